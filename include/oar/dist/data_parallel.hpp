// DataParallel, as paddle.DataParallel: replicates a Network over the ranks of a Communicator.
// At construction it checks that every rank built the same model and copies rank 0's parameters
// to all; backward() averages the flat gradient buffer in buckets (one allreduce each), so that
// every rank's optimizer takes the same step. With an AsyncCommunicator (MpiComm) and a network
// that reports each layer's finished gradients (Network::backward(dy, observer)), a bucket's
// allreduce starts as soon as the layers it covers are done, while earlier layers still run
// backward (PyTorch DDP's and Paddle's overlap); all are waited for before backward() returns.
#pragma once

#include <algorithm>  // std::min, std::max, std::sort
#include <functional> // std::greater
#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint64_t
#include <span>       // std::span
#include <string>     // std::string
#include <utility>    // std::declval
#include <vector>     // std::vector

#include "../core/error.hpp"  // value_error
#include "../core/shape.hpp"  // to_string(Dims)
#include "../kernels/cpu/elementwise.hpp"  // op::scale_down on cpu
#include "../kernels/dispatch.hpp"         // kernel, backend_of, storage_of: the model's backend
#include "communicator.hpp"   // Communicator, AsyncCommunicator, allgather, allgather_strings, split_u64

namespace oar::dist {

/// A model with one flat parameter buffer and one gradient buffer of the same size (Network):
///   net.parameters().values() / .grads() -> std::span<T>, T float or double;
///   net.parameters().entries()          -> the named tensors (key, dims, size) in the buffer.
template <class M>
concept FlatParameterModel = requires(M& m) {
    m.parameters().values();
    m.parameters().grads();
    m.parameters().entries();
    m.parameters().count();
};

struct DataParallelOptions {
    /// Bytes of gradient per allreduce. Paddle's comm_buffer_size and PyTorch's bucket_cap_mb
    /// default to 25 MB; small buckets cost one latency each, one huge bucket cannot overlap.
    /// Buckets are cut from the END of the flat buffer (the last layers' gradients, ready first).
    std::size_t bucket_bytes = 25u << 20;
    /// Rank whose parameters every rank starts from.
    int root = 0;
    /// Start each bucket's allreduce during backward, as soon as it is complete (needs an
    /// AsyncCommunicator and a network with backward(dy, observer); otherwise ignored). The
    /// result is bitwise the one of the blocking path: the same sums of the same values.
    bool overlap = true;
};

/// A rank's model: its parameter count and the keys and shapes of its tensors, as one line.
template <FlatParameterModel M>
std::string describe_parameters(const M& net) {
    std::string s = "[";
    for (const auto& e : net.parameters().entries()) {
        if (s.size() > 1) s += ", ";
        s += e.key + " " + to_string(e.dims);
    }
    return s + "]";
}

/// FNV-1a over the description and the buffer size: equal on ranks that built the same model.
inline std::uint64_t fingerprint(const std::string& description, std::size_t buffer_size) {
    std::uint64_t h = 14695981039346656037ull;
    auto mix = [&](unsigned char c) { h = (h ^ c) * 1099511628211ull; };
    for (char c : description) mix(static_cast<unsigned char>(c));
    for (int i = 0; i < 8; ++i) mix(static_cast<unsigned char>(buffer_size >> (8 * i)));
    return h;
}

/// A communicator whose collectives take device memory (NcclComm says so with device_memory).
template <class C>
concept DeviceCommunicator = requires { requires C::device_memory; };
/// A communicator that touches no memory (LocalComm: one process), fit for any backend.
template <class C>
concept AnyMemoryCommunicator = requires { requires C::any_memory; };

template <FlatParameterModel M, Communicator C>
class DataParallel {
public:
    using value_type = typename decltype(std::declval<M&>().parameters().values())::value_type;
    using backend = typename backend_of<M>::type;
    static_assert(AnyMemoryCommunicator<C> || storage<backend>::host_memory != DeviceCommunicator<C>,
                  "oar: DataParallel needs a communicator for the memory the network's gradients live in: "
                  "NcclComm for a network on the GPU, MpiComm or LocalComm for one on the CPU");

