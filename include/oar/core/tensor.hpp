// A batch of samples: [N, dims...] contiguous, row-major. `Tensor` (float32) owns its 64-byte
// aligned storage, `TensorView` / `MutableTensorView` borrow; `basic_tensor<double>` serves the
// double-precision checks. Networks and losses take views; nothing here is lazy.
#pragma once

#include <cstddef>      // std::size_t
#include <span>         // std::span
#include <string>       // std::string
#include <type_traits>  // std::is_convertible_v

#include "aligned.hpp"  // aligned_vector
#include "error.hpp"    // shape_error
#include "shape.hpp"    // Dims

namespace oar {

/// A borrowed [batch, dims...] block of T (float or const float).
template <class T>
class basic_tensor_view {
public:
    constexpr basic_tensor_view() = default;
    constexpr basic_tensor_view(T* data, std::size_t batch, Dims dims) : data_(data), batch_(batch), dims_(dims) {}
    template <class U>
        requires std::is_convertible_v<U*, T*>
    constexpr basic_tensor_view(const basic_tensor_view<U>& o) : data_(o.data()), batch_(o.batch()), dims_(o.dims()) {}

    constexpr T* data() const { return data_; }
    constexpr std::size_t batch() const { return batch_; }
    constexpr const Dims& dims() const { return dims_; }  ///< per-sample dims
    constexpr std::size_t sample_size() const { return dims_.size(); }
    constexpr std::size_t size() const { return batch_ * dims_.size(); }
    constexpr std::span<T> span() const { return {data_, size()}; }
    constexpr T* sample(std::size_t i) const { return data_ + i * dims_.size(); }
    constexpr T& operator[](std::size_t i) const { return data_[i]; }
    /// "[100, 1, 28, 28]"
    std::string shape_string() const {
        std::string s = "[";
        s.append(std::to_string(batch_));
        for (std::size_t i = 0; i < dims_.rank; ++i) s.append(", ").append(std::to_string(dims_.d[i]));
        return s.append("]");
    }

private:
    T* data_ = nullptr;
    std::size_t batch_ = 0;
    Dims dims_{};
};

using TensorView = basic_tensor_view<const float>;
using MutableTensorView = basic_tensor_view<float>;

/// An owning [batch, dims...] tensor of T, zero-initialised.
template <class T>
class basic_tensor {
public:
    basic_tensor() = default;
    basic_tensor(std::size_t batch, Dims dims) : data_(batch * dims.size(), T(0)), batch_(batch), dims_(dims) {}

    T* data() { return data_.data(); }
    const T* data() const { return data_.data(); }
    std::size_t batch() const { return batch_; }
    const Dims& dims() const { return dims_; }
    std::size_t size() const { return data_.size(); }
    T& operator[](std::size_t i) { return data_[i]; }
    T operator[](std::size_t i) const { return data_[i]; }
    std::span<T> span() { return {data_.data(), data_.size()}; }
    std::span<const T> span() const { return {data_.data(), data_.size()}; }

    /// Keeps the capacity: resizing to a smaller or equal size never allocates.
    void resize(std::size_t batch, Dims dims) {
        data_.resize(batch * dims.size());
        batch_ = batch;
        dims_ = dims;
    }

    basic_tensor_view<T> view() { return {data_.data(), batch_, dims_}; }
    basic_tensor_view<const T> view() const { return {data_.data(), batch_, dims_}; }
    operator basic_tensor_view<const T>() const { return view(); }
    operator basic_tensor_view<T>() { return view(); }

private:
    aligned_vector<T> data_;
    std::size_t batch_ = 0;
    Dims dims_{};
};

using Tensor = basic_tensor<float>;

/// tensor_source<X, T>: lets an array type from another library (interop/xtensor.hpp: xtensor
/// containers and expressions) be passed where a network takes a view of T: `with_view(x, f)`
/// calls f with a basic_tensor_view<const T> of x's values, a view of x itself or of an evaluated
/// copy that lives for the call, and returns f's result. Not defined for any type here.
template <class X, class T>
struct tensor_source;

/// X can stand in for a basic_tensor_view<const T> (through its tensor_source specialization).
template <class X, class T>
concept TensorSource = requires(const X& x) {
    tensor_source<X, T>::with_view(x, [](basic_tensor_view<const T>) { return 0; });
};

}  // namespace oar
