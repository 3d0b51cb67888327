// A tensor of an element type safetensors files cannot hold in oar (char: neither I8 nor U8).
// first-error: oar: safetensors element types are float, double, int64_t, int32_t, uint8_t
// expect: dtype_of\(\) \[with T = char\]
#include <span>  // std::span

#include <oar/io/safetensors.hpp>

const char text[] = "abc";
const auto ref = oar::io::TensorRef::of<char>("text", {3}, std::span<const char>(text, 3));
