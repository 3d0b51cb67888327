// A Residual whose body turns 4 channels into 8: x + body(x) is undefined without a shortcut.
// first-error: oar: Residual: its body changes the shape of its input
// expect: sequential_shape_error<1, oar::check_kind::residual_shape, 4, 8>
#include <oar/oar.hpp>

using Bad = oar::Sequential<oar::ReLU, oar::Residual<oar::Sequential<oar::Conv2D<4, 8, 3, 1, 1>, oar::ReLU>>>;
oar::Network<Bad, oar::Shape<4, 8, 8>> net;
