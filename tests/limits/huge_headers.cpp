// Files whose headers claim huge sizes are rejected before anything that size is allocated. Run by
// ctest under `ulimit -v 400000` (about 390 MiB of address space, tests/CMakeLists.txt), so a reader
// that trusted a claim would die of std::bad_alloc instead of throwing oar::format_error. A plain
// program, not doctest: each case prints its message; exit 0 only when every case is a clean
// oar::error. (Not run under the sanitizers: their shadow memory needs terabytes of address space.)
#include <algorithm>   // std::min
#include <cstddef>     // std::size_t
#include <cstdint>     // std::uint8_t, std::uint64_t
#include <cstdio>      // std::printf, std::snprintf
#include <cstring>     // std::memcpy, std::memset
#include <exception>   // std::exception
#include <filesystem>  // std::filesystem: the scratch folder
#include <fstream>     // std::ofstream: raw files
#include <functional>  // std::function: the cases
#include <string>      // std::string
#include <vector>      // std::vector

#include <unistd.h>  // ::getpid: a scratch folder per process
#include <zlib.h>    // gzopen, gzwrite: compressed inputs that inflate past the address-space limit

#include <oar/core/error.hpp>       // oar::error, oar::format_error
#include <oar/data/cifar10.hpp>     // load_cifar10_archive
#include <oar/data/idx.hpp>         // read_idx
#include <oar/data/mnist_json.hpp>  // read_mnist_json

namespace {

using bytes = std::vector<std::uint8_t>;
namespace fs = std::filesystem;

void write_raw(const std::string& path, const bytes& b) {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

/// `head`, then `repeat` copies of `unit` (streamed: never held whole), then `tail`, gzip level 1.
void write_gzip(const std::string& path, const std::string& head, const std::string& unit, std::size_t repeat,
                const std::string& tail = "") {
    gzFile f = gzopen(path.c_str(), "wb1");
    gzwrite(f, head.data(), static_cast<unsigned>(head.size()));
    std::string block;
    for (std::size_t i = 0; i < (std::size_t(1) << 20) / unit.size(); ++i) block += unit;
    const std::size_t per_block = block.size() / unit.size();
    for (std::size_t done = 0; done < repeat; done += per_block)
        gzwrite(f, block.data(), static_cast<unsigned>(std::min(per_block, repeat - done) * unit.size()));
    if (!tail.empty()) gzwrite(f, tail.data(), static_cast<unsigned>(tail.size()));
    gzclose(f);
}

void put_be32(bytes& b, std::uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(v >> s));
}

/// A ustar header for `name` whose size field says `size` (octal, or GNU base-256 beyond 8 GB).
bytes tar_header(const std::string& name, std::uint64_t size, char type = '0') {
    bytes h(512, 0);
    std::memcpy(h.data(), name.data(), name.size());
    std::memcpy(h.data() + 100, "0000644", 7);
    if (size < (std::uint64_t(1) << 33)) {
        std::snprintf(reinterpret_cast<char*>(h.data() + 124), 12, "%011llo", static_cast<unsigned long long>(size));
    } else {
        h[124] = 0x80;
        for (int i = 0; i < 8; ++i) h[135 - i] = static_cast<std::uint8_t>(size >> (8 * i));
    }
    h[156] = static_cast<std::uint8_t>(type);
    std::memcpy(h.data() + 257, "ustar\0" "00", 8);
    std::memset(h.data() + 148, ' ', 8);
    unsigned sum = 0;
    for (std::uint8_t c : h) sum += c;
    std::snprintf(reinterpret_cast<char*>(h.data() + 148), 8, "%06o", sum);
    return h;
}

int failures = 0;

void expect_rejected(const char* what, const std::function<void()>& f) {
    try {
        f();
        std::printf("FAIL  %s: accepted\n", what);
        ++failures;
    } catch (const oar::error& e) {
        std::printf("ok    %s: %s\n", what, e.what());
    } catch (const std::exception& e) {
        std::printf("FAIL  %s: not an oar::error: %s\n", what, e.what());
        ++failures;
    }
}

}  // namespace

