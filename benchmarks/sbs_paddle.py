"""One side-by-side job in PaddlePaddle (pip `paddlepaddle`, CPU): the same models, data shapes,
optimizer and timing as sbs_oar.cpp. Run by benchmarks/side_by_side.sh from its own venv.
    python sbs_paddle.py <cnn|mlp> <train|infer> <threads> <batch> <steps>
    -> "img_per_sec=<best of 3 rounds> peak_rss_mb=<ru_maxrss>"
"""
import resource
import sys
import time

import numpy as np
import paddle


def make_model(name):
    nn = paddle.nn
    if name == "cnn":
        return nn.Sequential(nn.Conv2D(1, 20, 5, padding=2), nn.ReLU(), nn.MaxPool2D(2),
                             nn.Conv2D(20, 20, 5, padding=2), nn.ReLU(), nn.MaxPool2D(2),
                             nn.Flatten(), nn.Linear(980, 10))
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Dropout(0.2), nn.Linear(512, 10))


def main():
    model, mode, threads, batch, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    paddle.set_device("cpu")
    paddle.seed(1)
    net = make_model(model)
    opt = paddle.optimizer.Adam(learning_rate=1e-3, parameters=net.parameters())
    x = paddle.to_tensor(np.random.default_rng(5).random((batch, 1, 28, 28), dtype=np.float32))
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
