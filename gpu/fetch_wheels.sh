#!/usr/bin/env bash
# Download, on a machine with network, the wheels gpu/check.sh needs on a CUDA machine without network: fencecheck's
# dependencies except torch (z3-solver, networkx, jsonschema, tomli_w, tqdm) and the test tools (pytest, hypothesis),
# with their own dependencies, for Linux x86_64 and the CUDA machine's Python version.
#
#   bash gpu/fetch_wheels.sh [DIR] [PYTHON_VERSION]     (defaults: ./wheels and 3.12)
#
# Then, on the CUDA machine: FENCECHECK_WHEELS=DIR bash gpu/check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-wheels}
PY=${2:-3.12}
plat=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  plat+=(--platform "$p")
done
python3 -m pip download -q --only-binary=:all: --python-version "$PY" --implementation cp "${plat[@]}" -d "$DIR" \
  z3-solver networkx jsonschema tomli_w tqdm pytest hypothesis
ls -la "$DIR"
