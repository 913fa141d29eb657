#!/bin/bash
# The end-to-end suite on every Slurm release a GB200 site runs, 22.05 to
# 26.05 (docs/test-cluster.md), with the packages, and a table of release x
# phase x tests x wall time. The releases, where each comes from and the
# phases each runs are one table, scripts/slurm-releases (read through
# scripts/releases.sh): Debian 12's own Slurm on this machine, Debian root
# filesystems' (from the build tree, or from our .deb with the previous
# release's upgraded under a running job, pyxis + enroot for containers, and
# the arm64 rootfs under qemu), and SchedMD's tarballs built from source
# (scripts/slurm-prefix.sh: in /opt/slurm with slurm-imex from the release
# tarball's install.sh, or in slurm.spec's layout with install.sh
# --slurm-prefix /usr or our RPM, erased with rpm -e at the end).
# The source builds (and the previous release's .deb) compile in the
# background at the lowest priority (scripts/slurm-builds.sh) while the
# phases that need none run; each release's phases start when its build is
# done. A release whose sources are not on this machine (no ../shared/vendor)
# shows as skipped. Prints "e2e: N passed, M failed"; needs root, and runs
# after cargo build --release. E2E_RELEASES="22.05 26.05" runs only those
# releases' phases (and no package tests).
# After every phase, whatever happened to it, what it left running is
# killed and named, and counted as that phase's failure (reap.sh), so
# that no phase fails the next. So is a change to this machine's live
# net.ipv4.ip_local_reserved_ports or /etc/sysctl.d/90-slurm-imex.conf
# (what installing slurm-imex changes, which belongs on a test node, never
# here): named, undone, and that phase's (or package test's) failure.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO" || exit 1
source tests/e2e/assert.sh
source tests/e2e/packages.sh
source tests/packaging/rpm.sh
source tests/e2e/arm64.sh
source tests/e2e/wait.sh
source tests/e2e/reap.sh
source tests/e2e/listed.sh
source scripts/releases.sh
trap 'e2e_teardown "versions (at exit)" || true' EXIT
trap 'exit 130' INT TERM HUP
LOGS=$REPO/target/e2e-logs
mkdir -p "$LOGS"
# The packages' contents are under test, not their compression: fast
# (scripts/package.sh, scripts/package-rpm.sh).
export SLURM_IMEX_FAST_PACKAGES=1
ROWS=()
ARM64_SOURCES=()
TOTAL_PASSED=0
TOTAL_FAILED=0

# The Slurm version of a root filesystem (its slurmd package), of a prefix
# build (its slurm_version.h), or of a build in slurm.spec's layout.
upstream_version() {
  local h hex
  for h in "$1/include/slurm/slurm_version.h" "$1/usr/include/slurm/slurm_version.h"; do
    [ -f "$h" ] || continue
    [ -f "$1/var/lib/dpkg/status" ] && continue
    hex=$(sed -n 's/^#define SLURM_VERSION_NUMBER 0x\([0-9a-fA-F]\{6\}\).*/\1/p' "$h")
    printf '%d.%02d.%d\n' "$((16#${hex:0:2}))" "$((16#${hex:2:2}))" "$((16#${hex:4:2}))"
    return
  done
  dpkg-query --admindir="$1/var/lib/dpkg" -W -f='${Version}' slurmd | sed 's/-[^-]*$//'
}

# Whether E2E_RELEASES (all when unset) names this major.minor.
selected() { [ -z "${E2E_RELEASES:-}" ] || [[ " $E2E_RELEASES " == *" $1 "* ]]; }

row() { # version arch phase from passed failed wall
  ROWS+=("$(printf '| %-8s | %-5s | %-10s | %-7s | %6s | %6s | %7s |' "$@")")
}
NATIVE_ARCH=$(dpkg --print-architecture)

# The Debian architecture of a tree: a rootfs's own dpkg says; a source
# build or "/" is this machine's.
tree_arch() { # tree
  if [ "$1" != / ] && [ -f "$1/var/lib/dpkg/status" ]; then rootfs_arch "$1"
  else echo "$NATIVE_ARCH"; fi
}

