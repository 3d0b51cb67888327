// bf16_mixed runs on oar::cpu and on backends that declare bf16 kernels (oar::cuda); the double CPU
// backend (cpu64) has none.
// first-error: oar: bf16_mixed runs on oar::cpu or oar::cuda
// expect: Bf16Backend
#include <oar/kernels/cpu/gemm_bf16.hpp>
#include <oar/oar.hpp>

oar::Network<oar::Sequential<oar::Linear<4, 2>>, oar::Shape<4>, oar::cpu64, oar::bf16_mixed> net;
