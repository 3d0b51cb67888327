// Observers for Network::forward(x, obs) / backward(dy, obs) (nn/network.hpp): LayerStats prints or
// collects every layer's shapes and statistics (the course's advice: print each layer's input and
// output to find a problem), NonFiniteGuard throws non_finite_error where the first NaN/Inf appears,
// check_finite_parameters checks the weights after an optimizer step, and observers(a, b, ...)
// passes several at once. All are opt-in: a network called without an observer calls none of this.
#pragma once

#include <bit>          // std::bit_cast for the branch-free finiteness scan
#include <cmath>        // std::isfinite, std::isnan, std::sqrt
#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint32_t, std::uint64_t
#include <cstdio>       // std::FILE, std::fputs
#include <limits>       // std::numeric_limits<double>::quiet_NaN
#include <ostream>      // std::ostream
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <tuple>        // std::tuple, std::apply
#include <type_traits>  // std::remove_reference_t, std::conditional_t
#include <utility>      // std::forward
#include <vector>       // std::vector

#include "../core/context.hpp"  // Mode
#include "../core/error.hpp"    // non_finite_error, detail::concat
#include "../core/shape.hpp"    // Dims, to_string
#include "../core/tensor.hpp"   // basic_tensor_view
#include "network.hpp"          // basic_layer_event, Pass, ForwardObserver, BackwardObserver
#include "parameters.hpp"       // basic_parameter_set, ParamEntry

namespace oar {

// ---------------------------------------------------------------------------------------------
// Statistics and finiteness of a block of values
// ---------------------------------------------------------------------------------------------

/// Summary of a block of values. mean, std (population: numpy's default ddof=0), min and max are
/// taken over the finite values only (NaN when there are none); non_finite counts NaN and +-inf.
struct TensorStats {
    std::size_t count = 0;  ///< all values, finite or not
    double mean = std::numeric_limits<double>::quiet_NaN();
    double std = std::numeric_limits<double>::quiet_NaN();
    double min = std::numeric_limits<double>::quiet_NaN();
    double max = std::numeric_limits<double>::quiet_NaN();
    std::size_t non_finite = 0;
};

/// Two passes in double (mean, then squared deviations), so std does not cancel catastrophically.
template <class T>
TensorStats tensor_stats(std::span<const T> v) {
    TensorStats s;
    s.count = v.size();
    double sum = 0;
    std::size_t finite = 0;
    for (const T x : v) {
        if (!std::isfinite(x)) {
            ++s.non_finite;
            continue;
        }
        const double d = static_cast<double>(x);
        if (finite == 0 || d < s.min) s.min = d;
        if (finite == 0 || d > s.max) s.max = d;
        sum += d;
        ++finite;
    }
    if (finite == 0) return s;
    s.mean = sum / static_cast<double>(finite);
    double sq = 0;
    for (const T x : v)
        if (std::isfinite(x)) sq += (static_cast<double>(x) - s.mean) * (static_cast<double>(x) - s.mean);
    s.std = std::sqrt(sq / static_cast<double>(finite));
    return s;
}

/// True when no value is NaN or +-inf. Branch-free over the exponent bits, so it vectorises; the
/// caller looks for the index only when this says there is something to find.
template <class T>
bool all_finite(std::span<const T> v) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "oar: all_finite needs float or double");
    using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    constexpr U exponent = sizeof(T) == 4 ? U(0x7f800000u) : U(0x7ff0000000000000ull);
    U bad = 0;
    for (const T x : v) bad |= U((std::bit_cast<U>(x) & exponent) == exponent);
    return bad == 0;
}

/// Index of the first NaN or +-inf in v, or v.size() when all are finite.
template <class T>
std::size_t first_non_finite(std::span<const T> v) {
    if (all_finite(v)) return v.size();
    for (std::size_t i = 0; i < v.size(); ++i)
        if (!std::isfinite(v[i])) return i;
    return v.size();
}

