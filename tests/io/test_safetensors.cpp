// Tests of include/oar/io/safetensors.hpp: round trips of every dtype, the byte layout, files cut at
// every byte, corrupted headers (each refused with a format_error naming the file, the key and the
// byte offset), and both directions against the `safetensors` python package (OAR_PYTHON).
#include <doctest/doctest.h>  // TEST_CASE, CHECK, REQUIRE

#include <cstddef>     // std::size_t, std::byte
#include <cstdint>     // fixed-width integers
#include <cstring>     // std::memcpy
#include <filesystem>  // std::filesystem::file_size, exists
#include <fstream>     // std::ofstream: python scripts
#include <map>         // std::map: metadata
#include <new>         // std::bad_alloc: what trusting a claimed size would throw under RLIMIT_AS
#include <string>      // std::string
#include <vector>      // std::vector

#include <sys/resource.h>  // ::setrlimit, RLIMIT_AS: the address-space limit of the child
#include <sys/wait.h>      // ::waitpid
#include <unistd.h>        // ::fork, ::_exit

#include <oar/io/safetensors.hpp>  // under test

#include "support/errors.hpp"    // oar_test::message_of, contains
#include "support/process.hpp"   // oar_test::run_command: the python cross-checks
#include "support/python.hpp"   // oar_test::skip_without_python: no test venv
#include "support/temp_dir.hpp"  // oar_test::TempDir

namespace {

using oar::io::Dtype;
using oar::io::TensorRef;
using oar_test::contains;
using oar_test::message_of;
using oar_test::TempDir;

// Deterministic values both C++ and the python scripts compute: v(i) for element i.
template <class T>
std::vector<T> pattern(std::size_t n, int which) {
    std::vector<T> v(n);
    for (std::size_t i = 0; i < n; ++i) {
        const auto k = static_cast<long long>(i);
        if constexpr (std::is_floating_point_v<T>) v[i] = static_cast<T>(k * 0.25 - 3.5 + which);
        else if constexpr (std::is_same_v<T, std::uint8_t>) v[i] = static_cast<T>((k * 37 + which) % 256);
        else v[i] = static_cast<T>((k - 5) * 1000003LL * (which + 1));
    }
    return v;
}

struct Sample {
    std::vector<float> f32 = pattern<float>(24, 0);
    std::vector<double> f64 = pattern<double>(6, 1);
    std::vector<std::int64_t> i64 = pattern<std::int64_t>(5, 2);
    std::vector<std::int32_t> i32 = pattern<std::int32_t>(8, 3);
    std::vector<std::uint8_t> u8 = pattern<std::uint8_t>(7, 4);
    std::vector<float> scalar{42.0f};

    std::vector<TensorRef> refs() const {
        return {TensorRef::of<float>("layer.0.weight", {2, 3, 4}, f32),
                TensorRef::of<double>("f64", {2, 3}, f64),
                TensorRef::of<std::int64_t>("i64", {5}, i64),
                TensorRef::of<std::int32_t>("i32", {2, 2, 2}, i32),
                TensorRef::of<std::uint8_t>("u8", {7}, u8),
                TensorRef::of<float>("scalar", {}, scalar),
                TensorRef::of<float>("empty", {0, 3}, std::span<const float>())};
    }
    std::map<std::string, std::string> metadata() const {
        return {{"format", "pt"}, {"note", "quote \" backslash \\ newline \n tab \t caf\xc3\xa9"}, {"epoch", "3"}};
    }
};

std::vector<std::byte> file_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::byte> b(c.size());
    if (!c.empty()) std::memcpy(b.data(), c.data(), c.size());
    return b;
}
void write_bytes(const std::string& path, const std::vector<std::byte>& b) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}
/// A file with the given header text (length prefix computed) and data bytes.
std::vector<std::byte> make_file(const std::string& header, std::size_t data_bytes) {
    std::vector<std::byte> b(8 + header.size() + data_bytes, std::byte{0});
    const std::uint64_t n = header.size();
    std::memcpy(b.data(), &n, 8);
    std::memcpy(b.data() + 8, header.data(), header.size());
    return b;
}
std::string parse_error(const std::string& header, std::size_t data_bytes) {
    return message_of<oar::format_error>([&] { (void)oar::io::parse_safetensors(make_file(header, data_bytes), "mem.safetensors"); });
}

}  // namespace

