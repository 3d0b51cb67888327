#!/usr/bin/env python3
"""Pillow's side of tests/io/test_image.cpp: writes pictures of every kind oar::io::read_image takes
(PNG grey, grey + alpha, RGB, RGBA, palette, 16-bit grey; JPEG grey, colour 4:2:0 and
4:4:4, progressive, CMYK) into OUT, each with Pillow's own grey reading of it beside it
(NAME.grey: raw 8-bit rows, what convert("L") gives after compositing any transparency over
white), and one picture with the exact area resampling of it to 28x28 computed independently
(an integral image of the piecewise-constant picture, linearly interpolated: NAME.area28, float64
rows).   usage: pictures_reference.py OUT
"""
import os
import sys

import numpy as np
from PIL import Image

out = sys.argv[1]
rng = np.random.default_rng(7)
w, h = 37, 45
# Smooth shapes plus noise, so JPEG's blocks and chroma subsampling have something to do.
yy, xx = np.mgrid[0:h, 0:w]
r = (128 + 100 * np.sin(xx / 5.0) + rng.integers(-20, 20, (h, w))).clip(0, 255).astype(np.uint8)
g = (128 + 100 * np.cos(yy / 7.0) + rng.integers(-20, 20, (h, w))).clip(0, 255).astype(np.uint8)
b = ((xx * 255) // w).astype(np.uint8)
a = ((yy * 255) // h).astype(np.uint8)
rgb = np.stack([r, g, b], axis=2)
grey = r


def grey_of(im):
    """Pillow's grey reading: transparency composited over white, then convert("L")."""
    if im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info):
        im = im.convert("RGBA")
        white = Image.new("RGBA", im.size, (255, 255, 255, 255))
        im = Image.alpha_composite(white, im)
    if im.mode == "I;16" or im.mode == "I":
            # Pillow would clip; the 8-bit value nearest (v / 257, rounded) is what libpng and oar give
        return (np.asarray(im, dtype=np.float64) / 257.0).round().clip(0, 255).astype(np.uint8)
    return np.asarray(im.convert("L"), dtype=np.uint8)


def save(name, im, **kw):
    path = os.path.join(out, name)
    im.save(path, **kw)
    with Image.open(path) as back:
        back.load()
        g8 = grey_of(back)
    g8.tofile(path + ".grey")


save("grey.png", Image.fromarray(grey))
save("grey_alpha.png", Image.fromarray(np.stack([grey, a], axis=2)))
save("rgb.png", Image.fromarray(rgb))
save("rgba.png", Image.fromarray(np.concatenate([rgb, a[:, :, None]], axis=2)))
save("palette.png", Image.fromarray(rgb).quantize(16))
save("grey16.png", Image.fromarray((grey.astype(np.uint16) * 257 + 100).astype(np.uint16)))
save("grey.jpg", Image.fromarray(grey), quality=90)
save("rgb420.jpg", Image.fromarray(rgb), quality=90, subsampling=2)
save("rgb444.jpg", Image.fromarray(rgb), quality=95, subsampling=0)
save("progressive.jpg", Image.fromarray(rgb), quality=85, progressive=True)
save("cmyk.jpg", Image.fromarray(rgb).convert("CMYK"), quality=95)

# Exact area resampling 37x45 -> 28x28 of grey.png, by integral images: the integral of a
# piecewise-constant function is piecewise linear, so the mean over [a, b) is
# (F(b) - F(a)) / (b - a) with F interpolated linearly between its values at whole pixels.
def area_1d(v, n_out):
    n = v.shape[0]
    F = np.concatenate([np.zeros((1,) + v.shape[1:]), np.cumsum(v, axis=0)], axis=0)
    edges = np.arange(n_out + 1) * (n / n_out)
    Fe = np.stack([np.interp(edges, np.arange(n + 1), F[:, j]) for j in range(F.shape[1])], axis=1)
    return (Fe[1:] - Fe[:-1]) / (n / n_out)


g = grey.astype(np.float64)
area = area_1d(area_1d(g, 28).T, 28).T  # rows, then columns
area.astype(np.float64).tofile(os.path.join(out, "grey.png.area28"))
print("ok", w, h)
