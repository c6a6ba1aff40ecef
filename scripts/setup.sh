#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test share. Safe to run repeatedly.
set -euo pipefail
# libsqlite3-dev: the shared folders' index database (SQLite).
# syncthing-discosrv and syncthing-relaysrv: Syncthing's global discovery server and relay, which the tests run as
# real peers (device IDs, announcements and lookups, relayed sessions); nftables: the NAT of the simulated internet
# those tests build in network namespaces. The rest are the baselines and tools of the benchmarks, which the test
# command runs in their smoke mode (scripts/smoke.sh). libsodium-dev: the primitives of magic-wormhole's protocol;
# magic-wormhole: its reference implementation (the `wormhole` command, python-spake2), which the tests check against;
# magic-wormhole-transit-relay: its transit relay, and python3-venv for its mailbox server (PyPI, below).
# chromium, chromium-driver and python3-selenium: a real browser that drives the agent's page in the tests.
# dbus-daemon, python3-dbus and python3-gi: a session bus of the tests' own with a freedesktop notification server
# that records what it is sent (conflicts reach the person as desktop notifications); libglib2.0-bin: gdbus, through
# which the agent sends them where notify-send is not installed.
# lintian and debootstrap: CI's package check (scripts/package-deb.sh --check) lints the .deb and installs it into a
# clean Debian 12 root.
packages=(libarchive-dev libarchive-tools libssl-dev libzstd-dev libsqlite3-dev libstdc++-12-dev openssl pkg-config zstd tar python3 iproute2 bc xfsprogs
    syncthing-discosrv syncthing-relaysrv nftables
    openssh-server openssh-client rsync time gcc iperf3 syncthing curl
    libsodium-dev magic-wormhole magic-wormhole-transit-relay python3-venv
    chromium chromium-driver python3-selenium lintian debootstrap
    dbus-daemon python3-dbus python3-gi libglib2.0-bin)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "share setup: missing packages: ${missing[*]}; run as root or: sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# magic-wormhole's mailbox (rendezvous) server is on PyPI only: the tests run it on loopback from this virtual
# environment (never the public server).
wormhole_tools=${SHARE_TOOLS:-/opt/share-tools}/wormhole-mailbox
if [ ! -x "$wormhole_tools/bin/twistd" ] && [ "$(id -u)" -eq 0 ]; then
    python3 -m venv "$wormhole_tools"
    "$wormhole_tools/bin/pip" install -q --disable-pip-version-check 'magic-wormhole-mailbox-server==0.8.0' >/dev/null
fi
# A LocalSend peer that nobody here wrote, for the tests and benchmarks: localsendd (PyPI; LocalSend protocol 2.2,
# HTTPS with mutual TLS, multicast discovery, PIN, accept or decline over a control socket). openssl makes its
# certificate.
localsend_tools=${SHARE_TOOLS:-/opt/share-tools}/localsend
if [ ! -x "$localsend_tools/bin/localsendd" ] && [ "$(id -u)" -eq 0 ]; then
    python3 -m venv "$localsend_tools"
    "$localsend_tools/bin/pip" install -q --disable-pip-version-check 'localsendd==0.1.1' >/dev/null
fi
# A second LocalSend implementation nobody here wrote: localsend-cli (PyPI; LocalSend protocol v2 over HTTPS, a
# sender and an auto-accepting receiver), so share's LocalSend speech is checked against more than one reading.
localsend_cli=${SHARE_TOOLS:-/opt/share-tools}/localsend-cli
if [ ! -x "$localsend_cli/bin/localsend-cli" ] && [ "$(id -u)" -eq 0 ]; then
    python3 -m venv "$localsend_cli"
    "$localsend_cli/bin/pip" install -q --disable-pip-version-check 'localsend-cli==0.1.1' requests cryptography >/dev/null
