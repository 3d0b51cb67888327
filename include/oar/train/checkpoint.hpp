// Saving and loading a network's weights and a whole training checkpoint as safetensors files,
// with Paddle/PyTorch state-dict keys ("0.weight", "0.bias", "3.weight", ...).
//
// API (namespace oar):
//   enum class WeightLayout { paddle, torch };
//       paddle: as in memory (Linear weight [in, out]); torch: Linear weights transposed to [out, in]
//       so that `model.load_state_dict(safetensors.torch.load_file(f))` works on an nn.Sequential of
//       the same architecture. Conv2D weights are [out, in, kh, kw] in both. A layer type whose
//       weight PyTorch stores transposed specialises torch_transposed_weight<L> (core/layer_concepts.hpp;
//       Linear does, in layers/linear.hpp).
//   save_weights(path, net, layout = paddle)     one file; metadata {"format": "pt", "oar.layout": ...}
//   load_weights(path, net, unmarked = paddle)   the file's "oar.layout" wins; a file without it
//                                                (e.g. written by torch) is read as `unmarked`
//   struct TrainingState { epoch, global_step, network_step, network_seed, rng_seed, sampler_epoch,
//                          extra (key/value strings: LR schedule state, ...) }
//   save_checkpoint(dir, stem, net, opt, state, layout = paddle)
//       writes <dir>/<stem>.safetensors (the weights, as save_weights) and
//       <dir>/<stem>.state.safetensors (each optimizer state buffer sliced per parameter, keys
//       "0.weight.moment1"; metadata: the optimizer's learning rate and step count, `state`, and
//       the weights file's size and FNV-1a 64 checksum, so that a mismatched pair is refused).
//       network_step and network_seed are taken from `net`, whatever `state` holds.
//   TrainingState load_checkpoint(dir, stem, net, opt)
//       restores weights, optimizer buffers, learning rate, step count and net.set_step(); returns
//       the rest for the caller (its data loader's epoch, LR schedule, ...).
//   checkpoint_exists(dir, stem), checkpoint_weights_path(dir, stem), checkpoint_state_path(dir, stem)
// Loading validates everything first (names, shapes, dtypes, the pair, the metadata) and only then
// changes the network and the optimizer: never half-loaded. Errors name the file and the key, with
// both shapes or dtypes: value_error (missing / unexpected key, dtype, optimizer kind), shape_error
// (shape), format_error (a corrupt file or a mismatched pair), io_error (cannot open / write).
// Headers checked with nvcc 13 too: nothing here includes simdjson (docs/ARCHITECTURE.md, "Constraints").
// Crash safety: every file is replaced atomically (io/atomic_file.hpp). The pair is two files, so
// save_checkpoint keeps the previous weights as a hard link "<stem>.safetensors.prev" while it
// replaces the weights and then the state file; if it is killed in between, load_checkpoint finds
// that the state file's checksum matches ".prev" and loads the previous checkpoint whole, and the
// next save_checkpoint repairs the pair first.
#pragma once

#include <cerrno>       // errno
#include <charconv>     // std::to_chars, std::from_chars: exact float / integer round trips
#include <cmath>        // std::isfinite
#include <cstddef>      // std::size_t, std::byte
#include <cstdint>      // std::uint64_t
#include <cstdio>       // std::fopen, std::fread, std::rename
#include <cstring>      // std::memcpy
#include <filesystem>   // std::filesystem::path, exists
#include <map>          // std::map: metadata
#include <set>          // std::set: keys stored transposed
#include <span>         // std::span
#include <string>       // std::string
#include <system_error> // std::error_code, std::errc
#include <tuple>        // std::tuple_element_t
#include <type_traits>  // std::false_type, std::true_type
#include <utility>      // std::index_sequence
#include <vector>       // std::vector

#include <unistd.h>  // ::link: the previous weights kept during a pair update

