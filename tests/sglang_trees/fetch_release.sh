#!/bin/sh
# Fetch the released SGLang 0.5.23 sources (no dependencies, never imported) for tests/test_sglang_source_release.py.
# Usage: sh tests/sglang_trees/fetch_release.sh [DIR]   (default DIR: /tmp/sglang-0.5.23)
# Then: FENCECHECK_SGLANG_0_5_23=DIR/sglang python3 -m pytest -q tests/test_sglang_source_release.py
set -eu
DIR=${1:-/tmp/sglang-0.5.23}
WHEELS=$(mktemp -d)
python3 -m pip download sglang==0.5.23 --no-deps --only-binary=:all: --python-version 3.11 \
    --platform manylinux_2_34_x86_64 -d "$WHEELS"
mkdir -p "$DIR"
python3 -m zipfile -e "$WHEELS"/sglang-0.5.23-*.whl "$DIR"
rm -rf "$WHEELS"
echo "sglang 0.5.23 sources in $DIR/sglang"
