// The course's mnist.json.gz: [[train_imgs, train_labels], [val_imgs, val_labels], [test_imgs,
// test_labels]], each image a list of 784 numbers, read into InMemoryDatasets (and written, for the
// converter). Not part of oar.hpp: it includes simdjson, which nvcc cannot compile (docs/ARCHITECTURE.md, "Constraints").
//
// Design. io::InflateThread inflates on its own thread into 4 MiB blocks while this thread parses,
// and the JSON is never held whole: a small state machine steps over the layout's few structural
// characters (the brackets and commas around splits, image lists and label lists), and each run of
// complete images (or labels) that has arrived is parsed as one document `[img, img, ...]` by
// simdjson On-Demand, which checks the syntax and converts every number. A run ends after an
// image's ']' (found by memchr, then ", [" must follow); the byte before the run and the one after
// it are overwritten with '[' and ']' for the parse and restored. Whatever the cut, simdjson sees
// every byte of every image and label, so only valid JSON of this layout is accepted.
// Measured (benchmarks/bench_json.sh, 2 cores, 50k/10k/10k from MNIST): a 713 MB JSON (43 MB
// gzipped) loads in 1.3 s with a 277 MB peak RSS (zcat alone: 2.2 s; Python's json.load(gzip.open):
// 16.6 s, 3.5 GB); the converter's 480 MB file in 0.9 s, 288 MB. The alternative, inflating all of
// it and then one On-Demand pass over the padded document, took 3.8 s and 1.36 GB: sequential, and
// text + simdjson's index + floats do not fit the 1.2 GB budget. Streaming needs no size up front,
// so the gzip ISIZE trailer is not used. Parsing is the slower of the two threads (~1.2 s of CPU
// for 713 MB, mostly simdjson's number parsing); inflating takes ~0.8 s.
// Values are kept as the file has them: the course file is already in [-1, 1]; a file of integers
// 0-255 gives floats 0-255 (normalise them yourself). Labels are integers (7 or 7.0) in [0, classes).
#pragma once

#include <simdjson.h>  // simdjson::ondemand: parses and checks every image and label
#include <zlib.h>      // gzopen, gzwrite, gzclose: write_mnist_json's output

#include <algorithm>     // std::min, std::max
#include <array>         // std::array: per-split state
#include <charconv>      // std::to_chars: shortest round-trip float text in write_mnist_json
#include <cmath>         // std::isfinite, std::floor
#include <cstddef>       // std::size_t
#include <cstdint>       // std::int64_t, std::uint64_t
#include <cstdio>        // std::rename, std::remove
#include <cstring>       // std::memchr, std::memcpy, std::memmove
#include <memory>        // std::unique_ptr: uninitialised image chunks
#include <string>        // std::string
#include <string_view>   // std::string_view
#include <utility>       // std::move
#include <vector>        // std::vector

#include "../core/error.hpp"      // format_error, io_error, value_error
#include "../core/shape.hpp"      // Dims, make_dims
#include "../io/gzip_stream.hpp"  // io::InflateThread: inflating concurrently with parsing
#include "dataset.hpp"            // InMemoryDataset: what the splits become
#include "mnist.hpp"              // MnistSplits: the IDX splits write_mnist_json's converter starts from

namespace oar::data {

/// The three splits of the course's file, in file order.
enum class MnistJsonSplit : std::size_t { train = 0, valid = 1, test = 2 };

inline const char* split_name(MnistJsonSplit s) {
    switch (s) {
        case MnistJsonSplit::train: return "train";
        case MnistJsonSplit::valid: return "valid";
        case MnistJsonSplit::test: return "test";
    }
    return "?";
}

/// The course's `mode`: "train", "valid", "eval" (the test split) or its alias "test".
inline MnistJsonSplit mnist_json_split(std::string_view mode) {
    if (mode == "train") return MnistJsonSplit::train;
    if (mode == "valid") return MnistJsonSplit::valid;
    if (mode == "eval" || mode == "test") return MnistJsonSplit::test;
    throw value_error(oar::detail::concat("mnist.json mode '", mode, "' is not train, valid, eval or test"));
}

struct MnistJsonOptions {
    Dims dims = make_dims(1, 28, 28);   ///< per-image shape; every image must hold dims.size() values
    std::size_t num_classes = 10;       ///< labels must lie in [0, num_classes)
    /// Longest text one image or label may take; bounds memory on malformed input (an image of the
    /// course's file is about 10 KB).
    std::size_t max_element_bytes = std::size_t(16) << 20;
    /// Most images (and labels) one split may hold: bounds memory on a gzip bomb of valid JSON
    /// (3.3 GB of floats at 28 x 28; the course's train split has 50,000). Raise it for larger sets.
    std::size_t max_images = std::size_t(1) << 20;
    /// Decompressed bytes the inflating thread hands over at a time (tests use tiny blocks to cut
    /// the text at every position).
    std::size_t block_bytes = std::size_t(4) << 20;
};

/// The three splits of a course file.
struct MnistJson {
    InMemoryDataset train, valid, test;

