// A projection shortcut with stride 1 beside a body with stride 2: 8x8 against 4x4.
// first-error: oar: Residual: its body and its shortcut give different shapes
// expect: sequential_shape_error<0, oar::check_kind::residual_shortcut, 8, 4>
#include <oar/oar.hpp>

using Bad = oar::Sequential<oar::Residual<oar::Conv2D<4, 8, 3, 2, 1>, oar::Conv2D<4, 8, 1>>>;
oar::Network<Bad, oar::Shape<4, 8, 8>> net;
