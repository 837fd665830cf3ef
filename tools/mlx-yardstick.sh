#!/usr/bin/env bash
# Runs MLX's own Python tests against kiln with only the import changed: the yardstick MLX users
# hold Kiln to (docs/python.md). Not part of `make test`: it needs a checkout of MLX.
#   tools/mlx-yardstick.sh MLX_CHECKOUT [test_compile.py ...]
# Copies the named test files (default: test_compile.py) and mlx_tests.py from
# MLX_CHECKOUT/python/tests into a temporary folder, changes only their imports (mlx.core ->
# kiln, mlx.nn -> kiln.nn, mlx.optimizers -> kiln.optimizers, mlx.utils -> kiln.utils), and runs
# them with pytest from .venv against build/python. docs/porting-from-mlx.md has the results.
# A file that stops at import counts as none passed; the others run on.
# YARDSTICK_JUNIT=FILE also writes pytest's JUnit XML report there, which
# tools/mlx-yardstick-table.py compares, file by file, with the report of MLX's own run.
set -euo pipefail
mlx=${1:?usage: tools/mlx-yardstick.sh MLX_CHECKOUT [test_file.py ...]}
shift
files=("${@:-test_compile.py}")
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for f in mlx_tests.py "${files[@]}"; do
  sed -E -e 's/^import mlx\.core as mx$/import kiln as mx/' \
    -e 's/^import mlx\.(nn|optimizers|utils)$/import kiln as mlx, kiln.\1/' \
    -e 's/^(import|from) mlx\.(nn|optimizers|utils)/\1 kiln.\2/' "$mlx/python/tests/$f" > "$work/$f"
done
cd "$work"
KILN_CACHE_DIR="$root/build/tests/kernel-cache" PYTHONPATH="$root/build/python" \
  "$root/.venv/bin/python" -m pytest -q -p no:cacheprovider -rf --continue-on-collection-errors \
  ${YARDSTICK_JUNIT:+--junitxml="$YARDSTICK_JUNIT"} "${files[@]}" | tail -${YARDSTICK_TAIL:-40}
