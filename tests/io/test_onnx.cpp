// Tests of include/oar/io/onnx.hpp: the exported model read back with the ONNX protobuf classes
// (opset, symbolic batch dimension, initializers named like the state dict), and run in
// onnxruntime (tests/io/run_onnx.py, OAR_PYTHON's venv) for the course's CNN and MLP and a network
// of every other mapped layer, and ResNet8 and InceptionNet (Residual as Add, Concat as Concat),
// whose outputs must match oar's forward to 1e-5 on two batch sizes.
// Without onnxruntime the runtime comparisons are reported skipped, naming scripts/setup.sh.
#include <doctest/doctest.h>  // TEST_CASE, CHECK, REQUIRE

#include <algorithm>   // std::max
#include <cmath>       // std::abs
#include <cstddef>     // std::size_t
#include <cstdint>     // std::int64_t, std::uint64_t
#include <cstring>     // std::memcpy
#include <fstream>     // std::ifstream, std::ofstream
#include <iterator>    // std::istreambuf_iterator
#include <set>         // std::set
#include <string>      // std::string
#include <vector>      // std::vector

#include <oar/io/onnx.hpp>  // under test
#include <oar/models/course.hpp>
#include <oar/models/resnet.hpp>  // ResNet8, InceptionNet: Residual and Concat

#include "support/errors.hpp"    // oar_test::message_of, contains
#include "support/process.hpp"   // oar_test::run_command
#include "support/random.hpp"    // oar_test::fill_random
#include "support/python.hpp"    // oar_test::skip_without_python: no onnxruntime
#include "support/temp_dir.hpp"  // oar_test::TempDir

namespace {

using oar_test::contains;
using oar_test::message_of;
using oar_test::TempDir;

std::vector<float> read_floats(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::vector<float> v(bytes.size() / sizeof(float));
    std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
    return v;
}
void write_floats(const std::string& path, const std::vector<float>& v) {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(v.data()),
                                                static_cast<std::streamsize>(v.size() * sizeof(float)));
}

onnx::ModelProto read_model(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    onnx::ModelProto m;
    REQUIRE(m.ParseFromIstream(&f));
    return m;
}

/// Exports `net` (eval mode), runs batches of 5 and 2 random samples through oar and onnxruntime,
/// and checks every output to 1e-5 (relative where the value exceeds 1).
template <class Net>
void check_round_trip(Net& net, std::uint64_t seed) {
    TempDir dir;
    const std::string model = dir.file("model.onnx");
    net.eval();
    oar::export_onnx(net, model);

    // The model as written: opset, IR version, symbolic batch, one initializer per state-dict entry.
    const onnx::ModelProto m = read_model(model);
    REQUIRE(m.opset_import_size() == 1);
    CHECK(m.opset_import(0).version() >= 17);
    CHECK(m.ir_version() == 8);
    REQUIRE(m.graph().input_size() == 1);
    const auto& in_shape = m.graph().input(0).type().tensor_type().shape();
    REQUIRE(in_shape.dim_size() == static_cast<int>(Net::input_shape::dims.rank + 1));
    CHECK(in_shape.dim(0).dim_param() == "batch");
    for (std::size_t i = 0; i < Net::input_shape::dims.rank; ++i)
        CHECK(in_shape.dim(static_cast<int>(i + 1)).dim_value() == static_cast<std::int64_t>(Net::input_shape::dims.d[i]));
    std::set<std::string> inits;
    for (const auto& t : m.graph().initializer()) inits.insert(t.name());
    for (const auto& e : net.state_dict()) CHECK_MESSAGE(inits.count(e.key) == 1, e.key);

    if (oar_test::skip_without_python("numpy, onnx, onnxruntime")) return;
    const std::size_t batches[2] = {5, 2};
    std::vector<std::vector<float>> want;
    std::string args;
    for (std::size_t k = 0; k < 2; ++k) {
        std::vector<float> x(batches[k] * Net::input_shape::dims.size());
        oar_test::fill_random(x, seed + k);
        const auto y = net.forward(oar::TensorView{x.data(), batches[k], Net::input_shape::dims});
        want.emplace_back(y.data(), y.data() + y.size());
        const std::string xin = dir.file("in" + std::to_string(k) + ".bin"), yout = dir.file("out" + std::to_string(k) + ".bin");
        write_floats(xin, x);
        args += " " + xin + " " + yout;
    }
    const auto r = oar_test::run_command(std::string(OAR_PYTHON) + " " + OAR_SOURCE_DIR "/tests/io/run_onnx.py " +
                                         model + args + " 2>&1");
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(contains(r.output, "onnx-ok opset 17 batches 5,2"));
    for (std::size_t k = 0; k < 2; ++k) {
        const auto got = read_floats(dir.file("out" + std::to_string(k) + ".bin"));
        REQUIRE(got.size() == want[k].size());
        double worst = 0;
        for (std::size_t i = 0; i < got.size(); ++i)
            worst = std::max(worst, std::abs(double(got[i]) - want[k][i]) / std::max(1.0, std::abs(double(want[k][i]))));
        INFO("batch " << batches[k] << ": largest difference " << worst);
        CHECK(worst <= 1e-5);
    }
}

}  // namespace

