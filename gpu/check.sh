#!/usr/bin/env bash
# fencecheck's GPU checks, on one machine with a CUDA device: the litmus tests of the CUDA rules R1-R8, the GPU
# tests, the trace corpus replayed on the GPU (with PyTorch's CUDA sanitizer alongside), and the fine/coarse fence
# timings. See docs/gpu.md.
#
#   bash gpu/check.sh [DIR]        (DIR defaults to ./gpu-report)
#   bash gpu/check.sh --requirements
#
# Run it from a source checkout of fencecheck; it uses the checkout's code and the environment's python3, which
# must have a CUDA build of PyTorch >= 2.8. fencecheck's other dependencies and the test tools (pytest, hypothesis),
# as pyproject.toml states them, are put in a private directory where the environment lacks them or has a version
# they exclude (without the packaging module, only exact pins are compared): from the package index, or, with
# FENCECHECK_WHEELS=PATH, from the wheels in PATH without network (gpu/fetch_wheels.sh makes them).
# --requirements prints those requirements, one per line.
#
# Writes DIR/report.json (every result, one file) and DIR/check.log (everything the checks printed). Exit status:
# 0 every check passed, 1 a check failed or ran out of time, 2 the checks could not start (no CUDA device, a torch
# without external events, dependencies that would not install).
set -uo pipefail
cd "$(dirname "$0")/.."

requirements() {  # fencecheck's dependencies but torch, and the test tools the GPU tests import: from pyproject.toml
  python3 - <<'EOF'
import re, tomllib
with open("pyproject.toml", "rb") as f:
    project = tomllib.load(f)["project"]
tools = [r for r in project["optional-dependencies"]["test"]
         if re.match(r"[A-Za-z0-9._-]+", r).group() in ("pytest", "hypothesis")]
print("\n".join(project["dependencies"] + tools))
EOF
}
if [ "${1:-}" = "--requirements" ]; then
  requirements
  exit
fi

OUT=${1:-${OUT:-gpu-report}}
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
LOG="$OUT/check.log"
: > "$LOG"
export PYTHONUNBUFFERED=1 WORK

# Seconds each check may take; 5 minutes in all.
LITMUS_S=30 PYTEST_S=60 TRACES_S=45 REPLAY_S=120 BENCH_S=45

finish() {  # merge the parts in $WORK into $OUT/report.json; print the summary
  python3 - "$OUT/report.json" "$1" <<'EOF'
import json, os, sys
work, path, setup = os.environ["WORK"], sys.argv[1], sys.argv[2]
def part(name):
    try:
        with open(os.path.join(work, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
checks = {}
for name in ("litmus", "pytest", "traces", "replay", "bench"):
    status = part(f"{name}.status")
    if status is None:
        continue
    status["timed_out"] = status["exit"] == 124
    status["result"] = part(f"{name}.json")
    if name == "pytest":
        try:
            with open(os.path.join(work, "pytest.txt")) as f:
                status["result"] = ([l.strip() for l in f if l.strip()] or [""])[-1]
        except OSError:
            pass
    checks[name] = status
report = {"machine": part("machine.json"), "setup": setup or "ok", "checks": checks,
          "ok": not setup and len(checks) == 5 and all(c["exit"] == 0 for c in checks.values())}
with open(path, "w") as f:
    json.dump(report, f, indent=2)
    f.write("\n")
print(f"setup: {report['setup']}")
for name, c in checks.items():
    state = "ok" if c["exit"] == 0 else ("TIMED OUT" if c["timed_out"] else f"FAILED (exit {c['exit']})")
    print(f"{name}: {state} in {c['seconds']} s")
print(f"report: {path} ({'all checks passed' if report['ok'] else 'NOT all checks passed'})")
EOF
}

check() {  # check NAME SECONDS COMMAND...: run it under a time limit, log its output, note its exit status
  local name=$1 limit=$2 start rc
  shift 2
  echo "== $name: $*" >> "$LOG"
  start=$(date +%s)
  timeout "$limit" "$@" >> "$LOG" 2>&1
  rc=$?
  printf '{"exit": %d, "seconds": %d, "limit": %d}\n' "$rc" "$(( $(date +%s) - start ))" "$limit" > "$WORK/$name.status"
  echo "== $name: exit $rc" >> "$LOG"
}

# -- dependencies (torch comes from the environment) ------------------------------------------------------------
reqs=$(requirements 2>>"$LOG") || { finish "cannot read the requirements in pyproject.toml (see check.log)"; exit 2; }
mapfile -t missing < <(python3 - "$reqs" <<'EOF'
import importlib.metadata, re, sys
try:
    from packaging.requirements import Requirement
except ImportError:  # without packaging, only an exact pin is compared
    Requirement = None
for req in sys.argv[1].split():
    name = re.match(r"[A-Za-z0-9._-]+", req).group()
    try:
        have = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        print(req)
        continue
    pin = req[len(name):].strip()
    if Requirement is not None:
        if not Requirement(req).specifier.contains(have, prereleases=True):
            print(req)
    elif pin.startswith("==") and have != pin[2:].strip():
        print(req)
EOF
)
if [ ${#missing[@]} -gt 0 ]; then
  SITE="$WORK/site"
  echo "== installing into a private directory: ${missing[*]}" >> "$LOG"
  if [ -n "${FENCECHECK_WHEELS:-}" ]; then
    python3 -m pip install -q --no-index --find-links "$FENCECHECK_WHEELS" --no-compile --target "$SITE" "${missing[@]}" >> "$LOG" 2>&1
  else
    python3 -m pip install -q --no-compile --target "$SITE" "${missing[@]}" >> "$LOG" 2>&1
  fi || { finish "could not install ${missing[*]} (see check.log)"; exit 2; }
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi

# -- the machine -----------------------------------------------------------------------------------------------
setup=$(python3 - "$WORK/machine.json" 2>>"$LOG" <<'EOF'
import json, subprocess, sys
import torch
from fencecheck import __version__
from fencecheck.gpu.device import missing_features
machine = {"fencecheck": __version__, "torch": torch.__version__, "cuda": torch.version.cuda}
missing = missing_features(torch)
if not missing:
    machine["device"] = torch.cuda.get_device_name()
    try:
        machine["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                           capture_output=True, text=True, timeout=30).stdout.strip()
    except OSError:
        machine["driver"] = "unknown (no nvidia-smi)"
with open(sys.argv[1], "w") as f:
    json.dump(machine, f)
print(missing)
EOF
) || setup="python3 cannot import torch and fencecheck (see check.log)"
if [ -n "$setup" ]; then
  finish "$setup"
  exit 2
fi

# -- the checks ------------------------------------------------------------------------------------------------
check litmus "$LITMUS_S" python3 -m fencecheck.gpu.litmus --trials 200 --json "$WORK/litmus.json"
check pytest "$PYTEST_S" bash -o pipefail -c 'python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py | tee "$WORK/pytest.txt"'
check traces "$TRACES_S" python3 -m fencecheck traces --out "$WORK/corpus"
check replay "$REPLAY_S" python3 -m fencecheck.gpu.replay "$WORK/corpus" --json "$WORK/replay.json"
check bench "$BENCH_S" python3 -m fencecheck.gpu.bench --json "$WORK/bench.json"
finish ""
python3 -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["ok"] else 1)' "$OUT/report.json"
