#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/: small valid and
near-valid inputs, each prefixed by the harness's mode byte (see the comment at the top of each
fuzz_*.cpp). Deterministic (fixed gzip mtime), standard library only (but fuzz_image's JPEG seeds: Pillow); every corpus stays well
under 100 KB. Run it again after changing a harness's input layout:  python3 fuzz/make_corpus.py
"""
import gzip
import io
import json
import os
import shutil
import struct
import zlib
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def gz(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9, mtime=0)


def write(target: str, name: str, data: bytes) -> None:
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


# ---- IDX -------------------------------------------------------------------------------------

def idx(dims, values: bytes) -> bytes:
    return bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + values


def idx_corpus() -> None:
    img = idx([2, 3, 3], bytes(range(18)))
    lab = idx([2], bytes([7, 3]))
    write("fuzz_idx", "raw_images", b"\x00" + img)
    write("fuzz_idx", "raw_labels", b"\x00" + lab)
    write("fuzz_idx", "rank4", b"\x00" + idx([1, 2, 2, 2], bytes(8)))
    write("fuzz_idx", "gzip_by_harness", b"\x01" + img)
    write("fuzz_idx", "gzip_in_input", b"\x00" + gz(img))
    write("fuzz_idx", "multi_member_gzip", b"\x00" + gz(img[:10]) + gz(img[10:]))
    write("fuzz_idx", "huge_claim", b"\x00" + idx([1000000000, 28, 28], bytes(16)))
    write("fuzz_idx", "truncated", b"\x00" + img[:-3])
    write("fuzz_idx", "bad_type", b"\x00" + bytes([0, 0, 9, 1, 0, 0, 0, 1, 5]))
    cut = len(img)
    pair = struct.pack("<H", cut) + img + lab
    write("fuzz_idx", "pair", b"\x02" + pair)
    write("fuzz_idx", "pair_gzip", b"\x03" + pair)
    write("fuzz_idx", "pair_bad_label", b"\x02" + struct.pack("<H", cut) + img + idx([2], bytes([7, 10])))


# ---- CIFAR-10 --------------------------------------------------------------------------------

NAMES = ["data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin",
         "test_batch.bin"]


def record(label: int, seed: int) -> bytes:
    return bytes([label]) + bytes((seed * 7 + k * 13 + (k // 1024) * 101) % 256 for k in range(3072))


def member(name: str, data: bytes, fmt=tarfile.USTAR_FORMAT, typ=tarfile.REGTYPE) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.type = typ
    info.mtime = 0
    head = info.tobuf(format=fmt, encoding="utf-8", errors="surrogateescape")
    pad = (-len(data)) % 512
    return head + data + b"\0" * pad


def archive(fmt=tarfile.USTAR_FORMAT, prefix="cifar-10-batches-bin/", order=range(6), extra=b"") -> bytes:
    out = extra
    for k in order:
        out += member(prefix + NAMES[k], record(k % 10, k), fmt)
    return out + b"\0" * 1024


def cifar_corpus() -> None:
    write("fuzz_cifar10", "batch_one_record", b"\x00" + record(3, 1))
    write("fuzz_cifar10", "batch_gzip_two_records", b"\x00" + gz(record(0, 2) + record(9, 3)))
    write("fuzz_cifar10", "batch_truncated", b"\x00" + record(3, 1)[:1000])
    write("fuzz_cifar10", "batch_bad_label", b"\x00" + bytes([10]) + record(3, 1)[1:])
    tar = archive()
    write("fuzz_cifar10", "archive_tar_gz", b"\x01" + gz(tar))
    write("fuzz_cifar10", "archive_gzip_by_harness", b"\x02" + tar)
    # GNU long names ('L') and pax path records, members in another order and one to skip.
    long_dir = "cifar-10-batches-bin/" + "x" * 120 + "/"
    gnu = member("README", b"not a batch\n") + archive(tarfile.GNU_FORMAT, long_dir, [5, 4, 3, 2, 1, 0])[:-1024]
    write("fuzz_cifar10", "archive_gnu_longnames_tar_gz", b"\x01" + gz(gnu + b"\0" * 1024))
    pax = archive(tarfile.PAX_FORMAT, long_dir)
    write("fuzz_cifar10", "archive_pax_tar_gz", b"\x01" + gz(pax))
    # Checksums fixed by the harness (mode 3): no end-of-archive blocks, a member claiming 100 GB.
    write("fuzz_cifar10", "archive_fixsum_no_end", b"\x03" + tar[:-1024])
    huge = bytearray(member("cifar-10-batches-bin/" + NAMES[0], b""))
    huge[124:136] = b"%011o\0" % (100 << 30)
    write("fuzz_cifar10", "archive_fixsum_huge_member", b"\x03" + bytes(huge) + record(1, 1)[:100])
    write("fuzz_cifar10", "archive_empty_gz", b"\x02")


# ---- mnist.json ------------------------------------------------------------------------------

def json_corpus() -> None:
    one = b"[[[[0.5], [1]], [3, 4]], [[[-1.0]], [9]], [[], []]]"
    four = (b"[[[[0.5, -1.0, 0.23529411852359772, 1e-3], [1, 2, 3, 4]], [3, 7.0]],\n"
            b" [[[-1, -1, -1, -1]], [9]],\n [[[0, 0, 0, 0]], [0]]]")
    write("fuzz_mnist_json", "one_value_images_blocks_of_4096", b"\x06" + one)
    write("fuzz_mnist_json", "one_value_images_blocks_of_1", b"\x00" + one)
    write("fuzz_mnist_json", "one_value_images_blocks_of_7_gzip", b"\x03" + one)
    write("fuzz_mnist_json", "four_value_images_blocks_of_64", b"\x0c" + four)
    write("fuzz_mnist_json", "four_value_images_gzip_in_input", b"\x0e" + gz(four))
    write("fuzz_mnist_json", "four_value_images_two_members", b"\x0e" + gz(four[:40]) + gz(four[40:]))
    pretty = b"[\n\t[\n\t\t[ [ 1 ] , [ 2 ] ] ,\r\n\t\t[ 1 , 2 ]\n\t] , [ [ ], [ ] ] , [ [ ], [ ] ]\n]\n"
    write("fuzz_mnist_json", "pretty", b"\x06" + pretty)
    write("fuzz_mnist_json", "label_out_of_range", b"\x00" + one.replace(b"[9]", b"[10]"))
    write("fuzz_mnist_json", "label_string", b"\x00" + one.replace(b"[9]", b'["9"]'))
    write("fuzz_mnist_json", "pixel_huge", b"\x00" + one.replace(b"0.5", b"1e999"))
    write("fuzz_mnist_json", "pixel_bad_utf8", b"\x00" + one.replace(b"0.5", b'"\xff"'))
    write("fuzz_mnist_json", "truncated", b"\x02" + one[:30])
    write("fuzz_mnist_json", "four_splits", b"\x00" + one[:-1] + b", [[], []]]")
    write("fuzz_mnist_json", "count_mismatch", b"\x00" + one.replace(b"[3, 4]", b"[3]"))


# ---- gzip ------------------------------------------------------------------------------------

def gzip_corpus() -> None:
    text = b"the quick brown fox jumps over the lazy dog\n" * 4
    write("fuzz_gzip", "plain", b"\x00" + text)
    write("fuzz_gzip", "one_member", b"\x05" + gz(text))
    write("fuzz_gzip", "two_members", b"\x0a" + gz(text[:50]) + gz(text[50:]))
    write("fuzz_gzip", "empty_member", b"\x0f" + gz(b""))
    write("fuzz_gzip", "truncated", b"\x06" + gz(text)[:-5])
    write("fuzz_gzip", "trailing_garbage", b"\x07" + gz(text) + b"garbage")
    bad_crc = bytearray(gz(text))
    bad_crc[-8] ^= 1
    write("fuzz_gzip", "bad_crc", b"\x0b" + bytes(bad_crc))
    write("fuzz_gzip", "magic_only", b"\x00\x1f\x8b")


# ---- safetensors / checkpoints -----------------------------------------------------------------
# Byte-for-byte what oar's writer produces (io/safetensors.hpp): compact JSON, "__metadata__" first
# with sorted keys, tensors in the order given, the header padded with spaces to a multiple of 8.

def st_file(tensors, metadata=None) -> bytes:
    """tensors: [(name, dtype, shape, data bytes)]"""
    parts = []
    if metadata:
        parts.append('"__metadata__":{' + ",".join(json.dumps(k) + ":" + json.dumps(v) for k, v in sorted(metadata.items())) + "}")
    off = 0
    for name, dtype, shape, data in tensors:
        parts.append(json.dumps(name) + ':{"dtype":"%s","shape":[%s],"data_offsets":[%d,%d]}'
                     % (dtype, ", ".join(str(d) for d in shape), off, off + len(data)))
        off += len(data)
    header = ("{" + ",".join(parts) + "}").encode()
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header + b"".join(t[3] for t in tensors)


def f32(values) -> bytes:
    return struct.pack("<%df" % len(values), *values)


def fnv1a64(data: bytes) -> int:
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


# fuzz_safetensors' network: Flatten, Linear<4,3>, ReLU, Linear<3,2> -> keys 1.*, 3.* (paddle dims).
ST_PARAMS = [("1.weight", [4, 3]), ("1.bias", [3]), ("3.weight", [3, 2]), ("3.bias", [2])]


def st_weights(layout: str, mark: str = "") -> bytes:
    """The network's weights (element j of each tensor 0.25 * j) in `layout`, labelled `mark`."""
    tensors = []
    for name, shape in ST_PARAMS:
        n = 1
        for d in shape:
            n *= d
        v = [0.25 * j for j in range(n)]
        if layout == "torch" and name.endswith("weight"):
            rows, cols = shape
            v = [v[r * cols + c] for c in range(cols) for r in range(rows)]
            shape = [cols, rows]
        tensors.append((name, "F32", shape, f32(v)))
    return st_file(tensors, {"format": "pt", "oar.layout": mark or layout, "oar.version": "1"})


def safetensors_corpus() -> None:
    t = "fuzz_safetensors"
    mixed = st_file([("a", "F32", [2, 2], f32([1, 2, 3, 4])), ("b", "F64", [1], struct.pack("<d", 0.5)),
                     ("c", "I64", [2], struct.pack("<2q", -1, 7)), ("d", "I32", [], struct.pack("<i", 3)),
                     ("e", "U8", [3], b"\x01\x02\x03"), ("empty", "F32", [0, 4], b"")],
                    {"format": "pt", "note": "caf\u00e9 \"q\" \\ \n"})
    write(t, "parse_mixed", b"\x00" + mixed)
    write(t, "parse_escapes", b"\x00" + st_file([("\u00e9\\u0041/\"x", "U8", [1], b"\x00")]))
    write(t, "parse_overlap", b"\x00" + mixed.replace(b'"data_offsets":[16,24]', b'"data_offsets":[12,20]'))
    write(t, "parse_f16", b"\x00" + st_file([("h", "F16", [2], b"\x00" * 4)]))
    write(t, "parse_huge_header", b"\x00" + struct.pack("<Q", 1 << 40) + b"{}")
    write(t, "parse_truncated", b"\x00" + mixed[:-5])
    write(t, "weights_paddle", b"\x01" + st_weights("paddle"))
    write(t, "weights_torch", b"\x01" + st_weights("torch"))
    unmarked = st_weights("torch").replace(b'"oar.layout":"torch",', b'"oar_layout":"torch",')
    write(t, "weights_unmarked_torch", b"\x02" + unmarked)
    write(t, "weights_wrong_shape", b"\x01" + st_weights("torch", mark="paddle"))
    # The checkpoint state for the harness's fixed weights file (paddle layout, 0.25 * j values).
    weights = st_weights("paddle")
    tensors = []
    for buf in ("moment1", "moment2"):
        for name, shape in ST_PARAMS:
            n = 1
            for d in shape:
                n *= d
            tensors.append((name + "." + buf, "F32", shape, f32([0.01 * (j + 1) for j in range(n)])))
    meta = {"oar.kind": "training_state", "oar.version": "1", "oar.weights_file": "c.safetensors",
            "oar.weights_bytes": str(len(weights)), "oar.weights_fnv1a64": "%016x" % fnv1a64(weights),
            "optimizer.state": "moment1,moment2", "optimizer.learning_rate": "0.001", "optimizer.step_count": "3",
            "train.epoch": "2", "train.global_step": "30", "train.network_step": "30", "train.network_seed": "1",
            "train.rng_seed": "5", "train.sampler_epoch": "2", "extra.lr_schedule.last_epoch": "2"}
    write(t, "checkpoint_state", b"\x03" + st_file(tensors, meta))
    write(t, "checkpoint_wrong_sum", b"\x03" + st_file(tensors, dict(meta, **{"oar.weights_fnv1a64": "0" * 16})))
    write(t, "checkpoint_momentum", b"\x03" + st_file(tensors[:4], dict(meta, **{"optimizer.state": "velocity"})))


# ---- pictures (PNG, JPEG) ----------------------------------------------------------------------

def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(w: int, h: int, depth: int, colour: int, rows, interlace: int = 0, extra: bytes = b"") -> bytes:
    """A PNG of the given rows (each already filtered: a filter byte, then the packed samples)."""
    ihdr = struct.pack(">IIBBBBB", w, h, depth, colour, 0, 0, interlace)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + extra +
            png_chunk(b"IDAT", zlib.compress(b"".join(rows), 9)) + png_chunk(b"IEND", b""))