#include "../core/error.hpp"        // format_error, io_error, shape_error, value_error
#include "../core/shape.hpp"        // Dims
#include "../io/atomic_file.hpp"    // AtomicFile
#include "../kernels/dispatch.hpp"  // storage_of: where the optimizer state lives
#include "../io/safetensors.hpp"    // read/write safetensors
#include "../core/layer_concepts.hpp"  // torch_transposed_weight
#include "../layers/linear.hpp"     // Linear: stored transposed in torch (its torch_transposed_weight)
#include "../nn/sequential.hpp"     // Sequential<Ls...>
#include "../optim/optimizer.hpp"   // Optimizer concept

namespace oar {

enum class WeightLayout { paddle, torch };

constexpr const char* layout_name(WeightLayout l) { return l == WeightLayout::torch ? "torch" : "paddle"; }

/// What a training loop needs besides weights and optimizer state to resume exactly.
struct TrainingState {
    std::uint64_t epoch = 0;          ///< epochs completed
    std::uint64_t global_step = 0;    ///< optimizer steps taken
    std::uint64_t network_step = 0;   ///< Network::step() (dropout masks); saved from the network
    std::uint64_t network_seed = 0;   ///< Network::seed(); saved from the network, for the caller to check
    std::uint64_t rng_seed = 0;       ///< the caller's seed (e.g. the loader's shuffle seed)
    std::uint64_t sampler_epoch = 0;  ///< the sampler's epoch (shuffle order)
    std::map<std::string, std::string> extra;  ///< anything else, e.g. "lr_schedule.last_epoch"
    bool operator==(const TrainingState&) const = default;
};

inline std::string checkpoint_weights_path(const std::string& dir, const std::string& stem) {
    return (std::filesystem::path(dir) / (stem + ".safetensors")).string();
}
inline std::string checkpoint_state_path(const std::string& dir, const std::string& stem) {
    return (std::filesystem::path(dir) / (stem + ".state.safetensors")).string();
}
inline bool checkpoint_exists(const std::string& dir, const std::string& stem) {
    std::error_code ec;
    return std::filesystem::exists(checkpoint_state_path(dir, stem), ec) &&
           (std::filesystem::exists(checkpoint_weights_path(dir, stem), ec) ||
            std::filesystem::exists(checkpoint_weights_path(dir, stem) + ".prev", ec));
}

namespace detail {

/// Whether an optimizer with step_count() counts steps: always, unless it says otherwise through
/// counts_steps() (Model's type-erased view of the prepared optimizer does).
template <class Opt>
bool counts_steps(const Opt& opt) {
    if constexpr (requires { opt.counts_steps(); }) return opt.counts_steps();
    else return true;
}

template <class Seq>
struct sequential_layers;
template <class... Ls>
struct sequential_layers<Sequential<Ls...>> {
    /// Keys ("3.weight", "3.body.2.weight" in a block) of the parameters PyTorch stores
    /// transposed, for the layers' input dims Info::dims.
    template <class Info>
    static std::set<std::string> transposed_keys() {
        std::set<std::string> keys;
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            (void([&] {
                 for (const auto& k : detail::transposed_keys_of<std::tuple_element_t<I, std::tuple<Ls...>>>(Info::dims[I]))
                     keys.insert(std::to_string(I) + "." + k);
             }()),
             ...);
        }(std::index_sequence_for<Ls...>{});
        return keys;
    }
    /// The same for a network type without `info` (a user's own): its top-level layers only.
    static std::set<std::string> top_level_transposed_keys() {
        std::set<std::string> keys;
        [&]<std::size_t... I>(std::index_sequence<I...>) {
            ((torch_transposed_weight<std::tuple_element_t<I, std::tuple<Ls...>>>::value
                  ? void(keys.insert(std::to_string(I) + ".weight"))
                  : void()),
             ...);
        }(std::index_sequence_for<Ls...>{});
        return keys;
    }
};

template <class Net>
std::set<std::string> transposed_keys() {
    if constexpr (requires { typename Net::info; })
        return sequential_layers<typename Net::sequential>::template transposed_keys<typename Net::info>();
    else
        return sequential_layers<typename Net::sequential>::top_level_transposed_keys();
}

inline std::vector<std::uint64_t> shape_of(const Dims& d, bool transposed) {
    std::vector<std::uint64_t> s(d.d.begin(), d.d.begin() + static_cast<std::ptrdiff_t>(d.rank));
    if (transposed && s.size() == 2) std::swap(s[0], s[1]);
    return s;
}

/// FNV-1a, 64 bits: the weights file's fingerprint in the state file.
inline std::uint64_t fnv1a64(std::span<const std::byte> bytes) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (std::byte b : bytes) {
        h ^= static_cast<std::uint64_t>(b);
        h *= 0x100000001b3ull;
    }
    return h;
}
inline std::string hex64(std::uint64_t v) {
    char buf[17];
    static constexpr char digits[] = "0123456789abcdef";
    for (int i = 15; i >= 0; --i, v >>= 4) buf[i] = digits[v & 15];
    buf[16] = '\0';
    return buf;
}