namespace detail {
/// "[6, 4, 2]": the multi-index of flat element i of a row-major block of `dims`.
inline std::string unravel(std::size_t i, const Dims& dims) {
    std::size_t idx[max_rank]{};
    for (std::size_t k = dims.rank; k-- > 0;) {
        idx[k] = dims.d[k] ? i % dims.d[k] : 0;
        i = dims.d[k] ? i / dims.d[k] : 0;
    }
    std::string s = "[";
    for (std::size_t k = 0; k < dims.rank; ++k) s.append(k ? ", " : "").append(std::to_string(idx[k]));
    return s + "]";
}

template <class T>
const char* non_finite_kind(T x) {
    return std::isnan(x) ? "nan" : x > 0 ? "inf" : "-inf";
}

/// "training step 3" or "an eval pass after 3 training steps".
inline std::string step_phrase(std::uint64_t step, Mode mode) {
    return mode == Mode::train ? concat("training step ", step)
                               : concat("an eval pass after ", step, " training steps");
}

/// "element 1234 of [2, 20, 14, 14] (sample 0, at [6, 4, 2]) is inf"
template <class T>
std::string batch_element(basic_tensor_view<const T> t, std::size_t i) {
    const std::size_t per = t.sample_size() ? t.sample_size() : 1;
    return concat("element ", i, " of ", t.shape_string(), " (sample ", i / per, ", at ",
                  unravel(i % per, t.dims()), ") is ", non_finite_kind(t[i]));
}

/// "element 17 of [20, 20, 5, 5] (at [0, 0, 3, 2]) is nan"
template <class T>
std::string tensor_element(std::span<const T> v, const Dims& dims, std::size_t i) {
    return concat("element ", i, " of ", to_string(dims), " (at ", unravel(i, dims), ") is ", non_finite_kind(v[i]));
}

/// The named tensor p's values inside a layer event's block (values or grads) starting at block_offset.
template <class T>
std::span<const T> entry_in_block(std::span<T> block, std::size_t block_offset, const ParamEntry& p) {
    return std::span<const T>(block).subspan(p.offset - block_offset, p.size);
}
}  // namespace detail

// ---------------------------------------------------------------------------------------------
// LayerStats: shapes and statistics of every layer's tensors
// ---------------------------------------------------------------------------------------------

/// One line of LayerStats: one tensor of one layer in one pass.
struct LayerStatsRow {
    std::uint64_t step = 0;  ///< the event's step (training passes before this one)
    Pass pass = Pass::forward;
    Mode mode = Mode::train;
    std::size_t layer = 0;
    std::string name;    ///< the layer's, e.g. "Conv2D"
    std::string tensor;  ///< "input", "output", "output grad" (dy), "input grad" (dx), "3.weight grad"
    std::string shape;   ///< "[100, 20, 28, 28]"
    TensorStats stats;
};

/// Observer that computes, per layer, the input and output shape and statistics in forward and
/// those of dy, dx and each parameter gradient in backward. Without a sink it collects rows();
/// with an ostream or FILE* it prints each row as it comes (a header first) and keeps none unless
/// asked. The statistics cost one or two passes over every activation: use it to look, not to train.
class LayerStats {
public:
    LayerStats() = default;
    explicit LayerStats(std::ostream& os, bool keep_rows = false) : os_(&os), keep_(keep_rows) {}
    explicit LayerStats(std::FILE* f, bool keep_rows = false) : file_(f), keep_(keep_rows) {}

    template <class T>
    void on_forward(const basic_layer_event<T>& e) {
        add(e, "input", e.input.shape_string(), tensor_stats(std::span<const T>(e.input.span())));
        add(e, "output", e.output.shape_string(), tensor_stats(std::span<const T>(e.output.span())));
    }

    template <class T>
    void on_backward(const basic_layer_event<T>& e) {
        add(e, "output grad", e.dy.shape_string(), tensor_stats(std::span<const T>(e.dy.span())));
        if (e.dx.data()) add(e, "input grad", e.dx.shape_string(), tensor_stats(std::span<const T>(e.dx.span())));
        for (const ParamEntry& p : e.params)
            add(e, p.key + " grad", to_string(p.dims),
                tensor_stats(detail::entry_in_block(e.param_grads, e.param_offset, p)));
    }

