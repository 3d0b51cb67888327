"""Decodes a PNG with zlib and struct only (8-bit RGB or RGBA, non-interlaced, as Chromium writes
screenshots) and counts pixels, for tests/io/test_svg_plot.cpp:

  check_png.py FILE.png COLOR ...      (COLOR as rrggbb)

prints `size <w> <h>`, `nonwhite <count>`, then per colour `color <rrggbb> <left half> <right half>`:
pixels within 40 (sum of channel differences) of it in each half of the image.
"""
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit("not a PNG")
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        if zlib.crc32(kind + body) & 0xFFFFFFFF != crc:
            raise SystemExit("bad chunk CRC in " + kind.decode("latin-1"))
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
        pos += 12 + length
    w, hgt, depth, ctype, _, _, interlace = ihdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise SystemExit("unsupported PNG: depth %d colour type %d interlace %d" % (depth, ctype, interlace))
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(hgt):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + ((a + b) >> 1)) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
            elif f != 0:
                raise SystemExit("bad filter %d" % f)
        rows.append(line)
        prev = line
    return w, hgt, bpp, rows


w, hgt, bpp, rows = decode(sys.argv[1])
colors = [tuple(int(c[i:i + 2], 16) for i in (0, 2, 4)) for c in sys.argv[2:]]
nonwhite = 0
counts = [[0, 0] for _ in colors]
for y in range(hgt):
    line = rows[y]
    for x in range(w):
        r, g, b = line[x * bpp], line[x * bpp + 1], line[x * bpp + 2]
        if r + g + b < 3 * 250:
            nonwhite += 1
            for k, (cr, cg, cb) in enumerate(colors):
                if abs(r - cr) + abs(g - cg) + abs(b - cb) <= 40:
                    counts[k][0 if x < w // 2 else 1] += 1
print("size", w, hgt)
print("nonwhite", nonwhite)
for c, (left, right) in zip(sys.argv[2:], counts):
    print("color", c, left, right)
