// DataLoader, as paddle.io.DataLoader: turns a Dataset and a batch order into contiguous
// [N, dims...] float batches, built in the calling thread or by worker threads that prefetch a
// bounded number of batches and hand them over in order, so the sequence never depends on timing.
#pragma once

#include <algorithm>           // std::min
#include <atomic>              // std::atomic<bool>: workers see a stop between samples
#include <condition_variable>  // std::condition_variable: the bounded hand-over
#include <cstddef>             // std::size_t
#include <cstdint>             // std::int64_t, std::uint64_t
#include <exception>           // std::exception_ptr: a worker's failure, rethrown to the consumer
#include <functional>          // std::function: the type-erased batch sampler
#include <memory>              // std::shared_ptr
#include <mutex>               // std::mutex, std::unique_lock
#include <optional>            // std::optional: an empty or filled hand-over slot
#include <span>                // std::span: Dataset::load's output
#include <thread>              // std::thread
#include <type_traits>         // std::remove_const_t: deduction from a shared_ptr<const D>
#include <utility>             // std::move
#include <variant>             // std::variant: a slot holds a batch or a worker's exception
#include <vector>              // std::vector

#include "../core/error.hpp"   // value_error
#include "../core/tensor.hpp"  // Tensor
#include "dataset.hpp"         // Dataset
#include "generator.hpp"       // generator
#include "sampler.hpp"         // BatchSampler, BatchedSampler, RandomSampler, SequentialSampler

// The static_assert message of a loader given a const dataset whose set_epoch is not const.
#define OAR_DATALOADER_CONST_EPOCH_MESSAGE                                                                \
    "oar: DataLoader: this dataset's set_epoch is not const, so a loader given it as const could not tell it " \
    "the epoch: pass the dataset non-const (an lvalue or a shared_ptr<D>), or make set_epoch const"

namespace oar::data {

/// One batch: the samples' images stacked contiguously and their labels.
struct Batch {
    Tensor images;                     // [N, dims...] float32, N = labels.size()
    std::vector<std::int64_t> labels;  // [N]
    std::size_t index = 0;             // the batch's number in its epoch, from 0
};

/// How the loader's threads work. num_workers = 0 builds every batch in the thread that iterates;
/// > 0 starts that many threads per epoch, each with up to `prefetch` finished batches waiting
/// (Paddle's prefetch_factor), so at most num_workers * prefetch batches wait in all.
struct WorkerOptions {
    std::size_t num_workers = 0;
    std::size_t prefetch = 2;
};

/// paddle.io.DataLoader's arguments (same defaults), for a loader that makes its own batches.
struct LoaderOptions {
    std::size_t batch_size = 1;
    bool shuffle = false;    // a fresh permutation from (seed, epoch) every epoch
    bool drop_last = false;  // drop the last batch when shorter than batch_size
    std::size_t num_workers = 0;
    std::size_t prefetch = 2;
    std::uint64_t seed = 0;
};

/// Iterates a Dataset in batches. `for (auto&& b : loader())` runs one epoch and the next call of
/// loader() the next (a new order with shuffle, as Paddle's); `loader.epoch(e)` gives epoch e.
///
/// The dataset: given by reference, it is borrowed and must outlive the loader and every
/// generator it returns (a temporary is refused); given as a shared_ptr, it is shared.
/// Whatever num_workers, the same seed gives the same batches, bitwise, in the same order.
/// A yielded Batch& is valid until the loop's next step; its storage is then reused (move it
/// out to keep it). Dataset::load's exceptions reach the loop from the step that would have
/// produced that batch, after every earlier batch. Leaving the loop early stops and joins the
/// workers, after at most one sample load each.
/// An empty dataset is a value_error at construction, as Paddle's samplers refuse one: an epoch
/// of nothing is nearly always a wrong path or split.
template <Dataset D>
class DataLoader {
public:
    using dataset_type = D;

