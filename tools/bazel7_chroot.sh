#!/usr/bin/env bash
# Run `bazel test //...` of this repository and of examples/consumer under
# Bazel 7 (Debian sid's bazel-bootstrap, 7.7.1 when written) in a debootstrap
# chroot. NOT part of CI: it needs root, ~2.5 minutes and ~2.2 GB the first
# time (the chroot is kept and reused), and a Debian mirror.
#
# Usage: sudo tools/bazel7_chroot.sh [setup|test|all]   (default: all)
# Environment: SHIMKIT_CHROOT (default /var/tmp/shimkit-sid),
#              DEBIAN_MIRROR (default http://deb.debian.org/debian).
#
# Under Bazel 7 the repository is read through MODULE.bazel (bzlmod; the empty
# WORKSPACE.bzlmod keeps the 4.x WORKSPACE out of the way), so this proves the
# bzlmod side: MODULE.bazel, the local_path_override stubs in third_party/ and
# the consumer's local_path_override of shimkit.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CHROOT=${SHIMKIT_CHROOT:-/var/tmp/shimkit-sid}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
MODE=${1:-all}
# The same Debian packages as tools/bootstrap.sh (read from there), plus what a
# minbase chroot lacks.
mapfile -t BOOTSTRAP_PACKAGES < <(sed -n '/^APT_PACKAGES=(/,/^)/p' "$ROOT/tools/bootstrap.sh" \
  | sed '1d;$d' | tr ' ' '\n' | sed '/^$/d')
SID_PACKAGES=("${BOOTSTRAP_PACKAGES[@]}" g++ python3 python3-venv ca-certificates)
# What shimkit_lint_test's interpreter needs (pins from requirements.lock);
# installed from PyPI into a venv in the chroot, passed as $SHIMKIT_PYTHON.
VENV_PACKAGES=(pyelftools numpy starlark-pyo3 Jinja2 MarkupSafe)
VENV=/opt/shimkit-venv

log() { echo "bazel7_chroot: $*"; }

require_root() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "bazel7_chroot: run as root (debootstrap and chroot need it)" >&2
    exit 2
  fi
}

setup() {
  if ! command -v debootstrap >/dev/null; then
    log "installing debootstrap"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  fi
  if [ ! -x "$CHROOT/usr/bin/apt-get" ]; then
    log "debootstrap --variant=minbase sid $CHROOT"
    debootstrap --variant=minbase sid "$CHROOT" "$MIRROR"
  fi
  mount_all
  local missing=() pkg
  for pkg in "${SID_PACKAGES[@]}"; do
    in_chroot dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
      || missing+=("$pkg")
  done
  if ((${#missing[@]})); then
    log "installing ${missing[*]} in the chroot"
    # The mirror's sid Release file may be older than its Valid-Until (a
    # frozen mirror, or a machine clock ahead of it): do not refuse it.
    in_chroot apt-get -o Acquire::Check-Valid-Until=false update -qq
    in_chroot env DEBIAN_FRONTEND=noninteractive \
      apt-get -o Acquire::Check-Valid-Until=false install -y -qq --no-install-recommends \
      "${missing[@]}"
  fi
  if ! in_chroot "$VENV/bin/python" -c "import elftools, numpy, starlark, jinja2" 2>/dev/null; then
    local pins=()
    for pkg in "${VENV_PACKAGES[@]}"; do
      pins+=("$(grep -i "^$pkg==" "$ROOT/requirements.lock")")
    done
    log "creating $VENV in the chroot: ${pins[*]}"
    # The host's pip fetches wheels for the chroot's Python (the host is
    # already set up to reach the package index); the chroot installs them
    # offline.
    local pyver wheels="$CHROOT/tmp/shimkit-wheels"
    pyver=$(in_chroot python3 -c 'import sys; print("%d%d" % sys.version_info[:2])')
    rm -rf "$wheels"
    "$ROOT/.venv/bin/pip" download -q --disable-pip-version-check -d "$wheels" \
      --only-binary=:all: --python-version "$pyver" --platform manylinux_2_28_x86_64 \
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any "${pins[@]}"
    rm -rf "${CHROOT:?}$VENV"
    in_chroot python3 -m venv "$VENV"
    in_chroot env -u PIP_FIND_LINKS "$VENV/bin/pip" install -q --disable-pip-version-check \
      --no-index --find-links /tmp/shimkit-wheels "${pins[@]}"
  fi
  log "$(in_chroot dpkg-query -W -f='${Package} ${Version}' bazel-bootstrap)"
}

mounts=()
mount_all() {
  for dir in proc dev dev/pts sys; do
    mkdir -p "$CHROOT/$dir"
    if ! mountpoint -q "$CHROOT/$dir"; then
      mount --bind "/$dir" "$CHROOT/$dir"
      mounts=("$CHROOT/$dir" "${mounts[@]}")
    fi
  done
}

umount_all() {
  local dir
  for dir in "${mounts[@]}"; do
    umount "$dir" || umount -l "$dir" || true
  done
  mounts=()
}

in_chroot() {
  chroot "$CHROOT" "$@"
}

copy_tree() {
  # The working tree as git sees it (tracked + untracked, not ignored), so the
  # chroot tests exactly what would be committed.
  local dest="$CHROOT/src/shimkit"
  rm -rf "$dest"
  mkdir -p "$dest"
  (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard \
    | xargs -0 -I{} sh -c 'test -e "{}" && printf "%s\0" "{}"' \
    | tar --null -T - -cf -) | tar -xf - -C "$dest"
}

run_tests() {
  copy_tree
  mount_all
  local status=0 version
  version=$(in_chroot dpkg-query -W -f='bazel-bootstrap ${Version}' bazel-bootstrap || true)
  log "bazel: ${version:-unknown}"
  log "bazel test //... (repository)"
  in_chroot env SHIMKIT_PYTHON="$VENV/bin/python" \
    bash -c 'cd /src/shimkit && bazel test //...' || status=1
  log "bazel test //... (examples/consumer)"
  in_chroot bash -c 'cd /src/shimkit/examples/consumer && bazel test //...' || status=1
  in_chroot bash -c 'cd /src/shimkit/examples/consumer && bazel shutdown; cd /src/shimkit && bazel shutdown' || true
  umount_all
  if [ "$status" -eq 0 ]; then
    log "PASS $(date -u +%Y-%m-%dT%H:%MZ) ${version}"
  else
    log "FAIL $(date -u +%Y-%m-%dT%H:%MZ) ${version}"
  fi
  return "$status"
}

require_root
trap umount_all EXIT
case "$MODE" in
  setup) setup ;;
  test) run_tests ;;
  all)
    setup
    run_tests
    ;;
  *)
    echo "usage: $0 [setup|test|all]" >&2
    exit 2
    ;;
esac
