// A network's parameters and gradients, each in one flat, cache-line aligned buffer
// (docs/ARCHITECTURE.md), plus the table of named tensors in it ("0.weight", "0.bias", ...).
// Optimizers run one fused pass over the flat buffers; state dicts are views into them.
#pragma once

#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint64_t: version()
#include <map>        // std::map for load_state_dict
#include <span>       // std::span
#include <string>     // std::string
#include <utility>    // std::move
#include <vector>     // std::vector

#include "../core/aligned.hpp"  // aligned_vector
#include "../core/error.hpp"    // shape_error, value_error
#include "../core/shape.hpp"    // Dims
#include "../kernels/cpu/storage.hpp"  // storage<cpu> (the default backend)

namespace oar {

/// One named parameter tensor: a view into the flat buffers.
struct ParamEntry {
    std::string key;   ///< "3.weight", as paddle/torch state_dict keys
    Dims dims;         ///< e.g. [20, 1, 5, 5]
    std::size_t offset = 0;  ///< in floats, into values() and grads()
    std::size_t size = 0;
};

/// A read-only view of a state-dict entry from some other source (a file, another network).
template <class T>
struct basic_state_entry {
    std::string key;
    Dims dims;
    std::span<const T> values;
};
using StateEntry = basic_state_entry<float>;

/// The flat buffers of scalar T in backend B's memory (host memory for the CPU, device memory for
/// a GPU), and the table of named tensors in them. values() / grads() are B's memory: pass them to
/// kernels. state_dict(), host_values() and load_state_dict() work on the host on every backend
/// (through a host mirror where B's memory is not the host's).
template <class T, class B = basic_cpu<T>>
class basic_parameter_set {
    using store = storage<B>;

public:
    using value_type = T;
    using backend = B;
    using state_entry = basic_state_entry<T>;

    basic_parameter_set() = default;
    /// `buffer_size` values for the parameters (`entries`), and `state_size` values of
    /// non-trainable state (`state_entries`: running statistics; see BufferedLayer).
    basic_parameter_set(std::size_t buffer_size, std::vector<ParamEntry> entries, std::size_t state_size = 0,
                        std::vector<ParamEntry> state_entries = {})
        : values_(store::template make<T>(buffer_size)), grads_(store::template make<T>(buffer_size)),
          state_(store::template make<T>(state_size)), entries_(std::move(entries)),
          state_entries_(std::move(state_entries)) {}

    /// The whole flat buffers, alignment padding included (padding stays zero). B's memory.
    /// Every non-const access to the values (values(), value(e), the loads) counts as a write in
    /// version(): a span kept from an earlier call and written later is not seen (call
    /// values() again, or touch(), after such a write).
    std::span<T> values() {
        ++version_;
        return {values_.data(), values_.size()};
    }
    std::span<const T> values() const { return {values_.data(), values_.size()}; }
    std::span<T> grads() { return {grads_.data(), grads_.size()}; }
    std::span<const T> grads() const { return {grads_.data(), grads_.size()}; }

    /// The trainable tensors (what optimizers, L2Decay and gradient buckets see).
    const std::vector<ParamEntry>& entries() const { return entries_; }
    /// Number of trainable scalars (padding excluded).
    std::size_t count() const {
        std::size_t s = 0;
        for (const auto& e : entries_) s += e.size;
        return s;
    }

    /// The non-trainable state (BatchNorm's running statistics): its flat storage (B's memory),
    /// its named tensors (offsets into buffers()), and its number of scalars. Saved and loaded with
    /// the state dict, never stepped by an optimizer.
    std::span<T> buffers() { return {state_.data(), state_.size()}; }
    std::span<const T> buffers() const { return {state_.data(), state_.size()}; }
    const std::vector<ParamEntry>& buffer_entries() const { return state_entries_; }
    std::size_t buffer_count() const {
        std::size_t s = 0;
        for (const auto& e : state_entries_) s += e.size;
        return s;
    }
    /// buffers() readable on the host (as host_values()).
    std::span<const T> host_buffers() const { return host_copy(state_, state_mirror_); }
    /// Replaces the whole state storage with `host` (buffers().size() values).
    void upload_buffers(std::span<const T> host) {
        if (host.size() != state_.size())
            throw shape_error(detail::concat("upload_buffers: ", host.size(), " values for a state of ", state_.size()));
        store::upload(state_.data(), host.data(), host.size());
    }