    const InMemoryDataset& operator[](MnistJsonSplit s) const {
        return s == MnistJsonSplit::train ? train : s == MnistJsonSplit::valid ? valid : test;
    }
    InMemoryDataset& operator[](MnistJsonSplit s) {
        return s == MnistJsonSplit::train ? train : s == MnistJsonSplit::valid ? valid : test;
    }
};

namespace json_detail {

inline bool json_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/// `c` for a message: 'x', or a hex code for bytes that do not print.
inline std::string show_char(char c) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "'";
    static const char* hex = "0123456789abcdef";
    return std::string("byte 0x") + hex[u >> 4] + hex[u & 15];
}

/// The images and labels of one split as they arrive. Images go into chunks that double from 1 MiB
/// up to 64 MiB (nothing is reallocated while the count is unknown; large chunks are returned to
/// the system when freed), joined into one vector when the split ends; a split that is not kept is
/// only counted.
class MnistJsonSink {
public:
    MnistJsonSink(std::size_t values, bool keep) : values_(values), keep_(keep) {
        if (!keep_) scratch_.reset(new float[values_]);
    }
    /// Room for the next image's values; commit() makes it count.
    float* slot() {
        if (!keep_) return scratch_.get();
        if (chunks_.empty() || fill_ == chunks_.back().images) {
            const std::size_t first = std::max<std::size_t>(1, (std::size_t(1) << 18) / values_);  // 1 MiB of floats
            const std::size_t most = std::max<std::size_t>(1, (std::size_t(1) << 24) / values_);   // 64 MiB
            const std::size_t n = chunks_.empty() ? first : std::min(most, 2 * chunks_.back().images);
            chunks_.push_back(Chunk{std::unique_ptr<float[]>(new float[n * values_]), n});
            fill_ = 0;
        }
        return chunks_.back().data.get() + fill_ * values_;
    }
    void commit() {
        ++images_;
        ++fill_;
    }
    void add_label(std::int64_t y) {
        if (keep_) labels_.push_back(y);
        ++label_count_;
    }
    std::size_t images() const { return images_; }
    std::size_t labels() const { return label_count_; }

    /// Joins the chunks into the split's dataset (called when the split ends, so that the copy's
    /// peak does not include later splits).
    void finish(Dims dims) {
        if (!keep_) return;
        std::vector<float> all;
        all.reserve(images_ * values_);
        for (Chunk& c : chunks_) {
            const std::size_t n = std::min(c.images, images_ - all.size() / values_) * values_;
            all.insert(all.end(), c.data.get(), c.data.get() + n);
            c.data.reset();  // the peak stays near one copy plus one chunk
        }
        chunks_.clear();
        done_ = InMemoryDataset(std::move(all), std::move(labels_), dims);
    }
    InMemoryDataset take() { return std::move(done_); }

private:
    struct Chunk {
        std::unique_ptr<float[]> data;  // uninitialised: every value is written before it counts
        std::size_t images;
    };
    std::size_t values_;
    bool keep_;
    std::vector<Chunk> chunks_;
    std::size_t fill_ = 0;  // images in chunks_.back()
    std::unique_ptr<float[]> scratch_;
    std::size_t images_ = 0, label_count_ = 0;
    std::vector<std::int64_t> labels_;
    InMemoryDataset done_;
};

/// The reader's state machine; see the header comment for the design.
class MnistJsonReader {
public:
    MnistJsonReader(std::string path, const MnistJsonOptions& opt, std::array<bool, 3> keep)
        : path_(std::move(path)), opt_(opt), values_(opt.dims.size()) {
        if (opt_.dims.rank == 0 || values_ == 0)
            throw value_error(oar::detail::concat(path_, ": MnistJsonOptions::dims ", to_string(opt_.dims), " holds no values"));
        if (opt_.num_classes == 0) throw value_error(oar::detail::concat(path_, ": MnistJsonOptions::num_classes is 0"));
        for (std::size_t s = 0; s < 3; ++s) sinks_.emplace_back(values_, keep[s]);
    }

