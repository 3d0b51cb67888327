// Conv2D padding must be smaller than the kernel size.
// first-error: oar: Conv2D padding must be smaller than the kernel size
// expect: Conv2D<1, 20, oar::Size2{5, 5}, oar::Size2{1, 1}, oar::Size2{5, 5}>
#include <oar/layers/conv2d.hpp>

oar::Conv2D<1, 20, 5, 1, 5> conv;