    /// Refuses (value_error, on every rank) ranks whose models differ from the root's in parameter
    /// count or in tensor keys and shapes, naming both; then broadcasts the root's parameters.
    /// Both are collectives: every rank constructs its DataParallel at the same point.
    DataParallel(M& net, C& comm, DataParallelOptions opts = {}) : net_(&net), comm_(&comm), opts_(opts) {
        if (opts_.root < 0 || opts_.root >= comm.world_size())
            throw value_error(detail::concat("DataParallel: root ", opts_.root, " is not a rank (world size ",
                                             comm.world_size(), ")"));
        cut_buckets();
        verify_same_model();
        broadcast_parameters();
    }

    M& module() { return *net_; }
    const M& module() const { return *net_; }
    C& communicator() { return *comm_; }
    int rank() const { return comm_->rank(); }
    int world_size() const { return comm_->world_size(); }
    /// Rank 0 alone writes checkpoints, curves, logs and the result line.
    bool is_writer() const { return comm_->rank() == 0; }

    /// net.forward, unchanged: each rank runs its own share of the global batch.
    template <class X>
    decltype(auto) forward(X&& x) { return net_->forward(static_cast<X&&>(x)); }
    /// net.backward, with the gradients averaged over the ranks when it returns: as Paddle's
    /// loss.backward() under DataParallel. Overlapped with backward where it can be (see options).
    template <class DY>
    void backward(DY&& dy) {
        last_overlapped_ = 0;
        if constexpr (AsyncCommunicator<C> && requires(M& m, Observer& o) { m.backward(dy, o); }) {
            if (opts_.overlap && comm_->world_size() > 1) {
                Observer obs{this};
                started_ = 0;
                try {
                    net_->backward(static_cast<DY&&>(dy), obs);
                    start_ready(0);  // what the layers did not cover (parameter-free first layers)
                    comm_->wait_all();
                } catch (...) {
                    comm_->wait_all();  // the engine must not write into the buffer after we leave
                    throw;
                }
                divide_by_world_size();
                return;
            }
        }
        net_->backward(static_cast<DY&&>(dy));
        sync_gradients();
    }

    /// Replaces every rank's gradients with their average over the ranks, one blocking allreduce
    /// per bucket. With losses that average over each rank's batch and equal batches per rank,
    /// this is the gradient of the global batch's mean loss. (backward() calls it when it does
    /// not overlap; call it yourself after a net.backward() of your own.)
    void sync_gradients() {
        if (comm_->world_size() == 1) return;
        const std::span<value_type> g = net_->parameters().grads();
        for (const Bucket& b : buckets_) comm_->allreduce_sum(g.subspan(b.first, b.size));
        divide_by_world_size();
    }

    /// Buckets whose allreduce started during the last backward() while layers before them were
    /// still to run backward (0 when nothing overlapped): the evidence that overlap happened.
    std::size_t overlapped_buckets() const { return last_overlapped_; }

    /// Every rank's parameters and buffers (running statistics) become the root's (also called by the
    /// constructor). Later, buffers evolve per rank from each rank's batches, as in Paddle and
    /// PyTorch (no synchronised BatchNorm); rank 0's are the ones checkpoints save.
    void broadcast_parameters() {
        comm_->broadcast(net_->parameters().values(), opts_.root);
        if constexpr (requires(M& m) { m.parameters().buffers(); })
            if (!net_->parameters().buffers().empty()) comm_->broadcast(net_->parameters().buffers(), opts_.root);
    }

    std::size_t num_buckets() const { return buckets_.size(); }
    std::size_t bucket_bytes() const { return opts_.bucket_bytes; }

private:
    struct Bucket {
        std::size_t first, size;  // in elements of the flat gradient buffer
    };

