// Per-sample transforms (as paddle.vision.transforms) and TransformDataset, the Dataset adaptor
// that applies them in order on load. Random choices are a pure function of (seed, epoch, sample
// index, position in the chain): the same for every thread count, load order and resume.
#pragma once

#include <array>        // std::array: the Dims chain, random words, the scratch pool
#include <concepts>     // std::same_as, std::copy_constructible
#include <cstddef>      // std::size_t, std::ptrdiff_t
#include <cstdint>      // std::uint32_t, std::uint64_t, std::int64_t
#include <span>         // std::span
#include <string>       // std::string: messages
#include <tuple>        // std::tuple: an adaptor's transforms
#include <type_traits>  // std::is_object_v, std::is_lvalue_reference_v, std::remove_cvref_t
#include <utility>      // std::move, std::forward, std::index_sequence
#include <vector>       // std::vector: Normalize's mean and std, scratch buffers

#include "../core/error.hpp"  // shape_error, value_error
#include "../core/rng.hpp"    // CounterRng, mulhi64
#include "../core/shape.hpp"  // Dims, make_dims, to_string, max_rank
#include "../kernels/cpu/elementwise.hpp"  // cpu_detail::map_span: the elementwise transforms' loop
#include "dataset.hpp"        // Dataset, dataset_base

namespace oar::data {

/// Random stream id of the transforms, beside core/rng.hpp's rng_stream ids (1-3 << 56 are
/// init, dropout, shuffle): top 8 bits = 4 ("transform"), bits 40..55 = the transform's position
/// in its adaptor, bits 0..39 = the epoch. The counter is the sample index.
inline constexpr std::uint64_t transform_stream = rng_stream::transform;

/// What a transform's output may depend on besides its input.
struct TransformContext {
    std::uint64_t seed = 0;   ///< the adaptor's seed
    std::uint64_t epoch = 0;  ///< the adaptor's epoch (taken mod 2^40)
    std::uint64_t index = 0;  ///< the sample's index in the dataset
    std::uint64_t slot = 0;   ///< the transform's position in its adaptor (mod 2^16)

    constexpr std::uint64_t stream() const {
        return transform_stream + ((slot & 0xFFFFu) << 40) + (epoch & ((1ull << 40) - 1));
    }
    /// The 128 random bits of this (seed, slot, epoch, index): all a transform draws per sample.
    std::array<std::uint32_t, 4> bits() const { return CounterRng{seed}.bits(stream(), index); }
    /// Uniform in [0, 1) from random word `w` (0..3), 24 bits as CounterRng::uniform.
    float uniform(std::size_t w) const { return static_cast<float>(bits()[w & 3] >> 8) * (1.0f / 16777216.0f); }
    /// Uniform integer in [0, n) for n > 0 from words 2p and 2p+1 (p = 0 or 1), as CounterRng::below.
    std::uint64_t below(std::size_t p, std::uint64_t n) const {
        const auto b = bits();
        const std::size_t w = (p & 1) * 2;
        return mulhi64((static_cast<std::uint64_t>(b[w]) << 32) | b[w + 1], n);
    }
};

/// Transform: a map from one sample's image to another, applied by TransformDataset.
///   Dims output_dims(Dims in) const;
///       // the output shape for input shape `in`; shape_error naming both when `in` is unsupported.
///   void apply(std::span<const float> in, Dims in_dims, std::span<float> out, const TransformContext& ctx) const;
///       // writes output_dims(in_dims).size() values into out (shape_error on sizes that disagree);
///       // in and out never overlap. A pure function of (in, in_dims, ctx): const and safe to call
///       // from several threads at once; randomness only through ctx.
template <class T>
concept Transform = std::is_object_v<T> && std::copy_constructible<T> &&
                    requires(const T& t, Dims d, std::span<const float> in, std::span<float> out,
                             const TransformContext& ctx) {
                        { t.output_dims(d) } -> std::same_as<Dims>;
                        t.apply(in, d, out, ctx);
                    };

}  // namespace oar::data

