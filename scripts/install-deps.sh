#!/bin/bash
# Installs what building and testing slurm-imex needs on Debian 12 (root).
# Idempotent: skips apt when everything is already there.
set -euo pipefail
# Slurm 22.05 and munge for the host cluster; debootstrap for the 24.11/26.05
# root filesystems; libclang-dev for slurm-spank's bindgen (Slurm >= 23.11);
# libslurm-dev for 22.05's headers; dpkg-dev and lintian for the packages.
# strace (kill -9 at each state change), sqlite3 (integrity_check) and
# python3 (open(2) probes) for the fault tests; prometheus-node-exporter
# and prometheus (promtool) for the metrics export tests; victoria-metrics
# (a long-term store with Prometheus's query API) and python3-bcrypt (the
# bcrypt hash of Prometheus's web.config basic auth) for the metrics-store
# test (tests/e2e/metrics-store.sh); equivs for the
# stand-in slurm-smd packages; systemd-container (systemd-nspawn) for the
# nodes booted with real systemd; libmunge-dev, libjson-c-dev, libyaml-dev, gcc and make for Slurm built
# from SchedMD's sources (scripts/slurm-prefix.sh; xz-utils unpacks them);
# rpm (rpmbuild) and rpmlint for the RPMs (scripts/package-rpm.sh), and
# binutils-aarch64-linux-gnu for its aarch64-linux-gnu-strip.
# qemu-user-static and binfmt-support run the arm64 root filesystem's
# programs (Slurm, our arm64 build) under emulation; file and binutils
# (readelf) check each artifact's architecture and glibc floor; shellcheck
# checks every shell file (tests/lint/shell.sh); lua5.1 and lua5.3 run
# job_submit.lua's unit tests (tests/lua/) and liblua5.3-dev gives the source builds
# job_submit/lua (the shared-node tests).
need=(slurmctld slurmd slurm-client munge iproute2 procps util-linux passwd
      debootstrap libclang-dev libslurm-dev dpkg-dev lintian binutils
      strace sqlite3 python3 openssl prometheus-node-exporter prometheus
      victoria-metrics python3-bcrypt equivs systemd-container libmunge-dev libjson-c-dev libyaml-dev liblua5.3-dev lua5.1 lua5.3 gcc make pkg-config xz-utils
      rpm rpmlint binutils-aarch64-linux-gnu qemu-user-static binfmt-support file shellcheck)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The packages enable the system services; the tests run their own daemons.
for s in slurmctld slurmd munge prometheus prometheus-node-exporter victoria-metrics; do
  systemctl disable --now "$s" >/dev/null 2>&1 || true
done
command -v cargo >/dev/null || { echo "cargo is missing: install Rust (rustup) first" >&2; exit 1; }
command -v cargo-deb >/dev/null || cargo install --quiet --locked cargo-deb
