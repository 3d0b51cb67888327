"""Reference statistics for tests/nn/test_hooks.cpp: numpy computes what LayerStats reports.

usage: tensor_stats.py VALUES.f32 SIZES.txt
VALUES.f32 holds float32 blocks back to back, SIZES.txt their lengths, one per line. Prints, per
block, "count mean std min max non_finite" where mean/std (ddof=0)/min/max are over the finite
values, computed in float64 ("nan" when a block has no finite value).
"""
import sys

import numpy as np

values = np.fromfile(sys.argv[1], dtype=np.float32)
sizes = [int(line) for line in open(sys.argv[2]) if line.strip()]
assert sum(sizes) == values.size, (sum(sizes), values.size)
offset = 0
for n in sizes:
    block = values[offset:offset + n].astype(np.float64)
    offset += n
    finite = block[np.isfinite(block)]
    if finite.size:
        stats = (finite.mean(), finite.std(), finite.min(), finite.max())
    else:
        stats = (float("nan"),) * 4
    print(n, *(repr(float(s)) for s in stats), int(block.size - finite.size))
