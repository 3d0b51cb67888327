// mnist_to_json: makes the course's mnist.json.gz from an MNIST-layout IDX folder, split as the
// course does (50,000 train / 10,000 valid / 10,000 test), pixels as x / 127.5 - 1 written the way
// Python prints them, labels as integers. oar::data::read_mnist_json reads the result back.
#include <chrono>      // std::chrono::steady_clock: the time line
#include <cstdint>     // std::uintmax_t
#include <cstdio>      // std::printf, std::fprintf
#include <exception>   // std::exception
#include <filesystem>  // std::filesystem::file_size: the size line
#include <string>      // std::string

#include <oar/core/error.hpp>       // oar::error, usage_error
#include <oar/data/mnist.hpp>       // load_mnist: the IDX folder and its course split
#include <oar/data/mnist_json.hpp>  // mnist_json_from_idx, write_mnist_json

#include "app/cli.hpp"  // cli::for_each_flag

namespace {

constexpr const char* usage = R"(usage: mnist_to_json --data DIR --out FILE.json.gz [--level N]
Writes the course's mnist.json.gz, [[train_imgs, train_labels], [val_imgs, val_labels],
[test_imgs, test_labels]], from the four MNIST IDX files (.gz or raw) in DIR.

  --data DIR      folder with train-images-idx3-ubyte(.gz), train-labels-idx1-ubyte(.gz),
                  t10k-images-idx3-ubyte(.gz), t10k-labels-idx1-ubyte(.gz)
  --out FILE      the gzip-compressed JSON to write (replaced if it exists)
  --level N       gzip level 0-9                                (default 6)
  --help          this text

Bad flags or unreadable data print the reason and exit with status 2.
)";

struct Config {
    std::string data, out;
    int level = 6;
};

/// Returns false when --help was asked for.
bool parse_args(int argc, char** argv, Config& c) {
    const bool run = cli::for_each_flag(argc, argv, [&](const std::string& flag, const std::string& value) {
        if (flag == "--data") c.data = value;
        else if (flag == "--out") c.out = value;
        else if (flag == "--level") {
            if (value.size() != 1 || value[0] < '0' || value[0] > '9')
                throw oar::usage_error("--level needs a gzip level 0-9, got '" + value + "'");
            c.level = value[0] - '0';
        } else throw cli::unknown_flag(flag);
    });
    if (!run) return false;
    if (c.data.empty()) throw oar::usage_error("--data DIR is required (see --help)");
    if (c.out.empty()) throw oar::usage_error("--out FILE is required (see --help)");
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        Config c;
        if (!parse_args(argc, argv, c)) {
            std::printf("%s", usage);
            return 0;
        }
        const auto start = std::chrono::steady_clock::now();
        const oar::data::MnistSplits idx = oar::data::load_mnist(c.data);
        oar::data::write_mnist_json(c.out, oar::data::mnist_json_from_idx(idx), c.level);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::printf("mnist_to_json: wrote %s: %zu / %zu / %zu images (train / valid / test), %ju bytes, %.1f s\n",
                    c.out.c_str(), idx.train.count, idx.valid.count, idx.test.count,
                    static_cast<std::uintmax_t>(std::filesystem::file_size(c.out)), seconds);
        return 0;
    } catch (const oar::error& e) {
        std::fprintf(stderr, "mnist_to_json: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mnist_to_json: unexpected failure: %s\n", e.what());
        return 1;
    }
}
