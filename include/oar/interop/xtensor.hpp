// xtensor at oar's seams, opt-in (no core header includes xtensor). In: an xtensor container or
// expression of shape (batch, dims...) is a network input (`net.forward(xt_images)`: a contiguous
// row-major container is read in place, any other expression is evaluated once into a tensor) and
// the images of a dataset (data::make_dataset). Out: as_xtensor gives zero-copy xtensor views of a
// network's outputs, of any oar tensor or view, and of a parameter's values and gradient by
// state-dict key. The views borrow: they are valid while what they view is (a network's output
// until its next forward), and writing through a mutable one writes oar's memory.
#pragma once

#include <cstddef>      // std::size_t, std::ptrdiff_t
#include <cstdint>      // std::int64_t
#include <span>         // std::span
#include <string>       // std::string: state-dict keys
#include <type_traits>  // std::is_same_v, std::remove_const_t
#include <utility>      // std::move
#include <vector>       // std::vector: adaptor shapes, dataset storage

#include <xtensor/xadapt.hpp>       // xt::adapt, xt::no_ownership
#include <xtensor/xexpression.hpp>  // xt::xexpression, xt::is_xexpression
#include <xtensor/xlayout.hpp>      // xt::layout_type

#include "../core/error.hpp"          // shape_error
#include "../core/shape.hpp"          // Dims, max_rank, to_string
#include "../core/tensor.hpp"         // basic_tensor, basic_tensor_view, tensor_source
#include "../data/dataset.hpp"        // data::InMemoryDataset
#include "../kernels/dispatch.hpp"    // storage<B>::host_memory
#include "../nn/parameters.hpp"       // basic_parameter_set

