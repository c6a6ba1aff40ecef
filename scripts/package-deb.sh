#!/usr/bin/env bash
# Builds share_VERSION_amd64.deb with dpkg-deb: the release binaries of share and share-watch (the Swift runtime and
# Foundation linked in, stripped), the man page, bash, zsh and fish completions, the systemd user unit, copyright
# and changelog. Depends only on the runtime libraries the binaries load (found by dpkg-shlibdeps: glibc, libssl3,
# libarchive13, libzstd1, libsodium23, libstdc++6, libgcc-s1). Prints the package's path, size and installed size.
#   --check   then checks it: dpkg-deb --info and --contents (every file expected is there), lintian (any error
#             fails), and installs it into a clean Debian 12 root without Swift (debootstrap --variant=minbase
#             bookworm, kept as a tarball in /var/cache/share between runs), where `share --version`, `share id` and
#             a send between two devices must work.
# SHARE_SMOKE=1 (the test command's smoke pass): packages the debug build the test command made (it loads the Swift
# runtime from the toolchain, so it is not installed anywhere) and checks the package's layout only.
# Usage: scripts/package-deb.sh [--check] [OUTDIR]        (default OUTDIR: .build-deb)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
CHECK=
[ "${1:-}" = "--check" ] && { CHECK=1; shift; }
OUT=$(realpath -m "${1:-.build-deb}")
WORK=$(mktemp -d)
ROOTFS=
cleanup() {
  if [ -n "$ROOTFS" ]; then
    for m in proc dev/pts dev; do umount "$ROOTFS/$m" 2>/dev/null || true; done
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
# Build output goes to a log, shown only on failure (SwiftPM's "waiting for another instance" lines included).
quietly() { "$@" > "$WORK/build.log" 2>&1 || { cat "$WORK/build.log" >&2; return 1; }; }
quietly release_build share share-watch
BIN=$(bin_dir)
VERSION=$("$BIN/share" --version | awk '{print $2}')
ARCH=$(dpkg --print-architecture)
DEB=$OUT/share_${VERSION}_${ARCH}.deb
PKG=$WORK/pkg
mkdir -p "$OUT" "$PKG/DEBIAN"

install -D -m 0755 "$BIN/share" "$PKG/usr/bin/share"
install -D -m 0755 "$BIN/share-watch" "$PKG/usr/bin/share-watch"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$PKG/usr/bin/share" "$PKG/usr/bin/share-watch"
# The release share links no Foundation beyond FoundationEssentials (docs/MEMORY.md): Foundation proper brings
# CoreFoundation and ICU's data, 42 MB of a 67 MB file. One call into it (String.contains(String) binds to Foundation's
# wherever a module imports CoreTransferable; JSONSerialization, String(format:), DateFormatter, Thread, Process) is
# enough, so a release build checks for it.
if [ -z "${SHARE_SMOKE:-}" ]; then
  share_mb=$(( $(stat -c %s "$PKG/usr/bin/share") / 1000000 ))
  if [ "$share_mb" -ge 40 ] || nm "$BIN/share" | grep -q ' icudt[0-9]*_dat$'; then
    echo "package: share is $share_mb MB stripped and links ICU: a module calls into Foundation proper; find it with" \
      "swift build -c release --static-swift-stdlib --product share -Xlinker -Map=share.map (docs/MEMORY.md)" >&2
    exit 1
  fi
  echo "share: $share_mb MB stripped, no ICU"
fi

# The man pages, from the commands' own definitions (swift-argument-parser's generate-manual).
# (The test command builds it with the debug build, so that a smoke run builds nothing.)
MANUAL=$BIN/generate-manual
if [ ! -x "$MANUAL" ]; then
  if [ -n "${SHARE_SMOKE:-}" ]; then quietly swift build --product generate-manual; else
    quietly swift build -c release --product generate-manual
  fi
fi
mkdir -p "$WORK/man"
"$MANUAL" "$PKG/usr/bin/share" --output-directory "$WORK/man" >/dev/null
# share-watch parses its own arguments (to stay small): its page is its --help, under man's headings.
{
  echo ".TH SHARE-WATCH 1 \"$(date -u +%Y-%m-%d)\" \"share $VERSION\" \"share\""
  echo ".SH NAME"
  echo "share-watch \\- a watch-style client of a share agent"
  echo ".SH SYNOPSIS"
  echo ".nf"
  "$PKG/usr/bin/share-watch" --help 2>&1 | sed -n 's/^\(USAGE: \)\{0,1\} *\(share watch.*\)/\2/p' | sed 's/^share watch/share-watch/'
  echo ".fi"
  echo ".SH DESCRIPTION"
  echo ".nf"
  "$PKG/usr/bin/share-watch" --help 2>&1 | sed -e '1,/^$/d' -e 's/\\/\\\\/g' -e 's/^\./\\\&./'
  echo ".fi"
  echo ".SH SEE ALSO"
  echo "share(1)"
} > "$WORK/man/share-watch.1"
for page in "$WORK"/man/*.1; do
  # A blank line is a paragraph break to a reader and a warning to groff: it is written as one.
  sed -i 's/^$/.sp/' "$page"
  install -D -m 0644 "$page" "$PKG/usr/share/man/man1/$(basename "$page")"
  gzip -9n "$PKG/usr/share/man/man1/$(basename "$page")"
done
# Completions where each shell looks for a package's.
# (bash-completion sources its files: no #! line.)
"$PKG/usr/bin/share" --generate-completion-script bash | sed '1{/^#!/d}' > "$WORK/bash"
"$PKG/usr/bin/share" --generate-completion-script zsh > "$WORK/zsh"
"$PKG/usr/bin/share" --generate-completion-script fish > "$WORK/fish"
install -D -m 0644 "$WORK/bash" "$PKG/usr/share/bash-completion/completions/share"
install -D -m 0644 "$WORK/zsh" "$PKG/usr/share/zsh/vendor-completions/_share"
install -D -m 0644 "$WORK/fish" "$PKG/usr/share/fish/vendor_completions.d/share.fish"
# The user unit: `systemctl --user enable --now share-agent` for each user who wants the agent.
install -d "$PKG/usr/lib/systemd/user"
sed -e 's|^Documentation=.*|Documentation=man:share(1)|' -e 's|%h/.local/bin/share|/usr/bin/share|' \
  -e 's|@CONFIG@ @DATA@ @STATE@|%h/.config/share %h/.local/share/share %h/.local/state/share|' \
  -e 's|Installed by Deploy/install.sh.|Installed by the share package: systemctl --user enable --now share-agent|' \
  -e 's|^# Deploy/install.sh writes the XDG folders.*|# The default XDG folders of share|' \
  -e 's|^# ~/.local/share/share, ~/.local/state/share); an inbox|# (an inbox|' \
  Deploy/share-agent.service > "$PKG/usr/lib/systemd/user/share-agent.service"
chmod 0644 "$PKG/usr/lib/systemd/user/share-agent.service"
# Documentation: copyright, changelog, the README.
DOC=$PKG/usr/share/doc/share
install -d "$DOC"
cat > "$DOC/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: share
Source: the share repository

Files: *
Copyright: 2026 The share developers
License: share
 The share developers keep every right to this software; it is given to you to run.
 Its binaries include the Swift runtime and Foundation (Apache License 2.0 with Runtime Library Exception,
 Copyright 2014-2026 Apple Inc. and the Swift project authors), swift-argument-parser, swift-log and
 swift-service-lifecycle (Apache License 2.0); on Debian systems the Apache License 2.0 is in
 /usr/share/common-licenses/Apache-2.0.
COPYRIGHT
DATE=$(date -R -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)")
{
  echo "share ($VERSION) unstable; urgency=medium"
  echo
  echo "  * Transferable items between machines: one engine and one policy for"
  echo "    share devices, LocalSend devices and magic-wormhole codes."
  echo "  * The agent's page on 127.0.0.1 (share web)."
  echo
  echo " -- The share developers <share@example.org>  $DATE"
} > "$DOC/changelog"
gzip -9n "$DOC/changelog"
install -m 0644 README.md "$DOC/README.md"
gzip -9n "$DOC/README.md"

# Depends: what the binaries load, as dpkg-shlibdeps finds it (the toolchain's own libraries, which only a debug
# build loads, have no package and are left out).
mkdir -p "$WORK/src/debian"
printf 'Source: share\n\nPackage: share\nArchitecture: any\n' > "$WORK/src/debian/control"
DEPENDS=$(cd "$WORK/src" && dpkg-shlibdeps -O --ignore-missing-info -e"$PKG/usr/bin/share" -e"$PKG/usr/bin/share-watch" \
  2>/dev/null | sed -n 's/^shlibs:Depends=//p')
SIZE=$(du -sk --exclude=DEBIAN "$PKG" | cut -f1)
cat > "$PKG/DEBIAN/control" <<CONTROL
Package: share
Version: $VERSION
Architecture: $ARCH
Maintainer: The share developers <share@example.org>
Installed-Size: $SIZE
Depends: $DEPENDS
Recommends: libnotify-bin | libglib2.0-bin
Section: net
Priority: optional
Description: send anything between your machines, as what the receiver understands
 share brings Apple's Transferable model to Linux and across the network: an
 item declares what it is and how it can be represented, and two machines agree
 over TLS on the best representation the receiver understands.
 .
 This package holds the share command (send, receive, pair, the agent, the
 agent's page on 127.0.0.1), share-watch (a lightweight client for a watch),
 their manual pages, shell completions and a systemd user unit for the agent.
 It speaks LocalSend to phones and magic-wormhole codes to anyone.
CONTROL
find "$PKG" -type d -exec chmod 0755 {} +
# xz for the real package; a smoke run's throwaway one is compressed fast.
COMPRESS=(-Zxz)
[ -n "${SHARE_SMOKE:-}" ] && COMPRESS=(-Zgzip -z1)
dpkg-deb --root-owner-group "${COMPRESS[@]}" --build "$PKG" "$DEB" >/dev/null
echo "package: $DEB"
echo "size: $(($(stat -c %s "$DEB") / 1024)) KiB; installed size: $SIZE KiB"
echo "depends: $DEPENDS"

# Every file a user expects is in the package.
CONTENTS=$(dpkg-deb --contents "$DEB")
for path in ./usr/bin/share ./usr/bin/share-watch ./usr/share/man/man1/share.1.gz \
  ./usr/share/bash-completion/completions/share ./usr/share/zsh/vendor-completions/_share \
  ./usr/share/fish/vendor_completions.d/share.fish ./usr/lib/systemd/user/share-agent.service \
  ./usr/share/doc/share/copyright ./usr/share/doc/share/changelog.gz; do
  grep -q " $path\$" <<< "$CONTENTS" || { echo "package-deb: $path is missing from the package" >&2; exit 1; }
done
INFO=$(dpkg-deb --info "$DEB")
grep -q "^ Package: share$" <<< "$INFO" || { echo "package-deb: no control information" >&2; exit 1; }
echo "contents: $(wc -l <<< "$CONTENTS") entries, every expected file there"
[ -n "$CHECK" ] || exit 0

# lintian: any error fails; warnings are printed.
command -v lintian >/dev/null && command -v debootstrap >/dev/null ||
  { echo "package-deb: lintian and debootstrap are needed for --check; run scripts/setup.sh as root" >&2; exit 1; }
LINT=$(lintian --tag-display-limit 0 "$DEB" 2>&1 || true)
[ -n "$LINT" ] && echo "$LINT" | sed 's/^/lintian: /'
if grep -q '^E: ' <<< "$LINT"; then echo "package-deb: lintian reports errors" >&2; exit 1; fi
echo "lintian: $(grep -c '^E: ' <<< "$LINT" || true) errors, $(grep -c '^W: ' <<< "$LINT" || true) warnings"

# A clean Debian 12 root, made once per machine and unpacked anew for each check.
CACHE=${SHARE_DEB_ROOT_CACHE:-/var/cache/share/bookworm-minbase.tar}
if [ ! -s "$CACHE" ]; then
  mkdir -p "$(dirname "$CACHE")" "$WORK/bootstrap"
  debootstrap --variant=minbase bookworm "$WORK/bootstrap" http://deb.debian.org/debian >/dev/null
  tar -C "$WORK/bootstrap" -cf "$CACHE.part" . && mv "$CACHE.part" "$CACHE"
  rm -rf "$WORK/bootstrap"
fi
ROOTFS=$WORK/root
mkdir -p "$ROOTFS"
tar -C "$ROOTFS" -xf "$CACHE"
cp /etc/resolv.conf "$ROOTFS/etc/resolv.conf"
mount -t proc proc "$ROOTFS/proc"
mount --bind /dev "$ROOTFS/dev"
mount --bind /dev/pts "$ROOTFS/dev/pts"
cp "$DEB" "$ROOTFS/tmp/"
in_root() { chroot "$ROOTFS" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"; }
in_root sh -c "ls /opt/swift /usr/lib/swift 2>/dev/null | head -1" | grep -q . && {
  echo "package-deb: the clean root has a Swift toolchain" >&2; exit 1; }
in_root apt-get update -qq >/dev/null
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "/tmp/$(basename "$DEB")" >/dev/null
echo "installed in a clean Debian 12 root: $(in_root share --version)"
in_root share id --config /root/a --name alpha | sed 's/^/  /'
in_root share id --config /root/b --name beta >/dev/null
in_root share trust add --config /root/b "$(in_root share id --config /root/a | tail -1)" --name alpha --no-ask >/dev/null 2>&1
in_root sh -c 'share receive --config /root/b --port 0 --listen 127.0.0.1 --into /root/inbox > /root/receive.out 2>&1 &
  for i in $(seq 1200); do grep -q "waiting on port" /root/receive.out && break; sleep 0.1; done
  port=$(grep -o "port [0-9]*" /root/receive.out | head -1 | cut -d" " -f2)
  share trust add --config /root/a "$(share id --config /root/b | tail -1)" --name beta --address 127.0.0.1:$port >/dev/null 2>&1
  head -c 3000000 /dev/urandom > /root/payload.bin
  share send --config /root/a /root/payload.bin --to beta 2>&1 | tail -1
  wait'
want=$(sha256sum "$ROOTFS/root/payload.bin" | cut -d' ' -f1)
got=$(sha256sum "$ROOTFS"/root/inbox/payload.bin 2>/dev/null | cut -d' ' -f1)
[ "$want" = "$got" ] || { echo "package-deb: the send in the clean root did not arrive whole" >&2; cat "$ROOTFS/root/receive.out" >&2; exit 1; }
echo "a send between two devices in the clean root: payload.bin arrived, SHA-256 $got"
echo "installed size in the root: $(in_root dpkg-query -W -f='${Installed-Size}' share) KiB"
