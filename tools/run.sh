#!/usr/bin/env bash
# The README's run command: installs what is missing, builds into build/ and runs the main job.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ensure_packages
build_project

cli="$BUILD_DIR/app/shardscope-cli"
as_builder "$cli" graph gpt2
echo
as_builder "$cli" strategies gpt2 --mesh dp=2,mp=4 --op transformer.h.0.mlp.c_fc
echo
as_builder "$cli" propagate gpt2 --mesh dp=2,mp=4 --policy megatron
