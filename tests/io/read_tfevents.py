"""Reads TensorBoard event files two independent ways and prints what each saw, one line per item,
for tests/io/test_tensorboard.cpp to compare with what it wrote.

  read_tfevents.py FILE_OR_DIR

1. TensorBoard's own loader: EventAccumulator (tensorboard.backend.event_processing), which reads
   TFRecords with its CRC-checking reader; every scalar as
     acc <step> <wall_time as float.hex> <value as float.hex> <tag>
2. A plain TFRecord walk here: length, masked CRC-32C of the length and of the payload (a bitwise
   CRC-32C written below, sharing no code with oar or tensorboard), then the payload parsed by the
   protobuf runtime with tensorboard's Event message:
     version <wall_time hex> <file_version>
     raw <step> <wall_time hex> <value hex> <tag>
     crc_error <record index> <length|payload>      (and the walk stops)
     truncated <record index>
"""
import os
import struct
import sys

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.compat.proto import event_pb2


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def raw_walk(path):
    with open(path, "rb") as f:
        data = f.read()
    pos, index = 0, 0
    while pos < len(data):
        if pos + 12 > len(data):
            print("truncated", index)
            return
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (len_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if masked(crc32c(header)) != len_crc:
            print("crc_error", index, "length")
            return
        if pos + 12 + length + 4 > len(data):
            print("truncated", index)
            return
        payload = data[pos + 12:pos + 12 + length]
        (data_crc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        if masked(crc32c(payload)) != data_crc:
            print("crc_error", index, "payload")
            return
        ev = event_pb2.Event.FromString(payload)
        kind = ev.WhichOneof("what")
        if kind == "file_version":
            print("version", float(ev.wall_time).hex(), ev.file_version)
        elif kind == "summary":
            for v in ev.summary.value:
                assert v.WhichOneof("value") == "simple_value", v
                print("raw", ev.step, float(ev.wall_time).hex(), float(v.simple_value).hex(), v.tag)
        else:
            print("other", index, kind)
        pos += 16 + length
        index += 1


def main():
    target = sys.argv[1]
    acc = event_accumulator.EventAccumulator(target, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    for tag in sorted(acc.Tags()[event_accumulator.SCALARS]):
        for s in acc.Scalars(tag):
            print("acc", s.step, float(s.wall_time).hex(), float(s.value).hex(), tag)
    files = [target] if os.path.isfile(target) else sorted(
        os.path.join(target, n) for n in os.listdir(target) if "tfevents" in n)
    for path in files:
        print("file", os.path.basename(path))
        raw_walk(path)


if __name__ == "__main__":
    main()
