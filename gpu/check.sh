#!/usr/bin/env bash
# The one prepared GPU check (issue 5): litmus tests of R1-R7, the GPU tests, the corpus replayed on CUDA, and the
# fine/coarse fence timings. Writes everything to $OUT (default ./gpu-report). Sized for under 8 minutes on one H200.
#
# Before the device call, on the development machine: bash gpu/fetch_wheels.sh   (fills .whl/, which git ignores)
# Device call: run(command="bash gpu/check.sh", carry=[".whl"], timeout_s=540)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-report}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 2
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target /tmp/site . || exit 2
export PYTHONPATH=/tmp/site
status=0
{
  echo "# GPU check"; date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)"
} > "$OUT/machine.txt" 2>&1
timeout 90 python3 -m fencecheck.gpu.litmus --trials 200 --json "$OUT/litmus.json" 2>&1 | tee "$OUT/litmus.txt" || status=1
timeout 90 python3 -m pytest -q -p no:cacheprovider -m gpu tests 2>&1 | tee "$OUT/pytest.txt" | tail -5 || status=1
timeout 60 python3 -m fencecheck.cli traces --out /tmp/corpus > "$OUT/traces.txt" 2>&1 || status=1
timeout 240 python3 -m fencecheck.cli replay /tmp/corpus --device cuda > "$OUT/replay.txt" 2>&1 || status=1
cat "$OUT/replay.txt"
timeout 60 python3 -m fencecheck.gpu.bench --json "$OUT/bench.json" > "$OUT/bench.txt" 2>&1 || status=1
cat "$OUT/bench.txt"
echo "exit status $status" | tee "$OUT/status.txt"
exit $status
