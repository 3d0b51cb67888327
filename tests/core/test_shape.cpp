// Tests of include/oar/core/shape.hpp: Shape, Dims, make_dims, to_string, shape_of, ShapeType.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <cstddef>      // std::size_t
#include <string>       // std::string
#include <type_traits>  // std::is_same_v

#include <oar/core/shape.hpp>  // under test

using oar::Dims;
using oar::make_dims;
using oar::Shape;

// ---- compile-time facts (a failure here stops the build) -------------------------------------

static_assert(Shape<784>::rank == 1 && Shape<784>::size == 784);
static_assert(Shape<1, 28, 28>::rank == 3 && Shape<1, 28, 28>::size == 1 * 28 * 28);
static_assert(Shape<2, 3, 5, 7>::rank == 4 && Shape<2, 3, 5, 7>::size == 210);
static_assert(Shape<1, 28, 28>::dims == make_dims(1, 28, 28));
static_assert(Shape<1, 28, 28>::dims.rank == 3);
static_assert(Shape<1, 28, 28>::dims[1] == 28 && Shape<1, 28, 28>::dims[3] == 0);

static_assert(make_dims(7).rank == 1 && make_dims(7).size() == 7);
static_assert(make_dims(2, 3).rank == 2 && make_dims(2, 3).size() == 6);
static_assert(make_dims(2, 3, 4).rank == 3 && make_dims(2, 3, 4).size() == 24);
static_assert(make_dims(2, 3, 4, 5).rank == 4 && make_dims(2, 3, 4, 5).size() == 120);
static_assert(Dims{}.rank == 0 && Dims{}.size() == 1);  // the empty product
static_assert(make_dims(2, 3) != make_dims(3, 2));
static_assert(make_dims(6) != make_dims(2, 3));  // same size, different shape
static_assert(make_dims(4) != make_dims(4, 1));  // same size, different rank

// shape_of is the inverse of ::dims for every rank.
template <class S>
using round_trip = oar::shape_of<S::dims.rank, S::dims[0], S::dims[1], S::dims[2], S::dims[3]>;
static_assert(std::is_same_v<round_trip<Shape<784>>, Shape<784>>);
static_assert(std::is_same_v<round_trip<Shape<10, 3>>, Shape<10, 3>>);
static_assert(std::is_same_v<round_trip<Shape<1, 28, 28>>, Shape<1, 28, 28>>);
static_assert(std::is_same_v<round_trip<Shape<2, 3, 5, 7>>, Shape<2, 3, 5, 7>>);
static_assert(std::is_same_v<oar::shape_of<2, 4, 5>, Shape<4, 5>>);
static_assert(!std::is_same_v<oar::shape_of<2, 4, 5>, Shape<5, 4>>);

// ShapeType accepts exactly the Shape<...> types.
static_assert(oar::ShapeType<Shape<1>>);
static_assert(oar::ShapeType<Shape<1, 28, 28>>);
static_assert(oar::ShapeType<oar::shape_of<3, 1, 2, 3>>);
static_assert(!oar::ShapeType<int>);
static_assert(!oar::ShapeType<Dims>);
static_assert(!oar::ShapeType<std::size_t>);
static_assert(!oar::ShapeType<Shape<1>*>);
static_assert(!oar::ShapeType<void>);

// Dims is structural: it can be a template argument.
template <Dims D>
struct dims_holder {
    static constexpr std::size_t size = D.size();
};
static_assert(dims_holder<make_dims(2, 3, 4)>::size == 24);
static_assert(!std::is_same_v<dims_holder<make_dims(2, 3)>, dims_holder<make_dims(3, 2)>>);

// A template constrained by ShapeType accepts Shapes and refuses other types.
template <oar::ShapeType S>
constexpr std::size_t rank_of() { return S::rank; }
template <class T>
concept rank_of_callable = requires { rank_of<T>(); };
static_assert(rank_of_callable<Shape<3>> && rank_of<Shape<3, 4>>() == 2);
static_assert(!rank_of_callable<double> && !rank_of_callable<Dims>);

// ---- run-time checks --------------------------------------------------------------------------

TEST_CASE("Shape reports rank, size and dims that match its parameters") {
    using S = Shape<3, 5, 7>;
    CHECK(S::rank == 3);
    CHECK(S::size == 3u * 5u * 7u);
    CHECK(S::dims.d[0] == 3);
    CHECK(S::dims.d[1] == 5);
    CHECK(S::dims.d[2] == 7);
    CHECK(S::dims.d[3] == 0);  // unused trailing entries are zero
}

TEST_CASE("Dims::size is the product of the first rank entries only") {
    Dims d = make_dims(2, 3, 4, 5);
    CHECK(d.size() == 120);
    d.rank = 2;
    CHECK(d.size() == 6);
    d.rank = 0;
    CHECK(d.size() == 1);
}

TEST_CASE("Dims equality compares rank and every entry") {
    CHECK(make_dims(1, 28, 28) == Shape<1, 28, 28>::dims);
    CHECK_FALSE(make_dims(1, 28, 28) == make_dims(1, 28, 27));
    CHECK_FALSE(make_dims(784) == make_dims(1, 784));
    CHECK(Dims{} == Dims{});
}

TEST_CASE("make_dims fills rank entries and leaves the rest zero") {
    const Dims d = make_dims(9, 8);
    CHECK(d.rank == 2);
    CHECK(d[0] == 9);
    CHECK(d[1] == 8);
    CHECK(d[2] == 0);
    CHECK(d[3] == 0);
}

TEST_CASE("to_string prints dims as a bracketed, comma-separated list") {
    CHECK(oar::to_string(make_dims(1, 28, 28)) == "[1, 28, 28]");
    CHECK(oar::to_string(make_dims(784)) == "[784]");
    CHECK(oar::to_string(make_dims(20, 1, 5, 5)) == "[20, 1, 5, 5]");
    CHECK(oar::to_string(Dims{}) == "[]");
    CHECK(oar::to_string(make_dims(18446744073709551615ull)) == "[18446744073709551615]");
}
