// A Conv2D expecting 3 channels after one that produces 20.
// first-error: oar: Sequential: a Conv2D's input channels do not match
// expect: sequential_shape_error<2, oar::check_kind::channels, 3, 20>
#include <oar/oar.hpp>

using Bad = oar::Sequential<oar::Conv2D<1, 20, 3>, oar::ReLU, oar::Conv2D<3, 8, 3>>;
oar::Network<Bad, oar::Shape<1, 16, 16>> net;