TEST_CASE("every dtype round-trips through a file with its shape, values and metadata") {
    TempDir dir;
    const std::string path = dir.file("all.safetensors");
    const Sample s;
    oar::io::write_safetensors(path, s.refs(), s.metadata());
    const auto st = oar::io::read_safetensors(path);
    CHECK(st.metadata() == s.metadata());
    REQUIRE(st.tensors().size() == 7);
    CHECK(st.at("layer.0.weight").shape == std::vector<std::uint64_t>{2, 3, 4});
    CHECK(st.at("layer.0.weight").dtype == Dtype::F32);
    CHECK(st.values<float>("layer.0.weight") == s.f32);
    CHECK(st.values<double>("f64") == s.f64);
    CHECK(st.values<std::int64_t>("i64") == s.i64);
    CHECK(st.values<std::int32_t>("i32") == s.i32);
    CHECK(st.values<std::uint8_t>("u8") == s.u8);
    CHECK(st.values<float>("scalar") == s.scalar);
    CHECK(st.at("scalar").shape.empty());
    CHECK(st.values<float>("empty").empty());
    CHECK(st.find("missing") == nullptr);
    CHECK(contains(message_of<oar::value_error>([&] { (void)st.values<double>("i64"); }), "'i64' is I64, asked for F64"));
    CHECK(contains(message_of<oar::value_error>([&] { (void)st.at("nope"); }), "no tensor named 'nope'"));
}

TEST_CASE("the header is padded with spaces so that the data starts at a multiple of 8") {
    TempDir dir;
    const std::string path = dir.file("pad.safetensors");
    const std::vector<float> v{1, 2, 3};
    oar::io::write_safetensors(path, {TensorRef::of<float>("w", {3}, v)});
    const auto b = file_bytes(path);
    std::uint64_t n = 0;
    std::memcpy(&n, b.data(), 8);
    CHECK(n % 8 == 0);
    CHECK(b.size() == 8 + n + 12);
    CHECK(static_cast<char>(b[8]) == '{');
    CHECK(static_cast<char>(b[8 + n - 1]) == ' ');
    float back[3];
    std::memcpy(back, b.data() + 8 + n, 12);
    CHECK(back[2] == 3.0f);
}

TEST_CASE("a file cut at every byte is refused with a format_error naming the file") {
    TempDir dir;
    const std::string path = dir.file("full.safetensors");
    const Sample s;
    oar::io::write_safetensors(path, s.refs(), s.metadata());
    const auto full = file_bytes(path);
    const std::string cut = dir.file("cut.safetensors");
    std::size_t refused = 0;
    for (std::size_t len = 0; len < full.size(); ++len) {
        write_bytes(cut, std::vector<std::byte>(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(len)));
        const std::string msg = message_of<oar::format_error>([&] { (void)oar::io::read_safetensors(cut); });
        if (contains(msg, cut)) ++refused;
        else FAIL_CHECK("cut at " << len << ": " << msg);
    }
    CHECK(refused == full.size());
}

