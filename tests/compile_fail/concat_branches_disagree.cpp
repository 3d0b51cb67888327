// Two Concat branches along channels whose images differ: 8x8 against 4x4 (stride 2).
// first-error: oar: Concat: its branches' outputs differ outside the concatenation axis
// expect: sequential_shape_error<0, oar::check_kind::concat_branches, 8, 4>
#include <oar/oar.hpp>

using Bad = oar::Sequential<oar::Concat<1, oar::Conv2D<4, 2, 3, 1, 1>, oar::Conv2D<4, 2, 3, 2, 1>>>;
oar::Network<Bad, oar::Shape<4, 8, 8>> net;
