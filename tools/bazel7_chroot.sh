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
SID_PACKAGES=(
  bazel-bootstrap bazel-skylib bazel-platforms bazel-rules-java
  g++ binutils python3 ca-certificates
)

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
  if [ ! -x "$CHROOT/usr/bin/bazel" ]; then
    log "installing ${SID_PACKAGES[*]} in the chroot"
    # The mirror's sid Release file may be older than its Valid-Until (a
    # frozen mirror, or a machine clock ahead of it): do not refuse it.
    in_chroot apt-get -o Acquire::Check-Valid-Until=false update -qq
    in_chroot env DEBIAN_FRONTEND=noninteractive \
      apt-get -o Acquire::Check-Valid-Until=false install -y -qq --no-install-recommends \
      "${SID_PACKAGES[@]}"
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
  version=$(in_chroot bazel --version 2>/dev/null | tail -1 || true)
  log "bazel: ${version:-unknown}"
  log "bazel test //... (repository)"
  in_chroot bash -c 'cd /src/shimkit && bazel test //...' || status=1
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
  all) setup && run_tests ;;
  *)
    echo "usage: $0 [setup|test|all]" >&2
    exit 2
    ;;
esac
