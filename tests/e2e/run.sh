#!/bin/bash
# End-to-end tests of slurm-imex on a real Slurm cluster of $E2E_NODES nodes
# (tests/e2e/cluster.sh), whichever Slurm this machine (or rootfs) has.
# tests/e2e/versions.sh runs it on every supported Slurm. Needs root.
# E2E_PHASE picks the cluster and the tests (phases.sh); E2E_ONLY=WORD runs
# only the tests whose name holds WORD; E2E_SKIP="WORD..." leaves out (and
# names) the tests whose name holds one of the words. Prints "e2e: N passed, M failed" and
# exits non-zero on any failure.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BIN=${BIN:-$REPO/target/release}
E2E_PHASE=${E2E_PHASE:-base}
source "$HERE/phases.sh"
phase_environment "$E2E_PHASE"
source "$HERE/cluster.sh"
source "$HERE/lib.sh"
for feature in jobs shared-nodes blame doctor prefix-install rpm-install gpu-health switch topology rack-map rack-domains \
  controller segments faults fleet gb200 accounting metrics-store watch nvl72 containers upgrade systemd; do
  # shellcheck disable=SC1090 # the feature files, each checked on its own
  source "$HERE/$feature.sh"
done

skipped() { # test
  local w
  for w in ${E2E_SKIP:-}; do [[ "$1" == *"$w"* ]] && return 0; done
  return 1
}

# The phase's tests (phase_tests, or phase_tests_after_down once the
# cluster is down), each after reset_nodes while it is up; a failed one
# dumps the cluster.
run_phase_tests() { # list-function
  local t
  for t in $("$1" "$E2E_PHASE"); do
    if [ -n "${E2E_ONLY:-}" ] && [[ "$t" != *"$E2E_ONLY"* ]]; then continue; fi
    if skipped "$t"; then echo "--- $t"; echo "    skipped (E2E_SKIP)"; continue; fi
    run_test "$t"
  done
}

# Every binary the cluster installs, built.
check_built() {
  local f
  for f in slurm-imex-prolog slurm-imex-epilog slurm-imex-watch slurm-imex nvidia-imex nvidia-imex-ctl fake-gpu-job libnvidia_ml.so; do
    [ -e "$BIN/$f" ] || { echo "e2e: $BIN/$f missing: run cargo build --release --workspace" >&2; return 1; }
  done
}

# Whatever ends the phase (a failed cluster_up, an error, SIGINT or SIGTERM),
# the cluster goes down with it; versions.sh reaps after a SIGKILL.
CLUSTER_STARTED=0
down_on_exit() { [ "$CLUSTER_STARTED" = 1 ] || return 0; CLUSTER_STARTED=0; cluster_down; }
trap down_on_exit EXIT
trap 'echo "e2e: interrupted" >&2; exit 130' INT TERM HUP

main() {
  [ "$(id -u)" = 0 ] || { echo "e2e: must run as root" >&2; exit 1; }
  case " $PHASES " in *" $E2E_PHASE "*) ;; *)
    echo "e2e: unknown E2E_PHASE '$E2E_PHASE' (one of: $PHASES)" >&2; exit 2;;
  esac
  check_built || exit 1
  # What an earlier run left is named on stderr and stopped.
  cluster_down >/dev/null || true
  cluster_install "$BIN" || exit 1
  if [ "$E2E_PHASE" = containers ]; then containers_setup || exit 1; fi
  local t0=$SECONDS
  CLUSTER_STARTED=1
  cluster_up || { echo "e2e: cluster_up failed: phase $E2E_PHASE not run" >&2; exit 1; }
  echo "cluster of $E2E_NODES nodes up in $((SECONDS - t0)) s: $(sinfo -V), phase $E2E_PHASE, from $E2E_INSTALL"
  run_phase_tests phase_tests
  CLUSTER_STARTED=0
  cluster_down || { FAILED=$((FAILED + 1)); FAILED_NAMES+=(cluster_down_leftovers); }
  # shellcheck disable=SC2034 # read by run_test (lib.sh)
  CLUSTER_IS_DOWN=1
  run_phase_tests phase_tests_after_down
  echo "e2e run time: $((SECONDS - t0)) s"
  [ ${#FAILED_NAMES[@]} -gt 0 ] && echo "failed: ${FAILED_NAMES[*]}"
  echo "e2e: $PASSED passed, $FAILED failed"
  [ "$FAILED" = 0 ]
}
main "$@"