// Helpers live in oar::detail, and oar::data code names them fully qualified: an
// oar::data::detail (declared by another header) would hide oar::detail from a plain detail::.
namespace oar::detail {

/// shape_error unless in and out hold in_dims.size() and out_dims.size() values.
inline void check_transform_spans(const char* who, std::span<const float> in, Dims in_dims, std::span<float> out,
                                  Dims out_dims) {
    if (in.size() != in_dims.size() || out.size() != out_dims.size())
        throw shape_error(concat(who, ": ", in.size(), " input values for ", to_string(in_dims), " and ", out.size(),
                                 " output values for ", to_string(out_dims)));
}

/// Two scratch buffers per nesting level per thread, for TransformDataset::load: no allocation
/// once they have grown to the sample size, and a load nested inside another load on the same
/// thread (an adaptor over an adaptor) gets its own pair.
class transform_scratch {
public:
    transform_scratch() : level_(pool().depth++) {}
    ~transform_scratch() { --pool().depth; }
    transform_scratch(const transform_scratch&) = delete;
    transform_scratch& operator=(const transform_scratch&) = delete;

    std::vector<float>& buffer(std::size_t k) {
        auto& p = pool();
        return level_ < p.levels.size() ? p.levels[level_][k & 1] : own_[k & 1];
    }

private:
    struct pool_type {
        std::array<std::array<std::vector<float>, 2>, 8> levels;
        std::size_t depth = 0;
    };
    static pool_type& pool() {
        thread_local pool_type p;
        return p;
    }
    std::size_t level_;
    std::array<std::vector<float>, 2> own_;  // deeper than 8 levels: allocated per load
};

}  // namespace oar::detail

namespace oar::data {

/// The elementwise transforms as expression functors (kernels/expr.hpp's kind, run by the CPU map
/// loop cpu_detail::map_span, as activations are): Normalize's per-channel standardisation and
/// Scale's affine map. Compose them with expr::then to run several in one pass.
struct standardize_fn {
    double mean = 0.0, stddev = 1.0;
    /// (x - mean) / stddev in double, rounded once to float.
    float operator()(float x) const { return static_cast<float>((static_cast<double>(x) - mean) / stddev); }
    float backward(float, float, float dy) const { return static_cast<float>(static_cast<double>(dy) / stddev); }
};
struct scale_fn {
    float a = 1.0f, b = 0.0f;
    float operator()(float x) const { return x * a + b; }
    float backward(float, float, float dy) const { return dy * a; }
};

/// Normalize: out = (x - mean[c]) / std[c], computed in double, for channel c = dimension 0 of a
/// CHW input (paddle.vision.transforms.Normalize with data_format "CHW"). A single mean and std
/// apply to every value of an input of any shape. Dims are unchanged. value_error at construction
/// for empty or different-length lists or a std that is not > 0; shape_error in output_dims when
/// the input's dimension 0 is not the number of channels given.
class Normalize {
public:
    Normalize(std::vector<float> mean, std::vector<float> stddev) : mean_(std::move(mean)), std_(std::move(stddev)) {
        if (mean_.empty() || mean_.size() != std_.size())
            throw value_error(oar::detail::concat("Normalize: ", mean_.size(), " means and ", std_.size(),
                                             " standard deviations; give one of each per channel"));
        for (std::size_t c = 0; c < std_.size(); ++c)
            if (!(std_[c] > 0.0f))
                throw value_error(oar::detail::concat("Normalize: std[", c, "] is ", std_[c], ", must be > 0"));
    }
    /// From arrays such as cifar10_mean and cifar10_std.
    Normalize(std::span<const float> mean, std::span<const float> stddev)
        : Normalize(std::vector<float>(mean.begin(), mean.end()), std::vector<float>(stddev.begin(), stddev.end())) {}

    Dims output_dims(Dims in) const {
        if (mean_.size() > 1 && (in.rank < 2 || in[0] != mean_.size()))
            throw shape_error(oar::detail::concat("Normalize: ", mean_.size(),
                                                  " channels (dimension 0 of a CHW input) but input is ", to_string(in)));
        return in;
    }

    void apply(std::span<const float> in, Dims in_dims, std::span<float> out, const TransformContext&) const {
        oar::detail::check_transform_spans("Normalize", in, in_dims, out, output_dims(in_dims));
        const std::size_t channels = mean_.size();
        const std::size_t plane = in.size() / channels;  // (C, plane)
        for (std::size_t c = 0; c < channels; ++c)
            cpu_detail::map_span(standardize_fn{mean_[c], std_[c]}, in.data() + c * plane, out.data() + c * plane, plane);
    }

    std::span<const float> mean() const { return mean_; }
    std::span<const float> stddev() const { return std_; }

private:
    std::vector<float> mean_, std_;
};

/// Scale: out = x * a + b (float), any shape, dims unchanged. The named constructors cover the
/// usual ranges: bytes [0, 255] to [0, 1] or [-1, 1], and [0, 1] to [-1, 1].
struct Scale {
    float a = 1.0f;
    float b = 0.0f;

