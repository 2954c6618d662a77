#!/usr/bin/env bash
# tools/gpu-check.sh: the GPU executor's checks in one go, for a session lent a GPU machine
# (issue 8). Configures build-gpu/ with the cuda and nccl backends, builds, runs the gpu test
# suite and the GPU benchmarks, and leaves every log under "$OUT" (the device tool's output
# folder) or ./gpu-logs. Exits non-zero when the build or a test failed; a suite that only
# skipped (no device answered) is reported as such, never as a pass.
#   bash tools/gpu-check.sh            everything (about 5 minutes on an H100/H200)
#   GPU_CHECK_QUICK=1 bash tools/gpu-check.sh   build and the gpu suite only
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
LOGS="${OUT:-$PWD/gpu-logs}"
BUILD="${GPU_CHECK_BUILD_DIR:-build-gpu}"
mkdir -p "$LOGS"
export PATH="/usr/local/cuda/bin:$PATH"
status=0

{
  echo "== $(date -u +%FT%TZ) $(uname -n)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv 2>&1 || true
  nvcc --version | tail -1
} | tee "$LOGS/machine.txt"

step() { # name, command...
  local name=$1
  shift
  echo "== $name: $*" | tee -a "$LOGS/summary.txt"
  local start=$SECONDS
  "$@" >"$LOGS/$name.log" 2>&1
  local rc=$?
  echo "   exit $rc after $((SECONDS - start)) s (log: $name.log)" | tee -a "$LOGS/summary.txt"
  return $rc
}

if [ -f "$BUILD/meson-private/coredata.dat" ]; then
  step configure meson setup --reconfigure "$BUILD" -Dcuda=enabled -Dnccl=enabled || status=1
else
  step configure meson setup "$BUILD" -Dcuda=enabled -Dnccl=enabled || status=1
fi
step build ninja -C "$BUILD" || { tail -40 "$LOGS/build.log"; exit 1; }

step gpu-suite meson test -C "$BUILD" --suite gpu --print-errorlogs --num-processes 1 || status=1
cp "$BUILD/meson-logs/testlog.txt" "$LOGS/gpu-suite-testlog.txt" 2>/dev/null
grep -E "^ *[0-9]+/[0-9]+ " "$LOGS/gpu-suite.log" | tee -a "$LOGS/summary.txt"
if grep -qE "SKIP" "$LOGS/gpu-suite.log" && ! grep -qE " OK " "$LOGS/gpu-suite.log"; then
  echo "   the gpu suite only SKIPPED: no device answered (see gpu-suite-testlog.txt)" \
    | tee -a "$LOGS/summary.txt"
  status=1
fi

# The CLI end to end: the issue's command on 8 virtual devices, and nccl where GPUs allow.
cli="$BUILD/app/shardscope-cli"
step plan "$cli" propagate gpt2-tiny --mesh dp=2,mp=4 --policy megatron -o "$LOGS/p.json" || status=1
step run-cuda "$cli" run "$LOGS/p.json" --backend cuda --json || status=1
step run-nccl "$cli" run "$LOGS/p.json" --backend nccl --json # skips itself below 8 GPUs

if [ -z "${GPU_CHECK_QUICK:-}" ]; then
  bench="$BUILD/tests/bench/bench-gpu"
  step bench-gemm "$bench" gemm gpt2 dp=2,mp=4 megatron 8 1024 || status=1
  step bench-collectives "$bench" collectives 8 256 || status=1
  step bench-trial "$bench" trial gpt2 dp=2,mp=4 megatron 4 512 0 5 || status=1
  step calibrate-nccl "$cli" calibrate --backend nccl --max-bytes 268435456 -o "$LOGS/nccl-profile.json"
  for f in bench-gemm bench-collectives bench-trial; do
    grep -E "share of best|busbw|^AllReduce|trial on" "$LOGS/$f.log" | tail -20 >>"$LOGS/summary.txt"
  done
fi
echo "== status $status; logs in $LOGS" | tee -a "$LOGS/summary.txt"
exit $status
