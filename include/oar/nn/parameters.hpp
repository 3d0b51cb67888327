// A network's parameters and gradients, each in one flat, cache-line aligned buffer
// (DESIGN.md, commitment 2), plus the table of named tensors in it ("0.weight", "0.bias", ...).
// Optimizers run one fused pass over the flat buffers; state dicts are views into them.
#pragma once

#include <algorithm>  // std::fill, std::copy
#include <cstddef>    // std::size_t
#include <map>        // std::map for load_state_dict
#include <span>       // std::span
#include <string>     // std::string
#include <utility>    // std::move
#include <vector>     // std::vector

#include "../core/aligned.hpp"  // aligned_vector
#include "../core/error.hpp"    // shape_error, value_error
#include "../core/shape.hpp"    // Dims

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

/// The flat buffers of scalar T and the table of named tensors in them.
template <class T>
class basic_parameter_set {
public:
    using value_type = T;
    using state_entry = basic_state_entry<T>;

    basic_parameter_set() = default;
    basic_parameter_set(std::size_t buffer_size, std::vector<ParamEntry> entries)
        : values_(buffer_size, T(0)), grads_(buffer_size, T(0)), entries_(std::move(entries)) {}

    /// The whole flat buffers, alignment padding included (padding stays zero).
    std::span<T> values() { return {values_.data(), values_.size()}; }
    std::span<const T> values() const { return {values_.data(), values_.size()}; }
    std::span<T> grads() { return {grads_.data(), grads_.size()}; }
    std::span<const T> grads() const { return {grads_.data(), grads_.size()}; }

    const std::vector<ParamEntry>& entries() const { return entries_; }
    /// Number of trainable scalars (padding excluded).
    std::size_t count() const {
        std::size_t s = 0;
        for (const auto& e : entries_) s += e.size;
        return s;
    }

    std::span<T> value(const ParamEntry& e) { return {values_.data() + e.offset, e.size}; }
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

    void clear_grad() { std::fill(grads_.begin(), grads_.end(), T(0)); }

    /// Views of every parameter tensor by key, in layer order.
    std::vector<state_entry> state_dict() const {
        std::vector<state_entry> out;
        out.reserve(entries_.size());
        for (const auto& e : entries_) out.push_back({e.key, e.dims, value(e)});
        return out;
    }

    /// Copies `state` in. Every key must be present exactly once with the same shape; nothing is
    /// changed unless all entries check out (no half-loaded network).
    void load_state_dict(const std::vector<state_entry>& state) {
        std::map<std::string, const state_entry*> by_key;
        for (const auto& s : state) {
            if (!by_key.emplace(s.key, &s).second)
                throw value_error(detail::concat("load_state_dict: key '", s.key, "' appears twice"));
        }
        for (const auto& e : entries_) {
            auto it = by_key.find(e.key);
            if (it == by_key.end()) throw value_error(detail::concat("load_state_dict: missing key '", e.key, "'"));
            const state_entry& s = *it->second;
            if (!(s.dims == e.dims) || s.values.size() != e.size)
                throw shape_error(detail::concat("load_state_dict: key '", e.key, "' has shape ", to_string(s.dims),
                                                 " (", s.values.size(), " values), expected ", to_string(e.dims)));
        }
        if (by_key.size() != entries_.size())
            for (const auto& s : state) {
                bool known = false;
                for (const auto& e : entries_) known = known || e.key == s.key;
                if (!known) throw value_error(detail::concat("load_state_dict: unexpected key '", s.key, "'"));
            }
        for (const auto& e : entries_) {
            const auto& src = by_key.at(e.key)->values;
            std::copy(src.begin(), src.end(), values_.begin() + static_cast<std::ptrdiff_t>(e.offset));
        }
    }

private:
    aligned_vector<T> values_;
    aligned_vector<T> grads_;
    std::vector<ParamEntry> entries_;
};

using ParameterSet = basic_parameter_set<float>;

}  // namespace oar
