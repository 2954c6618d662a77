#!/usr/bin/env bash
# The README's run command: installs what is missing, builds into build/ and starts the app
# (the CLI when there is no display).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ensure_packages
build_project

# The app on the built-in example (gpt2, megatron, dp=2,mp=4) and the default store, with the
# translations built in $BUILD_DIR/po (SHARDSCOPE_LOCALEDIR); without a display (or without
# the GUI in this build) the same job through the CLI.
app="$BUILD_DIR/app/shardscope"
if [ -x "$app" ] && { [ -n "${DISPLAY:-}" ] || [ -n "${WAYLAND_DISPLAY:-}" ]; }; then
  as_builder env DISPLAY="${DISPLAY:-}" WAYLAND_DISPLAY="${WAYLAND_DISPLAY:-}" \
    XAUTHORITY="${XAUTHORITY:-}" XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-}" \
    SHARDSCOPE_LOCALEDIR="$BUILD_DIR/po" \
    "$app" gpt2 --mesh dp=2,mp=4 --policy megatron
  exit
fi
if [ -x "$app" ]; then
  echo "No display (DISPLAY and WAYLAND_DISPLAY are unset): running the CLI instead of $app."
else
  echo "This build has no GUI (GTK 4 and libadwaita not found): running the CLI."
fi
echo

cli="$BUILD_DIR/app/shardscope-cli"
as_builder "$cli" graph gpt2
echo
as_builder "$cli" strategies gpt2 --mesh dp=2,mp=4 --op transformer.h.0.mlp.c_fc
echo
as_builder "$cli" propagate gpt2 --mesh dp=2,mp=4 --policy megatron
