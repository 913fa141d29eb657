#!/bin/bash
# Every test of slurm-imex: formatting and lints (shellcheck and the
# pipeline rule over every shell file too), unit and integration tests, the
# README's demo run in full and checked, then the end-to-end suite on a real
# multi-node Slurm of every release we ship for (22.05 to 26.05;
# tests/e2e/versions.sh), with the packages.
# Run as root on Debian 12; installs what it needs (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# The Slurm releases built from source compile in the background, at the
# lowest priority, from now until the end-to-end phases that need them.
scripts/slurm-builds.sh start
echo "== cargo fmt --check"; cargo fmt --all --check
echo "== cargo clippy"; cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== shell files: shellcheck, and no pipeline reader that stops early (tests/lint/shell.sh)"; bash tests/lint/shell.sh
readme_bytes=$(wc -c < README.md)
echo "== README.md is a front door: $readme_bytes bytes, at most 12 KiB (detail goes to docs/)"
[ "$readme_bytes" -le 12288 ] || { echo "README.md is $readme_bytes bytes, over 12288: move detail to docs/" >&2; exit 1; }
echo "== cargo build --release"; cargo build --release --workspace --quiet
echo "== cargo build (debug: the bad-input suite runs these binaries)"; cargo build --workspace --quiet
echo "== cargo test"; cargo test --workspace --no-fail-fast --quiet 2>&1 | tee /tmp/slurm-imex-cargo-test.log
echo "== job_submit.lua's decisions under Lua 5.1 and 5.3 (tests/lua/job_submit_test.lua)"
lua5.1 tests/lua/job_submit_test.lua
lua5.3 tests/lua/job_submit_test.lua
echo "== Prometheus alert rules (promtool check rules, promtool test rules)"
promtool check rules conf-examples/prometheus/slurm-imex.rules.yml
promtool test rules tests/prometheus/slurm-imex.rules.test.yml
echo "== packaging scripts (port reservation, install.sh refusals; tests/packaging/run.sh)"; bash tests/packaging/run.sh
echo "== the README's demo, in full, as a user runs it (tests/demo-check.sh)"
bash tests/demo-check.sh --self-test
bash tests/demo-check.sh
echo "== end-to-end on real Slurm, every release from 22.05 to 26.05"; bash tests/e2e/versions.sh
