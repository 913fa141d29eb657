# shellcheck shell=bash

# Package tests, run by tests/e2e/versions.sh on the built .debs: what a
# package installs, that purging it leaves nothing behind, and what apt and
# dpkg say when it meets the wrong Slurm. $1 of each: the rootfs to use.

# A package install or purge in a root filesystem, in a network namespace of
# its own: apt runs dpkg's triggers (procps applies the root's sysctl.d),
# which would otherwise set this machine's net.ipv4.ip_local_reserved_ports
# (a per-network-namespace key); versions.sh fails a test that changes it.
in_rootfs_own_net() { unshare --net -- "$REPO/tests/e2e/in-rootfs.sh" "$@"; }

# Every path in a root filesystem except pseudo and scratch file systems
# and the bookkeeping Debian policy says dpkg keeps (its own database and log).
rootfs_files() {
  (cd "$1" && find . -xdev \( -path ./proc -o -path ./sys -o -path ./dev -o -path ./tmp -o -path ./run \
     -o -path ./var/tmp -o -path ./var/lib/dpkg -o -path ./var/log -o -path ./var/cache/debconf \
     -o -path ./var/cache/ldconfig -o -path ./etc/ld.so.cache -o -path ./work \) -prune -o -print | sort)
}

# A root filesystem's own architecture: that of its dpkg package (dpkg
# --print-architecture would name this machine's, whatever --admindir says).
rootfs_arch() { # rootfs
  dpkg-query --admindir="$1/var/lib/dpkg" -W -f='${Architecture}' dpkg
}

# Debian's multiarch directory of a root filesystem's architecture
# (x86_64-linux-gnu, aarch64-linux-gnu): where its Slurm's PluginDir is.
rootfs_multiarch() { # rootfs
  dpkg-architecture -a"$(rootfs_arch "$1")" -qDEB_HOST_MULTIARCH 2>/dev/null
}

test_package_installs_where_slurm_looks_and_purges_clean() { # rootfs deb
  local root=$1 deb=$2 before after multiarch
  multiarch=$(rootfs_multiarch "$root")
  # As on a node that never had slurm-imex (a cached rootfs may hold the
  # e2e harness's mount point there).
  rm -rf "$root/var/lib/slurm-imex"
  # in-rootfs.sh makes the repo's mount point on first use; make it now so
  # the snapshot compares the package's files only.
  in_rootfs_own_net "$root" true || { fail "cannot enter $root"; return; }
  before=$(rootfs_files "$root")
  local out; out=$(in_rootfs_own_net "$root" dpkg -i "$deb" 2>&1) || { fail "dpkg -i $deb: $out"; return; }
  local f
  for f in "/usr/lib/$multiarch/slurm-wlm/spank_imex.so" /usr/sbin/slurm-imex-prolog /usr/sbin/slurm-imex-epilog /usr/sbin/slurm-imex-watch \
           /usr/bin/slurm-imex /usr/sbin/slurm-imex-healthcheck /etc/slurm/imex.toml /usr/lib/sysctl.d/90-slurm-imex.conf \
           /usr/share/doc/slurm-imex/README.Debian /usr/share/doc/slurm-imex/copyright \
           /usr/share/doc/slurm-imex/examples/enroot/mounts.d/90-slurm-imex.fstab /usr/share/doc/slurm-imex/examples/job_submit.lua \
           /usr/share/man/man1/slurm-imex.1.gz /usr/share/man/man1/slurm-imex-history.1.gz \
           /usr/share/man/man8/slurm-imex-prolog.8.gz /usr/share/man/man8/slurm-imex-epilog.8.gz /usr/share/man/man8/slurm-imex-watch.8.gz; do
    [ -e "$root$f" ] || fail "package did not install $f"
  done
  expect_eq "$(stat -c '%a %U' "$root/var/lib/slurm-imex")" "700 root" "state directory mode and owner"
  expect_contains "$(cat "$root/var/lib/dpkg/info/slurm-imex.conffiles")" "/etc/slurm/imex.toml" "imex.toml is a conffile"
  expect_eq "$(in_rootfs_own_net "$root" slurm-imex --help 2>&1 | sed -n 1p | grep -c .)" 1 "installed CLI runs"
  # Nothing is enabled behind the admin's back.
  expect_not_contains "$(cat "$root"/etc/slurm/plugstack.conf "$root"/etc/slurm/plugstack.conf.d/* 2>/dev/null)" "spank_imex" "plugin not enabled by the package"
  out=$(in_rootfs_own_net "$root" dpkg --purge slurm-imex 2>&1) || { fail "dpkg --purge: $out"; return; }
  after=$(rootfs_files "$root")
  expect_eq "$(diff <(echo "$before") <(echo "$after") | grep '^[<>]')" "" "files left or lost after install and purge"
}

