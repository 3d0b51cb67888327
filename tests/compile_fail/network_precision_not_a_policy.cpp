// Network's fourth argument must be a precision policy.
// first-error: oar: Network's fourth argument is a precision policy: oar::fp32 or oar::bf16_mixed
// expect: fourth argument is a precision policy
#include <oar/oar.hpp>

oar::Network<oar::Sequential<oar::ReLU>, oar::Shape<4>, oar::cpu, float> net;
