# shellcheck shell=bash
# Waiting, for the harness, the tests and the benches: the one way to wait
# for something in tests/e2e (no hand-written sleep loops).

# Run CMD... every 0.1 s until it succeeds or SECONDS (whole) have passed on
# the clock, however long CMD takes; its status. Says nothing: for waits
# whose caller decides what a timeout means (a graceful stop before kill -9,
# a state the caller then asserts, a wait inside $(...)).
poll_until() { # seconds cmd...
  local deadline=$(( ${EPOCHREALTIME/./} + $1 * 1000000 )); shift
  until "$@"; do
    (( ${EPOCHREALTIME/./} < deadline )) || return 1
    sleep 0.1
  done
}

# poll_until, and on timeout one line naming WHAT: a failure of the current
# test (assert.sh's fail) inside a test, on stderr outside one. Never inside
# $(...), where the failure would be lost with the subshell.
wait_until() { # seconds what cmd...
  local seconds=$1 what=$2; shift 2
  poll_until "$seconds" "$@" && return 0
  if declare -F fail >/dev/null; then fail "waited $seconds s for $what"; else echo "waited $seconds s for $what" >&2; fi
  return 1
}

not() { ! "$@"; }
