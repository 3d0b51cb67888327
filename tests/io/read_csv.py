"""Reads a CSV file with python's csv module and prints each record for tests/io/test_csv.cpp:

  read_csv.py FILE

one line per record: `row` then, per field, its UTF-8 bytes in hex (`-` for an empty field),
followed by `:` and float(field).hex() when python's float() parses it.
"""
import csv
import sys


def show(field: str) -> str:
    text = field.encode("utf-8").hex() or "-"
    try:
        return text + ":" + float(field).hex()
    except ValueError:
        return text


with open(sys.argv[1], newline="", encoding="utf-8") as f:
    for record in csv.reader(f, strict=True):
        print("row", " ".join(show(x) for x in record))
