#!/bin/bash
# The end-to-end suite on every Slurm we ship for, each from Debian's own
# packages: 22.05 on this machine (Debian 12), 24.11 (Debian 13 "trixie")
# and 26.05 (Debian unstable) in root filesystems made by
# scripts/slurm-rootfs.sh. Builds one plugin per Slurm and the packages,
# tests the packages, then runs the phases of tests/e2e/run.sh:
#   22.05  systemd                   (each node a Debian 12 container booted by
#                                     systemd-nspawn, systemd 252 as PID 1)
#   22.05  base, faults, fleet, rack (from the build tree; faults needs
#                                     strace, sqlite3 and python3; fleet
#                                     node_exporter and promtool; rack is
#                                     one 18-node --imex job)
#   24.11  upgrade                   (the previous release's .deb, then this one
#                                     over it with an --imex job running)
#   24.11  base, switch, topology,   (from the installed .deb; topology.conf;
#          containers                 pyxis + enroot from ../shared/vendor, built
#                                     by tests/e2e/containers-build.sh; shown
#                                     as skipped when those snapshots are absent)
#   24.11  base                      (SchedMD's tarball built into /opt/slurm
#                                     by scripts/slurm-prefix.sh; slurm-imex
#                                     from the release tarball's install.sh)
#   26.05  base, switch, topology    (from the build tree; topology.yaml)
# Prints a table of Slurm version x phase x tests x wall time, then
# "e2e: N passed, M failed". Needs root; run after cargo build --release.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
source tests/e2e/lib.sh
source tests/e2e/packages.sh
LOGS=$REPO/target/e2e-logs
mkdir -p "$LOGS"
ROWS=()
TOTAL_PASSED=0
TOTAL_FAILED=0

# The Slurm version of a root filesystem (its slurmd package), or of a
# prefix build (its slurm_version.h).
upstream_version() {
  local h=$1/include/slurm/slurm_version.h hex
  if [ -f "$h" ]; then
    hex=$(sed -n 's/^#define SLURM_VERSION_NUMBER 0x\([0-9a-fA-F]\{6\}\).*/\1/p' "$h")
    printf '%d.%02d.%d\n' "$((16#${hex:0:2}))" "$((16#${hex:2:2}))" "$((16#${hex:4:2}))"
    return
  fi
  dpkg-query --admindir="$1/var/lib/dpkg" -W -f='${Version}' slurmd | sed 's/-[^-]*$//'
}

