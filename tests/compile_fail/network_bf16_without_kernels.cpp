// A bf16_mixed network needs the header with the policy's kernels (not part of oar.hpp).
// first-error: oar: a bf16_mixed Network needs <oar/kernels/cpu/gemm_bf16.hpp>
// expect: bf16_mixed
#include <oar/oar.hpp>

oar::Network<oar::Sequential<oar::Linear<4, 2>>, oar::Shape<4>, oar::cpu, oar::bf16_mixed> net;