inline std::string float_text(float v) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
}

/// Reads a whole file (io_error when it cannot), for checksumming and parsing.
inline std::vector<std::byte> read_all(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) throw io_error(concat(path, ": is a folder, not a file"));
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw io_error(concat(path, ": cannot open (", io::detail::errno_text(errno), ")"));
    std::vector<std::byte> out;
    std::byte buf[1 << 16];
    for (;;) {
        const std::size_t got = std::fread(buf, 1, sizeof buf, f);
        out.insert(out.end(), buf, buf + got);
        if (got < sizeof buf) break;
    }
    const bool bad = std::ferror(f) != 0;
    std::fclose(f);
    if (bad) throw io_error(concat(path, ": read error after ", out.size(), " bytes"));
    return out;
}

/// The metadata value `key` as an unsigned integer; format_error naming the file and key otherwise.
inline std::uint64_t meta_u64(const io::SafeTensors& st, const std::string& key) {
    const auto it = st.metadata().find(key);
    if (it == st.metadata().end()) throw format_error(concat(st.source(), ": metadata '", key, "' is missing"));
    std::uint64_t v = 0;
    const char* b = it->second.data();
    const char* e = b + it->second.size();
    const auto r = std::from_chars(b, e, v);
    if (it->second.empty() || r.ec != std::errc() || r.ptr != e)
        throw format_error(concat(st.source(), ": metadata '", key, "' = '", it->second, "' is not an unsigned integer"));
    return v;
}
inline float meta_float(const io::SafeTensors& st, const std::string& key) {
    const auto it = st.metadata().find(key);
    if (it == st.metadata().end()) throw format_error(concat(st.source(), ": metadata '", key, "' is missing"));
    float v = 0;
    const char* b = it->second.data();
    const char* e = b + it->second.size();
    const auto r = std::from_chars(b, e, v);
    if (it->second.empty() || r.ec != std::errc() || r.ptr != e)
        throw format_error(concat(st.source(), ": metadata '", key, "' = '", it->second, "' is not a number"));
    return v;
}

/// The file's layout: its "oar.layout" metadata, else `unmarked`.
inline WeightLayout layout_of(const io::SafeTensors& st, WeightLayout unmarked) {
    const auto it = st.metadata().find("oar.layout");
    if (it == st.metadata().end()) return unmarked;
    if (it->second == "paddle") return WeightLayout::paddle;
    if (it->second == "torch") return WeightLayout::torch;
    throw format_error(concat(st.source(), ": metadata 'oar.layout' = '", it->second, "', expected 'paddle' or 'torch'"));
}

/// Checks that `expected` (key -> shape, in file layout) is exactly the set of tensors in `st`,
/// each of dtype `dtype`. Throws naming the first mismatching key.
inline void check_tensors(const io::SafeTensors& st, const std::vector<std::pair<std::string, std::vector<std::uint64_t>>>& expected,
                          io::Dtype dtype, const char* what) {
    for (const auto& [key, shape] : expected) {
        const io::TensorInfo* t = st.find(key);
        if (!t)
            throw value_error(concat(st.source(), ": ", what, " key '", key, "' is missing (expected ", io::dtype_name(dtype), " ",
                                     io::shape_string(shape), ")"));
        if (t->dtype != dtype)
            throw value_error(concat(st.source(), ": key '", key, "' is ", io::dtype_name(t->dtype), " ", io::shape_string(t->shape),
                                     ", expected ", io::dtype_name(dtype), " ", io::shape_string(shape)));
        if (t->shape != shape)
            throw shape_error(concat(st.source(), ": key '", key, "' has shape ", io::shape_string(t->shape), ", expected ",
                                     io::shape_string(shape), " (", io::dtype_name(dtype), ")"));
    }
    if (st.tensors().size() != expected.size())
        for (const auto& t : st.tensors()) {
            bool known = false;
            for (const auto& e : expected) known = known || e.first == t.name;
            if (!known)
                throw value_error(concat(st.source(), ": unexpected key '", t.name, "' (", io::dtype_name(t.dtype), " ",
                                         io::shape_string(t.shape), "); the ", what, " has ", expected.size(), " tensors"));
        }
}

