#!/usr/bin/env bash
# The README's test command: installs what is missing, builds into build/, runs every test
# suite (benchmarks are not tests and are not run), then builds the sanitized tree,
# build-asan/, and runs the planner, executor (CPU) and CLI suites under
# `meson test --setup=asan` (ASan, UBSan, leak checking) with a short pass of every fuzz
# harness (suite fuzz, about 6 s each, where clang built them). Ends with one line,
#   tests: N passed, N failed, N skipped
# counted from both builds' test logs. Exits non-zero when anything failed.
# SHARDSCOPE_ASAN=0 leaves the sanitized run out (a quicker local run).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ensure_packages

testlog="$BUILD_DIR/meson-logs/testlog.json"
asan_testlog="$ASAN_DIR/meson-logs/testlog-asan.json"
rm -f "$testlog" "$asan_testlog"
# A failed build still ends with the summary line (no tests ran) and a non-zero exit.
if build_project; then
  run_tests=(meson test -C "$BUILD_DIR" --print-errorlogs --num-processes 2)
  # The ui suite needs a display; CI has none.
  if [ -z "${DISPLAY:-}" ]; then
    # A screen larger than the 1920x1080 window that ui-screenshots photographs: X keeps a
    # window inside the screen.
    run_tests=(xvfb-run -a -s "-screen 0 2560x1600x24" "${run_tests[@]}")
  fi
  set +e
  as_builder "${run_tests[@]}"
  status=$?
  set -e
else
  status=$?
  echo "$(basename "$0"): the build failed; no tests ran" >&2
fi

asan_status=0
if [ "${SHARDSCOPE_ASAN:-1}" != 0 ]; then
  if build_asan; then
    suites=(--suite planner --suite executor --suite graphview)
    if [ -d "$ASAN_DIR/tests/fuzz" ] && ls "$ASAN_DIR"/tests/fuzz/fuzz-* >/dev/null 2>&1; then
      suites+=(--suite fuzz)
    fi
    set +e
    as_builder meson test -C "$ASAN_DIR" --setup=asan "${suites[@]}" --print-errorlogs \
      --num-processes 2
    asan_status=$?
    set -e
  else
    asan_status=$?
    echo "$(basename "$0"): the sanitized build failed; its tests did not run" >&2
  fi
fi

python3 - "$status" "$asan_status" "$testlog" "$asan_testlog" "${SHARDSCOPE_ASAN:-1}" <<'PY'
import json
import os
import sys

status, asan_status = int(sys.argv[1]), int(sys.argv[2])
logs, asan = sys.argv[3:5], sys.argv[5] != "0"
passed = failed = skipped = 0
failures = []
for path in logs:
    if not os.path.exists(path):
        continue
    with open(path, encoding="utf-8") as log:
        for line in log:
            if not line.strip():
                continue
            entry = json.loads(line)
            result = entry.get("result")
            if result in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif result == "SKIP":
                skipped += 1
            else:  # FAIL, TIMEOUT, ERROR, UNEXPECTEDPASS
                failed += 1
                where = os.path.basename(os.path.dirname(os.path.dirname(path)))
                failures.append((f"{where}/{entry.get('name')} ({result}, "
                                 f"{entry.get('duration', 0):.0f} s)",
                                 (entry.get("stdout") or "").splitlines()[-30:]))
# CI shows only the tail of the output: repeat what failed, and the end of its log, just above
# the count.
for name, tail in failures:
    print(f"failed: {name}")
    for text in tail:
        print(f"  | {text}")
print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")
# meson test failing with nothing counted (no log, a crash before any test) is a failure too,
# in either build.
missing = not os.path.exists(logs[0]) or (asan and not os.path.exists(logs[1]))
sys.exit(1 if failed or status != 0 or asan_status != 0 or missing else 0)
PY
