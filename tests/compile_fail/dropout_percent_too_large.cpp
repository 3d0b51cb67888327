// DropoutPercent<100> would drop everything.
// first-error: oar: DropoutPercent<Percent> needs Percent < 100
// expect: DropoutPercent<100>
#include <oar/layers/dropout.hpp>

oar::DropoutPercent<100> d;
