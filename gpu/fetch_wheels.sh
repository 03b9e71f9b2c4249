#!/usr/bin/env bash
# Download, on a machine with network, the wheels gpu/check.sh needs on a CUDA machine without network: the
# requirements `bash gpu/check.sh --requirements` prints (fencecheck's dependencies but torch, as pyproject.toml
# states them, and the test tools pytest and hypothesis), with their own dependencies, for Linux x86_64 and the CUDA
# machine's Python version.
#
#   bash gpu/fetch_wheels.sh [DIR] [PYTHON_VERSION]     (defaults: ./.whl, which git ignores, and 3.12)
#
# Then, on the CUDA machine: FENCECHECK_WHEELS=DIR bash gpu/check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-.whl}
PY=${2:-3.12}
mapfile -t reqs < <(bash gpu/check.sh --requirements)
[ ${#reqs[@]} -gt 0 ] || { echo "fetch_wheels.sh: no requirements read from pyproject.toml" >&2; exit 2; }
plat=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  plat+=(--platform "$p")
done
python3 -m pip download -q --only-binary=:all: --python-version "$PY" --implementation cp "${plat[@]}" -d "$DIR" \
  "${reqs[@]}"
ls -l "$DIR"
du -sh "$DIR"
