// A Conv2D after Flatten: it needs (C,H,W), it gets a rank-1 input.
// first-error: oar: Sequential: a layer needs an input of another rank
// expect: sequential_shape_error<1, oar::check_kind::rank, 3, 1>
#include <oar/oar.hpp>

using Bad = oar::Sequential<oar::Flatten, oar::Conv2D<1, 4, 3>>;
oar::Network<Bad, oar::Shape<1, 8, 8>> net;
