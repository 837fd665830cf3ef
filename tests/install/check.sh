#!/usr/bin/env bash
# Installs the build tree into a fresh prefix, then builds and runs a separate project against
# it with find_package(Kiln) and with pkg-config, and checks that a backend component that was
# not built fails the find. Fails on any step, printing its log.
#   tests/install/check.sh BUILD_DIR WORK_DIR
set -euo pipefail
build=$1 work=$2
src=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
step() {  # step NAME COMMAND...: runs it with its output in $work/NAME.log, shown on failure
  local name=$1; shift
  if ! "$@" > "$work/$name.log" 2>&1; then
    echo "install check: '$name' failed:"; cat "$work/$name.log"; exit 1
  fi
}
# A sanitizer build's library needs the sanitizer's runtime in the program that links it:
# there tests/CMakeLists.txt sets KILN_CONSUMER_CXX and KILN_CONSUMER_FLAGS (its compiler and
# -fsanitize flags) for the consumer builds.
cxx=${KILN_CONSUMER_CXX:-c++} flags=${KILN_CONSUMER_FLAGS:-}
consumer=(-DCMAKE_CXX_COMPILER="$cxx")
if [[ -n $flags ]]; then consumer+=(-DCMAKE_CXX_FLAGS="$flags"); fi
step install cmake --install "$build" --prefix "$work/prefix"
step kiln-devices "$work/prefix/bin/kiln" devices
step configure cmake -S "$src/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=Release "${consumer[@]}"
step build cmake --build "$work/consumer"
"$work/consumer/app"

if cmake -S "$src/consumer" -B "$work/missing" -DCMAKE_PREFIX_PATH="$work/prefix" \
     -DKILN_TEST_BACKEND=metal > "$work/missing.log" 2>&1; then
  echo "install check: find_package(Kiln COMPONENTS metal) succeeded"; exit 1
fi
grep -q "built without the metal backend" "$work/missing.log" || {
  echo "install check: the failed find does not say why:"; cat "$work/missing.log"; exit 1; }

export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
step pkg-config-build sh -c "'$cxx' -std=c++17 -O1 $flags '$src/consumer/main.cpp' \
  -o '$work/app-pc' \$(pkg-config --cflags --libs kiln)"
"$work/app-pc"