    MnistJson run() {
        io::InflateThread::Options io_opt;
        io_opt.block_bytes = opt_.block_bytes;
        io::InflateThread in(path_, io_opt);
        gzip_ = in.gzip();
        std::vector<char> block;
        for (;;) {
            bool more = false;
            try {
                more = in.next(block);
            } catch (const format_error& e) {
                throw format_error(oar::detail::concat(e.what(), "; the JSON reader had reached ", position()));
            } catch (const io_error& e) {
                throw io_error(oar::detail::concat(e.what(), "; the JSON reader had reached ", position()));
            }
            if (!more) break;
            append(block);
            process(false);
        }
        if (offset(end_) == 0)
            throw format_error(gzip_ ? oar::detail::concat(path_, ": the gzip data decompresses to 0 bytes, expected JSON")
                                     : oar::detail::concat(path_, ": the file is empty"));
        process(true);
        MnistJson out;
        for (std::size_t s = 0; s < 3; ++s) out[static_cast<MnistJsonSplit>(s)] = sinks_[s].take();
        return out;
    }

private:
    enum class State {
        doc_open, split_open, images_open, images_first, images_next, images_sep, after_images,
        labels_open, labels_first, labels_next, labels_sep, split_close, after_split, done
    };

    // ---- the buffer: unconsumed text in buf_[begin_, end_), buf_[0] kept free for the '[' ----

    /// Decompressed offset of buf_[i].
    std::uint64_t offset(std::size_t i) const { return shift_ + i - 1; }

    void append(const std::vector<char>& block) {
        if (begin_ > 1) {  // drop what is consumed; at most one unfinished element remains
            std::memmove(buf_.data() + 1, buf_.data() + begin_, end_ - begin_);
            shift_ += begin_ - 1;
            end_ -= begin_ - 1;
            begin_ = 1;
        }
        const std::size_t need = end_ + block.size() + 1 + simdjson::SIMDJSON_PADDING;
        if (buf_.size() < need) buf_.resize(std::max(need, buf_.size() + buf_.size() / 2));
        std::memcpy(buf_.data() + end_, block.data(), block.size());
        end_ += block.size();
    }

    // ---- messages ----

    const char* split_str() const { return split_name(static_cast<MnistJsonSplit>(split_ < 3 ? split_ : 2)); }

    std::string position() const {
        const std::string at = oar::detail::concat("byte ", offset(begin_), gzip_ ? " of the decompressed JSON" : "");
        if (split_ >= 3) return at;
        switch (state_) {
            case State::images_first:
            case State::images_next:
            case State::images_sep:
                return oar::detail::concat("split ", split_, " (", split_str(), "), image ", sinks_[split_].images(), ", ", at);
            case State::labels_first:
            case State::labels_next:
            case State::labels_sep:
                return oar::detail::concat("split ", split_, " (", split_str(), "), label ", sinks_[split_].labels(), ", ", at);
            default:
                return oar::detail::concat("split ", split_, " (", split_str(), "), ", at);
        }
    }

    /// format_error "<file>: <where> at byte <offset>: <what>".
    [[noreturn]] void fail(std::size_t at, const std::string& where, const std::string& what) const {
        throw format_error(oar::detail::concat(path_, ": ", where, where.empty() ? "" : " ", "at byte ", offset(at),
                                          gzip_ ? " of the decompressed JSON" : "", ": ", what));
    }
    std::string split_where() const { return oar::detail::concat("split ", split_, " (", split_str(), ")"); }
    std::string image_where(std::size_t n) const { return oar::detail::concat(split_where(), ", image ", n); }
    std::string label_where(std::size_t n) const { return oar::detail::concat(split_where(), ", label ", n); }