TEST_CASE("corrupted headers are refused with errors naming the key and the byte offset") {
    const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    CHECK_NOTHROW((void)oar::io::parse_safetensors(make_file(ok, 8), "mem"));

    SUBCASE("bad JSON") {
        CHECK(contains(parse_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},})", 8), "byte"));
        CHECK(contains(parse_error(R"({"a":{"dtype":"F32","shape":[2,],"data_offsets":[0,8]}})", 8), "header byte 39: expected a non-negative integer"));
        CHECK(contains(parse_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", 8), "the header ends here"));
        CHECK(contains(parse_error(R"(["a"])", 0), "must be a JSON object"));
        CHECK(contains(parse_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} x)", 8), "unexpected bytes after"));
        CHECK(contains(parse_error(R"({"a":{"dtype":"F32","shape":[02],"data_offsets":[0,8]}})", 8), "leading zero"));
        CHECK(contains(parse_error(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), "non-negative integer"));
        CHECK(contains(parse_error(R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", 8), "fraction"));
        CHECK(contains(parse_error(R"({"a":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,8]}})", 8), "2^64"));
        CHECK(contains(parse_error("{\"a\xff\":{}}", 0), "not valid UTF-8"));
        CHECK(contains(parse_error("{\"a\tb\":{}}", 0), "raw control character"));
        CHECK(contains(parse_error(R"({"a\q":{}})", 0), "unknown escape"));
        CHECK(contains(parse_error(R"({"\ud800":{}})", 0), "surrogate"));
    }
    SUBCASE("bad entries name the key") {
        CHECK(contains(parse_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 16),
                       "tensor 'a' appears twice"));
        CHECK(contains(parse_error(R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", 4), "tensor 'a': dtype 'F16' is not supported"));
        CHECK(contains(parse_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}})", 8), "tensor 'a': unknown field 'extra'"));
        CHECK(contains(parse_error(R"({"a":{"dtype":"F32","shape":[2]}})", 8), "tensor 'a': missing data_offsets"));
        CHECK(contains(parse_error(R"({"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8), "field 'dtype' appears twice"));
        CHECK(contains(parse_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,9]}})", 8), "more than 2 entries"));
        CHECK(contains(parse_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8), "end before they begin"));
        CHECK(contains(parse_error(R"({"":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8), "name is empty"));
        CHECK(contains(parse_error(R"({"a\u0001":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8), "control character"));
        CHECK(contains(parse_error(R"({"__metadata__":{"k":1}})", 0), "value of 'k' must be a string"));
    }
    SUBCASE("offsets must be contiguous, cover the data exactly and match the shape") {
        const std::string overlap = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
        CHECK(contains(parse_error(overlap, 12), "tensor 'b': data_offsets [4, 12] overlap"));
        const std::string hole = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})";
        CHECK(contains(parse_error(hole, 20), "tensor 'b': data_offsets [12, 20] leave a hole"));
        const std::string late = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
        CHECK(contains(parse_error(late, 12), "leave a hole"));
        CHECK(contains(parse_error(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
                       "tensor 'a': shape [3] of F32 needs 12 bytes, data_offsets [0, 8] hold 8"));
        CHECK(contains(parse_error(ok, 16), "8 bytes after the last tensor's data belong to no tensor"));
        CHECK(contains(parse_error(ok, 4), "reach past the end of the file"));
        CHECK(contains(parse_error(R"({"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8), "overflows"));
    }
    SUBCASE("a huge or impossible header length is refused before allocating") {
        auto b = make_file(ok, 8);
        const std::uint64_t huge = 1ull << 62;
        std::memcpy(b.data(), &huge, 8);
        CHECK(contains(message_of<oar::format_error>([&] { (void)oar::io::parse_safetensors(b, "mem"); }), "more than the limit"));
        const std::uint64_t past = b.size();
        std::memcpy(b.data(), &past, 8);
        CHECK(contains(message_of<oar::format_error>([&] { (void)oar::io::parse_safetensors(b, "mem"); }), "truncated?"));
        CHECK(contains(message_of<oar::format_error>([&] { (void)oar::io::parse_safetensors(std::vector<std::byte>(5), "mem"); }),
                       "too short"));
    }
}

TEST_CASE("the writer refuses bad names and shapes that do not match the data, leaving no file") {
    TempDir dir;
    const std::string path = dir.file("bad.safetensors");
    const std::vector<float> v{1, 2, 3};
    CHECK(contains(message_of<oar::value_error>([&] { oar::io::write_safetensors(path, {TensorRef::of<float>("w", {2, 2}, v)}); }),
                   "'w' has shape [2, 2] of F32 (16 bytes) but 12 bytes"));
    CHECK(contains(message_of<oar::value_error>([&] {
                       oar::io::write_safetensors(path, {TensorRef::of<float>("w", {3}, v), TensorRef::of<float>("w", {3}, v)});
                   }),
                   "given twice"));
    CHECK(contains(message_of<oar::value_error>([&] { oar::io::write_safetensors(path, {TensorRef::of<float>("a\nb", {3}, v)}); }),
                   "control character"));
    CHECK_FALSE(std::filesystem::exists(path));
    CHECK(std::filesystem::is_empty(dir.path));
}

TEST_CASE("a missing file or a folder is an io_error naming it") {
    TempDir dir;
    CHECK(contains(message_of<oar::io_error>([&] { (void)oar::io::read_safetensors(dir.file("none.safetensors")); }), "none.safetensors"));
    CHECK(contains(message_of<oar::io_error>([&] { (void)oar::io::read_safetensors(dir.path.string()); }), "is a folder"));
}

TEST_CASE("the safetensors python package reads our files with equal values and metadata") {
    if (oar_test::skip_without_python("numpy, safetensors")) return;
    TempDir dir;
    const std::string path = dir.file("ours.safetensors");
    const Sample s;
    oar::io::write_safetensors(path, s.refs(), s.metadata());
    const std::string script = dir.file("check.py");
    std::ofstream(script) << R"PY(
import sys, numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file
t = load_file(sys.argv[1])
def pat(n, which, dt):
    k = np.arange(n, dtype=np.int64)
    if dt in (np.float32, np.float64): return (k * 0.25 - 3.5 + which).astype(dt)
    if dt == np.uint8: return ((k * 37 + which) % 256).astype(dt)
    return ((k - 5) * 1000003 * (which + 1)).astype(dt)
exp = {"layer.0.weight": pat(24, 0, np.float32).reshape(2, 3, 4), "f64": pat(6, 1, np.float64).reshape(2, 3),
       "i64": pat(5, 2, np.int64), "i32": pat(8, 3, np.int32).reshape(2, 2, 2), "u8": pat(7, 4, np.uint8),
       "scalar": np.array(42.0, dtype=np.float32), "empty": np.zeros((0, 3), np.float32)}
assert sorted(t) == sorted(exp), sorted(t)
for k, v in exp.items():
    assert t[k].dtype == v.dtype and t[k].shape == v.shape and np.array_equal(t[k], v), k
with safe_open(sys.argv[1], "np") as f:
    m = f.metadata()
assert m == {"format": "pt", "note": "quote \" backslash \\ newline \n tab \t caf\u00e9", "epoch": "3"}, m
print("python-read-ok", len(t))
)PY";
    const auto r = oar_test::run_command(std::string(OAR_PYTHON) + " " + script + " " + path + " 2>&1");
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(contains(r.output, "python-read-ok 7"));
}

TEST_CASE("we read files that safetensors.torch.save_file writes, and refuse its F16 naming key and dtype") {
    if (oar_test::skip_without_python("torch, safetensors")) return;
    TempDir dir;
    const std::string path = dir.file("torch.safetensors"), f16 = dir.file("f16.safetensors");
    const std::string script = dir.file("write.py");
    std::ofstream(script) << R"PY(
import sys, torch
from safetensors.torch import save_file
def pat(n, which, dt):
    k = torch.arange(n, dtype=torch.int64)
    if dt in (torch.float32, torch.float64): return (k.double() * 0.25 - 3.5 + which).to(dt)
    if dt == torch.uint8: return ((k * 37 + which) % 256).to(dt)
    return ((k - 5) * 1000003 * (which + 1)).to(dt)
save_file({"conv.weight": pat(24, 0, torch.float32).reshape(2, 3, 4), "f64": pat(6, 1, torch.float64).reshape(2, 3),
           "i64": pat(5, 2, torch.int64), "i32": pat(8, 3, torch.int32).reshape(2, 2, 2), "u8": pat(7, 4, torch.uint8)},
          sys.argv[1], metadata={"source": "torch"})
save_file({"ok": torch.zeros(2), "half.weight": torch.zeros(3, dtype=torch.float16)}, sys.argv[2])
print("written")
)PY";
    const auto r = oar_test::run_command(std::string(OAR_PYTHON) + " " + script + " " + path + " " + f16 + " 2>&1");
    INFO(r.output);
    REQUIRE(r.status == 0);
    const auto st = oar::io::read_safetensors(path);
    CHECK(st.metadata().at("source") == "torch");
    CHECK(st.values<float>("conv.weight") == pattern<float>(24, 0));
    CHECK(st.at("conv.weight").shape == std::vector<std::uint64_t>{2, 3, 4});
    CHECK(st.values<double>("f64") == pattern<double>(6, 1));
    CHECK(st.values<std::int64_t>("i64") == pattern<std::int64_t>(5, 2));
    CHECK(st.values<std::int32_t>("i32") == pattern<std::int32_t>(8, 3));
    CHECK(st.values<std::uint8_t>("u8") == pattern<std::uint8_t>(7, 4));
    const std::string msg = message_of<oar::format_error>([&] { (void)oar::io::read_safetensors(f16); });
    CHECK(contains(msg, f16));
    CHECK(contains(msg, "tensor 'half.weight': dtype 'F16' is not supported"));
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)  // their shadow memory needs terabytes of address space
TEST_CASE("huge claimed sizes are refused within 400 MB of address space (a child under RLIMIT_AS), never allocated") {
    TempDir dir;
    const std::string path = dir.file("claims.safetensors");
    // Exit status: 0 every claim refused with format_error, 1 one was accepted, 2 bad_alloc (a claim was trusted).
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        const rlimit lim{400ull << 20, 400ull << 20};
        ::setrlimit(RLIMIT_AS, &lim);
        const std::vector<std::vector<std::byte>> files{
            make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8),
            make_file(R"({"a":{"dtype":"F64","shape":[1000000000,1000],"data_offsets":[0,8000000000000]}})", 64),
            make_file(R"({"a":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,18446744073709551615]}})", 64),
        };
        int status = 0;
        for (std::size_t k = 0; k < files.size(); ++k) {
            auto b = files[k];
            if (k == 0) {
                const std::uint64_t claim = oar::io::max_header_bytes - 8;  // under the cap, beyond the file
                std::memcpy(b.data(), &claim, 8);
            }
            write_bytes(path, b);
            try {
                (void)oar::io::read_safetensors(path);
                status = 1;
            } catch (const oar::format_error&) {
            } catch (const std::bad_alloc&) {
                status = 2;
            }
        }
        ::_exit(status);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}
#endif