    static constexpr Scale byte_to_unit() { return {1.0f / 255.0f, 0.0f}; }         // x / 255
    static constexpr Scale byte_to_symmetric() { return {1.0f / 127.5f, -1.0f}; }   // x / 127.5 - 1
    static constexpr Scale unit_to_symmetric() { return {2.0f, -1.0f}; }            // 2x - 1

    constexpr Dims output_dims(Dims in) const { return in; }
    void apply(std::span<const float> in, Dims in_dims, std::span<float> out, const TransformContext&) const {
        oar::detail::check_transform_spans("Scale", in, in_dims, out, in_dims);
        cpu_detail::map_span(scale_fn{a, b}, in.data(), out.data(), in.size());
    }
};

/// Reshape: the same values, row-major, as shape `to` (e.g. [784] -> [1, 28, 28]). shape_error at
/// construction for a rank outside 1..4 or a zero dimension, and in output_dims (so when an
/// adaptor is made) for an input with a different number of values.
class Reshape {
public:
    explicit Reshape(Dims to) : to_(to) {
        bool ok = to.rank >= 1 && to.rank <= max_rank;
        for (std::size_t i = 0; ok && i < to.rank; ++i) ok = to[i] > 0;
        if (!ok) throw shape_error(oar::detail::concat("Reshape: target ", to_string(to), " needs rank 1..", max_rank,
                                                  " and positive dimensions"));
    }

    Dims output_dims(Dims in) const {
        if (in.size() != to_.size())
            throw shape_error(oar::detail::concat("Reshape: cannot reshape ", to_string(in), " (", in.size(),
                                                  " values) to ", to_string(to_), " (", to_.size(), " values)"));
        return to_;
    }
    void apply(std::span<const float> in, Dims in_dims, std::span<float> out, const TransformContext&) const {
        oar::detail::check_transform_spans("Reshape", in, in_dims, out, output_dims(in_dims));
        for (std::size_t k = 0; k < in.size(); ++k) out[k] = in[k];
    }
    Dims target() const { return to_; }

private:
    Dims to_;
};

/// RandomCrop: pads an (H, W) or (C, H, W) input with `padding` values equal to `fill` on every
/// side, then cuts an h x w window at a uniformly random (top, left) of the padded image,
/// top in [0, H + 2p - h], left in [0, W + 2p - w] (paddle's RandomCrop(size, padding) with
/// constant padding). Output dims: (h, w) or (C, h, w). The padding is in the values the crop
/// sees: put it before Normalize to pad with black. shape_error for other ranks or a window
/// larger than the padded input; value_error for a zero size.
class RandomCrop {
public:
    /// A square window, size x size.
    explicit RandomCrop(std::size_t size, std::size_t padding = 0, float fill = 0.0f)
        : RandomCrop(make_dims(size, size), padding, fill) {}
    /// A window of make_dims(height, width).
    explicit RandomCrop(Dims window, std::size_t padding = 0, float fill = 0.0f)
        : h_(window[0]), w_(window[1]), pad_(padding), fill_(fill) {
        if (window.rank != 2 || h_ == 0 || w_ == 0)
            throw value_error(oar::detail::concat("RandomCrop: window ", to_string(window),
                                                  " is not a non-empty (height, width)"));
    }

    Dims output_dims(Dims in) const {
        if (in.rank != 2 && in.rank != 3)
            throw shape_error(oar::detail::concat("RandomCrop: input ", to_string(in),
                                             " is neither (H, W) nor (C, H, W); Reshape it first"));
        const std::size_t hi = in[in.rank - 2], wi = in[in.rank - 1];
        if (h_ > hi + 2 * pad_ || w_ > wi + 2 * pad_)
            throw shape_error(oar::detail::concat("RandomCrop: window ", h_, "x", w_, " is larger than input ",
                                                  to_string(in), " padded by ", pad_, " (", hi + 2 * pad_, "x",
                                                  wi + 2 * pad_, ")"));
        Dims out = in;
        out.d[in.rank - 2] = h_;
        out.d[in.rank - 1] = w_;
        return out;
    }

    /// The window's (top, left) in the padded input for this context: words 0-1 and 2-3.
    std::array<std::size_t, 2> offsets(Dims in, const TransformContext& ctx) const {
        const std::size_t hi = in[in.rank - 2], wi = in[in.rank - 1];
        return {static_cast<std::size_t>(ctx.below(0, hi + 2 * pad_ - h_ + 1)),
                static_cast<std::size_t>(ctx.below(1, wi + 2 * pad_ - w_ + 1))};
    }