# One phase of run.sh: on the host when the tree is "/", in a rootfs, or
# with a source build mounted (install "prefix": install.sh into /opt/slurm;
# slurm.spec's layout laid over /, "rpm": our RPM, E2E_RPM=..., or "rhel":
# install.sh --slurm-prefix /usr).
run_phase() { # tree install phase [env...]
  local tree=$1 install=$2 phase=$3; shift 3
  local version mm log start rc line passed failed from=$install arch host
  version=$(upstream_version "$tree"); mm=${version%.*}; arch=$(tree_arch "$tree")
  selected "$mm" || return 0
  host=$(e2e_host_state)
  log=$LOGS/slurm-$mm-$phase-$install.log
  [ "$arch" = "$NATIVE_ARCH" ] || log=$LOGS/slurm-$mm-$arch-$phase-$install.log
  start=$SECONDS
  local cmd=(env E2E_PHASE="$phase" E2E_INSTALL="$install" E2E_SLURM_VERSION="$version"
             E2E_PLUGIN="$REPO/target/slurm-plugins/$mm/libspank_imex.so" "$@" bash tests/e2e/run.sh)
  echo "== Slurm $version $arch: phase $phase (from $install) -> $log"
  if [ "$tree" = / ]; then "${cmd[@]}" > "$log" 2>&1
  elif [ "$install" = prefix ]; then tests/e2e/in-prefix.sh "$tree" "${cmd[@]}" > "$log" 2>&1
  elif [ "$install" = rhel ] || [ "$install" = rpm ]; then
    [ "$install" = rhel ] && cmd[2]=E2E_INSTALL=prefix
    tests/e2e/in-prefix.sh --root "$tree" env E2E_SLURM_PREFIX=/usr E2E_SLURM_SYSCONFDIR=/etc/slurm "${cmd[@]}" > "$log" 2>&1
  else tests/e2e/in-rootfs.sh "$tree" "${cmd[@]}" > "$log" 2>&1; fi
  rc=$?
  line=$(grep -E '^e2e: [0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
  passed=$(sed -n 's/^e2e: \([0-9]*\) passed.*/\1/p' <<<"$line"); failed=$(sed -n 's/.* \([0-9]*\) failed$/\1/p' <<<"$line")
  if [ -z "$line" ]; then passed=0; failed=1; fi
  [ $rc -ne 0 ] && [ "${failed:-0}" = 0 ] && failed=1
  grep -E '^(---|    (ok|FAIL|FAILED))' "$log" | grep -E 'FAIL' -B1 | sed 's/^/   /'
  # Why a phase that ran no test failed (cluster_up's last word, an exit).
  [ -z "$line" ] && grep -E '^([a-z_]+_up: |e2e: |cluster_install: |in-(rootfs|prefix): )' "$log" | tail -3 | sed 's/^/   /'
  local who="versions: after Slurm $version $phase" left=0
  { e2e_teardown "$who" || left=1; e2e_host_unchanged "$who" "$host" || left=1; } 2> "$log.teardown"
  if [ $left = 1 ]; then
    sed 's/^/   /' "$log.teardown"; cat "$log.teardown" >> "$log"
    [ "$failed" = 0 ] && failed=1
  fi
  rm -f "$log.teardown"
  echo "   $passed passed, $failed failed in $((SECONDS - start)) s"
  TOTAL_PASSED=$((TOTAL_PASSED + passed)); TOTAL_FAILED=$((TOTAL_FAILED + failed))
  row "$version" "$arch" "$phase" "$from" "$passed" "$failed" "$((SECONDS - start)) s"
  stage_row "e2e $version $arch $phase ($from)" "$((SECONDS - start))"
}

# One line of tests/run-all.sh's stage table: NAME and its wall seconds.
stage_row() { # name seconds
  echo "$1|$2" >> "$LOGS/stages"
}

# The background builds' wall times, from their logs, for the stage table.
build_rows() {
  local f name secs
  for f in target/slurm-builds/*.err; do
    [ -f "$f" ] || continue
    name=$(basename "$f" .err)
    secs=$(sed -n 's/.*built\( Slurm [0-9.]*\)\{0,1\} in \([0-9][0-9]*\) s.*/\2/p' "$f" | tail -n 1)
    [ -n "$secs" ] || continue
    case $name in
      previous) stage_row "background: the previous release's .deb build" "$secs";;
      *-rhel) stage_row "background: Slurm ${name%-rhel} rhel build" "$secs";;
      *) stage_row "background: Slurm $name build" "$secs";;
    esac
  done
  if [ -f "$LOGS/arm64-build.log" ]; then
    sed -n 's/^\(cross toolchain\|arm64 rootfs\|cross build\|arm64 plugins\)[^:]*: \([0-9][0-9]*\) s$/\1|\2/p' "$LOGS/arm64-build.log" |
      while IFS="|" read -r what secs; do stage_row "background: arm64 ${what#arm64 }" "$secs"; done
  fi
}

