// How a loss reduces per-element values: Paddle's and PyTorch's reduction="mean" | "sum".
#pragma once

namespace oar {

enum class Reduction { mean, sum };

}  // namespace oar
