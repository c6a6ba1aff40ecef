#!/usr/bin/env python3
"""The upgrade fixtures' source file: 1 MiB of numbered lines (the same bytes every time). Usage: source.py PATH"""
import sys

with open(sys.argv[1], "wb") as out:
    data = b"".join(b"line %07d of the file sent before the upgrade\n" % n for n in range(25000))
    out.write(data[: 1 << 20])
