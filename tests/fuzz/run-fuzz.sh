#!/bin/sh
# run-fuzz.sh HARNESS SOURCE_DIR BUILD_DIR [SECONDS]: one short libFuzzer pass of HARNESS over
# its seeds and regression inputs (SOURCE_DIR/seeds, SOURCE_DIR/regressions). New inputs go to
# BUILD_DIR/corpus-NAME, a crashing input to BUILD_DIR/crash-NAME-*; exits non-zero on a
# finding. SECONDS (or $FUZZ_SECONDS, default 6) bounds the run.
set -eu
harness=$1 src=$2 build=$3
seconds=${4:-${FUZZ_SECONDS:-6}}
name=$(basename "$harness")
corpus="$build/corpus-${name#fuzz-}"
mkdir -p "$corpus"
set -- "$corpus" "$src/seeds"
if [ -d "$src/regressions" ]; then
  set -- "$@" "$src/regressions"
fi
# Leaks count as findings; stderr of the harness (GLib's own messages) stays in the log.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
exec "$harness" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$build/crash-${name#fuzz-}-" "$@"