template <class Net>
void check_weights(const io::SafeTensors& st, const Net& net, WeightLayout layout) {
    using T = typename Net::value_type;
    const auto transposed = transposed_keys<Net>();
    std::vector<std::pair<std::string, std::vector<std::uint64_t>>> expected;
    for (const auto& e : net.parameters().entries())
        expected.emplace_back(e.key, shape_of(e.dims, layout == WeightLayout::torch && transposed.count(e.key)));
    if constexpr (requires { net.parameters().buffer_entries(); })
        for (const auto& e : net.parameters().buffer_entries()) expected.emplace_back(e.key, shape_of(e.dims, false));
    check_tensors(st, expected, io::dtype_of<T>(), "network");
}

/// Copies validated weights into the network (cannot fail: check_weights ran first). They are
/// assembled in a host copy of the whole buffer and uploaded at once (one copy on a device backend).
template <class Net>
void apply_weights(const io::SafeTensors& st, Net& net, WeightLayout layout) {
    using T = typename Net::value_type;
    const auto transposed = transposed_keys<Net>();
    auto& params = net.parameters();
    const std::span<const T> current = params.host_values();
    std::vector<T> staged(current.begin(), current.end());
    for (const auto& e : params.entries()) {
        const auto bytes = st.bytes(st.at(e.key));
        const std::span<T> dst(staged.data() + e.offset, e.size);
        if (layout == WeightLayout::torch && transposed.count(e.key) && e.dims.rank == 2) {
            const std::size_t rows = e.dims.d[0], cols = e.dims.d[1];  // memory (rows, cols), file (cols, rows)
            for (std::size_t c = 0; c < cols; ++c)
                for (std::size_t r = 0; r < rows; ++r) {
                    T v;
                    std::memcpy(&v, bytes.data() + (c * rows + r) * sizeof(T), sizeof(T));
                    dst[r * cols + c] = v;
                }
        } else if (!bytes.empty()) {
            std::memcpy(dst.data(), bytes.data(), bytes.size());
        }
    }
    params.upload_values(staged);
    if constexpr (requires { params.buffer_entries(); }) {  // non-trainable state: stored as is
        const std::span<const T> state = params.host_buffers();
        std::vector<T> staged_state(state.begin(), state.end());
        for (const auto& e : params.buffer_entries()) {
            const auto bytes = st.bytes(st.at(e.key));
            if (!bytes.empty()) std::memcpy(staged_state.data() + e.offset, bytes.data(), bytes.size());
        }
        params.upload_buffers(staged_state);
    }
}