    DataLoader(const D& dataset, LoaderOptions opts = {}) : DataLoader(borrow(dataset), opts) {}
    DataLoader(std::shared_ptr<const D> dataset, LoaderOptions opts = {})
        : DataLoader(mutable_tag{}, std::move(dataset), nullptr, opts) {
        static_assert(!(EpochAware<D> && !ConstEpochAware<D>), OAR_DATALOADER_CONST_EPOCH_MESSAGE);
    }
    /// A non-const dataset: a set_epoch that is not const is reachable too.
    DataLoader(D& dataset, LoaderOptions opts = {}) : DataLoader(mutable_tag{}, borrow(dataset), &dataset, opts) {}
    DataLoader(std::shared_ptr<D> dataset, LoaderOptions opts = {})
        : DataLoader(mutable_tag{}, dataset, dataset.get(), opts) {}

    /// Batches chosen by `batch_sampler` (e.g. a DistributedBatchSampler); its indices must be < dataset size.
    template <BatchSampler S>
    DataLoader(const D& dataset, S batch_sampler, WorkerOptions workers = {})
        : DataLoader(borrow(dataset), std::move(batch_sampler), workers) {}
    template <BatchSampler S>
    DataLoader(std::shared_ptr<const D> dataset, S batch_sampler, WorkerOptions workers = {})
        : DataLoader(mutable_tag{}, std::move(dataset), nullptr, std::move(batch_sampler), workers) {
        static_assert(!(EpochAware<D> && !ConstEpochAware<D>), OAR_DATALOADER_CONST_EPOCH_MESSAGE);
    }
    template <BatchSampler S>
    DataLoader(D& dataset, S batch_sampler, WorkerOptions workers = {})
        : DataLoader(mutable_tag{}, borrow(dataset), &dataset, std::move(batch_sampler), workers) {}
    template <BatchSampler S>
    DataLoader(std::shared_ptr<D> dataset, S batch_sampler, WorkerOptions workers = {})
        : DataLoader(mutable_tag{}, dataset, dataset.get(), std::move(batch_sampler), workers) {}

    DataLoader(const D&&, LoaderOptions = {}) = delete;  // would dangle
    template <BatchSampler S>
    DataLoader(const D&&, S, WorkerOptions = {}) = delete;

    /// The batches of epoch e; the next loader() call gives epoch e + 1. The order is fixed here;
    /// loading starts at the loop's begin().
    /// A dataset with set_epoch (TransformDataset, Subset over one, a dataset of the caller's) is
    /// told e when the epoch's loop begins, before any sample of it loads: random transforms draw
    /// new crops and flips every epoch, the same for a seed whatever num_workers.
    generator<Batch> epoch(std::uint64_t e) {
        next_epoch_ = e + 1;
        return run(dataset_, batches_of_(e), workers_, epoch_setter(e));
    }
    /// The batches of the current epoch, then advances it.
    generator<Batch> operator()() { return epoch(next_epoch_); }

    /// The epoch the next loader() call gives.
    void set_epoch(std::uint64_t e) { next_epoch_ = e; }
    std::uint64_t current_epoch() const { return next_epoch_; }
    std::size_t num_batches() const { return num_batches_; }
    const D& dataset() const { return *dataset_; }

private:
    using Slot = std::variant<Batch, std::exception_ptr>;
    struct mutable_tag {};

    DataLoader(mutable_tag, std::shared_ptr<const D> dataset, D* mut, LoaderOptions opts)
        : dataset_(std::move(dataset)), mutable_(mut), workers_{opts.num_workers, opts.prefetch} {
        check_dataset();
        if (opts.batch_size == 0) throw value_error("DataLoader: batch_size must be positive, got 0");
        const std::size_t n = dataset_->size();
        if (opts.shuffle)
            use(BatchedSampler<RandomSampler>(RandomSampler(n, opts.seed), opts.batch_size, opts.drop_last));
        else
            use(BatchedSampler<SequentialSampler>(SequentialSampler(n), opts.batch_size, opts.drop_last));
    }
    template <BatchSampler S>
    DataLoader(mutable_tag, std::shared_ptr<const D> dataset, D* mut, S batch_sampler, WorkerOptions workers)
        : dataset_(std::move(dataset)), mutable_(mut), workers_(workers) {
        check_dataset();
        use(std::move(batch_sampler));
    }

