// Reading back what a program or logger printed: a FILE*'s whole text, occurrences of a string.
#pragma once

#include <cstddef>  // std::size_t
#include <cstdio>   // std::FILE, std::fflush, std::rewind, std::fgetc
#include <string>   // std::string

namespace oar_test {

/// Everything written to `f` so far (flushed, rewound, read to the end).
inline std::string read_all(std::FILE* f) {
    std::fflush(f);
    std::rewind(f);
    std::string s;
    for (int c; (c = std::fgetc(f)) != EOF;) s += static_cast<char>(c);
    return s;
}

/// How many times `what` occurs in `s` (overlapping occurrences counted).
inline std::size_t count(const std::string& s, const std::string& what) {
    std::size_t n = 0;
    for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
    return n;
}

}  // namespace oar_test
