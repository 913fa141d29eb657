#!/bin/bash
# Every test of slurm-imex: formatting and lints (shellcheck and the
# pipeline rule over every shell file too), unit and integration tests, the
# README's demo run in full and checked, then the end-to-end suite on a real
# multi-node Slurm of every release we ship for (22.05 to 26.05;
# tests/e2e/versions.sh), with the packages. It ends with a table of each
# stage's wall time against its budget on a fresh machine
# (docs/development.md, "Stage budgets"), and names a stage past it (a
# warning, never a failure).
# Run as root on Debian 12; installs what it needs (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
T0=$SECONDS
STAGES=()

# Run one stage, timed; its name is what the budget table lists.
stage() { # name command...
  local name=$1 start=$SECONDS rc=0
  shift
  echo "== $name"
  "$@" || rc=$?
  STAGES+=("$name|$((SECONDS - start))")
  return $rc
}

# The table, whatever ended the run: each stage, then the e2e suite's rows
# (tests/e2e/versions.sh writes them) and the background builds'.
stage_table() {
  local rows=() line
  for line in "${STAGES[@]}"; do rows+=("$line"); done
  if [ -f target/e2e-logs/stages ]; then
    while IFS= read -r line; do rows+=("$line"); done < target/e2e-logs/stages
  fi
  rows+=("whole run|$((SECONDS - T0))")
  bash tests/stage-table.sh docs/development.md "${rows[@]}" || true
}
trap stage_table EXIT

rm -f target/e2e-logs/stages
stage "dependencies" bash scripts/install-deps.sh test
# The Slurm releases built from source compile in the background, at the
# lowest priority, from now until the end-to-end phases that need them.
scripts/slurm-builds.sh start
# So do the e2e suite's root filesystems and the arm64 build, below
# cargo's priority (tests/e2e/background-start.sh).
bash tests/e2e/background-start.sh
export E2E_BACKGROUND_STARTED=1
stage "cargo fmt" cargo fmt --all --check
stage "cargo clippy" cargo clippy --workspace --all-targets --quiet -- -D warnings
stage "shell lint" bash tests/lint/shell.sh
readme_bytes=$(wc -c < README.md)
echo "== README.md is a front door: $readme_bytes bytes, at most 12 KiB (detail goes to docs/)"
[ "$readme_bytes" -le 12288 ] || { echo "README.md is $readme_bytes bytes, over 12288: move detail to docs/" >&2; exit 1; }
stage "cargo build --release" cargo build --release --workspace --quiet
stage "cargo build (debug)" cargo build --workspace --quiet
cargo_tests() { # cargo test args...: its output kept for the log too
  cargo test --no-fail-fast --quiet "$@" 2>&1 | tee -a /tmp/slurm-imex-cargo-test.log
}
rm -f /tmp/slurm-imex-cargo-test.log
stage "cargo test (unit and integration)" cargo_tests --workspace --exclude bad-input
stage "cargo test (bad-input suite)" cargo_tests -p bad-input
lua_tests() {
  lua5.1 tests/lua/job_submit_test.lua
  lua5.3 tests/lua/job_submit_test.lua
}
stage "job_submit.lua (Lua 5.1 and 5.3)" lua_tests
promtool_tests() {
  promtool check rules conf-examples/prometheus/slurm-imex.rules.yml
  promtool test rules tests/prometheus/slurm-imex.rules.test.yml
}
stage "promtool rules" promtool_tests
stage "packaging scripts" bash tests/packaging/run.sh
demo_check() {
  bash tests/demo-check.sh --self-test
  bash tests/demo-check.sh
}
stage "demo (tests/demo-check.sh)" demo_check
stage "e2e, every release" bash tests/e2e/versions.sh
