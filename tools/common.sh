# tools/common.sh: what tools/run.sh, tools/test.sh and .ci/run share. Sourced, not run.
#
# Works as root (CI, containers), as a normal user (apt through sudo) and under
# "sudo bash tools/...", where the build itself runs as the invoking user so that build/
# does not end up owned by root in their checkout.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# build/ unless SHARDSCOPE_BUILD_DIR names another (to keep several builds side by side).
BUILD_DIR="${SHARDSCOPE_BUILD_DIR:-$ROOT/build}"

# The sanitized build (tools/test.sh): ASan + UBSan, no GPU or GUI, and with clang the
# libFuzzer harnesses too. $SHARDSCOPE_ASAN_DIR names another folder.
ASAN_DIR="${SHARDSCOPE_ASAN_DIR:-$ROOT/build-asan}"

# Everything the project builds, tests and runs with on Debian 12 (clang and its runtime
# libraries for the fuzz harnesses).
PACKAGES=(
  build-essential meson ninja-build pkg-config
  libglib2.0-dev libjson-glib-dev libsqlite3-dev
  libgraphviz-dev graphviz libcairo2-dev libpango1.0-dev
  libgtk-4-dev libadwaita-1-dev
  libopenblas-dev
  gettext desktop-file-utils appstream
  xvfb xauth python3 python3-numpy
  fonts-wqy-zenhei  # CJK glyphs for the canvas text test (tests/test-ui-dark.c)
  libopenmpi-dev
  clang libclang-rt-dev
  libprotobuf-c-dev protobuf-c-compiler
)

# Root runs apt itself; anyone else needs sudo.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "$(basename "$0"): installing packages needs root; run as root or install sudo" >&2
    return 1
  fi
}

# Under sudo, build and test as the user who owns the checkout.
as_builder() {
  if [ "$(id -u)" -eq 0 ] && [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ] \
     && [ "$(stat -c %U "$ROOT")" = "$SUDO_USER" ]; then
    # sudo resets PATH to its secure_path, which lacks /usr/local/cuda/bin.
    sudo -u "$SUDO_USER" -H -- env PATH="$PATH" "$@"
  else
    "$@"
  fi
}

# Installs the packages that are missing; does nothing (not even apt-get update) when none is.
ensure_packages() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
      missing+=("$p")
    fi
  done
  if [ "${#missing[@]}" -eq 0 ]; then
    return 0
  fi
  echo "Installing missing packages: ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
}

# Configures build/ (or reconfigures an existing one) and builds it. Returns non-zero on the
# first failure, also where the caller tests it (errexit does not apply there).
# With the CUDA toolkit on the machine (CI's has it), the GPU backends are built whatever
# the machine's GPUs, so their code cannot rot; their tests skip where no device answers.
# Elsewhere the features stay auto.
gpu_options() {
  if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
  if command -v nvcc >/dev/null 2>&1; then
    echo "-Dcuda=enabled -Dnccl=enabled"
  fi
}

build_project() {
  cd "$ROOT" || return
  gpu_options >/dev/null
  local options
  read -r -a options <<<"$(gpu_options)"
  if [ -f "$BUILD_DIR/meson-private/coredata.dat" ]; then
    as_builder meson setup --reconfigure "${options[@]}" "$BUILD_DIR" || return
  else
    as_builder meson setup "${options[@]}" "$BUILD_DIR" || return
  fi
  as_builder meson compile -C "$BUILD_DIR"
}

# Configures and builds the sanitized tree, ASAN_DIR: clang with the fuzz harnesses where
# clang is installed, else the default compiler without them. CUDA, NCCL, MPI and the GTK app
# stay out: the sanitizers run the planner, executor (CPU) and CLI suites. Returns non-zero
# on the first failure.
build_asan() {
  cd "$ROOT" || return
  local options=(-Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled -Dnccl=disabled
                 -Dmpi=disabled -Dgui=disabled)
  local compiler=()
  if command -v clang >/dev/null 2>&1; then
    options+=(-Dfuzz=true)
    compiler=(env CC=clang)
  fi
  if [ -f "$ASAN_DIR/meson-private/coredata.dat" ]; then
    as_builder meson setup --reconfigure "${options[@]}" "$ASAN_DIR" || return
  else
    as_builder "${compiler[@]}" meson setup "${options[@]}" "$ASAN_DIR" || return
  fi
  as_builder meson compile -C "$ASAN_DIR"
}