    const std::vector<LayerStatsRow>& rows() const { return rows_; }
    void clear() { rows_.clear(); }

    /// The column titles, aligned with format(row).
    static std::string header() {
        return pad("step", 6, true) + "  " + pad("pass", 10) + pad("layer", 16) + pad("tensor", 16) + pad("shape", 20) +
               pad("mean", 13, true) + pad("std", 13, true) + pad("min", 13, true) + pad("max", 13, true) +
               pad("non-finite", 12, true);
    }
    static std::string format(const LayerStatsRow& r) {
        return pad(std::to_string(r.step), 6, true) + "  " +
               pad(r.pass == Pass::forward ? (r.mode == Mode::train ? "forward" : "eval") : "backward", 10) +
               pad(std::to_string(r.layer) + " " + r.name, 16) + pad(r.tensor, 16) + pad(r.shape, 20) +
               pad(number(r.stats.mean), 13, true) + pad(number(r.stats.std), 13, true) +
               pad(number(r.stats.min), 13, true) + pad(number(r.stats.max), 13, true) +
               pad(std::to_string(r.stats.non_finite), 12, true);
    }
    /// The collected rows as a table, header first.
    void print(std::ostream& os) const {
        os << header() << '\n';
        for (const auto& r : rows_) os << format(r) << '\n';
    }
    void print(std::FILE* f) const {
        std::fputs((header() + "\n").c_str(), f);
        for (const auto& r : rows_) std::fputs((format(r) + "\n").c_str(), f);
    }

private:
    template <class T>
    void add(const basic_layer_event<T>& e, std::string tensor, std::string shape, TensorStats s) {
        LayerStatsRow r{e.step, e.pass, e.mode, e.index, std::string(e.name), std::move(tensor), std::move(shape), s};
        if (os_ || file_) {
            std::string line = (printed_header_ ? "" : header() + "\n") + format(r) + "\n";
            printed_header_ = true;
            if (os_) *os_ << line;
            if (file_) std::fputs(line.c_str(), file_);
            if (!keep_) return;
        }
        rows_.push_back(std::move(r));
    }
    static std::string pad(std::string s, std::size_t w, bool right = false) {
        if (s.size() + 1 >= w) return right ? " " + s : s + " ";
        return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
    }
    static std::string number(double x) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.5g", x);
        return buf;
    }

    std::vector<LayerStatsRow> rows_;
    std::ostream* os_ = nullptr;
    std::FILE* file_ = nullptr;
    bool keep_ = true;
    bool printed_header_ = false;
};

// ---------------------------------------------------------------------------------------------
// NonFiniteGuard: stop where the first NaN/Inf appears
// ---------------------------------------------------------------------------------------------

struct NonFiniteGuardOptions {
    /// Also check each layer's parameters before its output in forward (one scan of the weights
    /// per pass), so that a NaN weight is named as such rather than as the output it spoils.
    bool check_parameters = true;
};

/// Observer that throws non_finite_error at the first NaN/Inf of a pass, naming the training
/// step, the layer (index and name), forward or backward, the tensor ("input", "parameter
/// 3.weight", "output", "output gradient", "parameter gradient 3.weight", "input gradient") and
/// the first bad element. Checks follow the order in which values are made, so the tensor named is
/// the first one that went bad: in forward the network's input (layer 0), the layer's parameters,
/// its output; in backward the loss gradient (last layer), each layer's parameter gradients, its
/// input gradient. Each check is one branch-free scan; the index is searched only on failure.
class NonFiniteGuard {
public:
    NonFiniteGuard() = default;
    explicit NonFiniteGuard(NonFiniteGuardOptions o) : opt_(o) {}

    template <class T>
    void on_forward(const basic_layer_event<T>& e) {
        if (e.index == 0) check_batch(e, "input", e.input);
        if (opt_.check_parameters)
            for (const ParamEntry& p : e.params)
                check_entry(e, "parameter ", p, detail::entry_in_block(e.param_values, e.param_offset, p));
        check_batch(e, "output", e.output);
    }