# A package test, counted like the e2e tests; one that changed this
# machine's port reservation fails (reap.sh, e2e_host_unchanged).
run_package_test() {
  CURRENT_OK=1
  echo "--- $*"
  local start=$SECONDS host changed
  host=$(e2e_host_state)
  "$@"
  changed=$(e2e_host_unchanged "versions: $1" "$host" 2>&1) || { sed 's/^/    FAIL: /' <<<"$changed"; CURRENT_OK=0; }
  if [ "$CURRENT_OK" = 1 ]; then TOTAL_PASSED=$((TOTAL_PASSED + 1)); echo "    ok ($((SECONDS - start)) s)"
  else TOTAL_FAILED=$((TOTAL_FAILED + 1)); echo "    FAILED"; fi
}

# The plugins and the release tarball again, with every plugin built so far
# (install.sh picks a release's plugin from the tarball).
refresh_release() { # plugin-source...
  [ $# -eq 0 ] || scripts/build-plugins.sh "$@" || return 1
  scripts/release.sh >/dev/null || return 1
}

# A source build's phases, once the background queue has built it:
# NAME (scripts/slurm-builds.sh), then the phases (PHASE@rpm: slurm-imex
# from its RPM, built first, alone, in target/rpm-e2e; else from the
# release tarball's install.sh, into /opt/slurm or, in slurm.spec's layout,
# with --slurm-prefix /usr).
source_release() { # release
  local rel=$1 name=$1 layout install tree rc=0 phase
  selected "$rel" || return 0
  layout=$(release_field "$rel" from); layout=${layout#source:}
  install=prefix; [ "$layout" = rhel ] && { name=$rel-rhel; install=rhel; }
  read -ra phases <<<"$(release_field "$rel" phases)"
  echo "== Slurm $name from source (scripts/slurm-builds.sh wait $name)"
  tree=$(scripts/slurm-builds.sh wait "$name") || rc=$?
  if [ $rc = 3 ]; then
    for phase in "${phases[@]}"; do row "$rel" "$NATIVE_ARCH" "${phase%@*}" "$install" - - skipped; done
    return
  fi
  if [ $rc != 0 ]; then TOTAL_FAILED=$((TOTAL_FAILED + 1)); row "$rel" "$NATIVE_ARCH" build "$install" 0 1 failed; return; fi
  local headers=$tree; [ "$install" = prefix ] || headers=$tree/usr
  refresh_release "prefix=$headers" || { TOTAL_FAILED=$((TOTAL_FAILED + 1)); row "$rel" "$NATIVE_ARCH" plugin "$install" 0 1 failed; return; }
  # Its arm64 plugin too, built with the others at the end (arm64_artifacts).
  [ "$install" != prefix ] || ARM64_SOURCES+=("prefix=$headers")
  local rpm=
  for phase in "${phases[@]}"; do
    if [ "${phase#*@}" = rpm ] && [ -z "$rpm" ]; then
      rpm=$(RPM_ONLY="$rel" RPM_OUT=target/rpm-e2e scripts/package-rpm.sh | awk '{ print $1 }') && [ -f "$rpm" ] ||
        { TOTAL_FAILED=$((TOTAL_FAILED + 1)); row "$rel" "$NATIVE_ARCH" rpm rpm 0 1 failed; rpm=; continue; }
    fi
    case $phase in
      *@rpm) run_e2e_phase "$tree" rpm "${phase%@rpm}" E2E_RPM="$REPO/$rpm";;
      *) run_e2e_phase "$tree" "$install" "$phase";;
    esac
  done
}

# Whether a background build is over (whatever its result): a source
# release's (scripts/slurm-builds.sh) or arm64's (arm64_start).
built() { # release | arm64
  if [ "$1" = arm64 ]; then ! arm64_building
  else scripts/slurm-builds.sh finished "$1"; fi
}