    void apply(std::span<const float> in, Dims in_dims, std::span<float> out, const TransformContext& ctx) const {
        oar::detail::check_transform_spans("RandomCrop", in, in_dims, out, output_dims(in_dims));
        const std::size_t hi = in_dims[in_dims.rank - 2], wi = in_dims[in_dims.rank - 1];
        const std::size_t channels = in.size() / (hi * wi);
        const auto [top, left] = offsets(in_dims, ctx);
        // Output (y, x) reads input (top + y - pad, left + x - pad) when that lies inside.
        const auto row0 = static_cast<std::ptrdiff_t>(top) - static_cast<std::ptrdiff_t>(pad_);
        const auto col0 = static_cast<std::ptrdiff_t>(left) - static_cast<std::ptrdiff_t>(pad_);
        const auto hs = static_cast<std::ptrdiff_t>(hi), ws = static_cast<std::ptrdiff_t>(wi);
        for (std::size_t c = 0; c < channels; ++c) {
            const float* src = in.data() + c * hi * wi;  // (H, W)
            float* dst = out.data() + c * h_ * w_;       // (h, w)
            for (std::size_t y = 0; y < h_; ++y) {
                const std::ptrdiff_t sy = row0 + static_cast<std::ptrdiff_t>(y);
                for (std::size_t x = 0; x < w_; ++x) {
                    const std::ptrdiff_t sx = col0 + static_cast<std::ptrdiff_t>(x);
                    dst[y * w_ + x] = (sy >= 0 && sy < hs && sx >= 0 && sx < ws) ? src[sy * ws + sx] : fill_;
                }
            }
        }
    }

private:
    std::size_t h_, w_, pad_;
    float fill_;
};

/// RandomHorizontalFlip: with probability p reverses the last dimension (the width of an (H, W)
/// or (C, H, W) input), else copies; dims unchanged. Flipped when ctx.uniform(0) < p. value_error
/// for p outside [0, 1]; shape_error for rank-1 inputs (Reshape them first).
class RandomHorizontalFlip {
public:
    explicit RandomHorizontalFlip(float p = 0.5f) : p_(p) {
        if (!(p >= 0.0f && p <= 1.0f))
            throw value_error(oar::detail::concat("RandomHorizontalFlip: p must be in [0, 1], got ", p));
    }

    Dims output_dims(Dims in) const {
        if (in.rank < 2)
            throw shape_error(oar::detail::concat("RandomHorizontalFlip: input ", to_string(in),
                                             " has no width to flip (rank < 2); Reshape it first"));
        return in;
    }
    bool flips(const TransformContext& ctx) const { return ctx.uniform(0) < p_; }

    void apply(std::span<const float> in, Dims in_dims, std::span<float> out, const TransformContext& ctx) const {
        oar::detail::check_transform_spans("RandomHorizontalFlip", in, in_dims, out, output_dims(in_dims));
        const std::size_t w = in_dims[in_dims.rank - 1], rows = in.size() / w;  // (rows, W)
        if (!flips(ctx)) {
            for (std::size_t k = 0; k < in.size(); ++k) out[k] = in[k];
            return;
        }
        for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t x = 0; x < w; ++x) out[r * w + x] = in[r * w + (w - 1 - x)];
    }
    float p() const { return p_; }

private:
    float p_;
};

/// A dataset with transforms applied on load, in order (the label passes through). D is a
/// Dataset type held by value, or `const X&` to borrow one the caller keeps alive (what
/// transform() makes of an lvalue). dims() is the last transform's output; every transform's
/// output_dims is checked when the adaptor is made (shape_error naming the transform's position).
/// load() is const and thread-safe; set_seed/set_epoch are not, call them between epochs (the
/// DataLoader calls set_epoch before an epoch's first load).
template <class D, class... Ts>
    requires(std::is_object_v<D> || std::is_lvalue_reference_v<D>) && Dataset<std::remove_cvref_t<D>> &&
            (Transform<Ts> && ...)
class TransformDataset : public dataset_base<TransformDataset<D, Ts...>> {
public:
    using Base = std::remove_cvref_t<D>;
    static_assert(!(std::is_reference_v<D> && EpochAware<Base> && !ConstEpochAware<Base>),
                  "oar: TransformDataset: the borrowed base dataset's set_epoch is not const, so the adaptor could "
                  "not pass the epoch on: move the base in (transform(std::move(base), ...)) or make set_epoch const");

