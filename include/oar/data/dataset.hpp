// Datasets, as paddle.io.Dataset: something with a size and a way to get sample i. Samples are a
// fixed-shape float image plus an integer label. `load(i, out)` writes straight into a batch
// buffer (no allocation); `get(i)` returns an owning Sample for convenience. Subset views some
// samples of another dataset.
#pragma once

#include <concepts>  // std::convertible_to, std::same_as
#include <cstddef>   // std::size_t
#include <cstdint>   // std::int64_t, std::uint8_t
#include <span>      // std::span
#include <utility>   // std::move
#include <vector>    // std::vector

#include "../core/error.hpp"  // value_error, shape_error
#include "../core/shape.hpp"  // Dims

namespace oar::data {

/// One sample: image values laid out as `dims` (e.g. [1, 28, 28]) and its label.
struct Sample {
    std::vector<float> image;
    Dims dims{};
    std::int64_t label = 0;
};

/// Dataset: a finite, random-access collection of fixed-shape samples.
///   std::size_t size() const;                                 // number of samples
///   Dims dims() const;                                        // per-sample image shape, the same for all
///   std::int64_t load(std::size_t i, std::span<float> out) const;
///        // writes sample i's dims().size() values into out, returns its label; i < size(),
///        // else value_error naming i. Must be safe to call concurrently from several threads.
///   Sample get(std::size_t i) const;                          // the same, owning (paddle's __getitem__)
template <class D>
concept Dataset = requires(const D& d, std::size_t i, std::span<float> out) {
    { d.size() } -> std::convertible_to<std::size_t>;
    { d.dims() } -> std::same_as<Dims>;
    { d.load(i, out) } -> std::same_as<std::int64_t>;
    { d.get(i) } -> std::same_as<Sample>;
};

/// A dataset whose samples depend on the epoch (random transforms draw anew each epoch): DataLoader
/// (and so Model::fit) calls set_epoch(e) when epoch e's loop begins. ConstEpochAware: callable on a
/// const dataset (TransformDataset's is), so a loader or a wrapper given the dataset as const
/// reaches it too.
template <class D>
concept EpochAware = requires(D& d, std::uint64_t e) { d.set_epoch(e); };
template <class D>
concept ConstEpochAware = requires(const D& d, std::uint64_t e) { d.set_epoch(e); };

/// Implements get() from load() for a dataset type (CRTP), so a dataset writes only load().
template <class Derived>
struct dataset_base {
    Sample get(std::size_t i) const {
        const auto& self = static_cast<const Derived&>(*this);
        Sample s;
        s.dims = self.dims();
        s.image.resize(s.dims.size());
        s.label = self.load(i, s.image);
        return s;
    }

protected:
    /// Throws value_error unless i < n and out holds exactly `values` floats.
    static void check_load(const char* who, std::size_t i, std::size_t n, std::span<float> out, std::size_t values) {
        if (i >= n) throw value_error(detail::concat(who, ": sample index ", i, " is out of range (size ", n, ")"));
        if (out.size() != values)
            throw shape_error(detail::concat(who, ": output span holds ", out.size(), " values, a sample has ", values));
    }
};

/// Samples held in memory as float images and int64 labels.
class InMemoryDataset : public dataset_base<InMemoryDataset> {
public:
    InMemoryDataset() = default;
    /// `images` holds labels.size() samples of dims.size() values each.
    InMemoryDataset(std::vector<float> images, std::vector<std::int64_t> labels, Dims dims)
        : images_(std::move(images)), labels_(std::move(labels)), dims_(dims) {
        if (images_.size() != labels_.size() * dims_.size())
            throw shape_error(detail::concat("InMemoryDataset: ", images_.size(), " image values for ", labels_.size(),
                                             " labels of shape ", to_string(dims_)));
    }

