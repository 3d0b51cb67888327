// Network's first argument must be a Sequential.
// first-error: oar: Network<Seq, InShape, Backend> needs Seq = Sequential<Layers...>
// expect: Network<oar::ReLU, oar::Shape<4>
#include <oar/oar.hpp>

oar::Network<oar::ReLU, oar::Shape<4>> net;