/// The weights file's bytes (header + data) in `layout`, ready to write and checksum.
template <class Net>
std::vector<std::byte> weights_file_bytes(const Net& net, WeightLayout layout, std::vector<std::vector<typename Net::value_type>>& scratch) {
    using T = typename Net::value_type;
    const auto transposed = transposed_keys<Net>();
    const auto& params = net.parameters();
    const std::span<const T> host = params.host_values();
    std::vector<io::TensorRef> refs;
    scratch.clear();
    scratch.reserve(params.entries().size());
    for (const auto& e : params.entries()) {
        const bool tr = layout == WeightLayout::torch && transposed.count(e.key) && e.dims.rank == 2;
        std::span<const T> values = host.subspan(e.offset, e.size);
        if (tr) {
            const std::size_t rows = e.dims.d[0], cols = e.dims.d[1];
            auto& t = scratch.emplace_back(values.size());
            for (std::size_t r = 0; r < rows; ++r)
                for (std::size_t c = 0; c < cols; ++c) t[c * rows + r] = values[r * cols + c];
            values = t;
        }
        refs.push_back(io::TensorRef::of<T>(e.key, shape_of(e.dims, tr), values));
    }
    if constexpr (requires { params.buffer_entries(); }) {
        const std::span<const T> state = params.host_buffers();
        for (const auto& e : params.buffer_entries())
            refs.push_back(io::TensorRef::of<T>(e.key, shape_of(e.dims, false), state.subspan(e.offset, e.size)));
    }
    const std::map<std::string, std::string> meta{{"format", "pt"}, {"oar.layout", layout_name(layout)}, {"oar.version", "1"}};
    const std::string header = io::safetensors_header(refs, meta);
    std::vector<std::byte> out(8 + header.size());
    const std::uint64_t n = header.size();
    std::memcpy(out.data(), &n, 8);
    std::memcpy(out.data() + 8, header.data(), header.size());
    for (const auto& r : refs) out.insert(out.end(), r.data.begin(), r.data.end());
    return out;
}

}  // namespace detail

/// Writes the network's weights to `path` atomically (see the top of this header).
template <class Net>
void save_weights(const std::string& path, const Net& net, WeightLayout layout = WeightLayout::paddle) {
    std::vector<std::vector<typename Net::value_type>> scratch;
    const auto bytes = detail::weights_file_bytes(net, layout, scratch);
    io::write_file_atomically(path, bytes.data(), bytes.size());
}

/// Loads weights from `path` into `net`, all or nothing. The file's "oar.layout" metadata decides
/// its layout; a file without it (written by torch or another tool) is read as `unmarked`.
template <class Net>
void load_weights(const std::string& path, Net& net, WeightLayout unmarked = WeightLayout::paddle) {
    const io::SafeTensors st = io::read_safetensors(path);
    const WeightLayout layout = detail::layout_of(st, unmarked);
    detail::check_weights(st, net, layout);
    detail::apply_weights(st, net, layout);
}

namespace detail {

/// A checkpoint's state file's fingerprint of its weights file.
inline bool weights_match(const io::SafeTensors& state, std::span<const std::byte> weights) {
    return meta_u64(state, "oar.weights_bytes") == weights.size() &&
           state.metadata().count("oar.weights_fnv1a64") && state.metadata().at("oar.weights_fnv1a64") == hex64(fnv1a64(weights));
}

/// After a save_checkpoint killed between its two renames: put the previous weights back.
inline void repair_pair(const std::string& wpath, const std::string& spath) {
    const std::string prev = wpath + ".prev";
    std::error_code ec;
    if (!std::filesystem::exists(prev, ec)) return;
    bool restore = false;
    try {
        const io::SafeTensors state = io::read_safetensors(spath);
        const auto p = read_all(prev);
        bool current_ok = false;
        if (std::filesystem::exists(wpath, ec)) current_ok = weights_match(state, read_all(wpath));
        restore = !current_ok && weights_match(state, p);
    } catch (const error&) {
        restore = false;  // no usable state file: the previous weights cannot be paired with anything
    }
    if (restore) {
        if (std::rename(prev.c_str(), wpath.c_str()) != 0)
            throw io_error(concat(wpath, ": cannot restore the previous weights from ", prev, " (", io::detail::errno_text(errno), ")"));
        io::detail::fsync_folder(io::detail::folder_of(wpath), wpath);
    } else {
        std::filesystem::remove(prev, ec);
    }
}

}  // namespace detail

