// Compiled against an *installed* oar through oar::json (find_package(oar COMPONENTS json)): the
// course's mnist.json reader, which needs simdjson, reads a small file written here.
#include <oar/data/mnist_json.hpp>

#include <cstdio>
#include <exception>

int main() try {
    const char* path = "oar_consumer_tiny.json";
    std::FILE* f = std::fopen(path, "w");
    if (!f) {
        std::printf("oar consumer json: cannot write %s\n", path);
        return 1;
    }
    // Three splits of [images, labels], two values per image.
    std::fputs("[[[[0.5, -1.0], [0.25, 0.0]], [3, 4]], [[[0.0, 1.0]], [1]], [[[1.0, 1.0]], [2]]]", f);
    std::fclose(f);
    const oar::data::MnistJson d = oar::data::read_mnist_json(path, {.dims = oar::make_dims(2)});
    std::remove(path);
    if (d.train.size() != 2 || d.valid.size() != 1 || d.test.size() != 1 || d.train.images()[2] != 0.25f ||
        d.train.labels()[1] != 4 || d.test.labels()[0] != 2) {
        std::printf("oar consumer json: read back wrong\n");
        return 1;
    }
    std::printf("oar consumer json: ok\n");
    return 0;
} catch (const std::exception& e) {
    std::printf("oar consumer json: %s\n", e.what());
    return 1;
}
