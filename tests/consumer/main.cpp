// Compiled against an *installed* oar (see CMakeLists.txt beside this file).
#include <oar/oar.hpp>

#if __has_include(<oar/config.hpp>)
#include <oar/config.hpp>
#endif

#include <cstdio>

#if defined(OAR_CONSUMER_EXPECT_MPI) && !(defined(OAR_HAS_MPI) && OAR_HAS_MPI)
#error "oar::mpi did not define OAR_HAS_MPI=1"
#endif

int main() {
#ifdef OAR_HAS_MPI
  std::printf("oar consumer: ok (OAR_HAS_MPI=%d)\n", static_cast<int>(OAR_HAS_MPI));
#else
  std::printf("oar consumer: ok\n");
#endif
  return 0;
}
