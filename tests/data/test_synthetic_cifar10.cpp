// Tests of include/oar/data/synthetic_cifar10.hpp: the records' layout and classes, the class
// square standing out of the noise, the seeds, and the in-memory dataset equal to the same records
// written as CIFAR-10 files and read back by load_cifar10.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint8_t, std::int64_t
#include <string>   // std::to_string
#include <vector>   // std::vector

#include <oar/data/cifar10.hpp>            // load_cifar10: the files read back
#include <oar/data/synthetic_cifar10.hpp>  // under test

#include "support/files.hpp"     // oar_test::write_raw
#include "support/temp_dir.hpp"  // oar_test::TempDir

namespace {

namespace data = oar::data;

/// Mean byte of channel c inside (or outside) the 8x8 square at (x0, y0) of one record's image.
double synthetic_region_mean(const std::uint8_t* image, std::size_t c, std::size_t x0, std::size_t y0, bool inside) {
    double sum = 0;
    std::size_t n = 0;
    for (std::size_t y = 0; y < 32; ++y)
        for (std::size_t x = 0; x < 32; ++x)
            if ((x >= x0 && x < x0 + 8 && y >= y0 && y < y0 + 8) == inside) {
                sum += image[c * 1024 + y * 32 + x];
                ++n;
            }
    return sum / static_cast<double>(n);
}

}  // namespace

TEST_CASE("synthetic_cifar10_records: CIFAR-10's record layout, classes in turn, the class square over noise") {
    constexpr std::size_t n = 40;
    const auto rec = data::synthetic_cifar10_records(n, 2);
    REQUIRE(rec.size() == n * data::cifar10_record_bytes);
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint8_t* r = rec.data() + i * data::cifar10_record_bytes;
        const std::size_t k = (i * 3 + 2) % 10;
        CHECK(r[0] == k);
        const std::size_t x0 = 2 + 6 * (k % 5), y0 = 4 + 16 * (k / 5);
        for (std::size_t c = 0; c < 3; ++c) {
            // The square is a flat 160..255 per channel; the noise outside lies in 40..103.
            CHECK(synthetic_region_mean(r + 1, c, x0, y0, true) >= 160.0);
            CHECK(synthetic_region_mean(r + 1, c, x0, y0, false) < 104.0);
        }
    }
    // Any 10 consecutive records hold every class once.
    std::vector<int> seen(10, 0);
    for (std::size_t i = 7; i < 17; ++i) ++seen[rec[i * data::cifar10_record_bytes]];
    for (int s : seen) CHECK(s == 1);
}

TEST_CASE("synthetic_cifar10_records: the same arguments give the same bytes, another seed other noise") {
    const auto a = data::synthetic_cifar10_records(12, 1, 0), b = data::synthetic_cifar10_records(12, 1, 0);
    const auto c = data::synthetic_cifar10_records(12, 1, 5);
    CHECK(a == b);
    REQUIRE(c.size() == a.size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < a.size(); ++i) differ += a[i] != c[i];
    CHECK(differ > a.size() / 2);  // the noise moves; labels and squares stay
    for (std::size_t i = 0; i < 12; ++i) CHECK(a[i * data::cifar10_record_bytes] == c[i * data::cifar10_record_bytes]);
    CHECK(data::synthetic_cifar10_records(0, 3).empty());
}

TEST_CASE("synthetic_cifar10: the dataset equals the same records written as CIFAR-10 files and read back") {
    oar_test::TempDir dir;
    for (std::size_t b = 1; b <= 5; ++b)
        oar_test::write_raw(dir.path / ("data_batch_" + std::to_string(b) + ".bin"),
                            data::synthetic_cifar10_records(6, b, 3));
    oar_test::write_raw(dir.path / "test_batch.bin", data::synthetic_cifar10_records(9, 0, 3));
    const auto files = data::load_cifar10(dir.path.string());
    const auto test = data::synthetic_cifar10(9, 0, 3);
    REQUIRE(test.size() == files.test.size());
    std::vector<float> x(3 * 32 * 32), y(3 * 32 * 32);
    for (std::size_t i = 0; i < test.size(); ++i) {
        CHECK(test.load(i, x) == files.test.load(i, y));
        CHECK(x == y);
    }
    const auto first = data::synthetic_cifar10(6, 1, 3);
    for (std::size_t i = 0; i < first.size(); ++i) {
        CHECK(first.load(i, x) == files.train.load(i, y));
        CHECK(x == y);
    }
    CHECK(test.dims() == data::cifar10_dims);
    CHECK(data::synthetic_cifar10(0, 0).size() == 0);
}
