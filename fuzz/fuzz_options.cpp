// libFuzzer target for examples/app/train_options.hpp (train_mnist's flags).
// Input: NUL-separated arguments (argv without the program name).
// oar::usage_error is the expected rejection; any other exception, a crash or a sanitizer report
// is a finding. A successful parse must be within the documented bounds.
#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint8_t
#include <string>   // std::string
#include <vector>   // std::vector

#include <oar/core/error.hpp>  // oar::usage_error: the expected rejection

#include "app/train_options.hpp"  // under test (examples/app/, through oar_app)

#include "fuzz_common.hpp"  // oar_fuzz::require

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::vector<std::string> args(1);
    for (std::size_t i = 0; i < size; ++i) {
        if (data[i] == 0) args.emplace_back();
        else args.back() += static_cast<char>(data[i]);
    }
    if (args.size() > 64) return 0;
    try {
        const auto o = oar::parse_train_options(args);
        if (!o) return 0;  // --help
        oar_fuzz::require(o->epochs >= 1 && o->epochs <= 1000000);
        oar_fuzz::require(o->batch_size >= 1 && o->batch_size <= (std::size_t{1} << 24));
        oar_fuzz::require(o->workers <= 1024);
        oar_fuzz::require(o->lr >= 0.0f && o->l2 >= 0.0f);
        oar_fuzz::require(o->model == "linear" || o->model == "sigmoid-mlp" || o->model == "mlp" || o->model == "cnn");
        oar_fuzz::require(o->lr_schedule.gamma > 0.0 && o->lr_schedule.gamma < 1.0);
    } catch (const oar::usage_error&) {
    }
    return 0;
}
