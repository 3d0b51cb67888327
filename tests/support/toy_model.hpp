// A tiny learnable classification set and network for the Model and callback tests: class c of 4
// is a bright column at x = c of a 6x6 image, over a faint pattern that varies by sample.
#pragma once

#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t
#include <cstring>  // std::memcmp
#include <utility>  // std::move
#include <vector>   // std::vector

#include <oar/oar.hpp>  // Sequential, layers, Network, InMemoryDataset

namespace oar_test {

using ToySeq = oar::Sequential<oar::Flatten, oar::Linear<36, 16>, oar::ReLU, oar::DropoutPercent<20>, oar::Linear<16, 4>>;
using ToyNet = oar::Network<ToySeq, oar::Shape<1, 6, 6>>;

/// n samples; `offset` shifts the pattern so a second call gives different (validation) samples.
inline oar::data::InMemoryDataset toy_set(std::size_t n, std::size_t offset = 0) {
    std::vector<float> images;
    std::vector<std::int64_t> labels;
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t c = ((i + offset) * 7) % 4;
        for (std::size_t y = 0; y < 6; ++y)
            for (std::size_t x = 0; x < 6; ++x)
                images.push_back(x == c ? 1.0f : 0.1f * static_cast<float>((x * y + i + offset) % 5) - 0.2f);
        labels.push_back(static_cast<std::int64_t>(c));
    }
    return oar::data::InMemoryDataset(std::move(images), std::move(labels), oar::make_dims(1, 6, 6));
}

/// The network's parameters (the whole flat buffer).
template <class Net>
std::vector<float> weights_of(const Net& net) {
    auto v = net.parameters().values();
    return {v.begin(), v.end()};
}

inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace oar_test
