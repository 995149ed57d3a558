#!/usr/bin/env bash
# Bazel 7 (Debian sid's bazel-bootstrap, 7.7.1 when written) in a debootstrap
# chroot, for the bzlmod proofs of `make test` (tests/bazel/test_adopt.py runs
# the acme consumer through `run`). Needs root; the chroot is made once
# (~2.5 minutes, ~2.2 GB, a Debian mirror) and kept under build/.
#
# Usage: tools/bazel7_chroot.sh setup
#          create or complete the chroot: sid minbase, the packages of
#          tools/bootstrap.sh plus g++ and python3, and a venv with the lint
#          tests' Python packages (pins from requirements.lock) at /opt/shimkit-venv
#        tools/bazel7_chroot.sh run [--cwd DIR] COMMAND...
#          run COMMAND in the chroot (DIR is a path inside it), with
#          SHIMKIT_PYTHON set to that venv
#        tools/bazel7_chroot.sh test
#          `bazel test //...` of this working tree (tracked + untracked files)
#          under Bazel 7: shimkit's own tree through MODULE.bazel; not part of
#          `make test` (slow), for changes to the module itself
# Environment: SHIMKIT_CHROOT (default build/bazel7-sid), DEBIAN_MIRROR
#              (default http://deb.debian.org/debian).
#
# /proc, /dev and /sys are bound into the chroot inside a private mount
# namespace (unshare), so no mount outlives the command, whatever kills it, and
# `rm -rf build` never reaches the host's /dev.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CHROOT=${SHIMKIT_CHROOT:-$ROOT/build/bazel7-sid}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DEBOOTSTRAP_DONE=.shimkit-debootstrap-ok
# The Debian packages of tools/bootstrap.sh (read from there; debootstrap is
# for the host only), plus what a minbase chroot lacks.
mapfile -t BOOTSTRAP_PACKAGES < <(sed -n '/^APT_PACKAGES=(/,/^)/p' "$ROOT/tools/bootstrap.sh" \
  | sed '1d;$d' | tr ' ' '\n' | sed '/^$/d;/^debootstrap$/d')
SID_PACKAGES=("${BOOTSTRAP_PACKAGES[@]}" g++ python3 python3-venv ca-certificates)
# What shimkit_lint_test's interpreter needs (pins from requirements.lock);
# installed from PyPI into a venv in the chroot, passed as $SHIMKIT_PYTHON.
VENV_PACKAGES=(pyelftools numpy starlark-pyo3 Jinja2 MarkupSafe)
VENV=/opt/shimkit-venv

log() { echo "bazel7_chroot: $*" >&2; }

die() {
  log "$*"
  exit 2
}

require_root() {
  [ "$(id -u)" -eq 0 ] || die "run as root (debootstrap, chroot and mounts need it)"
}

# Run "$@" inside the chroot, in a private mount namespace holding the binds.
in_chroot() {
  unshare --mount --propagation private -- /bin/sh -euc '
    root=$1; shift
    for dir in proc dev sys; do
      mkdir -p "$root/$dir"
      mount --rbind "/$dir" "$root/$dir"
    done
    exec chroot "$root" "$@"' sh "$CHROOT" "$@"
}

setup() {
  command -v debootstrap >/dev/null || die "debootstrap is missing: run tools/bootstrap.sh (make setup)"
  if [ ! -e "$CHROOT/$DEBOOTSTRAP_DONE" ]; then
    log "debootstrap --variant=minbase sid $CHROOT (once: ~2.5 minutes, ~2.2 GB with the packages)"
    mkdir -p "$CHROOT"
    debootstrap --variant=minbase sid "$CHROOT" "$MIRROR" >&2 \
      || die "debootstrap of sid into $CHROOT from $MIRROR failed (network? DEBIAN_MIRROR?)"
    touch "$CHROOT/$DEBOOTSTRAP_DONE"
  fi
  local missing=() pkg
  for pkg in "${SID_PACKAGES[@]}"; do
    in_chroot dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
      || missing+=("$pkg")
  done
  if ((${#missing[@]})); then
    log "installing ${missing[*]} in the chroot"
    # The mirror's sid Release file may be older than its Valid-Until (a
    # frozen mirror, or a machine clock ahead of it): do not refuse it.
    in_chroot apt-get -o Acquire::Check-Valid-Until=false update -qq >&2
    in_chroot env DEBIAN_FRONTEND=noninteractive \
      apt-get -o Acquire::Check-Valid-Until=false install -y -qq --no-install-recommends \
      "${missing[@]}" >&2
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
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any "${pins[@]}" >&2
    rm -rf "${CHROOT:?}$VENV"
    in_chroot python3 -m venv "$VENV"
    in_chroot env -u PIP_FIND_LINKS "$VENV/bin/pip" install -q --disable-pip-version-check \
      --no-index --find-links /tmp/shimkit-wheels "${pins[@]}" >&2
    rm -rf "$wheels"
  fi
  log "ready: $(in_chroot dpkg-query -W -f='${Package} ${Version}' bazel-bootstrap)"
}

run() {
  local cwd=/
  if [ "${1:-}" = "--cwd" ]; then
    cwd=$2
    shift 2
  fi
  (($#)) || die "usage: $0 run [--cwd DIR] COMMAND..."
  [ -x "$CHROOT/usr/bin/bazel" ] || die "no Bazel in $CHROOT: run $0 setup first"
  in_chroot /usr/bin/env SHIMKIT_PYTHON="$VENV/bin/python" /bin/sh -c 'cd "$1" && shift && exec "$@"' \
    sh "$cwd" "$@"
}

test_tree() {
  # The working tree as git sees it (tracked + untracked, not ignored), so the
  # chroot tests exactly what would be committed.
  local dest="$CHROOT/src/shimkit"
  rm -rf "$dest"
  mkdir -p "$dest"
  (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard \
    | xargs -0 -I{} sh -c 'test -e "{}" && printf "%s\0" "{}"' \
    | tar --null -T - -cf -) | tar -xf - -C "$dest"
  local status=0
  run --cwd /src/shimkit bazel test //... || status=1
  run --cwd /src/shimkit bazel shutdown || true
  return "$status"
}

require_root
case "${1:-}" in
  setup) setup ;;
  run)
    shift
    run "$@"
    ;;
  test) test_tree ;;
  *) die "usage: $0 setup | run [--cwd DIR] COMMAND... | test" ;;
esac
