// LinearWarmup cannot wrap ReduceOnPlateau: that one is stepped with a metric.
// expect: LinearWarmup wraps a number or an epoch schedule
// expect: ReduceOnPlateau
#include <oar/optim/lr_scheduler.hpp>

oar::LinearWarmup<oar::ReduceOnPlateau> w(oar::ReduceOnPlateau(0.1), 5, 0.0, 0.1);
