#!/usr/bin/env python3
"""Builds hostile archives with Python's tarfile and zipfile: hostile_archives.py OUTDIR ESCAPE

ESCAPE is a folder outside any extraction target; entries try to reach it. Prints one line per archive:
NAME<TAB>WHAT-THE-REFUSAL-MUST-NAME."""
import io
import os
import sys
import tarfile
import zipfile

out, escape = sys.argv[1], sys.argv[2]


def tar(name, members, fmt=tarfile.PAX_FORMAT, mode="w"):
    with tarfile.open(os.path.join(out, name), mode, format=fmt) as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)


def file(path, data=b"evil\n"):
    info = tarfile.TarInfo(path)
    info.size = len(data)
    return info, data


def entry(path, kind, target=""):
    info = tarfile.TarInfo(path)
    info.type = kind
    info.linkname = target
    return info, None


cases = []
tar("dotdot.tar", [file("ok.txt"), file("../evil.txt")]); cases.append(("dotdot.tar", "../evil.txt"))
tar("nested-dotdot.tar", [file("a/../../evil.txt")]); cases.append(("nested-dotdot.tar", "a/../../evil.txt"))
tar("absolute.tar", [file(escape + "/absolute.txt")]); cases.append(("absolute.tar", escape + "/absolute.txt"))
tar("symlink-then-file.tar", [entry("link", tarfile.SYMTYPE, escape), file("link/through.txt")])
cases.append(("symlink-then-file.tar", "link"))
tar("relative-symlink-out.tar", [entry("up", tarfile.SYMTYPE, "../../.."), file("up/x.txt")])
cases.append(("relative-symlink-out.tar", "up"))
tar("inside-symlink-then-file.tar", [entry("d", tarfile.DIRTYPE), entry("l", tarfile.SYMTYPE, "d"), file("l/x.txt")])
cases.append(("inside-symlink-then-file.tar", "l/x.txt"))
tar("hardlink-passwd.tar", [entry("passwd", tarfile.LNKTYPE, "/etc/passwd")]); cases.append(("hardlink-passwd.tar", "passwd"))
tar("hardlink-dotdot.tar", [entry("pw", tarfile.LNKTYPE, "../../../../../../etc/passwd")]); cases.append(("hardlink-dotdot.tar", "pw"))
# The chained link of the outside review: each link alone looks inside by its name; followed, the second leaves.
tar("chained-links.tar", [
    entry("x/y/z/w", tarfile.DIRTYPE),
    entry("x/y/z/w/r", tarfile.SYMTYPE, "../../../.."),
    entry("d", tarfile.SYMTYPE, "x/y/z/w/r/../../../../.."),
])
cases.append(("chained-links.tar", "d"))
# A link that leaves only through another link created after it.
tar("late-chain.tar", [
    entry("a", tarfile.DIRTYPE),
    entry("out", tarfile.SYMTYPE, "a/b/.."),
    entry("a/b", tarfile.SYMTYPE, ".."),
])
cases.append(("late-chain.tar", "out"))
dev = tarfile.TarInfo("null")
dev.type = tarfile.CHRTYPE
dev.devmajor, dev.devminor = 1, 3
tar("device.tar", [(dev, None)]); cases.append(("device.tar", "null"))
fifo = tarfile.TarInfo("pipe")
fifo.type = tarfile.FIFOTYPE
tar("fifo.tar", [(fifo, None)]); cases.append(("fifo.tar", "pipe"))

# 200,000 empty entries (gzip keeps the file small).
with tarfile.open(os.path.join(out, "many.tar.gz"), "w:gz", compresslevel=1, format=tarfile.GNU_FORMAT) as archive:
    for i in range(200_000):
        archive.addfile(tarfile.TarInfo(f"f{i}"), io.BytesIO(b""))
cases.append(("many.tar.gz", "entries"))

# A 1 KiB entry whose header says 10 GiB: the archive ends after 1 KiB of data.
raw = io.BytesIO()
with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as archive:
    info = tarfile.TarInfo("bomb.bin")
    info.size = 1024
    archive.addfile(info, io.BytesIO(b"\0" * 1024))
data = bytearray(raw.getvalue())
header = tarfile.TarInfo("bomb.bin")
header.size = 10 << 30
data[0:512] = header.tobuf(format=tarfile.GNU_FORMAT)[0:512]
with open(os.path.join(out, "bomb.tar"), "wb") as f:
    f.write(bytes(data[: 512 + 1024]))
cases.append(("bomb.tar", "bomb.bin"))

with zipfile.ZipFile(os.path.join(out, "zip-slip.zip"), "w") as z:
    z.writestr("ok.txt", "fine")
    z.writestr("../evil.txt", "evil")
cases.append(("zip-slip.zip", "../evil.txt"))
with zipfile.ZipFile(os.path.join(out, "zip-absolute.zip"), "w") as z:
    z.writestr(zipfile.ZipInfo(escape + "/zip-absolute.txt"), "evil")
cases.append(("zip-absolute.zip", "zip-absolute.txt"))

for name, needle in cases:
    print(f"{name}\t{needle}")