    /// Buckets of at most bucket_bytes, tiling the buffer from its end (buckets_[0] holds the last
    /// layers' gradients, ready first in backward) and cut at tensor starts, as PyTorch DDP does:
    /// a tensor is split only when it alone exceeds a bucket, so a bucket is complete as soon as
    /// the layers it covers are.
    void cut_buckets() {
        const std::size_t per = std::max<std::size_t>(1, opts_.bucket_bytes / sizeof(value_type));
        std::vector<std::size_t> starts;  // tensor offsets, highest first
        for (const auto& e : net_->parameters().entries()) starts.push_back(e.offset);
        std::sort(starts.begin(), starts.end(), std::greater<>());
        std::size_t end = net_->parameters().grads().size(), start = end;  // the open bucket: [start, end)
        auto close = [&] {
            if (start < end) buckets_.push_back({start, end - start});
            end = start;
        };
        for (std::size_t t : starts) {
            if (end - t <= per) {  // the tensor (and padding after it) joins the open bucket
                start = t;
                continue;
            }
            close();
            for (; end - t > per; end -= per) buckets_.push_back({end - per, per});  // a tensor too big for one
            start = t;
        }
        if (start > 0) {  // anything before the first tensor (nothing, in a Network)
            if (end > per) {
                close();
                for (; end > per; end -= per) buckets_.push_back({end - per, per});
            }
            start = 0;
        }
        close();
    }

    /// Network::backward's observer: after layer i, the gradients from its block's offset to the
    /// end of the buffer are final (the blocks tile the buffer, layers run last to first).
    struct Observer {
        DataParallel* dp;
        template <class Event>
        void on_backward(const Event& e) {
            if (e.param_grads.empty()) return;
            const std::size_t before = dp->started_;
            dp->start_ready(e.param_offset);
            if (e.index > 0) dp->last_overlapped_ += dp->started_ - before;
            dp->comm_->progress();
        }
    };

    /// Starts, in bucket order (the same on every rank), every bucket lying at or after `ready`.
    void start_ready(std::size_t ready) {
        const std::span<value_type> g = net_->parameters().grads();
        for (; started_ < buckets_.size() && buckets_[started_].first >= ready; ++started_)
            comm_->start_allreduce_sum(g.subspan(buckets_[started_].first, buckets_[started_].size));
    }

    /// The sums become averages: correctly rounded, the same bits on every rank (MpiComm's
    /// allreduce_average does exactly this).
    void divide_by_world_size() {
        const std::span<value_type> g = net_->parameters().grads();
        kernel<op::scale_down, backend>::run(g.data(), g.size(), static_cast<value_type>(comm_->world_size()));
    }

    void verify_same_model() {
        const std::string mine = describe_parameters(*net_);
        const std::size_t buffer = net_->parameters().values().size();
        std::vector<double> fp = split_u64(fingerprint(mine, buffer));
        fp.push_back(static_cast<double>(net_->parameters().count()));
        const std::size_t k = fp.size();
        const std::vector<double> all = allgather(*comm_, std::span<const double>(fp));
        const auto root = static_cast<std::size_t>(opts_.root);
        int odd = -1;  // the first rank whose model differs from the root's; all ranks see the same
        for (std::size_t r = 0; r < static_cast<std::size_t>(comm_->world_size()) && odd < 0; ++r)
            for (std::size_t i = 0; i < k; ++i)
                if (all[r * k + i] != all[root * k + i]) odd = static_cast<int>(r);
        if (odd < 0) return;
        const std::vector<std::string> what = allgather_strings(*comm_, mine);  // every rank takes part
        const auto o = static_cast<std::size_t>(odd);
        auto count = [&](std::size_t r) { return static_cast<std::size_t>(all[r * k + k - 1]); };
        throw value_error(detail::concat("DataParallel: the ranks built different models: rank ", odd, " has ",
                                         count(o), " parameters in ", what[o], ", rank ", opts_.root, " has ",
                                         count(root), " in ", what[root]));
    }

    M* net_;
    C* comm_;
    DataParallelOptions opts_;
    std::vector<Bucket> buckets_;
    std::size_t started_ = 0;          // buckets started in the current backward
    std::size_t last_overlapped_ = 0;  // see overlapped_buckets()
};

}  // namespace oar::dist
