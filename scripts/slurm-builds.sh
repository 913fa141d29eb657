#!/bin/bash
# Builds every Slurm release the end-to-end matrix needs from source, one
# after another, in the background and at the lowest CPU priority, so that
# they compile while the tests that need no source build run:
#
#   scripts/slurm-builds.sh start        # start the queue (returns at once)
#   scripts/slurm-builds.sh wait NAME    # wait for one build; prints its tree
#   scripts/slurm-builds.sh run NAME     # build one now, in the foreground
#   scripts/slurm-builds.sh queue-order  # the source releases, in build order
#   scripts/slurm-builds.sh finished REL # exit 0 once REL's build is over
#
# NAME is RELEASE or RELEASE-rhel (slurm.spec's layout): every release of
# scripts/slurm-releases built from source (from = source:prefix or
# source:rhel); each is scripts/slurm-prefix.sh RELEASE [--layout rhel],
# cached by release. The previous slurm-imex release's .deb
# (tests/e2e/previous-release.sh) is in the queue too: it is the other long
# build. `wait` exits 3 when a build had nothing to build from (no source
# snapshot, no earlier release), and 1 when it failed (its log is named).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
state=$REPO/target/slurm-builds
source "$REPO/scripts/releases.sh"

# The queue, most needed first: the source releases with the most phases
# (the newest first among equals), with the previous release's .deb second
# (the upgrade phase, early in the matrix, waits for it). Not first: it
# builds in Debian 13's rootfs, which tests/e2e/background-start.sh is still
# making then (debootstrap, about 9 minutes); the first source build needs
# nothing, so the queue compiles from the start instead of waiting on it.
build_queue() {
  local rel name
  for rel in $(releases_from source); do
    name=$rel
    [ "$(release_field "$rel" from)" = source:rhel ] && name=$rel-rhel
    echo "$(release_field "$rel" phases | wc -w) $name"
  done | sort -k1,1nr -k2,2r | cut -d' ' -f2 |
    awk '{ print } NR == 1 { print "previous" } END { if (NR == 0) print "previous" }'
}
mapfile -t QUEUE < <(build_queue)

# A process and every process below it, at normal priority (root may).
renice_tree() { # pid
  local pid=$1 child
  [ -n "$pid" ] && renice -n 0 -p "$pid" >/dev/null 2>&1 || return 0
  for child in $(ps -o pid= --ppid "$pid" 2>/dev/null); do renice_tree "$child"; done
}

build_one() { # name
  local name=$1 rc=0
  case $name in
    previous) "$REPO/tests/e2e/previous-release.sh" "$("$REPO/scripts/slurm-rootfs.sh" trixie)" || rc=$?;;
    *-rhel) "$REPO/scripts/slurm-prefix.sh" "${name%-rhel}" --layout rhel || rc=$?;;
    *) "$REPO/scripts/slurm-prefix.sh" "$name" || rc=$?;;
  esac
  return $rc
}

# Each build writes its result to $state/NAME.out and its exit status to
# $state/NAME.rc, the latter last.
run_queue() {
  local name rc
  for name in "${QUEUE[@]}"; do
    [ -f "$state/$name.rc" ] && continue
    rc=0
    build_one "$name" > "$state/$name.out" 2> "$state/$name.err" || rc=$?
    echo "$rc" > "$state/$name.rc"
  done
}

case ${1:-} in
  start)
    mkdir -p "$state"
    # Once per run: a queue that is still going is left to finish.
    if [ -f "$state/queue.pid" ] && kill -0 "$(cat "$state/queue.pid")" 2>/dev/null; then exit 0; fi
    rm -f "$state"/*.rc "$state"/*.out "$state"/*.err "$state/gave-up"
    nohup nice -n 19 "$0" queue > "$state/queue.log" 2>&1 &
    echo $! > "$state/queue.pid"
    echo "slurm-builds: started (${QUEUE[*]}); logs in $state" >&2;;
  queue) run_queue;;
  wait)
    name=${2:?wait NAME}
    [ -d "$state" ] || { echo "slurm-builds: no queue was started (scripts/slurm-builds.sh start)" >&2; exit 1; }
    case " ${QUEUE[*]} " in *" $name "*) ;; *) echo "slurm-builds: $name is not in the queue (${QUEUE[*]})" >&2; exit 2;; esac
    # Until its status is written, as long as the queue runs (a queue that
    # died, killed or out of disk, never writes it), and for at most
    # E2E_BUILD_WAIT seconds (3600), once per run: after one wait gives up,
    # every later one fails at once. Someone waits on the queue now: it runs
    # at normal priority from here on, so that a busy machine (another
    # nice 0 load) does not starve it.
    [ -f "$state/$name.rc" ] || renice_tree "$(cat "$state/queue.pid" 2>/dev/null)"
    limit=$((SECONDS + ${E2E_BUILD_WAIT:-3600}))
    until [ -f "$state/$name.rc" ]; do
      if ! kill -0 "$(cat "$state/queue.pid" 2>/dev/null)" 2>/dev/null && [ ! -f "$state/$name.rc" ]; then
        echo "slurm-builds: the queue stopped before building $name; see $state/queue.log" >&2; exit 1
      fi
      if [ -f "$state/gave-up" ]; then
        echo "slurm-builds: an earlier wait gave up on the queue ($(cat "$state/gave-up")); $name is not built" >&2; exit 1
      fi
      if [ "$SECONDS" -ge "$limit" ]; then
        echo "waited ${E2E_BUILD_WAIT:-3600} s for $name" > "$state/gave-up"
        echo "slurm-builds: waited ${E2E_BUILD_WAIT:-3600} s for $name (E2E_BUILD_WAIT); it is still building, see $state/queue.log; the builds after it are given up too" >&2; exit 1
      fi
      sleep 2
    done
    rc=$(cat "$state/$name.rc")
    case $rc in
      0) tail -1 "$state/$name.out";;
      3) cat "$state/$name.err" >&2; exit 3;;
      *) echo "slurm-builds: $name failed:" >&2; tail -5 "$state/$name.err" >&2; exit 1;;
    esac;;
  run) build_one "${2:?run NAME}";;
  # The source releases in the order the queue builds them (their names
  # without -rhel), for whoever runs their phases as they are done.
  queue-order) for name in "${QUEUE[@]}"; do [ "$name" = previous ] || echo "${name%-rhel}"; done;;
  # Whether a source release's build is over, in either layout (its status
  # written: built, failed or nothing to build from); `wait` says which.
  finished) rel=${2:?finished RELEASE}; [ -f "$state/$rel.rc" ] || [ -f "$state/$rel-rhel.rc" ];;
  *) echo "usage: slurm-builds.sh start | wait NAME | run NAME | queue-order | finished RELEASE" >&2; exit 2;;
esac
