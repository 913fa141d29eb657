# shellcheck shell=bash
# Package tests, run by tests/e2e/versions.sh on the built .debs: what a
# package installs, that purging it leaves nothing behind, and what apt and
# dpkg say when it meets the wrong Slurm. $1 of each: the rootfs to use.

# Every path in a root filesystem except pseudo and scratch file systems
# and the bookkeeping Debian policy says dpkg keeps (its own database and log).
rootfs_files() {
  (cd "$1" && find . -xdev \( -path ./proc -o -path ./sys -o -path ./dev -o -path ./tmp -o -path ./run \
     -o -path ./var/tmp -o -path ./var/lib/dpkg -o -path ./var/log -o -path ./var/cache/debconf \
     -o -path ./var/cache/ldconfig -o -path ./etc/ld.so.cache -o -path ./work \) -prune -o -print | sort)
}

test_package_installs_where_slurm_looks_and_purges_clean() { # rootfs deb
  local root=$1 deb=$2 before after
  # As on a node that never had slurm-imex (a cached rootfs may hold the
  # e2e harness's mount point there).
  rm -rf "$root/var/lib/slurm-imex"
  # in-rootfs.sh makes the repo's mount point on first use; make it now so
  # the snapshot compares the package's files only.
  "$REPO/tests/e2e/in-rootfs.sh" "$root" true || { fail "cannot enter $root"; return; }
  before=$(rootfs_files "$root")
  local out; out=$("$REPO/tests/e2e/in-rootfs.sh" "$root" dpkg -i "$deb" 2>&1) || { fail "dpkg -i $deb: $out"; return; }
  local f
  for f in /usr/lib/x86_64-linux-gnu/slurm-wlm/spank_imex.so /usr/sbin/slurm-imex-prolog /usr/sbin/slurm-imex-epilog \
           /usr/bin/slurm-imex /usr/sbin/slurm-imex-healthcheck /etc/slurm/imex.toml /usr/lib/sysctl.d/90-slurm-imex.conf \
           /usr/share/doc/slurm-imex/README.Debian /usr/share/doc/slurm-imex/copyright \
           /usr/share/doc/slurm-imex/examples/enroot/mounts.d/90-slurm-imex.fstab \
           /usr/share/man/man1/slurm-imex.1.gz /usr/share/man/man1/slurm-imex-history.1.gz \
           /usr/share/man/man8/slurm-imex-prolog.8.gz /usr/share/man/man8/slurm-imex-epilog.8.gz; do
    [ -e "$root$f" ] || fail "package did not install $f"
  done
  expect_eq "$(stat -c '%a %U' "$root/var/lib/slurm-imex")" "700 root" "state directory mode and owner"
  expect_contains "$(cat "$root/var/lib/dpkg/info/slurm-imex.conffiles")" "/etc/slurm/imex.toml" "imex.toml is a conffile"
  expect_eq "$("$REPO/tests/e2e/in-rootfs.sh" "$root" slurm-imex --help 2>&1 | head -1 | grep -c .)" 1 "installed CLI runs"
  # Nothing is enabled behind the admin's back.
  expect_not_contains "$(cat "$root"/etc/slurm/plugstack.conf "$root"/etc/slurm/plugstack.conf.d/* 2>/dev/null)" "spank_imex" "plugin not enabled by the package"
  out=$("$REPO/tests/e2e/in-rootfs.sh" "$root" dpkg --purge slurm-imex 2>&1) || { fail "dpkg --purge: $out"; return; }
  after=$(rootfs_files "$root")
  expect_eq "$(diff <(echo "$before") <(echo "$after") | grep '^[<>]')" "" "files left or lost after install and purge"
}

test_package_for_another_slurm_is_refused() { # rootfs wrong-deb
  local root=$1 deb=$2 out rc
  out=$("$REPO/tests/e2e/in-rootfs.sh" "$root" apt-get install -s -q "$deb" 2>&1); rc=$?
  [ $rc -ne 0 ] || fail "apt accepted $deb beside $(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Version}' slurmd)"
  expect_contains "$out" "Depends: slurm-wlm-basic-plugins" "apt names the Slurm dependency"
  echo "    apt says: $(grep -m1 'Depends: slurm-wlm' <<<"$out" | sed 's/^ *//')"
  out=$("$REPO/tests/e2e/in-rootfs.sh" "$root" dpkg -i "$deb" 2>&1); rc=$?
  [ $rc -ne 0 ] || fail "dpkg -i accepted $deb"
  expect_contains "$out" "dependency problems" "dpkg refuses to configure it"
  echo "    dpkg says: $(grep -m1 'depends on slurm-wlm' <<<"$out" | sed 's/^ *//')"
  "$REPO/tests/e2e/in-rootfs.sh" "$root" dpkg --purge slurm-imex >/dev/null 2>&1
  [ -e "$root/usr/lib/x86_64-linux-gnu/slurm-wlm/spank_imex.so" ] && fail "the refused package's plugin is still there"
  return 0
}
