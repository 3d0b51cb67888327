// A Residual whose body is neither a Sequential nor a layer.
// first-error: oar: Residual / Concat: a body, shortcut or branch must be an oar Sequential<...> or a single Layer
// expect: block_part_is_not_a_layer<int>
#include <oar/oar.hpp>

oar::Residual<int> block;