    std::size_t size() const { return labels_.size(); }
    Dims dims() const { return dims_; }
    std::int64_t load(std::size_t i, std::span<float> out) const {
        check_load("InMemoryDataset", i, size(), out, dims_.size());
        const float* src = images_.data() + i * dims_.size();
        for (std::size_t k = 0; k < out.size(); ++k) out[k] = src[k];
        return labels_[i];
    }
    std::span<const float> images() const { return images_; }
    std::span<const std::int64_t> labels() const { return labels_; }

private:
    std::vector<float> images_;
    std::vector<std::int64_t> labels_;
    Dims dims_{};
};

/// uint8 images (as IDX and CIFAR-10 store them) and labels, converted to float on load as
/// x * scale + shift; the course's normalisation x / 127.5 - 1 is the default.
class ByteImageDataset : public dataset_base<ByteImageDataset> {
public:
    ByteImageDataset() = default;
    ByteImageDataset(std::vector<std::uint8_t> pixels, std::vector<std::int64_t> labels, Dims dims,
                     float scale = 1.0f / 127.5f, float shift = -1.0f)
        : pixels_(std::move(pixels)), labels_(std::move(labels)), dims_(dims), scale_(scale), shift_(shift) {
        if (pixels_.size() != labels_.size() * dims_.size())
            throw shape_error(detail::concat("ByteImageDataset: ", pixels_.size(), " pixels for ", labels_.size(),
                                             " labels of shape ", to_string(dims_)));
    }

    std::size_t size() const { return labels_.size(); }
    Dims dims() const { return dims_; }
    std::int64_t load(std::size_t i, std::span<float> out) const {
        check_load("ByteImageDataset", i, size(), out, dims_.size());
        const std::uint8_t* src = pixels_.data() + i * dims_.size();
        for (std::size_t k = 0; k < out.size(); ++k) out[k] = static_cast<float>(src[k]) * scale_ + shift_;
        return labels_[i];
    }
    std::span<const std::uint8_t> pixels() const { return pixels_; }
    std::span<const std::int64_t> labels() const { return labels_; }

private:
    std::vector<std::uint8_t> pixels_;
    std::vector<std::int64_t> labels_;
    Dims dims_{};
    float scale_ = 1.0f / 127.5f, shift_ = -1.0f;
};

/// A view of some samples of another dataset (paddle.io.Subset, torch.utils.data.Subset): sample k
/// is the base's sample indices[k]. The base is borrowed (it must outlive the subset; a temporary
/// is refused). Indices may repeat; each must be below the base's size (value_error naming the
/// first that is not). set_epoch reaches a base that takes one (a TransformDataset).
template <Dataset D>
class Subset : public dataset_base<Subset<D>> {
public:
    Subset(const D& base, std::vector<std::size_t> indices) : base_(&base), indices_(std::move(indices)) {
        const std::size_t n = base.size();
        for (std::size_t k = 0; k < indices_.size(); ++k)
            if (indices_[k] >= n)
                throw value_error(detail::concat("Subset: index ", indices_[k], " (position ", k,
                                                 ") is out of range for a dataset of ", n, " samples"));
    }
    Subset(const D&&, std::vector<std::size_t>) = delete;  // would dangle

    /// Samples [first, first + count) of `base`, e.g. a validation split.
    static Subset range(const D& base, std::size_t first, std::size_t count) {
        if (first > base.size() || count > base.size() - first)
            throw value_error(detail::concat("Subset::range: [", first, ", ", first + count, ") of a dataset of ",
                                             base.size(), " samples"));
        std::vector<std::size_t> idx(count);
        for (std::size_t k = 0; k < count; ++k) idx[k] = first + k;
        return Subset(base, std::move(idx));
    }

    std::size_t size() const { return indices_.size(); }
    Dims dims() const { return base_->dims(); }
    std::int64_t load(std::size_t i, std::span<float> out) const {
        if (i >= indices_.size())
            throw value_error(detail::concat("Subset: sample index ", i, " is out of range (size ", indices_.size(), ")"));
        return base_->load(indices_[i], out);
    }
    void set_epoch(std::uint64_t e) const
        requires ConstEpochAware<D>
    {
        base_->set_epoch(e);
    }

    const D& base() const { return *base_; }
    std::span<const std::size_t> indices() const { return indices_; }

private:
    const D* base_;
    std::vector<std::size_t> indices_;
};

static_assert(Dataset<InMemoryDataset>);
static_assert(Dataset<ByteImageDataset>);
static_assert(Dataset<Subset<InMemoryDataset>>);

}  // namespace oar::data
