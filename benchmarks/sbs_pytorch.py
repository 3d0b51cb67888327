"""One side-by-side job in current PyTorch from PyPI (CPU): the same models, data shapes, optimizer
and timing as sbs_oar.cpp, in three variants: fp32, channels_last (the CNN's activations in NHWC,
oneDNN's preferred layout) and bf16 autocast (fp32 master weights). Run by
benchmarks/side_by_side.sh from its own venv (--pytorch-venv; see docs/BENCHMARKS.md).
    python sbs_pytorch.py <cnn|mlp|mynet|resnet8> <train|infer> <threads> <batch> <steps> [fp32|channels_last|bf16]
    -> "img_per_sec=<best of 3 rounds> peak_rss_mb=<ru_maxrss> variant=<variant>"
"""
import contextlib
import resource
import sys
import time

import torch
import torch.nn as nn


class Residual(nn.Module):
    """body(x) + shortcut(x) (the identity without a shortcut), as oar's Residual block."""

    def __init__(self, body, shortcut=None):
        super().__init__()
        self.body = body
        self.shortcut = shortcut if shortcut is not None else nn.Identity()

    def forward(self, x):
        return self.body(x) + self.shortcut(x)


def conv3x3(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)


def basic_block(c):
    return Residual(nn.Sequential(conv3x3(c, c), nn.BatchNorm2d(c), nn.ReLU(), conv3x3(c, c), nn.BatchNorm2d(c)))


def down_block(cin, cout):
    return Residual(nn.Sequential(conv3x3(cin, cout, 2), nn.BatchNorm2d(cout), nn.ReLU(), conv3x3(cout, cout),
                                  nn.BatchNorm2d(cout)),
                    nn.Sequential(nn.Conv2d(cin, cout, 1, stride=2, bias=False), nn.BatchNorm2d(cout)))


def make_model(name):
    if name == "cnn":  # course::CNN
        return nn.Sequential(nn.Conv2d(1, 20, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(20, 20, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(980, 10))
    if name == "mlp":  # course::MLP
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Dropout(0.2), nn.Linear(512, 10))
    if name == "mynet":  # course::MyNet, the fleet chapter's CIFAR-10 net
        return nn.Sequential(nn.Conv2d(3, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Conv2d(64, 64, 3), nn.ReLU(), nn.Flatten(),
                             nn.Linear(1024, 64), nn.ReLU(), nn.Linear(64, 10))
    if name == "resnet8":  # models::ResNet8<16>
        return nn.Sequential(conv3x3(3, 16), nn.BatchNorm2d(16), nn.ReLU(), basic_block(16), nn.ReLU(),
                             basic_block(16), nn.ReLU(), down_block(16, 32), nn.ReLU(),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    sys.exit(f"sbs_pytorch: unknown model {name}")


def main():
    model, mode, threads, batch, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    variant = sys.argv[6] if len(sys.argv) > 6 else "fp32"
    if variant not in ("fp32", "channels_last", "bf16"):
        sys.exit(f"sbs_pytorch: unknown variant {variant}")
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    net = make_model(model)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    shape = (3, 32, 32) if model in ("mynet", "resnet8") else (1, 28, 28)
    x = torch.rand(batch, *shape, generator=torch.Generator().manual_seed(5))
    y = torch.arange(batch) % 10
    if variant == "channels_last":
        net = net.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    train = mode == "train"
    if not train:
        net.eval()
    autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if variant == "bf16" else contextlib.nullcontext
    loss_fn = nn.CrossEntropyLoss()

    def step():
        if train:
            with autocast():
                loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=False)
        else:
            with torch.no_grad(), autocast():
                net(x)

    for _ in range(3):
        step()
    best = 0.0
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        best = max(best, batch * steps / (time.perf_counter() - t0))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"img_per_sec={best:.0f} peak_rss_mb={rss:.1f} variant={variant}")


if __name__ == "__main__":
    main()