fi
# BLAKE3, the chunk digest two share ends agree on when both have it (five times SHA-256's speed on this class of
# machine, where hashing was most of a transfer's CPU): its reference C implementation as Debian ships it (the C
# sources inside librust-blake3-dev, unpacked without installing the Rust packages), built once into a static
# library that every binary links (nothing needed at run time), found through pkg-config as share_blake3.
blake3_prefix=${SHARE_BLAKE3_PREFIX:-/usr/local}
if [ ! -f "$blake3_prefix/lib/pkgconfig/share_blake3.pc" ] || [ ! -f "$blake3_prefix/lib/libshare_blake3.a" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "share setup: BLAKE3 is not built yet; run scripts/setup.sh as root once" >&2
        exit 1
    fi
    blake3_work=$(mktemp -d)
    (cd "$blake3_work" && { apt-get download -qq librust-blake3-dev 2>/dev/null ||
        { apt-get update -qq && apt-get download -qq librust-blake3-dev; }; } && dpkg-deb -x librust-blake3-dev_*.deb x)
    blake3_src=$(echo "$blake3_work"/x/usr/share/cargo/registry/blake3-*/c)
    [ -f "$blake3_src/blake3.c" ] || { echo "share setup: librust-blake3-dev holds no C sources" >&2; exit 1; }
    blake3_files=(blake3.c blake3_dispatch.c blake3_portable.c)
    blake3_flags=()
    if [ "$(uname -m)" = x86_64 ]; then
        blake3_files+=(blake3_sse2_x86-64_unix.S blake3_sse41_x86-64_unix.S blake3_avx2_x86-64_unix.S
            blake3_avx512_x86-64_unix.S)
    elif [ "$(uname -m)" = aarch64 ]; then
        blake3_files+=(blake3_neon.c)
        blake3_flags+=(-DBLAKE3_USE_NEON=1)
    else
        blake3_flags+=(-DBLAKE3_NO_SSE2 -DBLAKE3_NO_SSE41 -DBLAKE3_NO_AVX2 -DBLAKE3_NO_AVX512)
    fi
    (cd "$blake3_src" && for f in "${blake3_files[@]}"; do gcc -O3 -fPIC "${blake3_flags[@]}" -c "$f" -o "${f%.*}.o"; done &&
        ar rcs libshare_blake3.a ./*.o)
    mkdir -p "$blake3_prefix/lib/pkgconfig" "$blake3_prefix/include/share_blake3"
    install -m 644 "$blake3_src/libshare_blake3.a" "$blake3_prefix/lib/"
    install -m 644 "$blake3_src/blake3.h" "$blake3_prefix/include/share_blake3/"
    printf '%s\n' "prefix=$blake3_prefix" 'Name: share_blake3' "Description: BLAKE3 (reference C, from Debian's librust-blake3-dev)" \
        "Version: $(basename "$(dirname "$blake3_src")" | sed 's/^blake3-//')" \
        'Cflags: -I${prefix}/include/share_blake3' 'Libs: -L${prefix}/lib -lshare_blake3' \
        > "$blake3_prefix/lib/pkgconfig/share_blake3.pc"
    rm -rf "$blake3_work"
fi
if ! command -v swift >/dev/null; then
    for d in /opt/swift/usr/bin /usr/share/swift/usr/bin; do [ -x "$d/swift" ] && export PATH="$d:$PATH"; done
fi
command -v swift >/dev/null || { echo "share setup: swift is not on PATH (expected Swift 6.x)" >&2; exit 1; }

# Release builds link the Swift runtime and Foundation statically: the binary needs only glibc, OpenSSL and
# libarchive at run time, and starts in ~11 ms of CPU instead of ~19 ms (no dynamic loading of Foundation), which
# matters for a command run as often as `share status`. Usage: release_build PRODUCT...
# SHARE_SMOKE=1 (the test command's smoke pass, scripts/smoke.sh): a script builds nothing and runs the debug build
# the test command has just made, at tiny sizes, so that every script is exercised on every run and none can rot.
release_build() {
    [ -n "${SHARE_SMOKE:-}" ] && return 0
    local product
    for product in "$@"; do swift build -c release --static-swift-stdlib --product "$product"; done
}
# The folder of the binaries release_build made (or, in a smoke pass, of the test command's debug build).
bin_dir() {
    if [ -n "${SHARE_SMOKE:-}" ]; then echo "$PWD/.build/debug"; else echo "$PWD/.build/release"; fi
}