def adam7_rows(w: int, h: int, pixel):
    """Adam7-interlaced rows of 8-bit grey pixels pixel(x, y), filter 0: the seven passes in order."""
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
    rows = []
    for x0, y0, dx, dy in passes:
        xs = list(range(x0, w, dx))
        if not xs:
            continue
        for y in range(y0, h, dy):
            rows.append(b"\x00" + bytes(pixel(x, y) for x in xs))
    return rows


def image_corpus() -> None:
    t = "fuzz_image"
    w, h = 12, 9
    grey = [b"\x00" + bytes((x * 20 + y * 7) % 256 for x in range(w)) for y in range(h)]
    write(t, "png_grey8", png(w, h, 8, 0, grey))
    write(t, "png_rgb8", png(w, h, 8, 2, [b"\x01" + bytes((x * 3 + c * 40 + y) % 256 for x in range(w) for c in range(3)) for y in range(h)]))
    write(t, "png_rgba8", png(w, h, 8, 6, [b"\x02" + bytes((x * 5 + c * 60 + y * 9) % 256 for x in range(w) for c in range(4)) for y in range(h)]))
    write(t, "png_grey_alpha16", png(4, 3, 16, 4, [b"\x00" + bytes((x * 31 + k) % 256 for x in range(4) for k in range(4)) for _ in range(3)]))
    write(t, "png_grey1", png(16, 4, 1, 0, [b"\x00" + bytes([0b10110010, 0b01001101]) for _ in range(4)]))
    plte = png_chunk(b"PLTE", bytes(range(0, 48))) + png_chunk(b"tRNS", bytes([0, 128, 255]))
    write(t, "png_palette4_trns", png(8, 3, 4, 3, [b"\x00" + bytes([0x01, 0x23, 0x45, 0x0F]) for _ in range(3)], extra=plte))
    write(t, "png_interlaced", png(w, h, 8, 0, adam7_rows(w, h, lambda x, y: (x * 20 + y * 7) % 256), interlace=1))
    whole = png(w, h, 8, 0, grey)
    write(t, "png_truncated", whole[: len(whole) // 2])
    # A header claiming 8000 x 8000 pixels in a file of a hundred bytes.
    write(t, "png_huge_claim", png(8000, 8000, 8, 0, [b"\x00\x00"]))
    try:  # JPEG seeds need an encoder: Pillow (the venv of scripts/setup.sh)
        from PIL import Image
    except ImportError:
        print("fuzz_image: no Pillow, PNG seeds only")
        return

    def jpeg(im, **kw) -> bytes:
        out = io.BytesIO()
        im.save(out, "JPEG", **kw)
        return out.getvalue()

    g = Image.frombytes("L", (16, 16), bytes((x * 16 + y * 5) % 256 for y in range(16) for x in range(16)))
    rgb = Image.merge("RGB", (g, g.transpose(Image.Transpose.FLIP_LEFT_RIGHT), g.transpose(Image.Transpose.FLIP_TOP_BOTTOM)))
    write(t, "jpeg_grey", jpeg(g, quality=75))
    write(t, "jpeg_rgb420", jpeg(rgb, quality=75, subsampling=2))
    write(t, "jpeg_rgb444", jpeg(rgb, quality=90, subsampling=0))
    write(t, "jpeg_progressive", jpeg(rgb, quality=75, progressive=True))
    write(t, "jpeg_cmyk", jpeg(rgb.convert("CMYK"), quality=75))
    whole = jpeg(rgb, quality=75)
    write(t, "jpeg_truncated", whole[: len(whole) * 2 // 3])


def main() -> None:
    if os.path.isdir(CORPUS):
        shutil.rmtree(CORPUS)
    idx_corpus()
    cifar_corpus()
    json_corpus()
    gzip_corpus()
    safetensors_corpus()
    image_corpus()
    for target in sorted(os.listdir(CORPUS)):
        folder = os.path.join(CORPUS, target)
        files = os.listdir(folder)
        total = sum(os.path.getsize(os.path.join(folder, f)) for f in files)
        print(f"{target}: {len(files)} seeds, {total} bytes")
        assert total < 100_000, target


if __name__ == "__main__":
    main()
