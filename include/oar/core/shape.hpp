// Per-sample shapes. `Shape<C,H,W>` is the compile-time form a network is bound to; `Dims` is the
// same thing as a constexpr value, so shape algebra is plain constexpr code over arrays
// (no recursive templates). The batch dimension is never part of a Shape.
#pragma once

#include <array>        // std::array
#include <cstddef>      // std::size_t
#include <string>       // std::string for to_string
#include <type_traits>  // std::false_type
#include <utility>      // std::index_sequence

namespace oar {

/// Largest per-sample rank oar handles (C,H,W plus one spare).
inline constexpr std::size_t max_rank = 4;

/// A per-sample shape as a value: rank <= max_rank, unused trailing entries are zero.
/// Structural, so it can be a template argument (`shape_of<Dims{...}>`).
struct Dims {
    std::array<std::size_t, max_rank> d{};
    std::size_t rank = 0;

    constexpr std::size_t size() const {
        std::size_t s = 1;
        for (std::size_t i = 0; i < rank; ++i) s *= d[i];
        return s;
    }
    constexpr std::size_t operator[](std::size_t i) const { return d[i]; }
    constexpr bool operator==(const Dims&) const = default;
};

constexpr Dims make_dims(std::size_t a) { return Dims{{a, 0, 0, 0}, 1}; }
constexpr Dims make_dims(std::size_t a, std::size_t b) { return Dims{{a, b, 0, 0}, 2}; }
constexpr Dims make_dims(std::size_t a, std::size_t b, std::size_t c) { return Dims{{a, b, c, 0}, 3}; }
constexpr Dims make_dims(std::size_t a, std::size_t b, std::size_t c, std::size_t e) {
    return Dims{{a, b, c, e}, 4};
}

/// "[1, 28, 28]"
inline std::string to_string(const Dims& d) {
    std::string s = "[";
    for (std::size_t i = 0; i < d.rank; ++i) {
        if (i) s += ", ";
        s += std::to_string(d.d[i]);
    }
    return s + "]";
}

/// A compile-time per-sample shape, e.g. Shape<1, 28, 28> for an MNIST image.
template <std::size_t... Ds>
struct Shape {
    static_assert(sizeof...(Ds) >= 1, "oar: Shape needs at least one dimension, e.g. Shape<784>");
    static_assert(sizeof...(Ds) <= max_rank, "oar: Shape has at most 4 dimensions (the batch is not one of them)");
    static_assert(((Ds > 0) && ...), "oar: every Shape dimension must be positive (a zero dimension holds no data)");

    static constexpr std::size_t rank = sizeof...(Ds);
    static constexpr std::size_t size = (Ds * ... * std::size_t{1});
    static constexpr Dims dims{{Ds...}, sizeof...(Ds)};
};

namespace detail {
template <std::size_t Rank, std::size_t A, std::size_t B, std::size_t C, std::size_t D>
struct shape_from_values;
template <std::size_t A, std::size_t B, std::size_t C, std::size_t D>
struct shape_from_values<1, A, B, C, D> { using type = Shape<A>; };
template <std::size_t A, std::size_t B, std::size_t C, std::size_t D>
struct shape_from_values<2, A, B, C, D> { using type = Shape<A, B>; };
template <std::size_t A, std::size_t B, std::size_t C, std::size_t D>
struct shape_from_values<3, A, B, C, D> { using type = Shape<A, B, C>; };
template <std::size_t A, std::size_t B, std::size_t C, std::size_t D>
struct shape_from_values<4, A, B, C, D> { using type = Shape<A, B, C, D>; };

template <class T> struct is_shape : std::false_type {};
template <std::size_t... Ds> struct is_shape<Shape<Ds...>> : std::true_type {};
}  // namespace detail

/// The Shape type of a constexpr Dims value: shape_of<d.rank, d[0], d[1], d[2], d[3]>. (Spelled
/// with scalars: g++ 12 crashes on a Dims template argument taken from a dependent constexpr array.)
template <std::size_t Rank, std::size_t A, std::size_t B = 0, std::size_t C = 0, std::size_t D = 0>
using shape_of = typename detail::shape_from_values<Rank, A, B, C, D>::type;

/// A Shape<...> type.
template <class T>
concept ShapeType = detail::is_shape<T>::value;

}  // namespace oar
