// The oar::kernels library (CMake target): the dispatched CPU kernels compiled once, for programs
// built with OAR_EXTERN_KERNELS=1 (config.hpp), which oar::kernels sets for what links it.
#define OAR_KERNELS_IMPLEMENTATION
#include <oar/kernels/cpu/compiled.hpp>
