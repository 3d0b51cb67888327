// kernels/cpu/compiled.hpp instantiates the kernels of the oar::kernels library: a file that
// includes it without defining OAR_KERNELS_IMPLEMENTATION (by mistake, or in a second file) is
// refused at once, naming what to do.
// first-error: oar: kernels/cpu/compiled.hpp is the oar::kernels library's implementation
// expect: define OAR_KERNELS_IMPLEMENTATION before including it, in one file only
#include <oar/kernels/cpu/compiled.hpp>

int main() {}
