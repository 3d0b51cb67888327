"""Reads a VisualDL record file with VisualDL's own reader and prints what it saw, one line per
item, for tests/io/test_visualdl.cpp (and the train_mnist test) to compare with what was written.

  read_visualdl.py FILE_OR_DIR

For a directory, every file whose name holds `vdlrecords` is read. Output lines:
  file <name> <valid>                 valid: VisualDL's is_VDLRecord_file(path, check=True)
  scalar <step> <timestamp ms> <value as float.hex> <tag>
Exit status 3 when visualdl is missing (the caller skips, naming the set-up command).
"""
import os
import sys

try:
    from visualdl import LogReader
    from visualdl.reader.reader import is_VDLRecord_file
except ImportError as e:
    print("missing visualdl:", e)
    sys.exit(3)


def read(path):
    print("file", os.path.basename(path), is_VDLRecord_file(path, check=True))
    reader = LogReader(file_path=path)
    for tag in sorted(reader.get_tags().get("scalar", [])):
        for v in reader.get_data("scalar", tag):
            print("scalar", v.id, v.timestamp, float(v.value).hex(), v.tag)


target = sys.argv[1]
if os.path.isdir(target):
    for name in sorted(os.listdir(target)):
        if "vdlrecords" in name:
            read(os.path.join(target, name))
else:
    read(target)
