// Compiled against an *installed* oar (see CMakeLists.txt beside this file).
#include <oar/oar.hpp>

#if __has_include(<oar/config.hpp>)
#include <oar/config.hpp>
#endif

#include <cstdint>
#include <cstdio>
#include <type_traits>
#include <vector>

#if defined(OAR_CONSUMER_EXPECT_MPI) && !(defined(OAR_HAS_MPI) && OAR_HAS_MPI)
#error "oar::mpi did not define OAR_HAS_MPI=1"
#endif

// A user's network type, checked at compile time through the installed headers.
using Net = oar::Network<oar::Sequential<oar::Flatten, oar::Linear<4, 3>, oar::ReLU, oar::Linear<3, 2>>, oar::Shape<2, 2>>;
static_assert(std::is_same_v<Net::output_shape, oar::Shape<2>>);
static_assert(Net::info::total_params == 4 * 3 + 3 + 3 * 2 + 2);

int main() {
  Net net(1);
  oar::Tensor x(2, oar::make_dims(2, 2));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) / 8.0f;
  const std::vector<std::int64_t> labels{0, 1};
  oar::CrossEntropyLoss ce;
  oar::SGD opt(net.parameters(), {.learning_rate = 0.1f});
  const float first = ce(net.forward(x), labels);
  float last = first;
  for (int step = 0; step < 20; ++step) {
    last = ce(net.forward(x), labels);
    net.backward(ce.backward());
    opt.step();
    opt.clear_grad();
  }
  if (!(last < first)) {
    std::printf("oar consumer: training did not reduce the loss (%g -> %g)\n", first, last);
    return 1;
  }
#ifdef OAR_HAS_MPI
  std::printf("oar consumer: ok (OAR_HAS_MPI=%d)\n", static_cast<int>(OAR_HAS_MPI));
#else
  std::printf("oar consumer: ok\n");
#endif
  return 0;
}