test_package_for_another_slurm_is_refused() { # rootfs wrong-deb
  local root=$1 deb=$2 out rc
  out=$(in_rootfs_own_net "$root" apt-get install -s -q "$deb" 2>&1); rc=$?
  [ $rc -ne 0 ] || fail "apt accepted $deb beside $(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Version}' slurmd)"
  expect_contains "$out" "Depends: slurm-wlm-basic-plugins" "apt names the Slurm dependency"
  echo "    apt says: $(grep -m1 'Depends: slurm-wlm' <<<"$out" | sed 's/^ *//')"
  out=$(in_rootfs_own_net "$root" dpkg -i "$deb" 2>&1); rc=$?
  [ $rc -ne 0 ] || fail "dpkg -i accepted $deb"
  expect_contains "$out" "dependency problems" "dpkg refuses to configure it"
  echo "    dpkg says: $(grep -m1 'depends on slurm-wlm' <<<"$out" | sed 's/^ *//')"
  in_rootfs_own_net "$root" dpkg --purge slurm-imex >/dev/null 2>&1
  [ -e "$root/usr/lib/$(rootfs_multiarch "$root")/slurm-wlm/spank_imex.so" ] && fail "the refused package's plugin is still there"
  return 0
}

# SchedMD's own Debian packages (slurm-smd, from the upstream tarball's
# debian/) stand in as equivs packages carrying only their names, versions
# and conflicts: what apt and dpkg judge a dependency by. They go into an
# overlay of the trixie root filesystem whose Debian Slurm is purged and
# whose apt lists are emptied (a SchedMD site's archive offers no Debian
# Slurm of the release, or apt would "solve" a refusal by swapping Slurms),
# so the cached rootfs is untouched. Prints the overlay's root;
# smd_root_done ends it. A third argument names another Slurm package to
# stand in (Ubuntu's slurm-wlm-basic-plugins), without SchedMD's conflicts.
smd_root() { # rootfs version [package]
  local root=$1 version=$2 package=${3:-slurm-smd} work conflicts=
  [ "$package" = slurm-smd ] && conflicts="Conflicts: slurm-wlm, slurm-wlm-basic-plugins"
  work=$(mktemp -d /var/tmp/slurm-imex-smd.XXXXXX)
  mkdir -p "$work"/{upper,work,root,pkg}
  mount -t overlay overlay -o "lowerdir=$root,upperdir=$work/upper,workdir=$work/work" "$work/root" || return 1
  cat > "$work/pkg/$package" <<CTL
Section: admin
Priority: optional
Standards-Version: 4.6.2
Package: $package
Version: $version
Maintainer: slurm-imex tests <tests@slurm-imex.invalid>
Architecture: $(rootfs_arch "$root")
$conflicts
Description: stand-in for $package $version (names and version only)
CTL
  (cd "$work/pkg" && equivs-build "$package" >/dev/null 2>&1) || { echo "smd_root: equivs-build failed" >&2; return 1; }
  local debian_slurm
  debian_slurm=$(dpkg-query --admindir="$work/root/var/lib/dpkg" -W -f='${Package}\n' | grep -E '^(slurm|libslurm|slurmd|slurmctld)' | tr '\n' ' ')
  # shellcheck disable=SC2086 # $debian_slurm: package names, split on purpose
  in_rootfs_own_net "$work/root" dpkg --purge --force-depends $debian_slurm >/dev/null 2>&1
  rm -rf "$work"/root/var/lib/apt/lists/*
  cp "$work"/pkg/"$package"_*.deb "$work/root/srv/"
  in_rootfs_own_net "$work/root" sh -c "dpkg -i /srv/${package}_*.deb" >/dev/null || { echo "smd_root: the stand-in did not install" >&2; return 1; }
  echo "$work"
}

smd_root_done() { umount "$1/root" 2>/dev/null; rm -rf "$1"; }

test_package_installs_beside_schedmd_packages() { # rootfs deb smd-version
  local work out
  work=$(smd_root "$1" "$3") || { fail "cannot make a root filesystem with slurm-smd $3"; return; }
  cp "$2" "$work/root/srv/"
  out=$(in_rootfs_own_net "$work/root" apt-get install -y -q "/srv/$(basename "$2")" 2>&1) ||
    fail "apt refused $(basename "$2") beside slurm-smd $3: $(tail -3 <<<"$out")"
  expect_eq "$(dpkg-query --admindir="$work/root/var/lib/dpkg" -W -f='${db:Status-Abbrev}' slurm-imex 2>&1)" "ii " "slurm-imex installed and configured beside slurm-smd $3"
  expect_eq "$(dpkg-query --admindir="$work/root/var/lib/dpkg" -W -f='${Package} ${Version}' slurm-smd)" "slurm-smd $3" "SchedMD's package is the Slurm it sits beside"
  [ -f "$work/root/usr/lib/$(rootfs_multiarch "$1")/slurm/spank_imex.so" ] || fail "no plugin in slurm-smd's PluginDir"
  smd_root_done "$work"
}

test_package_for_another_schedmd_slurm_is_refused() { # rootfs deb smd-version
  local work out rc
  work=$(smd_root "$1" "$3") || { fail "cannot make a root filesystem with slurm-smd $3"; return; }
  cp "$2" "$work/root/srv/"
  out=$(in_rootfs_own_net "$work/root" apt-get install -s -q "/srv/$(basename "$2")" 2>&1); rc=$?
  [ $rc -ne 0 ] || fail "apt accepted $(basename "$2") beside slurm-smd $3"
  expect_contains "$out" "slurm-smd (<" "apt names SchedMD's package and the range"
  echo "    apt says: $(grep -m1 'Depends:' <<<"$out" | sed 's/^ *//')"
  out=$(in_rootfs_own_net "$work/root" dpkg -i "/srv/$(basename "$2")" 2>&1); rc=$?
  [ $rc -ne 0 ] || fail "dpkg -i accepted it"
  expect_contains "$out" "dependency problems" "dpkg refuses to configure it"
  echo "    dpkg says: $(grep -m1 'depends on' <<<"$out" | sed 's/^ *//')"
  smd_root_done "$work"
}

# Ubuntu 24.04 (the base of DGX OS 7) packages Slurm 23.11 as slurm-wlm,
# like Debian: the 23.11 package installs beside it, plugin in its PluginDir.
test_package_installs_beside_ubuntu_slurm() { # rootfs deb version
  local work out
  work=$(smd_root "$1" "$3" slurm-wlm-basic-plugins) || { fail "cannot make a root filesystem with slurm-wlm-basic-plugins $3"; return; }
  cp "$2" "$work/root/srv/"
  out=$(in_rootfs_own_net "$work/root" apt-get install -y -q "/srv/$(basename "$2")" 2>&1) ||
    fail "apt refused $(basename "$2") beside slurm-wlm-basic-plugins $3: $(tail -3 <<<"$out")"
  expect_eq "$(dpkg-query --admindir="$work/root/var/lib/dpkg" -W -f='${db:Status-Abbrev}' slurm-imex 2>&1)" "ii " "slurm-imex installed beside Ubuntu's Slurm $3"
  [ -f "$work/root/usr/lib/$(rootfs_multiarch "$1")/slurm-wlm/spank_imex.so" ] || fail "no plugin in slurm-wlm's PluginDir"
  smd_root_done "$work"
}
