# shellcheck shell=bash
# Assertions for the end-to-end and package tests: each failed one prints
# one "FAIL:" line and marks the current test failed; nothing exits.

# The tally, read by the runners that source this file (run.sh, versions.sh,
# tests/packaging/run.sh).
# shellcheck disable=SC2034 # read by the runner that sources this file
PASSED=0
# shellcheck disable=SC2034 # read by the runner that sources this file
FAILED=0
# shellcheck disable=SC2034 # read by the runner that sources this file
FAILED_NAMES=()
# shellcheck disable=SC2034 # read by the runner that sources this file
CURRENT_TEST=""
CURRENT_OK=1

fail() { echo "    FAIL: $*"; CURRENT_OK=0; }
expect_eq() { # actual expected what
  if [ "$1" != "$2" ]; then fail "$3: expected [$2], got [$1]"; fi
}
expect_contains() { # haystack needle what
  case "$1" in *"$2"*) ;; *) fail "$3: [$2] not found in: ${1:0:600}";; esac
}
expect_not_contains() {
  case "$1" in *"$2"*) fail "$3: [$2] unexpectedly found in: ${1:0:600}";; esac
}
