#!/bin/bash
# Starts, in the background below the cargo stages' priority, what the
# end-to-end suite (tests/e2e/versions.sh) needs long before it runs, so
# that it overlaps the cargo stages.
#   - the Debian root filesystems of scripts/slurm-releases (and the
#     bookworm one booted with systemd, when a release has that phase):
#     those our .deb installs in (Debian 13's, which the previous release's
#     .deb also builds in: scripts/slurm-builds.sh) beside the others, which
#     are made one after another (scripts/slurm-rootfs.sh; versions.sh finds
#     each made, or waits on its lock);
#   - the arm64 build (tests/e2e/arm64.sh's arm64_start, at nice 10: it
#     says why); the root filesystems at nice 19.
# tests/run-all.sh calls it and then sets E2E_BACKGROUND_STARTED, so that
# versions.sh does not start the arm64 build again. Returns at once.
# Log: target/e2e-logs/rootfs-prefetch.log and arm64-build.log.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
LOGS=$REPO/target/e2e-logs
mkdir -p "$LOGS"
source scripts/releases.sh
source tests/e2e/arm64.sh

suites=() deb_suites=()
for r in $(releases_from rootfs); do suites+=("$(release_field "$r" from | cut -d: -f2)"); done
for r in $(releases_from rootfs-deb); do deb_suites+=("$(release_field "$r" from | cut -d: -f2)"); done
systemd=
for r in $(releases_from host) $(releases_from rootfs) $(releases_from rootfs-deb); do
  [[ " $(release_field "$r" phases) " == *" systemd "* ]] && systemd=1
done
# (failures are versions.sh's to name: it asks for every rootfs again)
prefetch() { # [--systemd] suite...
  local systemd=
  [ "${1:-}" = --systemd ] && { systemd=1; shift; }
  ( exec nice -n 19 bash -c '
      systemd=$1; shift
      for suite in "$@"; do scripts/slurm-rootfs.sh "$suite" >/dev/null || true; done
      [ -z "$systemd" ] || scripts/slurm-rootfs.sh bookworm systemd >/dev/null || true' \
      rootfs-prefetch "$systemd" "$@" ) >> "$LOGS/rootfs-prefetch.log" 2>&1 &
}
: > "$LOGS/rootfs-prefetch.log"
prefetch "${deb_suites[@]}"
prefetch ${systemd:+--systemd} "${suites[@]}"
arm64_start
echo "background: root filesystems (${deb_suites[*]} beside ${suites[*]}${systemd:+, bookworm systemd}) and the arm64 build started; logs in $LOGS"
