// A type that is not a layer inside a Sequential: its index and type are named.
// first-error: oar: Sequential: every element must be an oar Layer
// expect: sequential_element_is_not_a_layer<1, int>
#include <oar/oar.hpp>

oar::Sequential<oar::ReLU, int, oar::Flatten> seq;
