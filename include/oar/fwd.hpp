// Forward declarations of oar's public types; includes nothing heavy, so headers that only
// name a type need not pull in its definition.
#pragma once

#include <concepts>  // std::floating_point
#include <cstddef>  // std::size_t

namespace oar {

struct Dims;
template <std::size_t... Ds> struct Shape;

template <std::floating_point T> struct basic_cpu;
using cpu = basic_cpu<float>;

template <class... Layers> struct Sequential;
struct fp32;
struct bf16_mixed;
template <class Seq, class InShape, class Backend = cpu, class Precision = fp32> class Network;

template <class T> class basic_tensor;
template <class T> class basic_tensor_view;
using Tensor = basic_tensor<float>;

class error;

}  // namespace oar
