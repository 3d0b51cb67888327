// A Linear layer with a zero dimension.
// first-error: oar: Linear<In, Out> needs positive sizes
// expect: Linear<0, 10>
#include <oar/layers/linear.hpp>

oar::Linear<0, 10> fc;
