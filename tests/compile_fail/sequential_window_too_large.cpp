// A 5x5 pooling window over a 4x4 image.
// first-error: oar: Sequential: the input image is smaller than a layer's window
// expect: sequential_shape_error<0, oar::check_kind::spatial, 5, 4>
#include <oar/oar.hpp>

using Bad = oar::Sequential<oar::MaxPool2D<5>>;
oar::Network<Bad, oar::Shape<3, 4, 4>> net;
