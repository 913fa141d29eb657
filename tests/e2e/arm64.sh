# shellcheck shell=bash
# The aarch64 (Grace) half of tests/e2e/versions.sh: every arm64 artifact,
# built on this x86_64 machine with the pinned cross toolchain
# (scripts/cross-toolchain.sh), and proof on Debian 13's arm64 Slurm 24.11
# under qemu-user (binfmt_misc): real arm64 slurmctld, slurmd and slurmstepd
# load our arm64 plugin, and our arm64 prolog and epilog run, all installed
# from the arm64 .deb. Sourced by versions.sh, which gives run_phase,
# run_package_test and the counters.
ARM64_TARGET=aarch64-unknown-linux-gnu
ARM64_BIN=$REPO/target/cross/$ARM64_TARGET/release
ARM64_ROOT=   # the arm64 rootfs, once made: the later arm64 steps need it
# The release with arm64 phases (scripts/slurm-releases): Debian 13's 24.11.
ARM64_RELEASE=24.11

# The arm64 rootfs, binaries, fakes, the shim and the plugins of Debian's
# Slurms (22.05 from this machine's headers, 24.11 from the arm64 rootfs',
# and the newest rootfs release's, made or reused by slurm-rootfs.sh), in
# the background below the cargo stages' priority: tests/run-all.sh starts
# it before the cargo stages (tests/e2e/background-start.sh), versions.sh
# when run alone. arm64_wait collects it. Its steps run one after another: on 2
# cores the run is CPU-bound from the start, and the rootfs made beside the
# cross build took both longer and the source builds' share (rootfs 1126 ->
# 2224 s, cross build 804 -> 1654 s). It runs at nice 10, ahead of the
# source builds' queue (nice 19; the cargo stages and the phases at 0): its
# phase, under qemu the longest after it, then runs while the last source
# releases build rather than after them (its package tests wait for every
# source release's arm64 plugin, at the end). Log:
# target/e2e-logs/arm64-build.log, with each step's time; its pid in
# target/e2e-logs/arm64-build.pid.
arm64_start() {
  local newest
  newest=$(release_field "$(releases_from rootfs | tail -n 1)" from | cut -d: -f2)
  mkdir -p "$LOGS"
  ( exec nice -n 10 bash -c '
      set -e; t=$SECONDS
      scripts/cross-toolchain.sh builder >/dev/null; echo "cross toolchain: $((SECONDS - t)) s"; t=$SECONDS
      root=$(scripts/slurm-rootfs.sh --arch=arm64 trixie); echo "arm64 rootfs: $((SECONDS - t)) s"; t=$SECONDS
      scripts/cross-build.sh '"$ARM64_TARGET"'; echo "cross build: $((SECONDS - t)) s"; t=$SECONDS
      scripts/cross-toolchain.sh run aarch64-linux-gnu-gcc -O2 -shared -fPIC \
        -o "$PWD/target/cross/fexecve-shim.so" "$PWD/tests/e2e/fexecve-shim.c"
      newest=$(scripts/slurm-rootfs.sh "$1")
      scripts/build-plugins.sh --target='"$ARM64_TARGET"' host "$root" "$newest" >/dev/null
      echo "arm64 plugins (22.05, 24.11, $1): $((SECONDS - t)) s"
      echo done' arm64-build "$newest" ) > "$LOGS/arm64-build.log" 2>&1 &
  echo $! > "$LOGS/arm64-build.pid"
}

# Whether the arm64 build is still going.
arm64_building() { kill -0 "$(cat "$LOGS/arm64-build.pid" 2>/dev/null)" 2>/dev/null; }

# The arm64 steps wait on the build from here on: it runs at normal priority
# now, for at most E2E_BUILD_WAIT seconds (3600) more; past that it is
# stopped, and the arm64 steps fail, naming why, while the rest go on.
arm64_wait() {
  local pid; pid=$(cat "$LOGS/arm64-build.pid" 2>/dev/null)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    renice_tree "$pid"
    poll_until "${E2E_BUILD_WAIT:-3600}" not kill -0 "$pid" 2>/dev/null ||
      { echo "waited ${E2E_BUILD_WAIT:-3600} s for the arm64 build (E2E_BUILD_WAIT): stopping it" >&2; kill_tree "$pid"; }
  fi
  grep -qx 'done' "$LOGS/arm64-build.log" 2>/dev/null || {
    echo "versions: the arm64 build failed or did not finish; last lines of $LOGS/arm64-build.log:" >&2
    tail -5 "$LOGS/arm64-build.log" >&2; return 1; }
  sed 's/^/   /' "$LOGS/arm64-build.log" | grep -v 'done$'
}

# The arm64 plugins for the Slurms whose headers are given (build-plugins.sh's
# sources; none: those built so far), then the arm64 .debs and the
# aarch64-linux tarball of every arm64 plugin built.
# shellcheck disable=SC2120 # versions.sh passes the sources; arm64_phases none
arm64_artifacts() { # plugin-source...
  local t=$SECONDS
  if [ $# -gt 0 ]; then
    scripts/build-plugins.sh --target="$ARM64_TARGET" "$@" >/dev/null || return 1
    echo "   arm64 plugins ($*): $((SECONDS - t)) s"; t=$SECONDS
  fi
  scripts/package.sh --arch=arm64 >/dev/null || return 1
  scripts/release.sh --target="$ARM64_TARGET" >/dev/null || return 1
  echo "   arm64 packages and tarball: $((SECONDS - t)) s"
}

# The arm64 phases of the release whose rootfs is Debian 13's
# (scripts/slurm-releases: `arm64:PHASE`, the native phase: base less what
# only Slurm and our shared code decide, which its x86_64 base phase runs),
# on the arm64 rootfs, from the arm64 .deb, every program under qemu: the
# harness too (it runs inside the rootfs). The shim is for slurmd's fexecve
# under emulation only (tests/e2e/fexecve-shim.c). The phase leaves out 64
# epilogs at once: a load test, whose 64 emulated processes on CI's 2 cores
# run past the epilog's own bounds (NVML init within 2 s, SQLite's busy
# timeout), so it would measure qemu, not slurm-imex; it runs on every
# x86_64 release. The GPU gate's cap is 60 s there (E2E_GATE_TIMEOUT), which
# scales each NVML check's budget: emulated, a healthy node's NVLink read
# once overran 500 ms while its peers' prologs ran.
arm64_release_phases() { # arm64-rootfs deb
  local root=$1 deb=$2 phase
  tests/e2e/in-rootfs.sh "$root" dpkg -i "$deb" >/dev/null || { echo "versions: dpkg -i $deb in the arm64 rootfs failed" >&2; return 1; }
  for phase in $(release_field "$ARM64_RELEASE" phases); do
    case $phase in
      arm64:*) run_phase "$root" package "${phase#arm64:}" BIN="$ARM64_BIN" LD_PRELOAD="$REPO/target/cross/fexecve-shim.so" \
        E2E_READY_TIMEOUT="${E2E_ARM64_READY_TIMEOUT:-20s}" E2E_GATE_TIMEOUT="${E2E_ARM64_GATE_TIMEOUT:-60s}";;
    esac
  done
  tests/e2e/in-rootfs.sh "$root" dpkg --purge slurm-imex >/dev/null
}

# What versions.sh runs after its Debian 13 phases: the background build
# collected, the arm64 packages and tarball, then the base phase. A failed
# step is one failed row, and the x86_64 phases go on.
arm64_phases() {
  local step=build
  echo "== arm64: cross toolchain, rootfs, binaries, plugins (tests/e2e/arm64.sh; $LOGS/arm64-build.log)"
  if arm64_wait && step=rootfs && ARM64_ROOT=$(scripts/slurm-rootfs.sh --arch=arm64 trixie) &&
     step=package && arm64_artifacts; then
    arm64_release_phases "$ARM64_ROOT" "$(ls "$REPO"/target/debian/slurm-imex_*+slurm"$ARM64_RELEASE"_arm64.deb)" && return
    step=phases
  fi
  ARM64_ROOT=
  TOTAL_FAILED=$((TOTAL_FAILED + 1)); row "$ARM64_RELEASE" arm64 "$step" package 0 1 failed
}

# lintian on every arm64 .deb; the 24.11 one installs where arm64 Slurm
# looks and purges clean, and the 22.05 one is refused beside 24.11.
arm64_package_tests() { # arm64-rootfs
  local root=$1 deb
  echo "== arm64 packages: lintian, install and purge (Slurm $(upstream_version "$root") arm64 rootfs)"
  for deb in "$REPO"/target/debian/slurm-imex_*_arm64.deb; do run_package_test lintian_clean "$deb"; done
  run_package_test test_package_installs_where_slurm_looks_and_purges_clean "$root" "$(ls "$REPO"/target/debian/*+slurm24.11_arm64.deb)"
  run_package_test test_package_for_another_slurm_is_refused "$root" "$(ls "$REPO"/target/debian/*+slurm22.05_arm64.deb)"
}

# Every shipped binary and plugin, both architectures: file(1) says the
# architecture the package or tarball names, and no symbol needs a glibc
# newer than 2.34 (tests/glibc-floor.sh).
test_artifacts_are_for_their_architecture_and_glibc_2_34() {
  local out rc=0
  out=$(tests/glibc-floor.sh --require=amd64,arm64 2>&1) || rc=$?
  grep '^FAIL' <<<"$out" | sed 's/^/    /'
  echo "    $(tail -1 <<<"$out")"
  [ $rc = 0 ] || fail "an artifact is for the wrong architecture or needs a glibc newer than 2.34"
  expect_contains "$out" ".rpm:" "the RPMs are checked too"
  # The check fails where it must: Debian 13's own slurmd needs glibc 2.38 (strlcpy).
  local trixie_slurmd=${1:-}/usr/sbin/slurmd-wlm
  [ -n "${1:-}" ] || return 0
  [ -f "$trixie_slurmd" ] || { fail "no $trixie_slurmd to prove the check with"; return; }
  out=$(tests/glibc-floor.sh "$trixie_slurmd:${NATIVE_ARCH:-amd64}" 2>&1) && fail "glibc-floor passed a binary that needs a newer glibc"
  expect_contains "$out" "newer than the floor GLIBC_2.34: " "glibc-floor names the newer symbols"
}
