// libFuzzer target for include/oar/io/safetensors.hpp and train/checkpoint.hpp.
// Input: a mode byte, then the payload.
//   mode % 4 == 0: the payload parsed in memory (parse_safetensors), every tensor's values read
//   mode % 4 == 1: the payload as a weights file loaded into a small network (load_weights; the
//                  file's "oar.layout" decides, else paddle)
//   mode % 4 == 2: the same, unmarked files read in the torch layout
//   mode % 4 == 3: the payload as the state file of a checkpoint whose weights file the harness
//                  writes (fixed values, see fixed_weights; fuzz/make_corpus.py writes the
//                  matching seeds, checksum included), loaded with load_checkpoint into net + Adam
// oar::error is the expected rejection; any other exception, a crash, a leak or a sanitizer
// report is a finding. A load that fails must leave the network and optimizer untouched; one that
// succeeds must have read exactly the network's tensors.
#include <algorithm>  // std::equal
#include <cstddef>    // std::size_t, std::byte
#include <cstdint>    // std::uint8_t
#include <cstring>    // std::memcpy
#include <filesystem> // std::filesystem::create_directories: the checkpoint folder
#include <system_error> // std::error_code
#include <vector>     // std::vector

#include <oar/core/error.hpp>        // oar::error: the expected rejection
#include <oar/layers/activation.hpp> // ReLU
#include <oar/layers/flatten.hpp>    // Flatten
#include <oar/layers/linear.hpp>     // Linear
#include <oar/nn/network.hpp>        // Network
#include <oar/optim/adam.hpp>        // Adam: the optimizer whose state a checkpoint holds
#include <oar/train/checkpoint.hpp>  // under test (includes io/safetensors.hpp)

#include "fuzz_common.hpp"  // oar_fuzz::scratch, write_raw, require, rejected

namespace {

using Model = oar::Sequential<oar::Flatten, oar::Linear<4, 3>, oar::ReLU, oar::Linear<3, 2>>;
using Net = oar::Network<Model, oar::Shape<2, 2>>;

/// Element j of every parameter tensor is 0.25 * j (exact in float; make_corpus.py repeats it).
void fixed_weights(Net& net) {
    for (const auto& e : net.parameters().entries()) {
        auto v = net.parameters().value(e);
        for (std::size_t j = 0; j < v.size(); ++j) v[j] = 0.25f * static_cast<float>(j);
    }
}

std::vector<float> snapshot(Net& net, oar::Adam<>& opt) {
    const auto p = net.parameters().values();
    std::vector<float> s(p.begin(), p.end());
    for (auto& [name, buf] : opt.state()) s.insert(s.end(), buf.begin(), buf.end());
    s.push_back(opt.learning_rate());
    s.push_back(static_cast<float>(opt.step_count()));
    s.push_back(static_cast<float>(net.step()));
    return s;
}

/// Equal, NaN equal to NaN (a loaded file may hold NaNs).
bool same(const std::vector<float>& a, const std::vector<float>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](float x, float y) { return x == y || (x != x && y != y); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const unsigned mode = data[0] % 4;
    ++data;
    --size;
    const auto& dir = oar_fuzz::scratch();
    if (mode == 0) {
        std::vector<std::byte> bytes(size);
        if (size) std::memcpy(bytes.data(), data, size);
        try {
            const auto st = oar::io::parse_safetensors(std::move(bytes), "input");
            std::uint64_t expect_begin = 0;
            for (const auto& t : st.tensors()) {
                oar_fuzz::require(t.begin == expect_begin && t.end >= t.begin);
                oar_fuzz::require(t.elements() * oar::io::dtype_size(t.dtype) == t.end - t.begin);
                oar_fuzz::require(st.bytes(t).size() == t.end - t.begin);
                expect_begin = t.end;
                switch (t.dtype) {
                    case oar::io::Dtype::F32: oar_fuzz::require(st.values<float>(t.name).size() == t.elements()); break;
                    case oar::io::Dtype::F64: oar_fuzz::require(st.values<double>(t.name).size() == t.elements()); break;
                    case oar::io::Dtype::I64: oar_fuzz::require(st.values<std::int64_t>(t.name).size() == t.elements()); break;
                    case oar::io::Dtype::I32: oar_fuzz::require(st.values<std::int32_t>(t.name).size() == t.elements()); break;
                    case oar::io::Dtype::U8: oar_fuzz::require(st.values<std::uint8_t>(t.name).size() == t.elements()); break;
                }
            }
        } catch (const oar::error& e) {
            oar_fuzz::rejected(e);
        }
        return 0;
    }
    static Net net(1);
    static oar::Adam<> opt(net.parameters());
    if (mode == 1 || mode == 2) {
        const std::string path = dir.file("weights.safetensors");
        oar_fuzz::write_raw(path, data, size);
        const auto before = snapshot(net, opt);
        try {
            oar::load_weights(path, net, mode == 2 ? oar::WeightLayout::torch : oar::WeightLayout::paddle);
            const auto st = oar::io::read_safetensors(path);
            oar_fuzz::require(st.tensors().size() == net.parameters().entries().size());
        } catch (const oar::error& e) {
            oar_fuzz::rejected(e);
            oar_fuzz::require(same(snapshot(net, opt), before));
        }
        return 0;
    }
    // mode 3: a checkpoint whose weights file is fixed and valid, the state file from the input.
    static const bool weights_written = [&] {
        std::error_code ec;
        std::filesystem::create_directories(dir.file("ckpt"), ec);
        Net w(1);
        fixed_weights(w);
        oar::save_weights(oar::checkpoint_weights_path(dir.file("ckpt"), "c"), w);
        return true;
    }();
    (void)weights_written;
    const std::string d = dir.file("ckpt");
    oar_fuzz::write_raw(oar::checkpoint_state_path(d, "c"), data, size);
    const auto before = snapshot(net, opt);
    try {
        const oar::TrainingState ts = oar::load_checkpoint(d, "c", net, opt);
        oar_fuzz::require(net.step() == ts.network_step);
        for (const auto& e : net.parameters().entries()) {
            const auto v = net.parameters().value(e);
            for (std::size_t j = 0; j < v.size(); ++j) oar_fuzz::require(v[j] == 0.25f * static_cast<float>(j));
        }
    } catch (const oar::error& e) {
        oar_fuzz::rejected(e);
        oar_fuzz::require(same(snapshot(net, opt), before));
    }
    return 0;
}