    std::size_t index_of(const char* p) const {
        const char* lo = buf_.data();
        return p >= lo && p <= lo + end_ ? static_cast<std::size_t>(p - lo) : begin_;
    }
    /// Where simdjson stopped in the current document, or `fallback`.
    std::size_t stop_index(simdjson::ondemand::document& doc, std::size_t fallback) {
        const char* p = nullptr;
        if (doc.current_location().get(p) == simdjson::SUCCESS) return index_of(p);
        return fallback;
    }
    /// Whether `doc` was read to its end (simdjson 3.0 has no document::at_end; its current
    /// location is out of bounds exactly there).
    static bool at_end(simdjson::ondemand::document& doc) {
        const char* p = nullptr;
        return doc.current_location().get(p) == simdjson::OUT_OF_BOUNDS;
    }
    static std::string token_text(std::string_view t) {
        while (!t.empty() && json_ws(t.back())) t.remove_suffix(1);
        if (t.size() > 40) return std::string(t.substr(0, 40)) + "...";
        return std::string(t);
    }
    static const char* type_name(simdjson::ondemand::json_type t) {
        switch (t) {
            case simdjson::ondemand::json_type::array: return "an array";
            case simdjson::ondemand::json_type::object: return "an object";
            case simdjson::ondemand::json_type::number: return "a number";
            case simdjson::ondemand::json_type::string: return "a string";
            case simdjson::ondemand::json_type::boolean: return "a boolean";
            case simdjson::ondemand::json_type::null: return "null";
        }
        return "a value";
    }
    /// What a value that is not a usable number is, for a message.
    static std::string describe(simdjson::ondemand::value& v, simdjson::error_code e) {
        const std::string text = token_text(v.raw_json_token());
        if (text.empty() || text[0] == ']' || text[0] == ',') return "expected a number after ','";
        simdjson::ondemand::json_type t{};
        if (v.type().get(t) == simdjson::SUCCESS && t != simdjson::ondemand::json_type::number) {
            if (t == simdjson::ondemand::json_type::array || t == simdjson::ondemand::json_type::object ||
                t == simdjson::ondemand::json_type::null)
                return oar::detail::concat("expected a number, got ", type_name(t));
            return oar::detail::concat(text, " is ", type_name(t), ", expected a number");
        }
        if (e == simdjson::NUMBER_ERROR)
            return oar::detail::concat(text, " is not a valid finite JSON number (", simdjson::error_message(e), ")");
        return oar::detail::concat(text, " is not a JSON number (", simdjson::error_message(e), ")");
    }

    // ---- the state machine over the layout's structural characters ----

    void expect(char c, char want, State next, const std::string& what) {
        if (c != want) {
            std::string extra;
            if (state_ == State::doc_open && !gzip_)
                extra = " (the file is neither gzip-compressed, which starts with bytes 1f 8b, nor a JSON array)";
            fail(begin_, split_ < 3 && state_ != State::doc_open ? split_where() : std::string(),
                 oar::detail::concat("expected '", want, "' ", what, ", got ", show_char(c), extra));
        }
        ++begin_;
        state_ = next;
    }

    void process(bool eof) {
        for (;;) {
            while (begin_ < end_ && json_ws(buf_[begin_])) ++begin_;
            if (begin_ == end_) {
                if (eof && state_ != State::done) fail_end();
                return;
            }
            const char c = buf_[begin_];
            switch (state_) {
                case State::doc_open:
                    expect(c, '[', State::split_open,
                           "opening the file's list [[train images, train labels], [valid ...], [test ...]]");
                    break;
                case State::split_open:
                    if (c == ']') fail(begin_, "", oar::detail::concat("the file holds ", split_, " splits, expected 3 (train, valid, test)"));
                    expect(c, '[', State::images_open, "opening [images, labels]");
                    break;
                case State::images_open: expect(c, '[', State::images_first, "opening the list of images"); break;
                case State::images_first:
                    if (c == ']') {
                        ++begin_;
                        state_ = State::after_images;
                        break;
                    }
                    [[fallthrough]];
                case State::images_next:
                    if (!parse_images(eof)) return;
                    break;
                case State::images_sep:
                    if (c == ',') {
                        ++begin_;
                        state_ = State::images_next;
                    } else if (c == ']') {
                        ++begin_;
                        state_ = State::after_images;
                    } else {
                        fail(begin_, image_where(sinks_[split_].images()),
                             oar::detail::concat("expected ',' or ']' after the previous image, got ", show_char(c)));
                    }
                    break;
                case State::after_images:
                    expect(c, ',', State::labels_open, oar::detail::concat("between the list of ", sinks_[split_].images(),
                                                                      " images and the list of labels"));
                    break;
                case State::labels_open: expect(c, '[', State::labels_first, "opening the list of labels"); break;
                case State::labels_first:
                case State::labels_next:
                    if (!parse_labels(eof)) return;
                    break;
                case State::labels_sep:
                    if (c == ',') {
                        ++begin_;
                        state_ = State::labels_next;
                    } else {  // parse_labels stops only before ',' or ']'
                        const MnistJsonSink& s = sinks_[split_];
                        if (s.images() != s.labels())
                            fail(begin_, split_where(), oar::detail::concat("the split has ", s.images(), " images but ",
                                                                       s.labels(), " labels"));
                        ++begin_;
                        state_ = State::split_close;
                    }
                    break;
                case State::split_close:
                    expect(c, ']', State::after_split, "closing [images, labels] after the labels");
                    sinks_[split_].finish(opt_.dims);
                    ++split_;
                    break;
                case State::after_split:
                    if (c == ',' && split_ < 3) {
                        ++begin_;
                        state_ = State::split_open;
                    } else if (c == ']' && split_ == 3) {
                        ++begin_;
                        state_ = State::done;
                    } else if (c == ',') {
                        fail(begin_, "", "the file holds more than 3 splits (train, valid, test)");
                    } else if (c == ']') {
                        fail(begin_, "", oar::detail::concat("the file holds ", split_, " splits, expected 3 (train, valid, test)"));
                    } else {
                        fail(begin_, "", oar::detail::concat("expected ',' or ']' after split ", split_ - 1, ", got ", show_char(c)));
                    }
                    break;
                case State::done:
                    fail(begin_, "", oar::detail::concat("unexpected ", show_char(c), " after the end of the JSON"));
            }
        }
    }

