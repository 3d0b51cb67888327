// A Linear<981, 10> after a 980-wide Flatten: the course's CNN with one wrong number.
// first-error: oar: Sequential: a layer's input features do not match
// expect: sequential_shape_error<7, oar::check_kind::features, 981, 980>
#include <oar/oar.hpp>

using Bad = oar::Sequential<oar::Conv2D<1, 20, 5, 1, 2>, oar::ReLU, oar::MaxPool2D<2, 2>, oar::Conv2D<20, 20, 5, 1, 2>,
                            oar::ReLU, oar::MaxPool2D<2, 2>, oar::Flatten, oar::Linear<981, 10>>;
oar::Network<Bad, oar::Shape<1, 28, 28>> net;
