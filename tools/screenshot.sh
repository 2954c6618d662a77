#!/usr/bin/env bash
# Refreshes the README's picture, docs/screenshot.png (test-ui-app, /ui/app/screenshot), and
# docs/screenshots/app-{1920x1080,1280x720}-{light,dark}.png (test-ui-screenshots): the ui
# suite's photographs, which otherwise land in build/tests/ so that running the tests never
# changes a tracked file.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ensure_packages
build_project

shot="$ROOT/docs/screenshot.png"
shots="$ROOT/docs/screenshots"
mkdir -p "$shots"
run=(meson test -C "$BUILD_DIR" --suite ui ui-app ui-screenshots --print-errorlogs)
if [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ]; then
  run=(xvfb-run -a -s "-screen 0 2560x1600x24" "${run[@]}")
fi
as_builder env SHARDSCOPE_SCREENSHOT="$shot" SHARDSCOPE_SCREENSHOT_DIR="$shots" "${run[@]}"
echo "wrote $shot and $shots/"