# One phase of run.sh; on the host when rootfs is "/".
run_phase() { # rootfs install phase [env...]
  local root=$1 install=$2 phase=$3; shift 3
  local version mm log start rc line passed failed
  version=$(upstream_version "$root"); mm=${version%.*}
  log=$LOGS/slurm-$mm-$phase-$install.log
  start=$SECONDS
  local cmd=(env E2E_PHASE="$phase" E2E_INSTALL="$install" E2E_SLURM_VERSION="$version"
             E2E_PLUGIN="$REPO/target/slurm-plugins/$mm/libspank_imex.so" "$@" bash tests/e2e/run.sh)
  echo "== Slurm $version: phase $phase (from $install) -> $log"
  if [ "$root" = / ]; then "${cmd[@]}" > "$log" 2>&1
  elif [ "$install" = prefix ]; then tests/e2e/in-prefix.sh "$root" "${cmd[@]}" > "$log" 2>&1
  else tests/e2e/in-rootfs.sh "$root" "${cmd[@]}" > "$log" 2>&1; fi
  rc=$?
  line=$(grep -E '^e2e: [0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
  passed=$(sed -n 's/^e2e: \([0-9]*\) passed.*/\1/p' <<<"$line"); failed=$(sed -n 's/.* \([0-9]*\) failed$/\1/p' <<<"$line")
  if [ -z "$line" ]; then passed=0; failed=1; fi
  [ $rc -ne 0 ] && [ "${failed:-0}" = 0 ] && failed=1
  grep -E '^(---|    (ok|FAIL|FAILED))' "$log" | grep -E 'FAIL' -B1 | sed 's/^/   /'
  echo "   $passed passed, $failed failed in $((SECONDS - start)) s"
  TOTAL_PASSED=$((TOTAL_PASSED + passed)); TOTAL_FAILED=$((TOTAL_FAILED + failed))
  ROWS+=("$(printf '| %-8s | %-8s | %-7s | %6s | %6s | %5s s |' "$version" "$phase" "$install" "$passed" "$failed" "$((SECONDS - start))")")
}

# A package test, counted like the e2e tests.
run_package_test() {
  CURRENT_OK=1
  echo "--- $1"
  local start=$SECONDS
  "$@"
  if [ "$CURRENT_OK" = 1 ]; then TOTAL_PASSED=$((TOTAL_PASSED + 1)); echo "    ok ($((SECONDS - start)) s)"
  else TOTAL_FAILED=$((TOTAL_FAILED + 1)); echo "    FAILED"; fi
}

main() {
  [ "$(id -u)" = 0 ] || { echo "versions: must run as root" >&2; exit 1; }
  local t0=$SECONDS trixie sid bookworm_systemd
  trixie=$(scripts/slurm-rootfs.sh trixie) || exit 1
  sid=$(scripts/slurm-rootfs.sh sid) || exit 1
  bookworm_systemd=$(scripts/slurm-rootfs.sh bookworm systemd) || exit 1
  echo "== Slurm from the upstream tarball in /opt/slurm (scripts/slurm-prefix.sh)"
  local prefix_tree
  prefix_tree=$(scripts/slurm-prefix.sh) || exit 1
  echo "== enroot and pyxis in the Slurm $(upstream_version "$trixie") rootfs (tests/e2e/containers-build.sh)"
  local containers=yes rc=0
  tests/e2e/containers-build.sh "$trixie" || rc=$?
  case $rc in
    0) ;;
    3) containers=no;;   # no source snapshots on this machine: said above, shown in the table
    *) exit 1;;
  esac
  echo "== plugins, one per Slurm (each stamped from its own headers)"
  scripts/build-plugins.sh host "$trixie" "$sid" || exit 1
  echo "== packages and the release tarball"
  scripts/package.sh || exit 1
  scripts/release.sh || exit 1
  local deb2205 deb2411 deb2605
  deb2205=$(ls "$REPO"/target/debian/slurm-imex_*+slurm22.05_amd64.deb)
  deb2411=$(ls "$REPO"/target/debian/slurm-imex_*+slurm24.11_amd64.deb)
  deb2605=$(ls "$REPO"/target/debian/slurm-imex_*+slurm26.05_amd64.deb)
  echo "== lintian"
  local d; for d in "$deb2205" "$deb2411" "$deb2605"; do
    echo "   $(basename "$d"): $(lintian "$d" 2>/dev/null | sed 's/^[EWIP]: slurm-imex: //' | sort | uniq -c | awk '{$1=$1};1' | paste -sd ';')"
  done
  echo "== package tests (Slurm $(upstream_version "$trixie"))"
  run_package_test test_package_installs_where_slurm_looks_and_purges_clean "$trixie" "$deb2411"
  run_package_test test_package_for_another_slurm_is_refused "$trixie" "$deb2205"
  run_package_test test_package_for_another_slurm_is_refused "$sid" "$deb2411"
  run_package_test test_package_installs_beside_schedmd_packages "$trixie" "$deb2411" 24.11.5-1
  run_package_test test_package_for_another_schedmd_slurm_is_refused "$trixie" "$deb2411" 25.05.3-1

  run_phase / target base
  run_phase / target faults
  run_phase / target fleet
  run_phase / target rack
  # Nodes booted by systemd-nspawn (Debian 12, systemd 252 as PID 1),
  # manager = "systemd" through the real systemctl.
  run_phase / target systemd E2E_SYSTEMD_ROOTFS="$bookworm_systemd"
  # The previous release's package, then the current one over it with a job running.
  local previous prc=0
  previous=$(tests/e2e/previous-release.sh "$trixie") || prc=$?
  if [ $prc = 0 ]; then
    tests/e2e/in-rootfs.sh "$trixie" dpkg -i "$previous" >/dev/null || { echo "versions: dpkg -i $previous failed" >&2; exit 1; }
    run_phase "$trixie" package upgrade E2E_UPGRADE_TO="$deb2411"
    tests/e2e/in-rootfs.sh "$trixie" dpkg --purge slurm-imex >/dev/null
  elif [ $prc = 3 ]; then ROWS+=("$(printf '| %-8s | %-8s | %-7s | %6s | %6s | %7s |' "$(upstream_version "$trixie")" upgrade package - - skipped)")
  else exit 1
  fi
  # 24.11 runs from the installed package.
  tests/e2e/in-rootfs.sh "$trixie" dpkg -i "$deb2411" >/dev/null || { echo "versions: dpkg -i $deb2411 failed" >&2; exit 1; }
  run_phase "$trixie" package base
  run_phase "$trixie" package switch
  run_phase "$trixie" package topology E2E_TOPOLOGY=conf
  # enroot needs user namespaces: this phase enters the rootfs with pivot_root.
  if [ "$containers" = yes ]; then IN_ROOTFS_PIVOT=1 run_phase "$trixie" package containers
  else ROWS+=("$(printf '| %-8s | %-8s | %-7s | %6s | %6s | %7s |' "$(upstream_version "$trixie")" containers package - - skipped)")
  fi
  tests/e2e/in-rootfs.sh "$trixie" dpkg --purge slurm-imex >/dev/null
  # A Slurm built into /opt/slurm, slurm-imex from the release tarball's install.sh.
  run_phase "$prefix_tree" prefix base
  run_phase "$sid" target base
  run_phase "$sid" target switch
  run_phase "$sid" target topology E2E_TOPOLOGY=yaml

  echo
  echo "| Slurm    | phase    | from    | passed | failed | wall    |"
  echo "|----------|----------|---------|--------|--------|---------|"
  printf '%s\n' "${ROWS[@]}"
  echo "all Slurm versions: $((SECONDS - t0)) s"
  echo "e2e: $TOTAL_PASSED passed, $TOTAL_FAILED failed"
  [ "$TOTAL_FAILED" = 0 ]
}
main "$@"