    template <class T>
    void on_backward(const basic_layer_event<T>& e) {
        // dy of layer i is dx of layer i+1, already checked, unless this is the first layer of a pass
        if (e.index + 1 != previous_backward_) check_batch(e, "output gradient", e.dy);
        previous_backward_ = e.index;
        for (const ParamEntry& p : e.params)
            check_entry(e, "parameter gradient ", p, detail::entry_in_block(e.param_grads, e.param_offset, p));
        if (e.dx.data()) check_batch(e, "input gradient", e.dx);
    }

private:
    template <class T>
    static std::string where(const basic_layer_event<T>& e) {
        return detail::concat("non-finite value at ", detail::step_phrase(e.step, e.mode), ", layer ", e.index, " (",
                              e.name, "), ", e.pass == Pass::forward ? "forward" : "backward", ": ");
    }
    template <class T>
    static void check_batch(const basic_layer_event<T>& e, const char* what, basic_tensor_view<const T> t) {
        const std::span<const T> v(t.data(), t.size());
        const std::size_t i = first_non_finite(v);
        if (i != v.size()) throw non_finite_error(where(e) + what + " " + detail::batch_element(t, i));
    }
    template <class T>
    static void check_entry(const basic_layer_event<T>& e, const char* what, const ParamEntry& p, std::span<const T> v) {
        const std::size_t i = first_non_finite(v);
        if (i != v.size())
            throw non_finite_error(where(e) + what + p.key + " " + detail::tensor_element(v, p.dims, i));
    }

    NonFiniteGuardOptions opt_{};
    std::size_t previous_backward_ = static_cast<std::size_t>(-1);
};

/// Throws non_finite_error naming the parameter (key, element, position) when any of p's values is
/// NaN or +-inf, e.g. after an optimizer step: "... after the optimizer step of training step 3:
/// parameter 3.weight element 17 of [20, 20, 5, 5] (at [0, 0, 3, 2]) is nan". One scan when all is well
/// (on a device backend, of a host copy of the values).
template <class T, class B>
void check_finite_parameters(const basic_parameter_set<T, B>& p, std::uint64_t step,
                             std::string_view when = "after the optimizer step of") {
    const std::span<const T> all = p.host_values();
    if (all_finite(all)) return;
    for (const ParamEntry& e : p.entries()) {
        const auto v = all.subspan(e.offset, e.size);
        const std::size_t i = first_non_finite(v);
        if (i != v.size())
            throw non_finite_error(detail::concat("non-finite value ", when, " training step ", step, ": parameter ",
                                                  e.key, " ", detail::tensor_element(v, e.dims, i)));
    }
}

// ---------------------------------------------------------------------------------------------
// observers(a, b, ...): several observers as one
// ---------------------------------------------------------------------------------------------

/// Calls each member's on_forward / on_backward in order (members without one are skipped). Holds
/// references to observers passed as lvalues and copies of temporaries.
template <class... Os>
class observer_list {
public:
    explicit observer_list(Os&&... os) : members_(std::forward<Os>(os)...) {}

    template <class T>
        requires(ForwardObserver<std::remove_reference_t<Os>, T> || ...)
    void on_forward(const basic_layer_event<T>& e) {
        std::apply([&](auto&... o) { (forward_one(o, e), ...); }, members_);
    }
    template <class T>
        requires(BackwardObserver<std::remove_reference_t<Os>, T> || ...)
    void on_backward(const basic_layer_event<T>& e) {
        std::apply([&](auto&... o) { (backward_one(o, e), ...); }, members_);
    }

    std::tuple<Os...>& members() { return members_; }

private:
    template <class O, class T>
    static void forward_one(O& o, const basic_layer_event<T>& e) {
        if constexpr (ForwardObserver<O, T>) o.on_forward(e);
    }
    template <class O, class T>
    static void backward_one(O& o, const basic_layer_event<T>& e) {
        if constexpr (BackwardObserver<O, T>) o.on_backward(e);
    }

    std::tuple<Os...> members_;
};

/// `net.forward(x, observers(guard, stats))`: lvalues are held by reference, temporaries by value.
template <class... Os>
observer_list<Os...> observers(Os&&... os) {
    return observer_list<Os...>(std::forward<Os>(os)...);
}

}  // namespace oar
