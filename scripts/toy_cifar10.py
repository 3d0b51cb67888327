#!/usr/bin/env python3
"""Writes a small learnable data set in CIFAR-10's binary layout, for trying train_cifar10 where the
real CIFAR-10 cannot be downloaded: OUT/cifar-10-batches-bin/data_batch_1.bin .. data_batch_5.bin
(PER records each) and test_batch.bin (TEST records). A record is a label byte, then the R, G and B
planes of a 32x32 picture; class k is a bright 8x8 square whose place (a 5 x 2 grid) and tint
depend on k, over noise (the same kind of pictures as tests/support/toy_cifar.hpp).
    usage: toy_cifar10.py OUT [PER=1000] [TEST=1000]
"""
import os
import random
import sys


def records(n: int, offset: int, rng: random.Random) -> bytes:
    out = bytearray()
    for i in range(n):
        k = (i * 3 + offset) % 10
        x0, y0 = 2 + 6 * (k % 5), 4 + 16 * (k // 5)
        out.append(k)
        for c in range(3):
            tint = 160 + (k * 37 + c * 50) % 96
            for y in range(32):
                for x in range(32):
                    inside = x0 <= x < x0 + 8 and y0 <= y < y0 + 8
                    out.append(tint if inside else 40 + rng.randrange(64))
    return bytes(out)


def main() -> None:
    out = os.path.join(sys.argv[1], "cifar-10-batches-bin")
    per = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    test = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    os.makedirs(out, exist_ok=True)
    rng = random.Random(0)
    for b in range(1, 6):
        with open(os.path.join(out, f"data_batch_{b}.bin"), "wb") as f:
            f.write(records(per, b, rng))
    with open(os.path.join(out, "test_batch.bin"), "wb") as f:
        f.write(records(test, 0, rng))
    print(f"wrote {out}: {5 * per} training and {test} test records")


if __name__ == "__main__":
    main()
