#!/bin/bash
# Installs what slurm-imex needs on Debian 12 (root), by purpose:
#   scripts/install-deps.sh demo   what the README's demo uses (scripts/demo.sh)
#   scripts/install-deps.sh test   what every test uses (tests/run-all.sh):
#                                  the demo's set, the test set and the
#                                  packaging set
# Idempotent: says nothing and skips apt when everything is already there.
set -euo pipefail
purpose=${1:-test}

# The demo: Slurm 22.05 and munge for the host cluster (iproute2, procps,
# util-linux and passwd for its namespaced nodes and its test user);
# libslurm-dev for the headers the plugin is stamped from; gcc (and
# pkg-config) for the crates that build C (SQLite, ring).
demo=(slurmctld slurmd slurm-client munge iproute2 procps util-linux passwd
      libslurm-dev gcc pkg-config)
# The tests beside it: debootstrap for the Slurm 24.11 and 26.05 root
# filesystems; libclang-dev for slurm-spank's bindgen (Slurm >= 23.11);
# strace (kill -9 at each state change), sqlite3 (integrity_check) and
# python3 (open(2) probes) for the fault tests; openssl for the TLS tests;
# prometheus-node-exporter and prometheus (promtool) for the metrics export
# tests; mariadb-server and slurmdbd (Slurm's accounting, behind which
# sacct and AdminComment are real) and curl (Prometheus's query API) for the
# accounting phase (tests/e2e/accounting.sh); victoria-metrics (a long-term store with Prometheus's query API)
# and python3-bcrypt (the bcrypt hash of Prometheus's web.config basic auth)
# for the metrics-store test (tests/e2e/metrics-store.sh); systemd-container
# (systemd-nspawn) for the nodes booted with real systemd; libmunge-dev,
# libjson-c-dev, libyaml-dev, make and xz-utils for Slurm built from
# SchedMD's sources (scripts/slurm-prefix.sh), liblua5.3-dev for its
# job_submit/lua (the shared-node tests); lua5.1 and lua5.3 for
# job_submit.lua's unit tests (tests/lua/); qemu-user-static and
# binfmt-support to run the arm64 root filesystem's programs (Slurm, our
# arm64 build) under emulation; file and binutils (readelf) to check each
# artifact's architecture and glibc floor; shellcheck for every shell file
# (tests/lint/shell.sh).
test=(debootstrap libclang-dev strace sqlite3 python3 openssl
      prometheus-node-exporter prometheus mariadb-server slurmdbd curl
      victoria-metrics python3-bcrypt
      systemd-container libmunge-dev libjson-c-dev libyaml-dev liblua5.3-dev
      lua5.1 lua5.3 make xz-utils qemu-user-static binfmt-support file binutils
      shellcheck)
# The packages: dpkg-dev and lintian for the .debs (and cargo-deb, below),
# equivs for the stand-in slurm-smd packages they install beside, rpm
# (rpmbuild) and rpmlint for the RPMs (scripts/package-rpm.sh), and
# binutils-aarch64-linux-gnu for its aarch64-linux-gnu-strip.
package=(dpkg-dev lintian equivs rpm rpmlint binutils-aarch64-linux-gnu)

case $purpose in
  demo) need=("${demo[@]}");;
  test) need=("${demo[@]}" "${test[@]}" "${package[@]}");;
  *) echo "usage: scripts/install-deps.sh demo|test" >&2; exit 2;;
esac
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing (apt, for the $purpose): ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The packages enable the system services; the tests run their own daemons.
for s in slurmctld slurmd slurmdbd mariadb munge prometheus prometheus-node-exporter victoria-metrics; do
  systemctl disable --now "$s" >/dev/null 2>&1 || true
done
command -v cargo >/dev/null || { echo "cargo is missing: install Rust (rustup) first" >&2; exit 1; }
if [ "$purpose" = test ] && ! command -v cargo-deb >/dev/null; then
  echo "installing cargo-deb (cargo install, for the packages)"
  cargo install --quiet --locked cargo-deb
fi
