// A Linear straight after a Conv2D, the Flatten forgotten: it reads the (16, 28, 28) output's last
// dimension (28) as its features where 16 * 28 * 28 = 12544 were meant; the message says to flatten.
// first-error: oar: Sequential: a Linear gets an input of more than one dimension .*add an oar::Flatten before it
// expect: sequential_shape_error<2, oar::check_kind::features_unflattened, 12544, 28>
#include <oar/oar.hpp>

using Bad = oar::Sequential<oar::Conv2D<1, 16, 3, 1, 1>, oar::ReLU, oar::Linear<12544, 10>>;
oar::Network<Bad, oar::Shape<1, 28, 28>> net;