    [[noreturn]] void fail_end() const {
        std::string what = "the data ends ";
        switch (state_) {
            case State::doc_open: what += "before the JSON starts"; break;
            case State::images_first:
            case State::images_next:
            case State::images_sep:
                what += oar::detail::concat("inside the list of images, at image ", sinks_[split_].images());
                break;
            case State::labels_first:
            case State::labels_next:
            case State::labels_sep:
                what += oar::detail::concat("inside the list of labels, at label ", sinks_[split_].labels());
                break;
            default: what += "before the JSON is complete"; break;
        }
        fail(end_, split_ < 3 && state_ != State::doc_open ? split_where() : std::string(),
             what + " (truncated file?)");
    }

    // ---- runs of complete elements, parsed by simdjson On-Demand ----

    /// Makes buf_[from - 1, to] the document '[' + buf_[from, to) + ']', parses it with `parse`, and
    /// restores the byte at `to`. The byte at from - 1 is already consumed (',' '[' or space).
    template <class Parse>
    void with_document(std::size_t from, std::size_t to, Parse&& parse) {
        buf_[from - 1] = '[';
        const char saved = buf_[to];
        buf_[to] = ']';
        struct Restore {
            char* p;
            char c;
            ~Restore() { *p = c; }
        } restore{&buf_[to], saved};
        const std::size_t len = to - from + 2;
        simdjson::ondemand::document doc;
        const simdjson::error_code e = parser_.iterate(buf_.data() + from - 1, len, len + simdjson::SIMDJSON_PADDING).get(doc);
        parse(doc, e);
    }

    /// Parses the complete images at begin_ (as many as have arrived). False when none is complete yet.
    bool parse_images(bool eof) {
        const std::size_t n0 = sinks_[split_].images();
        if (buf_[begin_] != '[')
            fail(begin_, image_where(n0), oar::detail::concat("expected '[' starting an image (", values_,
                                                         " numbers), got ", show_char(buf_[begin_])));
        // Image ends: each image's first ']', as long as ", [" follows.
        cuts_.clear();
        const char* const b = buf_.data();
        std::size_t pos = begin_ + 1;
        for (;;) {
            const void* q = std::memchr(b + pos, ']', end_ - pos);
            if (!q) break;
            std::size_t r = static_cast<std::size_t>(static_cast<const char*>(q) - b) + 1;
            cuts_.push_back(r);
            while (r < end_ && json_ws(b[r])) ++r;
            if (r == end_ || b[r] != ',') break;
            ++r;
            while (r < end_ && json_ws(b[r])) ++r;
            if (r == end_ || b[r] != '[') break;
            pos = r + 1;
        }
        if (cuts_.empty()) {
            if (eof) fail(end_, image_where(n0), oar::detail::concat("the data ends inside this image, which starts at byte ",
                                                                 offset(begin_), " (truncated file?)"));
            if (end_ - begin_ > opt_.max_element_bytes)
                fail(begin_, image_where(n0), oar::detail::concat("the image is longer than ", opt_.max_element_bytes,
                                                             " bytes without its closing ']'"));
            return false;
        }
        const std::size_t to = cuts_.back();
        bool stage1_failed = false;
        with_document(begin_, to, [&](simdjson::ondemand::document& doc, simdjson::error_code e) {
            if (e) {
                stage1_failed = true;
                return;
            }
            parse_image_list(doc, n0, to);
        });
        if (stage1_failed) {
            // simdjson rejected the text before parsing (an unclosed string, bad UTF-8...): parse the
            // images one at a time to name the first bad one.
            std::size_t from = begin_;
            for (const std::size_t cut : cuts_) {
                with_document(from, cut, [&](simdjson::ondemand::document& doc, simdjson::error_code e) {
                    const std::size_t n = sinks_[split_].images();
                    if (e) fail(from, image_where(n), oar::detail::concat("invalid JSON in this image (", simdjson::error_message(e), ")"));
                    parse_image_list(doc, n, cut);
                });
                from = cut;
                while (from < end_ && json_ws(buf_[from])) ++from;
                ++from;  // the ',' between images
            }
        }
        begin_ = to;
        state_ = State::images_sep;
        return true;
    }