    static std::shared_ptr<const D> borrow(const D& d) { return std::shared_ptr<const D>(std::shared_ptr<void>{}, &d); }

    /// What tells the dataset the epoch (empty for a dataset without set_epoch).
    std::function<void()> epoch_setter(std::uint64_t e) const {
        if constexpr (ConstEpochAware<D>) {
            return [d = dataset_.get(), e] { d->set_epoch(e); };
        } else if constexpr (EpochAware<D>) {
            return [d = mutable_, e] { d->set_epoch(e); };  // non-null: the const constructors refuse D
        } else {
            return {};
        }
    }

    void check_dataset() const {
        if (!dataset_) throw value_error("DataLoader: the dataset pointer is null");
        if (dataset_->size() == 0) throw value_error("DataLoader: the dataset is empty (0 samples)");
        if (workers_.num_workers > 0 && workers_.prefetch == 0)
            throw value_error(detail::concat("DataLoader: prefetch must be positive with ", workers_.num_workers,
                                             " workers, got 0"));
    }

    template <BatchSampler S>
    void use(S sampler) {
        num_batches_ = sampler.num_batches();
        batches_of_ = [s = std::move(sampler)](std::uint64_t e) mutable {
            s.set_epoch(e);
            return s.batches();
        };
    }

    /// Gathers samples `indices` into b. False if `stop` was raised first.
    static bool build(const D& ds, const std::vector<std::size_t>& indices, std::size_t k, Batch& b,
                      const std::atomic<bool>* stop = nullptr) {
        const Dims dims = ds.dims();
        const std::size_t per = dims.size();
        b.images.resize(indices.size(), dims);  // keeps the capacity of a reused batch
        b.labels.resize(indices.size());
        b.index = k;
        for (std::size_t i = 0; i < indices.size(); ++i) {
            if (stop && stop->load(std::memory_order_relaxed)) return false;
            b.labels[i] = ds.load(indices[i], std::span<float>(b.images.data() + i * per, per));
        }
        return true;
    }

    /// Worker threads and the bounded, in-order hand-over, living in an epoch's coroutine frame:
    /// destroying it (the epoch ended, failed or was abandoned) stops and joins the threads.
    /// Batch k goes to slot k % capacity and may be started only once batch k - capacity was taken,
    /// so at most `capacity` finished batches wait and each slot has one writer at a time.
    class Workers {
    public:
        Workers(const D& ds, const BatchList& batches, WorkerOptions opts)
            : ds_(ds), batches_(batches), slots_(opts.num_workers * opts.prefetch) {
            const std::size_t n = std::min(opts.num_workers, batches.size());
            threads_.reserve(n);
            try {
                for (std::size_t w = 0; w < n; ++w) threads_.emplace_back([this] { work(); });
            } catch (...) {
                shut_down();
                throw;
            }
        }
        ~Workers() { shut_down(); }
        Workers(const Workers&) = delete;
        Workers& operator=(const Workers&) = delete;

        /// Waits for batch k (the next in order) and takes it.
        Slot take(std::size_t k) {
            Slot s;
            {
                std::unique_lock lock(mutex_);
                auto& slot = slots_[k % slots_.size()];
                ready_.wait(lock, [&] { return slot.has_value(); });
                s = std::move(*slot);
                slot.reset();
                taken_ = k + 1;
            }
            space_.notify_all();
            return s;
        }