/// Saves weights, optimizer state and `state` as a pair of files (see the top of this header).
template <class Net, Optimizer Opt>
void save_checkpoint(const std::string& dir, const std::string& stem, const Net& net, Opt& opt, const TrainingState& state,
                     WeightLayout layout = WeightLayout::paddle) {
    using T = typename Net::value_type;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw io_error(detail::concat(dir, ": cannot create the checkpoint folder (", ec.message(), ")"));
    const std::string wpath = checkpoint_weights_path(dir, stem), spath = checkpoint_state_path(dir, stem);
    const std::string prev = wpath + ".prev";
    detail::repair_pair(wpath, spath);

    std::vector<std::vector<T>> scratch;
    const auto weights = detail::weights_file_bytes(net, layout, scratch);

    std::vector<io::TensorRef> refs;
    std::string state_names;
    const auto& params = net.parameters();
    auto buffers = opt.state();
    using opt_store = storage_of<Opt>;
    std::vector<std::vector<T>> host_state;  // the state buffers on the host (device backends only)
    host_state.reserve(buffers.size());
    for (const auto& [name, buf] : buffers) {
        if (buf.size() != params.values().size())
            throw value_error(detail::concat("save_checkpoint: optimizer state '", name, "' has ", buf.size(),
                                             " values, the network's buffer ", params.values().size()));
        state_names += (state_names.empty() ? "" : ",") + name;
        const T* host = buf.data();
        if constexpr (!opt_store::host_memory) {
            auto& h = host_state.emplace_back(buf.size());
            opt_store::download(h.data(), buf.data(), buf.size());
            opt_store::synchronize();
            host = h.data();
        }
        for (const auto& e : params.entries())
            refs.push_back(io::TensorRef::of<T>(e.key + "." + name, detail::shape_of(e.dims, false),
                                                std::span<const T>(host + e.offset, e.size)));
    }
    std::map<std::string, std::string> meta{
        {"oar.kind", "training_state"},
        {"oar.version", "1"},
        {"oar.weights_file", std::filesystem::path(wpath).filename().string()},
        {"oar.weights_bytes", std::to_string(weights.size())},
        {"oar.weights_fnv1a64", detail::hex64(detail::fnv1a64(weights))},
        {"optimizer.state", state_names},
        {"optimizer.learning_rate", detail::float_text(opt.learning_rate())},
        {"train.epoch", std::to_string(state.epoch)},
        {"train.global_step", std::to_string(state.global_step)},
        {"train.network_step", std::to_string(net.step())},
        {"train.network_seed", std::to_string(net.seed())},
        {"train.rng_seed", std::to_string(state.rng_seed)},
        {"train.sampler_epoch", std::to_string(state.sampler_epoch)},
    };
    if constexpr (requires { opt.step_count(); })
        if (detail::counts_steps(opt)) meta["optimizer.step_count"] = std::to_string(opt.step_count());
    for (const auto& [k, v] : state.extra) meta["extra." + k] = v;
    const std::string header = io::safetensors_header(refs, meta);

    // Both files complete on disk before either replaces its predecessor.
    io::AtomicFile sfile(spath);
    const std::uint64_t n = header.size();
    sfile.write(&n, 8);
    sfile.write(header.data(), header.size());
    for (const auto& r : refs) sfile.write(r.data.data(), r.data.size());
    io::AtomicFile wfile(wpath);
    wfile.write(weights.data(), weights.size());

    // Keep the previous weights under ".prev" while the pair is inconsistent (see the top).
    if (std::filesystem::exists(wpath, ec) && ::link(wpath.c_str(), prev.c_str()) != 0)
        throw io_error(detail::concat(prev, ": cannot keep the previous weights (", io::detail::errno_text(errno), ")"));
    wfile.commit();
    sfile.commit();
    std::filesystem::remove(prev, ec);
}

