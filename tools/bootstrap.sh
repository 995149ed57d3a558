#!/usr/bin/env bash
# Install whatever is missing for shimkit on a Debian 12 machine: Debian
# packages (Bazel 4.2.3 and its rule packages, binutils, BLAS/oneDNN,
# debootstrap for the Bazel 7 chroot of tools/bazel7_chroot.sh), the
# Python venv with pinned dependencies, and buildifier from npm. Idempotent:
# a second run installs nothing and takes about a second.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  bazel-bootstrap bazel-skylib bazel-platforms bazel-rules-java
  binutils patchelf libopenblas-dev libdnnl-dev libsleef-dev python3-dev debootstrap cmake ninja-build g++
)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "bootstrap: installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PYTHON=${PYTHON:-python3}
stamp=.venv/.shimkit-installed
# (Re)install when the lock, the project or a compiled module's source changed, or the
# editable install's build of that module is gone (CMake puts it in site-packages).
accel=lint/shimkit/elf/_symnames.c
if [ ! -x .venv/bin/python ] || [ requirements.lock -nt "$stamp" ] || [ pyproject.toml -nt "$stamp" ] \
  || [ "$accel" -nt "$stamp" ] || ! compgen -G ".venv/lib/python3*/site-packages/shimkit/elf/_symnames.*.so" >/dev/null; then
  echo "bootstrap: creating the Python venv (.venv) from requirements.lock"
  [ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r requirements.lock 2>&1 | grep -v "is ignored" || true
  .venv/bin/pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e . 2>&1 | grep -v "is ignored" || true
  .venv/bin/python -c "import shimkit, elftools, numpy, starlark, torch" \
    || { echo "bootstrap: venv is incomplete" >&2; exit 1; }
  touch "$stamp"
fi

if [ ! -x node_modules/.bin/buildifier ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "bootstrap: installing npm dev tools (buildifier, the SARIF schema)"
  npm ci --no-audit --no-fund --silent
fi

# cuDNN's and cuBLAS's headers, for the compile-time check of the CUDA shims'
# declarations (tests/cuda); ~1 MB read out of the pinned wheels the first
# time, then only the local files' hashes are checked against the lock.
if ! python3 tools/fetch_nvidia_headers.py >/dev/null; then
  echo "bootstrap: warning: NVIDIA headers not fetched; tests/cuda will try again" >&2
fi
