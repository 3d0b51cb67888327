// An input Shape with a zero dimension.
// first-error: oar: every Shape dimension must be positive
// expect: Shape<1, 0, 28>
#include <oar/core/shape.hpp>

constexpr auto n = oar::Shape<1, 0, 28>::size;
