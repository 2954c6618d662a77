#!/usr/bin/env bash
# tools/framework-venv.sh: makes the virtual environments the `frameworks` test suite and the
# Hugging Face reference checks run in, from PyPI. Nothing else in the project needs them; the
# suite skips, with the reason, where they are missing.
#
#   tools/framework-venv.sh [DIR]     DIR defaults to $SHARDSCOPE_FRAMEWORK_VENV, else
#                                     .venv-frameworks/ in the checkout
#
# DIR/torch      PyTorch (a CUDA build from PyPI, about 5-6 GB; it runs on the CPU too), Hugging
#                Face transformers, safetensors, NumPy, JAX (CPU), onnx (tests/data/onnx/make-fixtures.py)
# DIR/mindspore  MindSpore, on its own: it pins NumPy and protobuf versions of its own
#
# Re-running it upgrades nothing that is already installed; delete DIR to start over.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${1:-${SHARDSCOPE_FRAMEWORK_VENV:-$ROOT/.venv-frameworks}}"
mkdir -p "$DIR"

if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  echo "framework-venv.sh: python3's venv module is missing: apt-get install python3-venv" >&2
  exit 1
fi

make_venv() {
  local name="$1"
  shift
  if [ ! -x "$DIR/$name/bin/python" ]; then
    python3 -m venv "$DIR/$name"
  fi
  "$DIR/$name/bin/python" -m pip install --quiet --upgrade pip
  "$DIR/$name/bin/python" -m pip install --quiet "$@"
  echo "framework-venv.sh: $DIR/$name ready: $("$DIR/$name/bin/python" -m pip list 2>/dev/null \
    | awk -v want="$*" 'BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) { sub(/\[.*/, "", w[i]); keep[tolower(w[i])] = 1 } }
                        tolower($1) in keep { printf "%s %s  ", $1, $2 }')"
}

make_venv torch torch transformers safetensors numpy "jax[cpu]" onnx
make_venv mindspore mindspore numpy