    void parse_image_list(simdjson::ondemand::document& doc, std::size_t n0, std::size_t to) {
        MnistJsonSink& sink = sinks_[split_];
        simdjson::ondemand::array list;
        if (const auto e = doc.get_array().get(list)) fail(begin_, image_where(n0), simdjson::error_message(e));
        for (auto elem : list) {
            const std::size_t n = sink.images();
            simdjson::ondemand::value img_v;
            if (const auto e = std::move(elem).get(img_v))
                fail(stop_index(doc, begin_), image_where(n), oar::detail::concat("invalid JSON (", simdjson::error_message(e), ")"));
            const std::size_t img_at = index_of(img_v.raw_json_token().data());
            simdjson::ondemand::array img;
            if (const auto e = img_v.get_array().get(img)) {
                simdjson::ondemand::json_type t{};
                (void)img_v.type().get(t);
                fail(img_at, image_where(n), oar::detail::concat("expected an array of ", values_, " numbers, got ", type_name(t)));
            }
            if (n >= opt_.max_images)
                fail(img_at, image_where(n), oar::detail::concat("more than ", opt_.max_images,
                                                                 " images in one split (MnistJsonOptions::max_images)"));
            float* dst = sink.slot();
            std::size_t k = 0;
            for (auto v_r : img) {
                simdjson::ondemand::value v;
                if (const auto e = std::move(v_r).get(v))
                    fail(stop_index(doc, img_at), image_where(n),
                         oar::detail::concat("invalid JSON after value ", k, " (", simdjson::error_message(e), ")"));
                double d;
                if (const auto e = v.get_double().get(d))
                    fail(index_of(v.raw_json_token().data()), oar::detail::concat(image_where(n), ", value ", k), describe(v, e));
                if (k == values_)
                    fail(index_of(v.raw_json_token().data()), image_where(n),
                         oar::detail::concat("the image has more than ", values_, " values"));
                const float f = static_cast<float>(d);
                if (!std::isfinite(f))
                    fail(index_of(v.raw_json_token().data()), oar::detail::concat(image_where(n), ", value ", k),
                         oar::detail::concat(token_text(v.raw_json_token()), " does not fit a float"));
                dst[k++] = f;
            }
            if (k != values_)
                fail(img_at, image_where(n), oar::detail::concat("the image has ", k, " values, expected ", values_, " (",
                                                            to_string(opt_.dims), ")"));
            sink.commit();
        }
        if (!at_end(doc))
            fail(stop_index(doc, to), image_where(sink.images()), "unexpected text after the previous image");
    }