    /// One tensor's block of values() / grads() (B's memory).
    std::span<T> value(const ParamEntry& e) {
        ++version_;
        return {values_.data() + e.offset, e.size};
    }
    /// Count of (possible) writes to the values so far: what a packed copy of a weight checks
    /// (kernels/cpu/gemm.hpp: gemm_pack_cache).
    std::uint64_t version() const { return version_; }
    /// Counts a write made through a span kept from an earlier values() or value(e).
    void touch() { ++version_; }
    std::span<const T> value(const ParamEntry& e) const { return {values_.data() + e.offset, e.size}; }
    std::span<T> grad(const ParamEntry& e) { return {grads_.data() + e.offset, e.size}; }
    std::span<const T> grad(const ParamEntry& e) const { return {grads_.data() + e.offset, e.size}; }

    /// The entry called `key`; throws value_error naming the key when there is none.
    const ParamEntry& entry(const std::string& key) const {
        for (const auto& e : entries_)
            if (e.key == key) return e;
        throw value_error(detail::concat("no parameter named '", key, "' (the network has ", entries_.size(),
                                         " parameter tensors)"));
    }

    void clear_grad() { store::fill(grads_.data(), grads_.size(), T(0)); }

    /// The whole value buffer readable on the host: values() itself on a host backend, else a
    /// copy (waits for B) valid until the next host_values() or state_dict().
    std::span<const T> host_values() const { return host_copy(values_, mirror_); }
    /// The same for the gradients.
    std::span<const T> host_grads() const { return host_copy(grads_, grad_mirror_); }

    /// Views of every parameter tensor by key, in layer order, then of every buffer (the state
    /// dict: what Paddle's and torch's state_dict() hold), readable on the host (see host_values()
    /// for how long they stay valid).
    std::vector<state_entry> state_dict() const {
        const std::span<const T> v = host_values();
        const std::span<const T> b = host_buffers();
        std::vector<state_entry> out;
        out.reserve(entries_.size() + state_entries_.size());
        for (const auto& e : entries_) out.push_back({e.key, e.dims, v.subspan(e.offset, e.size)});
        for (const auto& e : state_entries_) out.push_back({e.key, e.dims, b.subspan(e.offset, e.size)});
        return out;
    }

    /// Copies `state` (host memory) in. Every key must be present exactly once with the same shape;
    /// nothing is changed unless all entries check out (no half-loaded network).
    void load_state_dict(const std::vector<state_entry>& state) {
        std::map<std::string, const state_entry*> by_key;
        for (const auto& s : state) {
            if (!by_key.emplace(s.key, &s).second)
                throw value_error(detail::concat("load_state_dict: key '", s.key, "' appears twice"));
        }
        auto check = [&](const ParamEntry& e) {
            auto it = by_key.find(e.key);
            if (it == by_key.end()) throw value_error(detail::concat("load_state_dict: missing key '", e.key, "'"));
            const state_entry& s = *it->second;
            if (!(s.dims == e.dims) || s.values.size() != e.size)
                throw shape_error(detail::concat("load_state_dict: key '", e.key, "' has shape ", to_string(s.dims),
                                                 " (", s.values.size(), " values), expected ", to_string(e.dims)));
        };
        for (const auto& e : entries_) check(e);
        for (const auto& e : state_entries_) check(e);
        if (by_key.size() != entries_.size() + state_entries_.size())
            for (const auto& s : state) {
                bool known = false;
                for (const auto& e : entries_) known = known || e.key == s.key;
                for (const auto& e : state_entries_) known = known || e.key == s.key;
                if (!known) throw value_error(detail::concat("load_state_dict: unexpected key '", s.key, "'"));
            }
        ++version_;
        for (const auto& e : entries_) {
            const auto& src = by_key.at(e.key)->values;
            store::upload(values_.data() + e.offset, src.data(), src.size());
        }
        for (const auto& e : state_entries_) {
            const auto& src = by_key.at(e.key)->values;
            store::upload(state_.data() + e.offset, src.data(), src.size());
        }
    }

    /// Replaces the whole value buffer with `host` (host memory, values().size() values).
    void upload_values(std::span<const T> host) {
        if (host.size() != values_.size())
            throw shape_error(detail::concat("upload_values: ", host.size(), " values for a buffer of ", values_.size()));
        ++version_;
        store::upload(values_.data(), host.data(), host.size());
    }

private:
    using buffer = typename store::template buffer<T>;

    static std::span<const T> host_copy(const buffer& b, aligned_vector<T>& mirror) {
        if constexpr (store::host_memory) {
            return {b.data(), b.size()};
        } else {
            mirror.resize(b.size());
            store::download(mirror.data(), b.data(), b.size());
            store::synchronize();
            return {mirror.data(), mirror.size()};
        }
    }

    buffer values_;
    std::uint64_t version_ = 0;  ///< see version()
    buffer grads_;
    buffer state_;
    std::vector<ParamEntry> entries_;
    std::vector<ParamEntry> state_entries_;
    mutable aligned_vector<T> mirror_, grad_mirror_, state_mirror_;  ///< host copies (device backends only)
};

using ParameterSet = basic_parameter_set<float>;

}  // namespace oar