# One phase of the table (topology:conf and topology:yaml say how Slurm
# learns the racks) on TREE from INSTALL.
run_e2e_phase() { # tree install phase [env...]
  local tree=$1 install=$2 phase=$3; shift 3
  case $phase in
    topology:*) run_phase "$tree" "$install" topology E2E_TOPOLOGY="${phase#topology:}" "$@";;
    *) run_phase "$tree" "$install" "$phase" "$@";;
  esac
}

# The root filesystem of each release that has one (scripts/slurm-rootfs.sh).
declare -A ROOTFS

# A release that needs no source build: Debian 12's own Slurm on this
# machine (from the build tree), a rootfs's (from the build tree), or a
# rootfs's with our .deb installed (rootfs-deb; its upgrade phase installs
# the previous release's .deb first, then upgrades to this one under a
# running job). Its phases in the table's order; an arm64:PHASE runs after
# every x86_64 phase (arm64_phases).
native_release() { # release
  local rel=$1 from tree=/ install=target phase deb=
  selected "$rel" || return 0
  from=$(release_field "$rel" from)
  [ "$from" = host ] || tree=${ROOTFS[$rel]}
  if [ "${from%%:*}" = rootfs-deb ]; then
    install=package
    deb=$(ls "$REPO"/target/debian/slurm-imex_*+slurm"$rel"_"$NATIVE_ARCH".deb)
    tests/e2e/in-rootfs.sh "$tree" dpkg -i "$deb" >/dev/null || { echo "versions: dpkg -i $deb failed" >&2; exit 1; }
  fi
  for phase in $(release_field "$rel" phases); do
    case $phase in
      arm64:*) ;;
      systemd) local sysroot; sysroot=$(scripts/slurm-rootfs.sh bookworm systemd) || exit 1
        run_e2e_phase "$tree" "$install" systemd E2E_SYSTEMD_ROOTFS="$sysroot";;
      containers) containers_phase "$rel" "$tree" "$install";;
      upgrade) upgrade_phase "$rel" "$tree" "$deb";;
      *) run_e2e_phase "$tree" "$install" "$phase";;
    esac
  done
  [ -z "$deb" ] || tests/e2e/in-rootfs.sh "$tree" dpkg --purge slurm-imex >/dev/null
}

# pyxis + enroot in the release's rootfs (tests/e2e/containers-build.sh,
# from ../shared/vendor), then the phase; enroot needs user namespaces, so
# the phase enters the rootfs with pivot_root.
containers_phase() { # release tree install
  local rc=0
  echo "== enroot and pyxis in the Slurm $(upstream_version "$2") rootfs (tests/e2e/containers-build.sh)"
  tests/e2e/containers-build.sh "$2" || rc=$?
  case $rc in
    0) IN_ROOTFS_PIVOT=1 run_phase "$2" "$3" containers;;
    3) row "$(upstream_version "$2")" "$NATIVE_ARCH" containers "$3" - - skipped;;   # no source snapshots on this machine
    *) TOTAL_FAILED=$((TOTAL_FAILED + 1)); row "$(upstream_version "$2")" "$NATIVE_ARCH" containers "$3" 0 1 failed;;
  esac
}

# The previous release's .deb (scripts/slurm-builds.sh's `previous`), then
# this one (DEB) over it with a job running; our .deb goes back after.
upgrade_phase() { # release tree deb
  local previous rc=0
  previous=$(scripts/slurm-builds.sh wait previous) || rc=$?
  case $rc in
    0) tests/e2e/in-rootfs.sh "$2" dpkg --purge slurm-imex >/dev/null
       tests/e2e/in-rootfs.sh "$2" dpkg -i "$previous" >/dev/null || { echo "versions: dpkg -i $previous failed" >&2; exit 1; }
       run_phase "$2" package upgrade E2E_UPGRADE_TO="$3";;
    3) row "$(upstream_version "$2")" "$NATIVE_ARCH" upgrade package - - skipped;;
    *) TOTAL_FAILED=$((TOTAL_FAILED + 1)); row "$(upstream_version "$2")" "$NATIVE_ARCH" upgrade package 0 1 failed;;
  esac
}

lintian_clean() { # deb
  local out; out=$(lintian --allow-root "$1" 2>&1 | grep -v '^N: ')
  echo "    lintian: ${out:-nothing}"
  expect_eq "$out" "" "lintian on $(basename "$1")"
}

