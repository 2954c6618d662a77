#!/bin/sh
# run-fuzz.sh HARNESS SOURCE_DIR BUILD_DIR [SECONDS]: one short libFuzzer pass of HARNESS over
# its seeds and regression inputs (SOURCE_DIR/seeds, SOURCE_DIR/regressions). New inputs go to
# BUILD_DIR/corpus-NAME, a crashing input to BUILD_DIR/crash-NAME-*; exits non-zero on a
# finding. SECONDS (or $FUZZ_SECONDS, default 6) bounds the run. The random seed is fixed
# ($FUZZ_SEED, default 1) so that a CI pass repeats the inputs of a local one; campaigns
# (tools/fuzz.sh) draw new ones.
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
# Leaks count as findings. GSlice stays on (the asan setup turns it off for the tests):
# json-glib 1.6 leaks the nodes of some refused documents ("2{...") from its slices, which
# lsan.supp can name only with the slow unwinder, too slow for fuzzing; test-fuzz-inputs
# replays every kept input with both (tests/meson.build).
unset G_SLICE
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
exec "$harness" -seed="${FUZZ_SEED:-1}" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 -error_exitcode=1 \
  -artifact_prefix="$build/crash-${name#fuzz-}-" "$@"
