#!/usr/bin/env bash
# Wheels the GPU machine lacks (it has torch, pytest, hypothesis, networkx, tqdm, attrs; not z3, jsonschema, tomli_w),
# for its Python 3.12, into .whl/ (ignored by git). Run here before the device call.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
plat="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $plat -d .whl \
  z3-solver jsonschema jsonschema-specifications referencing rpds-py tomli_w
ls -la .whl
