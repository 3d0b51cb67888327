// Compiled against an *installed* oar (see CMakeLists.txt beside this file).
#include <oar/oar.hpp>

#if __has_include(<oar/config.hpp>)
#include <oar/config.hpp>
#endif

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <vector>

#if defined(OAR_CONSUMER_EXPECT_MPI) && !(defined(OAR_HAS_MPI) && OAR_HAS_MPI)
#error "oar::mpi did not define OAR_HAS_MPI=1"
#endif
// oar_consumer_kernels links oar::kernels (the compiled-kernels mode); the others only oar::oar.
#if defined(OAR_CONSUMER_EXPECT_EXTERN) != (OAR_EXTERN_KERNELS == 1)
#error "oar::kernels must define OAR_EXTERN_KERNELS=1, and oar::oar alone must not"
#endif

// A user's network type, checked at compile time through the installed headers.
using Net = oar::Network<oar::Sequential<oar::Flatten, oar::Linear<4, 3>, oar::ReLU, oar::Linear<3, 2>>, oar::Shape<2, 2>>;
static_assert(std::is_same_v<Net::output_shape, oar::Shape<2>>);
static_assert(Net::info::total_params == 4 * 3 + 3 + 3 * 2 + 2);

// A small CNN whose second convolution takes the Winograd kernel (5x5, 8 channels in and out),
// trained a few steps with Adam: GEMM, direct and Winograd convolution kernels all run. Its
// weights' bits are printed so that run_consumer_test.cmake can compare the header-only build with
// the oar::kernels one (the same kernels must give the same bits).
using CNN = oar::Network<oar::Sequential<oar::Conv2D<1, 8, 5, 1, 2>, oar::ReLU, oar::MaxPool2D<2, 2>,
                                         oar::Conv2D<8, 8, 5, 1, 2>, oar::ReLU, oar::MaxPool2D<2, 2>,
                                         oar::Flatten, oar::Linear<8 * 3 * 3, 3>>,
                         oar::Shape<1, 12, 12>>;

static bool train_cnn() {
  CNN net(7);
  constexpr std::size_t n = 8;
  oar::Tensor x(n, oar::make_dims(1, 12, 12));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 23) / 23.0f - 0.5f;
  std::vector<std::int64_t> labels(n);
  for (std::size_t i = 0; i < n; ++i) labels[i] = static_cast<std::int64_t>(i % 3);
  oar::CrossEntropyLoss ce;
  oar::Adam opt(net.parameters(), {.learning_rate = 1e-2f});
  float first = 0.0f, last = 0.0f;
  for (int step = 0; step < 10; ++step) {
    last = ce(net.forward(x), labels);
    if (step == 0) first = last;
    net.backward(ce.backward());
    opt.step();
    opt.clear_grad();
  }
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the weights' bits
  for (float v : net.parameters().values()) {
    std::uint32_t b;
    std::memcpy(&b, &v, 4);
    h = (h ^ b) * 1099511628211ull;
  }
  std::printf("oar consumer: cnn loss %a -> %a, weights %016llx\n", static_cast<double>(first),
              static_cast<double>(last), static_cast<unsigned long long>(h));
  return last < first;
}

int main() {
  if (!train_cnn()) {
    std::printf("oar consumer: the CNN's training did not reduce the loss\n");
    return 1;
  }
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
