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

# A background build (run at nice 19 so that it never slows a phase) that a
# phase now waits on: run it, and every process below it, at normal priority
# from now on, so that a busy machine (another nice 0 load) does not starve
# what everything waits for. Processes it starts later inherit that.
renice_tree() { # pid
  local pid=$1 child
  renice -n 0 -p "$pid" >/dev/null 2>&1 || return 0
  for child in $(ps -o pid= --ppid "$pid" 2>/dev/null); do renice_tree "$child"; done
}

# SIGKILL a process and everything below it, children first seen first.
kill_tree() { # pid
  local pid=$1 child
  kill -STOP "$pid" 2>/dev/null
  for child in $(ps -o pid= --ppid "$pid" 2>/dev/null); do kill_tree "$child"; done
  kill -KILL "$pid" 2>/dev/null
}