/// Loads a checkpoint written by save_checkpoint into `net` and `opt`, all or nothing, and returns
/// the training state (see the top of this header).
template <class Net, Optimizer Opt>
TrainingState load_checkpoint(const std::string& dir, const std::string& stem, Net& net, Opt& opt) {
    using T = typename Net::value_type;
    using detail::concat;
    const std::string wpath = checkpoint_weights_path(dir, stem), spath = checkpoint_state_path(dir, stem);
    const io::SafeTensors state = io::read_safetensors(spath);
    const auto kind = state.metadata().find("oar.kind");
    if (kind == state.metadata().end() || kind->second != "training_state")
        throw format_error(concat(spath, ": not an oar training state file (metadata 'oar.kind' is not 'training_state')"));

    // The weights that belong to this state file: the current file, else the kept previous one.
    std::error_code ec;
    std::string used = wpath;
    std::vector<std::byte> wbytes;
    bool matched = false;
    if (std::filesystem::exists(wpath, ec)) {
        wbytes = detail::read_all(wpath);
        matched = detail::weights_match(state, wbytes);
    }
    if (!matched && std::filesystem::exists(wpath + ".prev", ec)) {
        auto p = detail::read_all(wpath + ".prev");
        if (detail::weights_match(state, p)) {
            wbytes = std::move(p);
            used = wpath + ".prev";
            matched = true;
        }
    }
    if (!matched) {
        if (!std::filesystem::exists(wpath, ec)) throw io_error(concat(wpath, ": cannot open (the weights of ", spath, ")"));
        throw format_error(concat(wpath, " (", wbytes.size(), " bytes, FNV-1a ", detail::hex64(detail::fnv1a64(wbytes)),
                                  ") is not the weights file ", spath, " was saved with (",
                                  state.metadata().count("oar.weights_bytes") ? state.metadata().at("oar.weights_bytes") : "?",
                                  " bytes, FNV-1a ",
                                  state.metadata().count("oar.weights_fnv1a64") ? state.metadata().at("oar.weights_fnv1a64") : "?",
                                  "): a mismatched pair"));
    }
    const io::SafeTensors weights = io::parse_safetensors(std::move(wbytes), used);
    const WeightLayout layout = detail::layout_of(weights, WeightLayout::paddle);
    detail::check_weights(weights, net, layout);

    // Optimizer state: the same buffers by name, each sliced per parameter.
    auto buffers = opt.state();
    std::string names;
    for (const auto& b : buffers) names += (names.empty() ? "" : ",") + b.first;
    const auto saved_names = state.metadata().find("optimizer.state");
    if (saved_names == state.metadata().end() || saved_names->second != names)
        throw value_error(concat(spath, ": the optimizer state holds buffers '",
                                 saved_names == state.metadata().end() ? std::string("?") : saved_names->second,
                                 "', this optimizer has '", names, "' (another optimizer kind?)"));
    std::vector<std::pair<std::string, std::vector<std::uint64_t>>> expected;
    for (const auto& b : buffers)
        for (const auto& e : net.parameters().entries()) expected.emplace_back(e.key + "." + b.first, detail::shape_of(e.dims, false));
    detail::check_tensors(state, expected, io::dtype_of<T>(), "optimizer state");

    TrainingState ts;
    ts.epoch = detail::meta_u64(state, "train.epoch");
    ts.global_step = detail::meta_u64(state, "train.global_step");
    ts.network_step = detail::meta_u64(state, "train.network_step");
    ts.network_seed = detail::meta_u64(state, "train.network_seed");
    ts.rng_seed = detail::meta_u64(state, "train.rng_seed");
    ts.sampler_epoch = detail::meta_u64(state, "train.sampler_epoch");
    for (const auto& [k, v] : state.metadata())
        if (k.rfind("extra.", 0) == 0) ts.extra[k.substr(6)] = v;
    const float lr = detail::meta_float(state, "optimizer.learning_rate");
    if (!(lr >= 0.0f) || !std::isfinite(lr))
        throw format_error(concat(spath, ": metadata 'optimizer.learning_rate' = ", lr, " is not a finite rate >= 0"));
    std::uint64_t step_count = 0;
    if constexpr (requires { opt.step_count(); })
        if (detail::counts_steps(opt)) step_count = detail::meta_u64(state, "optimizer.step_count");

    // Everything checked: apply.
    detail::apply_weights(weights, net, layout);
    for (auto& [name, buf] : buffers)
        for (const auto& e : net.parameters().entries()) {
            const auto bytes = state.bytes(state.at(e.key + "." + name));
            if (bytes.empty()) continue;
            if constexpr (storage_of<Opt>::host_memory) {
                std::memcpy(buf.data() + e.offset, bytes.data(), bytes.size());
            } else {
                std::vector<T> h(e.size);
                std::memcpy(h.data(), bytes.data(), bytes.size());
                storage_of<Opt>::upload(buf.data() + e.offset, h.data(), e.size);
            }
        }
    opt.set_learning_rate(lr);
    if constexpr (requires { opt.set_step_count(step_count); })
        if (detail::counts_steps(opt)) opt.set_step_count(step_count);
    net.set_step(ts.network_step);
    return ts;
}

}  // namespace oar
