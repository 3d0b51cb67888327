#!/usr/bin/env python3
"""The course CNN in PyTorch (nn.Sequential with the same layer indices as oar's course::CNN), for
tests/train/test_checkpoint.cpp. Two modes, both on safetensors files:

  check WEIGHTS IO   load oar's weights (saved with WeightLayout::torch) with
                     model.load_state_dict(safetensors.torch.load_file(WEIGHTS)), run IO's "x" and
                     compare with oar's "logits": prints "max_abs_err=... scale=... rel=..." and exits
                     1 if rel > 1e-5 (rel = max|torch - oar| / max|torch|, as tests/torch does).
  make WEIGHTS IO    torch-initialised model trained 3 Adam steps on random data (seed 7); writes its
                     state_dict with safetensors.torch.save_file (no oar metadata) to WEIGHTS, and a
                     batch "x" with torch's "logits" to IO, for oar to load and compare.
"""
import sys

import torch
from safetensors.torch import load_file, save_file


def course_cnn() -> torch.nn.Sequential:
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 20, 5, 1, 2), torch.nn.ReLU(), torch.nn.MaxPool2d(2, 2),
        torch.nn.Conv2d(20, 20, 5, 1, 2), torch.nn.ReLU(), torch.nn.MaxPool2d(2, 2),
        torch.nn.Flatten(), torch.nn.Linear(980, 10))


def main() -> int:
    mode, weights, io = sys.argv[1], sys.argv[2], sys.argv[3]
    torch.set_num_threads(1)
    model = course_cnn()
    if mode == "check":
        model.load_state_dict(load_file(weights))  # strict: every key, every shape
        data = load_file(io)
        with torch.no_grad():
            logits = model.eval()(data["x"])
        err = (logits - data["logits"]).abs().max().item()
        scale = logits.abs().max().item()
        rel = err / max(scale, 1e-30)
        print(f"max_abs_err={err:.3e} scale={scale:.3e} rel={rel:.3e}")
        return 0 if rel <= 1e-5 else 1
    if mode == "make":
        torch.manual_seed(7)
        model = course_cnn()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for _ in range(3):
            x = torch.rand(16, 1, 28, 28)
            y = torch.randint(0, 10, (16,))
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, weights)
        x = torch.rand(8, 1, 28, 28)
        with torch.no_grad():
            logits = model.eval()(x)
        save_file({"x": x, "logits": logits}, io)
        print("made", sorted(model.state_dict()))
        return 0
    print("usage: torch_cnn_check.py check|make WEIGHTS IO", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
