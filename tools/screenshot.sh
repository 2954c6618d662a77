#!/usr/bin/env bash
# Refreshes the README's picture, docs/screenshot.png: the ui suite's window photograph
# (test-ui-app, /ui/app/screenshot), which otherwise lands in build/tests/screenshot.png so
# that running the tests never changes a tracked file.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ensure_packages
build_project

shot="$ROOT/docs/screenshot.png"
run=(meson test -C "$BUILD_DIR" --suite ui ui-app --print-errorlogs)
if [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ]; then
  run=(xvfb-run -a "${run[@]}")
fi
as_builder env SHARDSCOPE_SCREENSHOT="$shot" "${run[@]}"
echo "wrote $shot"
