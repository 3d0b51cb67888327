#!/usr/bin/env python3
"""Reference run of PaddlePaddle's MNIST course CNN in PyTorch, for comparison with oar.

The same job as benchmarks/accuracy/paddle_course_cnn.py and `train_mnist` (the course's CNN, Adam 1e-3 with
L2 weight decay 1e-5, batch 100, the first 50,000 training images, tested on the 10,000 t10k
images), written with PyTorch's own defaults: nn.Conv2d / nn.Linear initialise weights and biases
U(-1/sqrt(fan_in), 1/sqrt(fan_in)); torch.optim.Adam's weight_decay adds coeff * p to the gradient,
as Paddle's L2Decay does. Uses Debian's python3-torch (the checkout's .venv sees it); nothing is
downloaded.

  data   the four MNIST-layout IDX .gz files in --data (MNIST or Fashion-MNIST)
  input  float32 [N,1,28,28]; --norm course: x/127.5 - 1; --norm meanstd: (x/255 - 0.1307)/0.3081
  order  reshuffled every epoch (numpy RandomState(seed)), the last partial batch kept
  seed   torch.manual_seed(seed) (initialisation) and the numpy seed (shuffling)

Usage:
  .venv/bin/python benchmarks/accuracy/torch_course_cnn.py --data ../shared/data/mnist --seed 0 --epochs 5 [--milestones 4]
  (--milestones 4: train_mnist's default schedule, the last of 5 epochs at a tenth of the rate)
The last line printed is
  torch: data=... norm=... seed=... epochs=... test_accuracy=... seconds=...
where seconds is the training wall time (all epochs, excluding evaluation).
"""

import argparse
import os
import time

import numpy as np

from course_mnist import load_split  # benchmarks/accuracy/course_mnist.py


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="../shared/data/mnist")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--norm", choices=("course", "meanstd"), default="course")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--milestones", default="",
                    help="comma-separated epochs where the rate is multiplied by --gamma "
                         "(torch.optim.lr_scheduler.MultiStepLR, stepped per epoch); empty: constant, the course's")
    ap.add_argument("--gamma", type=float, default=0.1)
    args = ap.parse_args()
    milestones = [int(m) for m in args.milestones.split(",") if m]

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(args.seed)
    rng = np.random.RandomState(args.seed)

    train_x, train_y = load_split(args.data, "train", 50000, args.norm)
    test_x, test_y = load_split(args.data, "t10k", 10000, args.norm)

    model = nn.Sequential(
        nn.Conv2d(1, 20, 5, stride=1, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(20, 20, 5, stride=1, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Flatten(), nn.Linear(980, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-5)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones, gamma=args.gamma) if milestones else None

    n = len(train_x)
    t0 = time.time()
    for epoch in range(args.epochs):
        model.train()
        order = rng.permutation(n)
        total, steps = 0.0, 0
        for start in range(0, n, args.batch):  # last partial batch kept
            idx = order[start:start + args.batch]
            loss = F.cross_entropy(model(torch.from_numpy(train_x[idx])), torch.from_numpy(train_y[idx]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss)
            steps += 1
        print(f"epoch {epoch}: steps={steps} mean_train_loss={total / steps:.4f} lr={opt.param_groups[0]['lr']:g}",
              flush=True)
        if sched:
            sched.step()
    seconds = time.time() - t0

    model.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, len(test_x), 1000):
            pred = model(torch.from_numpy(test_x[start:start + 1000])).argmax(dim=1).numpy()
            correct += int((pred == test_y[start:start + 1000]).sum())
    acc = correct / len(test_x)
    name = os.path.basename(os.path.normpath(args.data))
    print(f"torch: data={name} norm={args.norm} seed={args.seed} epochs={args.epochs} "
          f"milestones={args.milestones or 'none'} test_accuracy={acc:.4f} seconds={seconds:.1f}")


if __name__ == "__main__":
    main()