namespace oar {

namespace xtensor_detail {
/// [batch, dims...] as an xtensor shape.
inline std::vector<std::size_t> shape_of(std::size_t batch, const Dims& d) {
    std::vector<std::size_t> s{batch};
    for (std::size_t i = 0; i < d.rank; ++i) s.push_back(d.d[i]);
    return s;
}

/// Dims of a per-sample shape given as an xtensor shape's entries [1, rank); `who` names the caller.
template <class Shape>
Dims sample_dims(const Shape& shape, const char* who) {
    if (shape.size() < 2 || shape.size() > max_rank + 1)
        throw shape_error(detail::concat(who, ": an xtensor input needs 2 to ", max_rank + 1,
                                         " dimensions (batch, then the sample's), got ", shape.size()));
    Dims d{};
    d.rank = shape.size() - 1;
    for (std::size_t i = 1; i < shape.size(); ++i) d.d[i - 1] = static_cast<std::size_t>(shape[i]);
    return d;
}

/// Whether e is a row-major contiguous block in memory that can be read in place.
template <class E>
bool contiguous_row_major(const E& e) {
    if constexpr (requires { e.data(); e.strides(); e.data_offset(); }) {
        if (e.data_offset() != 0) return false;
        std::ptrdiff_t expect = 1;
        for (std::size_t i = e.dimension(); i-- > 0;) {
            if (e.shape()[i] != 1 && static_cast<std::ptrdiff_t>(e.strides()[i]) != expect) return false;
            expect *= static_cast<std::ptrdiff_t>(e.shape()[i]);
        }
        return true;
    } else {
        return false;
    }
}
}  // namespace xtensor_detail

/// An xtensor container or expression of shape (batch, dims...) where a network takes a view of T:
/// read in place when it is a contiguous row-major container of T, else evaluated once into a
/// tensor that lives for the call (element types convert, as xtensor assignment converts them).
template <class E, class T>
    requires xt::is_xexpression<E>::value
struct tensor_source<E, T> {
    template <class F>
    static decltype(auto) with_view(const E& e, F&& f) {
        const Dims dims = xtensor_detail::sample_dims(e.shape(), "tensor_source<xtensor>");
        const std::size_t batch = static_cast<std::size_t>(e.shape()[0]);
        if constexpr (std::is_same_v<std::remove_const_t<typename E::value_type>, T> && requires { e.data(); }) {
            if (xtensor_detail::contiguous_row_major(e))
                return f(basic_tensor_view<const T>(e.data(), batch, dims));
        }
        basic_tensor<T> copy(batch, dims);
        auto target = xt::adapt(copy.data(), copy.size(), xt::no_ownership(), xtensor_detail::shape_of(batch, dims));
        target = e;  // one evaluation of the expression, nothing lazy kept
        return f(copy.view());
    }
};

/// A zero-copy xtensor view (an xarray adaptor, shape [batch, dims...]) of an oar view: mutable
/// for a MutableTensorView, read-only for a TensorView (a network's output).
template <class T>
auto as_xtensor(basic_tensor_view<T> v) {
    return xt::adapt(v.data(), v.size(), xt::no_ownership(), xtensor_detail::shape_of(v.batch(), v.dims()));
}
/// The same for an owning tensor (mutable; the tensor must outlive the view).
template <class T>
auto as_xtensor(basic_tensor<T>& t) {
    return as_xtensor(t.view());
}
template <class T>
auto as_xtensor(const basic_tensor<T>& t) {
    return as_xtensor(t.view());
}
template <class T>
void as_xtensor(basic_tensor<T>&&) = delete;  // the view would outlive the tensor

/// A zero-copy view of `data` with shape `dims` (e.g. a parameter's span and its entry's dims).
template <class T>
auto as_xtensor(std::span<T> data, const Dims& dims) {
    if (data.size() != dims.size())
        throw shape_error(detail::concat("as_xtensor: ", data.size(), " values for the shape ", to_string(dims)));
    std::vector<std::size_t> shape(dims.d.begin(), dims.d.begin() + static_cast<std::ptrdiff_t>(dims.rank));
    return xt::adapt(data.data(), data.size(), xt::no_ownership(), std::move(shape));
}

/// A zero-copy view of the parameter `key` ("0.weight", as its state-dict key) with its dims
/// ([OutC, InC, K, K] for a Conv2D weight). Host memory only (copy a device network to the CPU).
template <class T, class B>
    requires storage<B>::host_memory
auto as_xtensor(basic_parameter_set<T, B>& ps, const std::string& key) {
    const ParamEntry& e = ps.entry(key);
    return as_xtensor(ps.value(e), e.dims);
}
template <class T, class B>
    requires storage<B>::host_memory
auto as_xtensor(const basic_parameter_set<T, B>& ps, const std::string& key) {
    const ParamEntry& e = ps.entry(key);
    return as_xtensor(ps.value(e), e.dims);
}
/// A zero-copy view of the gradient of parameter `key`, shaped as the parameter.
template <class T, class B>
    requires storage<B>::host_memory
auto grad_as_xtensor(basic_parameter_set<T, B>& ps, const std::string& key) {
    const ParamEntry& e = ps.entry(key);
    return as_xtensor(ps.grad(e), e.dims);
}
template <class T, class B>
    requires storage<B>::host_memory
auto grad_as_xtensor(const basic_parameter_set<T, B>& ps, const std::string& key) {
    const ParamEntry& e = ps.entry(key);
    return as_xtensor(ps.grad(e), e.dims);
}

}  // namespace oar

namespace oar::data {

/// An in-memory dataset of the images of `images` (an xtensor container or expression of shape
/// (samples, dims...), e.g. `xt::xtensor<float, 4>`, evaluated once into the dataset's storage)
/// and their labels.
template <class E>
InMemoryDataset make_dataset(const xt::xexpression<E>& images, std::vector<std::int64_t> labels) {
    const E& e = images.derived_cast();
    const Dims dims = oar::xtensor_detail::sample_dims(e.shape(), "make_dataset");
    const std::size_t n = static_cast<std::size_t>(e.shape()[0]);
    if (n != labels.size())
        throw shape_error(detail::concat("make_dataset: ", n, " images and ", labels.size(), " labels"));
    std::vector<float> values(n * dims.size());
    auto target = xt::adapt(values.data(), values.size(), xt::no_ownership(), oar::xtensor_detail::shape_of(n, dims));
    target = e;
    return InMemoryDataset(std::move(values), std::move(labels), dims);
}
/// The same with labels from an xtensor expression of integers, one per image.
template <class E, class L>
    requires xt::is_xexpression<L>::value
InMemoryDataset make_dataset(const xt::xexpression<E>& images, const L& labels) {
    if (labels.dimension() != 1)
        throw shape_error(detail::concat("make_dataset: labels need 1 dimension, got ", labels.dimension()));
    std::vector<std::int64_t> l(labels.size());
    for (std::size_t i = 0; i < l.size(); ++i) l[i] = static_cast<std::int64_t>(labels(i));
    return make_dataset(images, std::move(l));
}

}  // namespace oar::data
