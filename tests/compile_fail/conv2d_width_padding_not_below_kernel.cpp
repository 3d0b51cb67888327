// A 3x1 kernel with padding 0x1: the width's padding is not below the width's kernel size.
// first-error: oar: Conv2D padding must be smaller than the kernel size
// expect: Conv2D<1, 2, oar::Size2{3, 1}, oar::Size2{1, 1}, oar::Size2{0, 1}
#include <oar/layers/conv2d.hpp>

oar::Conv2D<1, 2, oar::Size2{3, 1}, 1, oar::Size2{0, 1}> c;
