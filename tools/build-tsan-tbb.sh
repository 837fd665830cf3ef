#!/usr/bin/env bash
# Builds oneTBB with ThreadSanitizer from Debian's own source package (the version of the
# installed libtbb-dev), installs it into a cache directory and prints that directory.
# `make tsan` links Kiln against it: Debian's libtbb is not instrumented, so TSan cannot see its
# synchronisation and reports hundreds of races that are not there.
# Reused when present; the directory name holds everything the build depends on (bump `recipe`
# when this script changes how it builds).
set -euo pipefail

recipe=1
cxx=${KILN_TSAN_CXX:-clang++-15}
version=$(dpkg-query -W -f='${source:Version}' libtbb-dev)
source_pkg=$(dpkg-query -W -f='${source:Package}' libtbb-dev)
compiler=$("$cxx" -dumpversion)
cache=${KILN_TSAN_TBB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln-tsan-tbb}
prefix="$cache/$source_pkg-$version-clang$compiler-tsan-r$recipe"

if [ -f "$prefix/.complete" ]; then
  echo "$prefix"
  exit 0
fi

log() { echo "build-tsan-tbb: $*" >&2; }
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

# apt-get source needs deb-src entries; add Debian's own archive (the one the binaries came
# from) when none is configured.
if ! grep -rqsE '^(deb-src|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
  log "adding deb-src entries for Debian $codename (/etc/apt/sources.list.d/kiln-deb-src.sources)"
  $SUDO tee /etc/apt/sources.list.d/kiln-deb-src.sources >/dev/null <<EOF
# Added by Kiln's tools/build-tsan-tbb.sh: source packages from Debian's archive.
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $codename $codename-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: $codename-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  $SUDO apt-get update -qq
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-tsan-tbb.XXXXXX")
trap 'rm -rf "$work"' EXIT
log "fetching $source_pkg=$version with apt-get source"
# apt checks the files against the signed Release and Sources indices; dpkg-source checks them
# against the .dsc, unpacks the upstream tarball and applies Debian's patches. (It cannot check
# the uploader's signature on the .dsc without the debian-keyring package: apt's check covers it.)
(cd "$work" && apt-get source -qq --download-only "$source_pkg=$version" >/dev/null)
if ! (cd "$work" && dpkg-source -x ./*.dsc src >"$work/unpack.log" 2>&1); then
  cat "$work/unpack.log" >&2
  exit 1
fi

log "building $source_pkg $version with $cxx -fsanitize=thread into $prefix"
flags="-O1 -g -fno-omit-frame-pointer"
cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$flags" \
  -DTBB_SANITIZE=thread -DTBB_TEST=OFF -DTBB_EXAMPLES=OFF -DTBB_STRICT=OFF \
  -DTBBMALLOC_BUILD=OFF -DTBB_ENABLE_IPO=OFF \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib >/dev/null
cmake --build "$work/build" -j "$(nproc)" >/dev/null
rm -rf "$prefix"
cmake --install "$work/build" >/dev/null
echo "$source_pkg $version, $cxx $compiler, -fsanitize=thread $flags" >"$prefix/.complete"
echo "$prefix"
