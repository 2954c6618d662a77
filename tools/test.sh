#!/usr/bin/env bash
# The README's test command: installs what is missing, builds into build/, runs every test
# suite (benchmarks are not tests and are not run) and ends with one line,
#   tests: N passed, N failed, N skipped
# counted from build/meson-logs/testlog.json. Exits non-zero when anything failed.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ensure_packages

testlog="$BUILD_DIR/meson-logs/testlog.json"
rm -f "$testlog"
# A failed build still ends with the summary line (no tests ran) and a non-zero exit.
if build_project; then
  run_tests=(meson test -C "$BUILD_DIR" --print-errorlogs --num-processes 2)
  # The ui suite needs a display; CI has none.
  if [ -z "${DISPLAY:-}" ]; then
    run_tests=(xvfb-run -a "${run_tests[@]}")
  fi
  set +e
  as_builder "${run_tests[@]}"
  status=$?
  set -e
else
  status=$?
  echo "$(basename "$0"): the build failed; no tests ran" >&2
fi

python3 - "$testlog" "$status" <<'PY'
import json
import os
import sys

path, status = sys.argv[1], int(sys.argv[2])
passed = failed = skipped = 0
if os.path.exists(path):
    with open(path, encoding="utf-8") as log:
        for line in log:
            if not line.strip():
                continue
            result = json.loads(line).get("result")
            if result in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif result == "SKIP":
                skipped += 1
            else:  # FAIL, TIMEOUT, ERROR, UNEXPECTEDPASS
                failed += 1
print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")
# meson test failing with nothing counted (no log, a crash before any test) is a failure too.
sys.exit(1 if failed or status != 0 or not os.path.exists(path) else 0)
PY