    explicit TransformDataset(D data, Ts... transforms)
        : data_(static_cast<D&&>(data)), transforms_(std::move(transforms)...) {
        dims_[0] = data_.dims();
        [&]<std::size_t... K>(std::index_sequence<K...>) { (chain_dims<K>(), ...); }(std::index_sequence_for<Ts...>{});
    }

    std::size_t size() const { return data_.size(); }
    Dims dims() const { return dims_.back(); }
    /// The shape before transform k (k == count: the output).
    Dims dims_at(std::size_t k) const { return dims_.at(k); }

    std::int64_t load(std::size_t i, std::span<float> out) const {
        this->check_load("TransformDataset", i, size(), out, dims().size());
        if constexpr (sizeof...(Ts) == 0) {
            return data_.load(i, out);
        } else {
            oar::detail::transform_scratch scratch;
            std::vector<float>& first = scratch.buffer(0);
            first.resize(dims_[0].size());
            const std::int64_t label = data_.load(i, first);
            std::span<const float> cur = first;
            // Transform K reads buffer K % 2 and writes buffer (K + 1) % 2, the last one `out`.
            [&]<std::size_t... K>(std::index_sequence<K...>) {
                ((cur = step<K>(cur, scratch, out, i)), ...);
            }(std::index_sequence_for<Ts...>{});
            return label;
        }
    }

    void set_seed(std::uint64_t seed) { seed_ = seed; }
    std::uint64_t seed() const { return seed_; }
    /// Each epoch draws new random crops and flips (epoch taken mod 2^40). DataLoader and
    /// Model::fit call it at each epoch's start, so it is const (the epoch is the adaptor's only
    /// mutable state) and reaches a borrowed adaptor; it passes the epoch on to a base dataset
    /// that takes one (an adaptor over an adaptor).
    void set_epoch(std::uint64_t epoch) const {
        epoch_ = epoch;
        if constexpr (ConstEpochAware<Base>) data_.set_epoch(epoch);
    }
    /// A base held by value whose set_epoch is not const is reached through a non-const adaptor.
    void set_epoch(std::uint64_t epoch)
        requires(!std::is_reference_v<D> && EpochAware<Base> && !ConstEpochAware<Base>)
    {
        epoch_ = epoch;
        data_.set_epoch(epoch);
    }
    std::uint64_t epoch() const { return epoch_; }

    const std::remove_cvref_t<D>& base() const { return data_; }
    const std::tuple<Ts...>& transforms() const { return transforms_; }

private:
    template <std::size_t K>
    void chain_dims() {
        try {
            dims_[K + 1] = std::get<K>(transforms_).output_dims(dims_[K]);
        } catch (const shape_error& e) {
            const std::string what = e.what();
            const std::string bare = what.substr(what.rfind("oar: ", 0) == 0 ? 5 : 0);  // one "oar: " prefix
            throw shape_error(oar::detail::concat("TransformDataset: transform ", K, " of ", sizeof...(Ts), " (input ",
                                                  to_string(dims_[K]), "): ", bare));
        }
    }

    template <std::size_t K>
    std::span<const float> step(std::span<const float> in, oar::detail::transform_scratch& scratch,
                                std::span<float> out, std::size_t i) const {
        std::span<float> dst = out;
        if constexpr (K + 1 < sizeof...(Ts)) {
            std::vector<float>& buf = scratch.buffer(K + 1);
            buf.resize(dims_[K + 1].size());
            dst = buf;
        }
        std::get<K>(transforms_).apply(in, dims_[K], dst, TransformContext{seed_, epoch_, i, K});
        return dst;
    }

    D data_;
    std::tuple<Ts...> transforms_;
    std::array<Dims, sizeof...(Ts) + 1> dims_{};
    std::uint64_t seed_ = 0;
    mutable std::uint64_t epoch_ = 0;  // set between epochs (set_epoch), read by load
};

/// `data` with `transforms` applied on load, like paddle's dataset + transforms. An lvalue dataset
/// is borrowed (it must outlive the result), an rvalue is moved in. Seed 0, epoch 0.
template <class D, class... Ts>
    requires Dataset<std::remove_cvref_t<D>> && (Transform<Ts> && ...)
auto transform(D&& data, Ts... transforms) {
    using Held = std::conditional_t<std::is_lvalue_reference_v<D>, const std::remove_reference_t<D>&,
                                    std::remove_cvref_t<D>>;
    return TransformDataset<Held, Ts...>(std::forward<D>(data), std::move(transforms)...);
}

static_assert(Transform<Normalize> && Transform<Scale> && Transform<Reshape> && Transform<RandomCrop> &&
              Transform<RandomHorizontalFlip>);

}  // namespace oar::data
