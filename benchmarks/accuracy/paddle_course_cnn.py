#!/usr/bin/env python3
"""Reference run of PaddlePaddle's MNIST course CNN, for comparison with oar.

Trains the course's convolutional network in real PaddlePaddle (CPU) and
prints its top-1 test accuracy.  Not part of the oar build; needs
`pip install paddlepaddle numpy` (measured with paddlepaddle 3.3.1, numpy 2.4,
Python 3.11).

Setup (mirrors oar's course example):
  data   the four MNIST IDX .gz files (read with gzip + numpy, nothing is
         downloaded); train = first 50,000 training images (the course's
         mnist.json.gz split), test = the 10,000 t10k images
  input  float32 [N,1,28,28]; --norm course:  x/127.5 - 1
                              --norm meanstd: (x/255 - 0.1307)/0.3081
  model  Conv2D(1,20,5,1,2) -> ReLU -> MaxPool2D(2,2) ->
         Conv2D(20,20,5,1,2) -> ReLU -> MaxPool2D(2,2) -> Flatten -> Linear(980,10)
  init   --init paddle: Paddle defaults (conv W ~ N(0, sqrt(2/(in*k*k))),
                        linear W ~ XavierUniform, all biases 0)
         --init torch:  every W ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), biases 0
  loss   paddle.nn.functional.cross_entropy (mean) on the logits
  optim  Adam(lr=0.001, weight_decay=L2Decay(1e-5)), batch 100, reshuffled
         each epoch (numpy RandomState(seed)), last partial batch kept
  seed   paddle.seed(seed) (initialisation) and numpy seed (shuffling)

Usage:
  python3 benchmarks/accuracy/paddle_course_cnn.py --data ../shared/data/mnist \
      --seed 0 --norm course --init paddle --epochs 1
The last line printed is
  paddle: norm=... init=... seed=... epochs=... test_accuracy=... seconds=...
where seconds is the training wall time (all epochs, excluding evaluation).
"""

import argparse
import time

import numpy as np

from course_mnist import load_split  # benchmarks/accuracy/course_mnist.py


def build_model(paddle, init):
    nn = paddle.nn

    def attrs(fan_in):
        # None -> Paddle's own defaults; otherwise PyTorch-style uniform
        # weights and zero biases.
        if init == "paddle":
            return {}
        bound = 1.0 / np.sqrt(fan_in)
        return {
            "weight_attr": paddle.ParamAttr(
                initializer=nn.initializer.Uniform(-bound, bound)),
            "bias_attr": paddle.ParamAttr(
                initializer=nn.initializer.Constant(0.0)),
        }

    # Layers are created in this order, so the random draws for the
    # initialisation follow paddle.seed deterministically.
    return nn.Sequential(
        nn.Conv2D(1, 20, 5, stride=1, padding=2, **attrs(1 * 5 * 5)),
        nn.ReLU(),
        nn.MaxPool2D(kernel_size=2, stride=2),
        nn.Conv2D(20, 20, 5, stride=1, padding=2, **attrs(20 * 5 * 5)),
        nn.ReLU(),
        nn.MaxPool2D(kernel_size=2, stride=2),
        nn.Flatten(),
        nn.Linear(980, 10, **attrs(980)),
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="../shared/data/mnist")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--norm", choices=("course", "meanstd"), default="course")
    ap.add_argument("--init", choices=("paddle", "torch"), default="paddle")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=100)
    args = ap.parse_args()

    import paddle
    import paddle.nn.functional as F

    paddle.set_device("cpu")
    paddle.seed(args.seed)
    rng = np.random.RandomState(args.seed)

    train_x, train_y = load_split(args.data, "train", 50000, args.norm)
    test_x, test_y = load_split(args.data, "t10k", 10000, args.norm)

    model = build_model(paddle, args.init)
    opt = paddle.optimizer.Adam(
        learning_rate=0.001,
        parameters=model.parameters(),
        weight_decay=paddle.regularizer.L2Decay(1e-5))

    n = len(train_x)
    t0 = time.time()
    for epoch in range(args.epochs):
        model.train()
        order = rng.permutation(n)
        total, steps = 0.0, 0
        for start in range(0, n, args.batch):  # last partial batch kept
            idx = order[start:start + args.batch]
            x = paddle.to_tensor(train_x[idx])
            y = paddle.to_tensor(train_y[idx])
            loss = F.cross_entropy(model(x), y)  # mean over the batch
            loss.backward()
            opt.step()
            opt.clear_grad()
            total += float(loss)
            steps += 1
        print(f"epoch {epoch}: steps={steps} mean_train_loss={total / steps:.4f}",
              flush=True)
    seconds = time.time() - t0

    model.eval()
    correct = 0
    with paddle.no_grad():
        for start in range(0, len(test_x), 1000):
            logits = model(paddle.to_tensor(test_x[start:start + 1000]))
            pred = logits.numpy().argmax(axis=1)
            correct += int((pred == test_y[start:start + 1000]).sum())
    acc = correct / len(test_x)

    print(f"paddle: norm={args.norm} init={args.init} seed={args.seed} "
          f"epochs={args.epochs} test_accuracy={acc:.4f} seconds={seconds:.1f}")


if __name__ == "__main__":
    main()