TEST_CASE("export_onnx: the course CNN runs in onnxruntime with oar's logits") {
    oar::Network<oar::course::CNN, oar::course::Image> net(7);
    check_round_trip(net, 11);
}

TEST_CASE("export_onnx: the course MLP runs in onnxruntime with oar's logits (Dropout exported as in eval)") {
    oar::Network<oar::course::MLP, oar::course::Image> net(8);
    check_round_trip(net, 12);
}

TEST_CASE("export_onnx: every other mapped layer (BatchNorm with trained statistics, pools, activations)") {
    using Net = oar::Network<
        oar::Sequential<oar::Conv2D<3, 4, 3, 2, 1>, oar::BatchNorm2D<4>, oar::GELU, oar::AvgPool2D<2, 1>,
                        oar::Hardswish, oar::Conv2D<4, 6, 2>, oar::LeakyReLU, oar::AdaptiveAvgPool2D<2>, oar::ELU,
                        oar::Identity, oar::Flatten, oar::Linear<24, 8>, oar::BatchNorm1D<8>, oar::Tanh,
                        oar::Linear<8, 5>, oar::Sigmoid, oar::Linear<5, 4>, oar::Softmax>,
        oar::Shape<3, 12, 12>>;
    Net net(9);
    net.template layer<6>() = oar::LeakyReLU{0.2f};
    net.template layer<8>() = oar::ELU{0.7f};
    // Two training forwards move BatchNorm's running statistics away from 0 and 1.
    std::vector<float> x(6 * Net::input_shape::dims.size());
    for (std::uint64_t s = 0; s < 2; ++s) {
        oar_test::fill_random(x, 100 + s, 2.0);
        net.train();
        net.forward(oar::TensorView{x.data(), 6, Net::input_shape::dims});
    }
    check_round_trip(net, 13);
}

namespace {
/// Two training forwards on random batches move the BatchNorm running statistics away from 0 and 1.
template <class Net>
void move_running_statistics(Net& net, std::uint64_t seed) {
    std::vector<float> x(4 * Net::input_shape::dims.size());
    net.train();
    for (std::uint64_t s = 0; s < 2; ++s) {
        oar_test::fill_random(x, seed + s, 2.0);
        net.forward(oar::TensorView{x.data(), 4, Net::input_shape::dims});
    }
}
}  // namespace

TEST_CASE("export_onnx: ResNet8 (Residual blocks, identity and projection shortcuts) runs in onnxruntime") {
    oar::Network<oar::models::ResNet8<>, oar::models::CifarImage> net(14);
    move_running_statistics(net, 200);
    const auto m = oar::to_onnx(net);
    std::size_t adds = 0;
    for (const auto& n : m.graph().node()) adds += n.op_type() == "Add" ? 1 : 0;
    CHECK(adds == 3 + 1);  // the three blocks, and the classifier's bias
    check_round_trip(net, 15);
}

TEST_CASE("export_onnx: InceptionNet (a Concat of three branches) runs in onnxruntime") {
    oar::Network<oar::models::InceptionNet<>, oar::models::CifarImage> net(16);
    move_running_statistics(net, 210);
    const auto m = oar::to_onnx(net);
    int concats = 0;
    for (const auto& n : m.graph().node())
        if (n.op_type() == "Concat") {
            ++concats;
            CHECK(n.input_size() == 3);
            REQUIRE(n.attribute_size() == 1);
            CHECK(n.attribute(0).name() == "axis");
            CHECK(n.attribute(0).i() == 1);
        }
    CHECK(concats == 1);
    check_round_trip(net, 17);
}

TEST_CASE("export_onnx: what it cannot write is an error naming the layer or the file") {
    oar::Network<oar::Sequential<oar::AdaptiveAvgPool2D<3>, oar::Flatten>, oar::Shape<1, 7, 7>> pool;
    const auto m = message_of<oar::value_error>([&] { (void)oar::to_onnx(pool); });
    CHECK(contains(m, "layer 0 AdaptiveAvgPool2D<3, 3> on 7x7"));
    CHECK(contains(m, "divisible"));

    oar::Network<oar::course::MLP, oar::course::Image> net(1);
    TempDir dir;
    const std::string bad = dir.file("no_such_folder/model.onnx");
    CHECK(contains(message_of<oar::io_error>([&] { oar::export_onnx(net, bad); }), bad));
}
