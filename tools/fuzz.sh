#!/usr/bin/env bash
# tools/fuzz.sh [-t SECONDS] [-n RUNS] [-b BUILD_DIR] [HARNESS...]: a fuzzing campaign, one
# harness after the other, one job each (the machine is shared), each bounded by SECONDS
# (default 300) and RUNS executions (default 1000000). Needs a -Dfuzz=true build (clang):
#   CC=clang meson setup build-asan -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false
# (tools/test.sh makes that build as build-asan/ where clang is installed). The corpus grows
# in BUILD_DIR/fuzz-corpus/HARNESS; a crash leaves BUILD_DIR/fuzz-crash-HARNESS-*, to be kept
# as tests/fuzz/HARNESS/regressions/NAME once fixed. Prints one line per harness: executions,
# execs/s, cov and ft, and exits non-zero when any harness found something.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds=300 runs=1000000 build="$ROOT/build-asan"
while getopts t:n:b: opt; do
  case $opt in
    t) seconds=$OPTARG ;;
    n) runs=$OPTARG ;;
    b) build=$OPTARG ;;
    *) echo "usage: $0 [-t SECONDS] [-n RUNS] [-b BUILD_DIR] [HARNESS...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if [ $# -eq 0 ]; then
  set -- mesh layout pin hardware graph-json hf-config policy store plan-json
fi
# GSlice on, as tests/fuzz/run-fuzz.sh explains.
unset G_SLICE
found=0
for h in "$@"; do
  exe="$build/tests/fuzz/fuzz-$h"
  if [ ! -x "$exe" ]; then
    echo "$0: $exe is not built (a -Dfuzz=true build with clang)" >&2
    exit 2
  fi
  corpus="$build/fuzz-corpus/$h"
  log="$build/fuzz-$h.log"
  mkdir -p "$corpus"
  dirs=("$corpus" "$ROOT/tests/fuzz/$h/seeds")
  [ -d "$ROOT/tests/fuzz/$h/regressions" ] && dirs+=("$ROOT/tests/fuzz/$h/regressions")
  start=$(date +%s)
  ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" "$exe" -max_total_time="$seconds" -runs="$runs" \
    -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/fuzz-crash-$h-" \
    "${dirs[@]}" >"$log" 2>&1
  rc=$?
  took=$(($(date +%s) - start))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\) ft: \([0-9]*\).*/cov \1 ft \2/p' <<<"$last")
  rate=$(( ${execs:-0} / (took > 0 ? took : 1) ))
  if [ $rc -ne 0 ]; then
    found=1
    echo "$h: FOUND something after ${execs:-?} execs in ${took}s (rc $rc); see $log"
  else
    echo "$h: ${execs:-?} execs in ${took}s, ${rate} execs/s, $cov"
  fi
done
exit $found
