#!/usr/bin/env bash
# The README's test command: installs what is missing, builds into build/, runs every test
# suite (benchmarks are not tests and are not run), then builds the sanitized tree,
# build-asan/, and runs the planner, executor (CPU) and CLI suites under
# `meson test --setup=asan` (ASan, UBSan, leak checking) with a short pass of every fuzz
# harness (suite fuzz, about 6 s each, where clang built them). Ends with one line,
#   tests: N passed, N failed, N skipped
# counted from both builds' test logs, after the names and log tails of what failed. A failed
# test runs once more alone; passing then, it is named flaky and counted as passed. Exits
# non-zero when anything failed.
# SHARDSCOPE_ASAN=0 leaves the sanitized run out (a quicker local run).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ensure_packages

testlog="$BUILD_DIR/meson-logs/testlog.json"
asan_testlog="$ASAN_DIR/meson-logs/testlog-asan.json"
rm -f "$testlog" "$asan_testlog" "$testlog.first" "$asan_testlog.first"

# failed_tests LOG: the names of the tests that LOG records as not passed.
failed_tests() {
  python3 -c '
import json, sys
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    try:
        entry = json.loads(line)
    except json.JSONDecodeError:
        continue
    if entry.get("result") not in ("OK", "EXPECTEDFAIL", "SKIP"):
        print(entry["name"].split(" / ")[-1])
' "$1"
}

# rerun_failed LOG COMMAND...: runs the tests that failed once more, alone, after keeping the
# first run's log as LOG.first. A test that passes the second time is reported as flaky in the
# summary (with its first failure's log) and does not fail the run; one that fails twice does.
# Machines here are shared and noisy; a single timing-dependent failure should not throw away
# a submission, but it must be seen and mended.
rerun_failed() {
  local log=$1
  shift
  [ -f "$log" ] || return 1
  local names
  mapfile -t names < <(failed_tests "$log")
  [ "${#names[@]}" -gt 0 ] || return 1
  cp "$log" "$log.first"
  echo "$(basename "$0"): running again, alone: ${names[*]}" >&2
  "$@" --no-rebuild --num-processes 1 "${names[@]}"
}
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
  if [ "$status" != 0 ] && rerun_failed "$testlog" as_builder "${run_tests[@]}"; then
    status=0
  fi
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
    if [ "$asan_status" != 0 ] && rerun_failed "$asan_testlog" \
         as_builder meson test -C "$ASAN_DIR" --setup=asan --print-errorlogs; then
      asan_status=0
    fi
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
failures, flaky = [], []


unreadable = []


def entries(path):
    """The log's entries; a line that is not JSON (a log two runs wrote at once) is named and
    fails the run rather than the summary."""
    found = []
    with open(path, encoding="utf-8", errors="replace") as log:
        for number, line in enumerate(log, 1):
            if not line.strip():
                continue
            try:
                found.append(json.loads(line))
            except json.JSONDecodeError:
                unreadable.append(f"{path}:{number}")
    return found


def tail(entry):
    text = (entry.get("stdout") or "") + (entry.get("stderr") or "")
    return text.splitlines()[-30:]


for path in logs:
    if not os.path.exists(path):
        continue
    where = os.path.basename(os.path.dirname(os.path.dirname(path)))
    # After a rerun, PATH holds only the rerun tests and PATH.first the whole first run.
    first = path + ".first"
    rerun = {}
    if os.path.exists(first):
        rerun = {entry["name"]: entry for entry in entries(path)}
        path = first
    for entry in entries(path):
        result = entry.get("result")
        name = f"{where}/{entry.get('name')} ({result}, {entry.get('duration', 0):.0f} s)"
        if result in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif result == "SKIP":
            skipped += 1
        elif rerun.get(entry["name"], {}).get("result") == "OK":
            passed += 1  # FAIL, TIMEOUT, ERROR once, then OK alone
            flaky.append((name, tail(entry)))
        else:
            failed += 1
            again = rerun.get(entry["name"])
            failures.append((name, tail(again or entry)))
# CI shows only the tail of the output: repeat what failed, and the end of its log, just above
# the count.
for label, items in (("flaky, passed when run again", flaky), ("failed", failures)):
    for name, lines in items:
        print(f"{label}: {name}")
        for text in lines:
            print(f"  | {text}")
for where in unreadable:
    print(f"unreadable test log line: {where}")
if flaky:
    print(f"flaky: {len(flaky)} test(s) failed once and passed alone; mend them")
print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")
# meson test failing with nothing counted (no log, a crash before any test) is a failure too,
# in either build.
missing = not os.path.exists(logs[0]) or (asan and not os.path.exists(logs[1]))
sys.exit(1 if failed or unreadable or status != 0 or asan_status != 0 or missing else 0)
PY
