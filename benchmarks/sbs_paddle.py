"""One side-by-side job in PaddlePaddle (pip `paddlepaddle`, CPU): the same models, data shapes,
optimizer and timing as sbs_oar.cpp. Run by benchmarks/side_by_side.sh from its own venv.
    python sbs_paddle.py <cnn|mlp|mynet|resnet8> <train|infer> <threads> <batch> <steps>
    -> "img_per_sec=<best of 3 rounds> peak_rss_mb=<ru_maxrss>"
"""
import resource
import sys
import time

import numpy as np
import paddle


class Residual(paddle.nn.Layer):
    """body(x) + shortcut(x) (the identity without a shortcut), as oar's Residual block."""

    def __init__(self, body, shortcut=None):
        super().__init__()
        self.body = body
        self.shortcut = shortcut if shortcut is not None else paddle.nn.Identity()

    def forward(self, x):
        return self.body(x) + self.shortcut(x)


def conv3x3(cin, cout, stride=1):
    return paddle.nn.Conv2D(cin, cout, 3, stride=stride, padding=1, bias_attr=False)


def basic_block(c):
    nn = paddle.nn
    return Residual(nn.Sequential(conv3x3(c, c), nn.BatchNorm2D(c), nn.ReLU(), conv3x3(c, c), nn.BatchNorm2D(c)))


def down_block(cin, cout):
    nn = paddle.nn
    return Residual(nn.Sequential(conv3x3(cin, cout, 2), nn.BatchNorm2D(cout), nn.ReLU(), conv3x3(cout, cout),
                                  nn.BatchNorm2D(cout)),
                    nn.Sequential(nn.Conv2D(cin, cout, 1, stride=2, bias_attr=False), nn.BatchNorm2D(cout)))


def make_model(name):
    nn = paddle.nn
    if name == "cnn":  # course::CNN
        return nn.Sequential(nn.Conv2D(1, 20, 5, padding=2), nn.ReLU(), nn.MaxPool2D(2),
                             nn.Conv2D(20, 20, 5, padding=2), nn.ReLU(), nn.MaxPool2D(2),
                             nn.Flatten(), nn.Linear(980, 10))
    if name == "mlp":  # course::MLP
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Dropout(0.2), nn.Linear(512, 10))
    if name == "mynet":  # course::MyNet, the fleet chapter's CIFAR-10 net
        return nn.Sequential(nn.Conv2D(3, 32, 3), nn.ReLU(), nn.MaxPool2D(2), nn.Conv2D(32, 64, 3), nn.ReLU(),
                             nn.MaxPool2D(2), nn.Conv2D(64, 64, 3), nn.ReLU(), nn.Flatten(),
                             nn.Linear(1024, 64), nn.ReLU(), nn.Linear(64, 10))
    if name == "resnet8":  # models::ResNet8<16>
        return nn.Sequential(conv3x3(3, 16), nn.BatchNorm2D(16), nn.ReLU(), basic_block(16), nn.ReLU(),
                             basic_block(16), nn.ReLU(), down_block(16, 32), nn.ReLU(),
                             nn.AdaptiveAvgPool2D(1), nn.Flatten(), nn.Linear(32, 10))
    sys.exit(f"sbs_paddle: unknown model {name}")


def main():
    model, mode, threads, batch, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    paddle.set_device("cpu")
    paddle.seed(1)
    net = make_model(model)
    opt = paddle.optimizer.Adam(learning_rate=1e-3, parameters=net.parameters())
    shape = (3, 32, 32) if model in ("mynet", "resnet8") else (1, 28, 28)
    x = paddle.to_tensor(np.random.default_rng(5).random((batch, *shape), dtype=np.float32))
    y = paddle.to_tensor((np.arange(batch) % 10).astype(np.int64))
    train = mode == "train"
    if not train:
        net.eval()

    def step():
        if train:
            loss = paddle.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            opt.clear_grad()
        else:
            with paddle.no_grad():
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
    print(f"img_per_sec={best:.0f} peak_rss_mb={rss:.1f}")


if __name__ == "__main__":
    main()