    /// Parses the labels at begin_ up to the list's ']' or the last ',' that has arrived.
    bool parse_labels(bool eof) {
        MnistJsonSink& sink = sinks_[split_];
        const char* const b = buf_.data();
        std::size_t to = 0;
        if (const void* q = std::memchr(b + begin_, ']', end_ - begin_)) {
            to = static_cast<std::size_t>(static_cast<const char*>(q) - b);
        } else if (const std::size_t c = std::string_view(b + begin_, end_ - begin_).rfind(',');
                   c != std::string_view::npos) {
            to = begin_ + c;
        } else {
            if (eof) fail_end();
            if (end_ - begin_ > opt_.max_element_bytes)
                fail(begin_, label_where(sink.labels()), oar::detail::concat("the label is longer than ", opt_.max_element_bytes, " bytes"));
            return false;
        }
        // A label must follow a ',' and precede one: "[,9]" and "[1,]" are not JSON.
        const bool need_one = state_ == State::labels_next || b[to] == ',';
        const std::size_t n0 = sink.labels();
        bool stage1_failed = false;
        with_document(begin_, to, [&](simdjson::ondemand::document& doc, simdjson::error_code e) {
            if (e) stage1_failed = true;
            else parse_label_list(doc, to);
        });
        if (stage1_failed) {
            // As for images: one label at a time (split at ','), to name the first bad one.
            for (std::size_t from = begin_; from <= to;) {
                const void* comma = std::memchr(b + from, ',', to - from);
                const std::size_t end = comma ? static_cast<std::size_t>(static_cast<const char*>(comma) - b) : to;
                const std::size_t n = sink.labels();
                with_document(from, end, [&](simdjson::ondemand::document& doc, simdjson::error_code e) {
                    if (e) fail(from, label_where(n), oar::detail::concat("invalid JSON in this label (", simdjson::error_message(e), ")"));
                    parse_label_list(doc, end);
                });
                if (sink.labels() == n) fail(from, label_where(n), "expected a label");
                from = end + 1;
            }
        }
        if (need_one && sink.labels() == n0) fail(begin_, label_where(n0), "expected a label");
        begin_ = to;
        state_ = State::labels_sep;
        return true;
    }

    void parse_label_list(simdjson::ondemand::document& doc, std::size_t to) {
        MnistJsonSink& sink = sinks_[split_];
        simdjson::ondemand::array list;
        if (const auto e = doc.get_array().get(list)) fail(begin_, label_where(sink.labels()), simdjson::error_message(e));
        for (auto v_r : list) {
            const std::size_t n = sink.labels();
            simdjson::ondemand::value v;
            if (const auto e = std::move(v_r).get(v))
                fail(stop_index(doc, begin_), label_where(n), oar::detail::concat("invalid JSON (", simdjson::error_message(e), ")"));
            if (n >= opt_.max_images)
                fail(index_of(v.raw_json_token().data()), label_where(n),
                     oar::detail::concat("more than ", opt_.max_images, " labels in one split (MnistJsonOptions::max_images)"));
            sink.add_label(label_value(v, n));
        }
        if (!at_end(doc)) fail(stop_index(doc, to), label_where(sink.labels()), "unexpected text after the previous label");
    }

    std::int64_t label_value(simdjson::ondemand::value& v, std::size_t n) {
        const char* at = v.raw_json_token().data();
        std::int64_t y = 0;
        if (v.get_int64().get(y) != simdjson::SUCCESS) {  // 7.0 is accepted as 7
            double d = 0;
            if (const auto e = v.get_double().get(d)) fail(index_of(at), label_where(n), describe(v, e));
            if (d != std::floor(d) || !(d >= 0 && d < static_cast<double>(opt_.num_classes)))
                fail(index_of(at), label_where(n),
                     oar::detail::concat(token_text(v.raw_json_token()), " is not an integer class in [0, ",
                                         opt_.num_classes, ")"));
            y = static_cast<std::int64_t>(d);
        }
        if (y < 0 || static_cast<std::uint64_t>(y) >= opt_.num_classes)
            fail(index_of(at), label_where(n), oar::detail::concat("label ", y, " is not in [0, ", opt_.num_classes, ")"));
        return y;
    }

    std::string path_;
    MnistJsonOptions opt_;
    std::size_t values_;
    bool gzip_ = false;
    std::vector<MnistJsonSink> sinks_;
    simdjson::ondemand::parser parser_;
    std::vector<char> buf_ = std::vector<char>(1 + simdjson::SIMDJSON_PADDING + 1);
    std::size_t begin_ = 1, end_ = 1;
    std::uint64_t shift_ = 0;  // decompressed offset of buf_[1]
    State state_ = State::doc_open;
    std::size_t split_ = 0;
    std::vector<std::size_t> cuts_;
};

/// Python's repr of a float32 widened to double, as the course's file has it ("-1.0", "0.23529411852359772").
inline void append_course_float(std::string& out, float f) {
    char tmp[40];
    const auto r = std::to_chars(tmp, tmp + sizeof tmp, static_cast<double>(f));
    out.append(tmp, r.ptr);
    for (const char* p = tmp; p != r.ptr; ++p)
        if (*p == '.' || *p == 'e') return;
    out += ".0";
}

}  // namespace json_detail