int main() {
    const fs::path dir = fs::temp_directory_path() / ("oar_huge_headers_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const auto file = [&](const char* name) { return (dir / name).string(); };

    // IDX: 10^9 images of 28 x 28 (784 GB) claimed by a 32-byte file, raw and gzip-compressed.
    bytes idx{0, 0, 8, 3};
    put_be32(idx, 1000000000u);
    put_be32(idx, 28);
    put_be32(idx, 28);
    idx.resize(idx.size() + 16, 7);
    write_raw(file("huge.idx"), idx);
    expect_rejected("IDX header claiming 10^9 x 28 x 28", [&] { (void)oar::data::read_idx(file("huge.idx")); });
    write_gzip(file("huge.idx.gz"), std::string(idx.begin(), idx.end()), " ", 0);
    expect_rejected("gzip IDX header claiming 10^9 x 28 x 28", [&] { (void)oar::data::read_idx(file("huge.idx.gz")); });

    // CIFAR-10 tar: a batch member claiming 100 GB (base-256 size) and 8 GB (octal), raw and
    // gzip-compressed, followed by one real record; a GNU long-name member claiming 100 GB.
    for (const std::uint64_t claim : {std::uint64_t(100) << 30, (std::uint64_t(1) << 33) - 1}) {
        bytes tar = tar_header("cifar-10-batches-bin/data_batch_1.bin", claim);
        tar.resize(tar.size() + 3073, 1);
        const std::string label = claim >> 33 ? "100 GB" : "8 GB";
        write_raw(file("huge.tar"), tar);
        expect_rejected(("CIFAR-10 tar member claiming " + label).c_str(),
                        [&] { (void)oar::data::load_cifar10_archive(file("huge.tar")); });
        write_gzip(file("huge.tar.gz"), std::string(tar.begin(), tar.end()), " ", 0);
        expect_rejected(("CIFAR-10 tar.gz member claiming " + label).c_str(),
                        [&] { (void)oar::data::load_cifar10_archive(file("huge.tar.gz")); });
    }
    bytes longname = tar_header("././@LongLink", std::uint64_t(100) << 30, 'L');
    longname.resize(longname.size() + 4096, 'a');
    write_raw(file("longname.tar"), longname);
    expect_rejected("CIFAR-10 tar GNU long name claiming 100 GB",
                    [&] { (void)oar::data::load_cifar10_archive(file("longname.tar")); });

    // Gzip bombs: real data, far more than the header promises or a batch may hold, a few MiB
    // compressed. An IDX header promising 1000 x 28 x 28 followed by 1 GiB of zeros (read_idx stops
    // at the promise plus 1 MiB), and a CIFAR-10 tar.gz batch member of 1.1 GiB of zero records
    // (refused from its size field, before reading).
    bytes small{0, 0, 8, 3};
    put_be32(small, 1000);
    put_be32(small, 28);
    put_be32(small, 28);
    write_gzip(file("bomb.idx.gz"), std::string(small.begin(), small.end()), std::string(1, '\0'),
               std::size_t(1) << 30);
    expect_rejected("gzip IDX bomb: 1 GiB behind a 784,000-byte header",
                    [&] { (void)oar::data::read_idx(file("bomb.idx.gz")); });
    {
        const std::uint64_t member = std::uint64_t(3073) * 375000;  // 1.07 GiB of whole records
        const bytes h = tar_header("cifar-10-batches-bin/data_batch_1.bin", member);
        write_gzip(file("bomb.tar.gz"), std::string(h.begin(), h.end()), std::string(3073, '\0'), 375000);
        expect_rejected("CIFAR-10 tar.gz bomb: a batch member of 1.07 GiB of records",
                        [&] { (void)oar::data::load_cifar10_archive(file("bomb.tar.gz")); });
    }

    // mnist.json.gz: one image, and one label, of 512 MiB of text (more than the address space
    // allowed) that never ends; read with the default options (max_element_bytes 16 MiB).
    write_gzip(file("huge_image.json.gz"), "[[[[1", "1", std::size_t(512) << 20, "]]]]");
    expect_rejected("mnist.json image of 512 MiB",
                    [&] { (void)oar::data::read_mnist_json(file("huge_image.json.gz")); });
    write_gzip(file("huge_label.json.gz"), "[[[], [1", "0", std::size_t(512) << 20, "]]]");
    expect_rejected("mnist.json label of 512 MiB",
                    [&] { (void)oar::data::read_mnist_json(file("huge_label.json.gz")); });

    std::error_code ec;
    fs::remove_all(dir, ec);
    std::printf("%s\n", failures ? "FAILED" : "all rejected cleanly");
    return failures ? 1 : 0;
}
