// Replays inputs through the fuzz targets without libFuzzer, so that any compiler builds it and
// the seed corpora (fuzz/corpus/<target>/) run in the normal test suite (ctest label
// fuzz_replay): tests/CMakeLists.txt compiles each fuzz_<name>.cpp with its entry point
// LLVMFuzzerTestOneInput renamed to oar_fuzz_<name>, links them all into one program, and runs
//   oar_fuzz_replay <target> <file or folder>...
// Each file (a folder's files, sorted) is one input. A finding (a broken property, an unexpected
// exception) crashes, as under libFuzzer; every input passing prints a count and exits 0. Fails
// when no input was found, so that an emptied or mistyped corpus folder is not a pass.
#include <algorithm>   // std::sort
#include <cstddef>     // std::size_t
#include <cstdint>     // std::uint8_t
#include <cstdio>      // std::printf, std::fprintf
#include <cstdlib>     // std::exit
#include <cstring>     // std::strcmp
#include <filesystem>  // std::filesystem: the corpus folders
#include <fstream>     // std::ifstream
#include <iterator>    // std::istreambuf_iterator
#include <string>      // std::string
#include <vector>      // std::vector

extern "C" int oar_fuzz_idx(const std::uint8_t* data, std::size_t size);
extern "C" int oar_fuzz_cifar10(const std::uint8_t* data, std::size_t size);
extern "C" int oar_fuzz_mnist_json(const std::uint8_t* data, std::size_t size);
extern "C" int oar_fuzz_gzip(const std::uint8_t* data, std::size_t size);
extern "C" int oar_fuzz_safetensors(const std::uint8_t* data, std::size_t size);
extern "C" int oar_fuzz_options(const std::uint8_t* data, std::size_t size);
#if OAR_HAS_IMAGE  // fuzz_image.cpp is built where libpng and libjpeg are (oar::image)
extern "C" int oar_fuzz_image(const std::uint8_t* data, std::size_t size);
#endif

namespace {

using Entry = int (*)(const std::uint8_t*, std::size_t);

struct Target {
    const char* name;
    Entry entry;
};

constexpr Target targets[] = {{"fuzz_idx", oar_fuzz_idx},         {"fuzz_cifar10", oar_fuzz_cifar10},
                              {"fuzz_mnist_json", oar_fuzz_mnist_json}, {"fuzz_gzip", oar_fuzz_gzip},
                              {"fuzz_safetensors", oar_fuzz_safetensors}, {"fuzz_options", oar_fuzz_options},
#if OAR_HAS_IMAGE
                              {"fuzz_image", oar_fuzz_image},
#endif
};

std::vector<std::uint8_t> read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) {
        std::fprintf(stderr, "oar_fuzz_replay: cannot read %s\n", p.c_str());
        std::exit(2);
    }
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s <target> <file or folder>...\n", argv[0]);
        return 2;
    }
    Entry entry = nullptr;
    for (const Target& t : targets)
        if (std::strcmp(t.name, argv[1]) == 0) entry = t.entry;
    if (!entry) {
        std::fprintf(stderr, "oar_fuzz_replay: no target %s\n", argv[1]);
        return 2;
    }
    std::vector<std::filesystem::path> inputs;
    for (int i = 2; i < argc; ++i) {
        const std::filesystem::path p = argv[i];
        if (std::filesystem::is_directory(p)) {
            std::vector<std::filesystem::path> files;
            for (const auto& e : std::filesystem::directory_iterator(p))
                if (e.is_regular_file()) files.push_back(e.path());
            std::sort(files.begin(), files.end());
            inputs.insert(inputs.end(), files.begin(), files.end());
        } else {
            inputs.push_back(p);
        }
    }
    if (inputs.empty()) {
        std::fprintf(stderr, "oar_fuzz_replay: %s: no input files given\n", argv[1]);
        return 1;
    }
    for (const auto& p : inputs) {
        std::printf("%s %s\n", argv[1], p.filename().c_str());
        std::fflush(stdout);
        const std::vector<std::uint8_t> bytes = read_file(p);
        entry(bytes.data(), bytes.size());
    }
    std::printf("%s: %zu inputs replayed, no finding\n", argv[1], inputs.size());
    return 0;
}