        /// Returns a consumed batch's storage for the workers to fill again.
        void recycle(Batch&& b) {
            std::lock_guard lock(mutex_);
            spare_.push_back(std::move(b));
        }

    private:
        void work() {
            for (;;) {
                std::size_t k = 0;
                Batch b;
                {
                    std::unique_lock lock(mutex_);
                    space_.wait(lock, [&] { return stopping_ || next_ >= batches_.size() || next_ < taken_ + slots_.size(); });
                    if (stopping_ || next_ >= batches_.size()) return;
                    k = next_++;
                    if (!spare_.empty()) {
                        b = std::move(spare_.back());
                        spare_.pop_back();
                    }
                }
                Slot result;
                try {
                    if (!build(ds_, batches_[k], k, b, &stop_)) return;
                    result = std::move(b);
                } catch (...) {
                    result = std::current_exception();
                }
                {
                    std::lock_guard lock(mutex_);
                    slots_[k % slots_.size()] = std::move(result);
                }
                ready_.notify_one();  // the only waiter is the consumer
            }
        }

        void shut_down() noexcept {
            {
                std::lock_guard lock(mutex_);
                stopping_ = true;
            }
            stop_.store(true, std::memory_order_relaxed);
            space_.notify_all();
            for (auto& t : threads_)
                if (t.joinable()) t.join();
        }

        const D& ds_;
        const BatchList& batches_;
        std::mutex mutex_;
        std::condition_variable ready_, space_;  // a slot was filled; a slot was freed (or stop)
        std::vector<std::optional<Slot>> slots_;
        std::vector<Batch> spare_;
        std::size_t next_ = 0;   // the next batch a worker starts
        std::size_t taken_ = 0;  // batches the consumer has taken
        bool stopping_ = false;
        std::atomic<bool> stop_{false};
        std::vector<std::thread> threads_;  // last: joined before the rest is destroyed
    };

    /// The epoch's coroutine. Its parameters name no template parameter: nvcc 13's front end
    /// mistranslates a co_yield in a coroutine whose signature depends on one ("'__T0' was not
    /// declared"), so the dataset travels as a shared_ptr<const void>, which keeps it alive and
    /// still points at the D.
    static generator<Batch> run(std::shared_ptr<const void> dataset, BatchList batches, WorkerOptions opts,
                                std::function<void()> begin_epoch) {
        const D& ds = *static_cast<const D*>(dataset.get());
        if (begin_epoch) begin_epoch();  // at the loop's begin(), before any worker starts
        if (opts.num_workers == 0) {
            Batch b;
            for (std::size_t k = 0; k < batches.size(); ++k) {
                build(ds, batches[k], k, b);
                co_yield std::move(b);  // the consumer gets b itself; a move-from leaves it reusable
            }
            co_return;
        }
        Workers pool(ds, batches, opts);
        for (std::size_t k = 0; k < batches.size(); ++k) {
            Slot s = pool.take(k);
            if (auto* e = std::get_if<std::exception_ptr>(&s)) std::rethrow_exception(*e);
            Batch& b = std::get<Batch>(s);
            co_yield std::move(b);
            pool.recycle(std::move(b));
        }
    }

    std::shared_ptr<const D> dataset_;
    D* mutable_ = nullptr;  // the same dataset when given non-const: its set_epoch may be non-const
    WorkerOptions workers_;
    std::function<BatchList(std::uint64_t)> batches_of_;
    std::size_t num_batches_ = 0;
    std::uint64_t next_epoch_ = 0;
};

template <Dataset D>
DataLoader(std::shared_ptr<D>, LoaderOptions = {}) -> DataLoader<std::remove_const_t<D>>;
template <Dataset D, BatchSampler S>
DataLoader(std::shared_ptr<D>, S, WorkerOptions = {}) -> DataLoader<std::remove_const_t<D>>;

}  // namespace oar::data

#undef OAR_DATALOADER_CONST_EPOCH_MESSAGE
