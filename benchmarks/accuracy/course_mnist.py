"""MNIST-layout IDX reading for the reference scripts (paddle_course_cnn.py, torch_course_cnn.py):
the course's split (the first 50,000 training images; the 10,000 t10k images as test) and its
normalisation, with gzip + numpy only."""

import gzip
import os

import numpy as np


def read_idx(path):
    """Read a gzip-compressed IDX file (magic 2049 labels / 2051 images)."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    if magic == 2049:
        n = int.from_bytes(data[4:8], "big")
        return np.frombuffer(data, dtype=np.uint8, count=n, offset=8)
    if magic == 2051:
        n, rows, cols = (int.from_bytes(data[i:i + 4], "big") for i in (4, 8, 12))
        return np.frombuffer(data, dtype=np.uint8, count=n * rows * cols, offset=16).reshape(n, rows, cols)
    raise ValueError(f"{path}: bad IDX magic {magic}")


def load_split(data_dir, prefix, count, norm):
    """The first `count` images of `prefix` ("train" or "t10k") as float32 [N,1,28,28] and int64
    labels; norm "course": x/127.5 - 1, "meanstd": (x/255 - 0.1307)/0.3081."""
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))[:count]
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))[:count]
    x = images.astype(np.float32)
    if norm == "course":
        x = x / np.float32(127.5) - np.float32(1.0)
    else:
        x = (x / np.float32(255.0) - np.float32(0.1307)) / np.float32(0.3081)
    return x.reshape(-1, 1, 28, 28).astype(np.float32), labels.astype(np.int64)