/// Reads the course's mnist.json(.gz) into three datasets of shape `opt.dims` ([1, 28, 28]),
/// checking everything: three splits, as many labels as images, dims.size() finite values per
/// image, integer labels in [0, num_classes). io_error when the file cannot be opened;
/// format_error naming the file, split, sample index and byte offset for anything malformed.
inline MnistJson read_mnist_json(const std::string& path, const MnistJsonOptions& opt = {}) {
    return json_detail::MnistJsonReader(path, opt, {true, true, true}).run();
}

/// One split, as the course's `load_data(mode)`: mode is train, valid, eval or test (= eval). The
/// whole file is still checked; only the chosen split is kept in memory.
inline InMemoryDataset load_mnist_json(const std::string& path, std::string_view mode, const MnistJsonOptions& opt = {}) {
    const MnistJsonSplit s = mnist_json_split(mode);
    std::array<bool, 3> keep{};
    keep[static_cast<std::size_t>(s)] = true;
    MnistJson all = json_detail::MnistJsonReader(path, opt, keep).run();
    return std::move(all[s]);
}

/// The IDX splits as the course's floats: x / 127.5 - 1, computed as ByteImageDataset and
/// fill_batch do (x * (1 / 127.5f) - 1), so either path gives bitwise the same values.
inline MnistJson mnist_json_from_idx(const MnistSplits& s) {
    auto convert = [](const LabeledImages& set) {
        std::vector<float> x(set.pixels.size());
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(set.pixels[i]) * (1.0f / 127.5f) - 1.0f;
        return InMemoryDataset(std::move(x), set.labels, make_dims(1, set.rows, set.cols));
    };
    return MnistJson{convert(s.train), convert(s.valid), convert(s.test)};
}

/// Writes `data` in the course's layout, gzip-compressed at `level` (0-9): Python's json.dump
/// spacing, each value as Python prints a float32 widened to double, labels as integers. Written
/// to `path + ".tmp"` and renamed, so a failure leaves no partial file at `path`. io_error when
/// writing fails, value_error for a non-finite value.
inline void write_mnist_json(const std::string& path, const MnistJson& data, int level = 6) {
    if (level < 0 || level > 9) throw value_error(oar::detail::concat("write_mnist_json: gzip level ", level, " is not 0..9"));
    const std::string tmp = path + ".tmp";
    const std::string mode = "wb" + std::to_string(level);
    gzFile f = gzopen(tmp.c_str(), mode.c_str());
    if (!f) throw io_error(oar::detail::concat(tmp, ": cannot open for writing"));
    std::string out;
    out.reserve(std::size_t(1) << 21);
    auto flush = [&] {
        if (!out.empty() && gzwrite(f, out.data(), static_cast<unsigned>(out.size())) != static_cast<int>(out.size())) {
            gzclose(f);
            std::remove(tmp.c_str());
            throw io_error(oar::detail::concat(tmp, ": write failed"));
        }
        out.clear();
    };
    out += '[';
    for (std::size_t s = 0; s < 3; ++s) {
        const InMemoryDataset& d = data[static_cast<MnistJsonSplit>(s)];
        const std::size_t px = d.dims().size();
        const float* x = d.images().data();
        out += s ? ", [[" : "[[";
        for (std::size_t i = 0; i < d.size(); ++i) {
            out += i ? ", [" : "[";
            for (std::size_t k = 0; k < px; ++k) {
                const float v = x[i * px + k];
                if (!std::isfinite(v)) {
                    gzclose(f);
                    std::remove(tmp.c_str());
                    throw value_error(oar::detail::concat("write_mnist_json: split ", s, " (",
                                                     split_name(static_cast<MnistJsonSplit>(s)), "), image ", i,
                                                     ", value ", k, " is not finite"));
                }
                if (k) out += ", ";
                json_detail::append_course_float(out, v);
            }
            out += ']';
            if (out.size() >= (std::size_t(1) << 20)) flush();
        }
        out += "], [";
        for (std::size_t i = 0; i < d.size(); ++i) {
            if (i) out += ", ";
            out += std::to_string(d.labels()[i]);
        }
        out += "]]";
    }
    out += ']';
    flush();
    if (gzclose(f) != Z_OK) {
        std::remove(tmp.c_str());
        throw io_error(oar::detail::concat(tmp, ": write failed when closing"));
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        throw io_error(oar::detail::concat(path, ": cannot rename ", tmp, " to it"));
    }
}

}  // namespace oar::data