# Every package: lintian says nothing, and each installs beside the Slurm of
# its release (a stand-in of SchedMD's slurm-smd, or of Ubuntu 24.04's
# slurm-wlm for 23.11) and is refused beside the next release's.
package_tests() { # trixie sid
  local trixie=$1 sid=$2 deb
  echo "== packages: lintian and installs (Slurm $(upstream_version "$trixie") rootfs)"
  for deb in "$REPO"/target/debian/slurm-imex_*_"$NATIVE_ARCH".deb; do run_package_test lintian_clean "$deb"; done
  local d2205 d2411
  d2205=$(ls "$REPO"/target/debian/*+slurm22.05_"$NATIVE_ARCH".deb); d2411=$(ls "$REPO"/target/debian/*+slurm24.11_"$NATIVE_ARCH".deb)
  run_package_test test_package_installs_where_slurm_looks_and_purges_clean "$trixie" "$d2411"
  run_package_test test_package_for_another_slurm_is_refused "$trixie" "$d2205"
  run_package_test test_package_for_another_slurm_is_refused "$sid" "$d2411"
  run_package_test test_package_installs_beside_schedmd_packages "$trixie" "$d2411" 24.11.5-1
  run_package_test test_package_for_another_schedmd_slurm_is_refused "$trixie" "$d2411" 25.05.3-1
  local mm next deb
  # Every release built from source with a package beside SchedMD's.
  for mm in $(releases_from source); do
    [ "$(release_field "$mm" deb)" = both ] || continue
    deb=$(ls "$REPO"/target/debian/*+slurm"$mm"_"$NATIVE_ARCH".deb 2>/dev/null) || { echo "    (no package for Slurm $mm: its plugin was not built)"; continue; }
    next=$(release_next "$mm")
    run_package_test test_package_installs_beside_schedmd_packages "$trixie" "$deb" "$mm.1-1"
    run_package_test test_package_for_another_schedmd_slurm_is_refused "$trixie" "$deb" "$next.1-1"
  done
  deb=$(ls "$REPO"/target/debian/*+slurm23.11_"$NATIVE_ARCH".deb 2>/dev/null) &&
    run_package_test test_package_installs_beside_ubuntu_slurm "$trixie" "$deb" 23.11.4-1.2ubuntu5
}

# Whether one of these source releases (or arm64) still to run has a .deb
# (scripts/slurm-releases' deb column): its plugin is not built yet.
deb_release_in() { # release|arm64...
  local rel
  for rel in "$@"; do
    [ "$rel" = arm64 ] && continue
    [ "$(release_field "$rel" deb)" = none ] || return 0
  done
  return 1
}

# Every plugin built so far packaged, then the amd64 package tests.
amd64_package_tests() { # trixie sid
  scripts/package.sh >/dev/null || { echo "versions: packaging every plugin failed" >&2; exit 1; }
  package_tests "$@"
}

main() {
  [ "$(id -u)" = 0 ] || { echo "versions: must run as root" >&2; exit 1; }
  local t0=$SECONDS trixie sid
  echo "== every e2e test is run by some phase (tests/e2e/listed.sh)"
  run_package_test test_every_e2e_test_is_listed_in_a_phase
  # (the build queue only when a selected release needs one of its builds:
  # a source build, or the previous release's .deb for an upgrade phase)
  local r; for r in $(releases_from source) $(releases_from rootfs-deb); do selected "$r" && { scripts/slurm-builds.sh start; break; }; done
  # Every Debian root filesystem of the table, made now (or reused).
  for r in $(releases_from rootfs) $(releases_from rootfs-deb); do
    ROOTFS[$r]=$(scripts/slurm-rootfs.sh "$(release_field "$r" from | cut -d: -f2)") || exit 1
  done
  # The rootfs our .deb installs in (Debian 13's), and the newest (sid).
  trixie=${ROOTFS[$(releases_from rootfs-deb | sed -n 1p)]}
  sid=${ROOTFS[$(releases_from rootfs | tail -n 1)]}
  # The arm64 toolchain, rootfs, binaries and plugins build in the background
  # too (tests/run-all.sh started them already).
  [ -n "${E2E_BACKGROUND_STARTED:-}" ] || arm64_start
  echo "== plugins for Debian's Slurms (each stamped from its own headers), packages, the release tarball"
  local trees=()
  for r in $(releases_from rootfs) $(releases_from rootfs-deb); do trees+=("${ROOTFS[$r]}"); done
  scripts/build-plugins.sh host "${trees[@]}" || exit 1
  scripts/package.sh || exit 1
  refresh_release || exit 1

  # What needs no source build, while the builds run: this machine's Slurm,
  # then each rootfs's.
  for r in $(releases_from host) $(releases_from rootfs) $(releases_from rootfs-deb); do native_release "$r"; done

  # The releases built from source (slurm-builds.sh's order) and arm64
  # (Debian 13's arm64 Slurm 24.11 under qemu, from the arm64 .deb), each as
  # soon as its background build is done, so that neither waits on the
  # other's: the first one built, else the next source release (its wait is
  # bounded), else arm64.
  # The amd64 packages' tests run as soon as every release with a .deb has
  # its plugin, while the last builds (a release with no .deb, arm64) are
  # still going: they fill that wait instead of adding to the run's end.
  local todo=() next item rest debs_tested=
  for r in $(scripts/slurm-builds.sh queue-order); do todo+=("$r"); done
  todo+=(arm64)
  while [ ${#todo[@]} -gt 0 ]; do
    next=${todo[0]}
    for item in "${todo[@]}"; do built "$item" && { next=$item; break; }; done
    if [ "$next" = arm64 ]; then arm64_phases; else source_release "$next"; fi
    rest=(); for item in "${todo[@]}"; do [ "$item" = "$next" ] || rest+=("$item"); done
    todo=("${rest[@]}")
    if [ -z "$debs_tested" ] && [ -z "${E2E_RELEASES:-}" ] && ! deb_release_in "${todo[@]}"; then
      amd64_package_tests "$trixie" "$sid"; debs_tested=1
    fi
  done

  if [ -z "${E2E_RELEASES:-}" ]; then
    if [ -n "$ARM64_ROOT" ]; then
      if [ ${#ARM64_SOURCES[@]} -gt 0 ] && ! arm64_artifacts "${ARM64_SOURCES[@]}"; then
        TOTAL_FAILED=$((TOTAL_FAILED + 1)); row "source" arm64 plugin prefix 0 1 failed
      fi
      arm64_package_tests "$ARM64_ROOT"
    fi
    echo "== RPMs: rpmlint, install, verify, upgrade, erase in a RHEL-layout root (tests/packaging/rpm.sh)"
    scripts/package-rpm.sh >/dev/null || { echo "versions: the RPMs failed" >&2; exit 1; }
    # And for every other architecture cross-built here (target/cross/<triple>).
    local cross
    for cross in target/cross/*/release/slurm-imex-prolog; do
      [ -e "$cross" ] || continue
      cross=${cross#target/cross/}; cross=${cross%%/*}
      if ! scripts/package-rpm.sh "$cross" >/dev/null; then
        TOTAL_FAILED=$((TOTAL_FAILED + 1)); row "all" "${cross%%-*}" rpm package 0 1 failed
      fi
    done
    rpm_package_tests "$REPO"/target/rpm/slurm-imex-*.rpm
    echo "== every artifact: its architecture and glibc floor (tests/glibc-floor.sh)"
    run_package_test test_artifacts_are_for_their_architecture_and_glibc_2_34 "$trixie"
  fi

  echo
  echo "| Slurm    | arch  | phase      | from    | passed | failed | wall    |"
  echo "|----------|-------|------------|---------|--------|--------|---------|"
  printf '%s\n' "${ROWS[@]}"
  echo "plugins: $(ls target/slurm-plugins | paste -sd ' '); packages: $(ls target/debian | sed -n "s/.*+slurm\(.*\)_$NATIVE_ARCH.deb/\1/p" | paste -sd ' '); RPMs: $(ls target/rpm | sed -n 's/.*\.slurm\(.*\)\.rpm/\1/p' | paste -sd ' ')"
  echo "arm64 plugins: $(ls "target/cross/$ARM64_TARGET/slurm-plugins" | paste -sd ' '); packages: $(ls target/debian | sed -n 's/.*+slurm\(.*\)_arm64.deb/\1/p' | paste -sd ' ')"
  echo "all Slurm versions: $((SECONDS - t0)) s"
  build_rows
  echo "e2e: $TOTAL_PASSED passed, $TOTAL_FAILED failed"
  [ "$TOTAL_FAILED" = 0 ]
}
main "$@"
