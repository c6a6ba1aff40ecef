#!/usr/bin/env python3
"""Writes the archive seeds of the fuzz corpus: archive_seeds.py OUTDIR

Well-formed archives of every kind a peer or an import may send (pax, ustar and GNU tar with files, folders, links
inside, long and non-ASCII names; zip; gzip), plus the hostile archives of the extraction tests, whose refusals the
fuzzer then mutates."""
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def members():
    def file(name, data, mode=0o644):
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime = len(data), mode, 1_700_000_000
        return info, data

    def special(name, kind, target="", mode=0o755):
        info = tarfile.TarInfo(name)
        info.type, info.linkname, info.mode, info.mtime = kind, target, mode, 1_700_000_000
        return info, None

    return [
        special("./", tarfile.DIRTYPE),
        special("docs/", tarfile.DIRTYPE),
        file("docs/readme.txt", b"hello\n" * 40),
        file("docs/run.sh", b"#!/bin/sh\necho hi\n", 0o755),
        special("docs/latest", tarfile.SYMTYPE, "readme.txt", 0o777),
        special("docs/copy.txt", tarfile.LNKTYPE, "docs/readme.txt", 0o644),
        file("empty.bin", b""),
        file("caf\u00e9/\u00fcber-\u65e5\u672c.txt", "na\u00efve\n".encode()),
        file("deep/" + "d" * 120 + "/" + "n" * 150 + ".txt", b"long name\n"),
    ]


for name, fmt in [("pax.tar", tarfile.PAX_FORMAT), ("gnu.tar", tarfile.GNU_FORMAT), ("ustar.tar", tarfile.USTAR_FORMAT)]:
    with tarfile.open(os.path.join(out, name), "w", format=fmt) as archive:
        for info, data in members():
            if fmt == tarfile.USTAR_FORMAT and len(info.name) > 100:
                continue
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
with tarfile.open(os.path.join(out, "pax.tar.gz"), "w:gz", format=tarfile.PAX_FORMAT) as archive:
    for info, data in members()[:4]:
        archive.addfile(info, io.BytesIO(data) if data is not None else None)
with zipfile.ZipFile(os.path.join(out, "plain.zip"), "w", zipfile.ZIP_DEFLATED) as archive:
    archive.writestr("docs/readme.txt", b"hello\n" * 40)
    archive.writestr("docs/", b"")
    archive.writestr("caf\u00e9.txt", b"x")

# The hostile archives of the extraction tests (all but the 200,000-entry one, which is too big for a seed).
fixtures = os.path.join(os.path.dirname(__file__), "..", "Tests", "ShareArchiveTests", "Fixtures")
with tempfile.TemporaryDirectory() as hostile, tempfile.TemporaryDirectory() as escape:
    subprocess.run([sys.executable, os.path.join(fixtures, "hostile_archives.py"), hostile, escape],
                   check=True, stdout=subprocess.DEVNULL)
    for name in sorted(os.listdir(hostile)):
        if name.startswith("many"):
            continue
        with open(os.path.join(hostile, name), "rb") as source, open(os.path.join(out, "hostile-" + name), "wb") as target:
            target.write(source.read())
