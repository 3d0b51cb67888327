// Dropout<100> would drop everything.
// first-error: oar: Dropout<Percent> needs Percent < 100
// expect: Dropout<100>
#include <oar/layers/dropout.hpp>

oar::Dropout<100> d;
