// unique_file: a std::FILE* that closes itself on every path (std::fclose in the deleter), for the
// log writers that append to files they keep open (CSV, TensorBoard event files).
#pragma once

#include <cstdio>  // std::FILE, std::fclose
#include <memory>  // std::unique_ptr

namespace oar::io {

struct file_closer {
    void operator()(std::FILE* f) const noexcept { std::fclose(f); }
};
using unique_file = std::unique_ptr<std::FILE, file_closer>;

}  // namespace oar::io
