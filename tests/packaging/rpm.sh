# shellcheck shell=bash
# RPM tests, with Debian's rpm tools (apt: rpm, rpmlint): each RPM that
# scripts/package-rpm.sh wrote installs into a RHEL-layout root (merged /usr,
# /usr/lib64/slurm, /etc/slurm; rpm's database in /var/lib/rpm) beside a
# stand-in of Slurm's own `slurm` package of its release, verifies, upgrades
# over an older slurm-imex, erases clean, and is refused beside another
# Slurm; rpmlint says nothing but the warnings justified in
# packaging/rpm/rpmlint.toml. The stand-in is built here with rpmbuild and
# carries only its name, version and the directories it owns (PluginDir,
# /etc/slurm): what rpm judges a dependency by; building SchedMD's real RPMs
# needs a RHEL build root. Sourced by tests/e2e/versions.sh; alone:
#   bash tests/packaging/rpm.sh target/rpm/slurm-imex-*.rpm
# Everything runs in private mount, PID and network namespaces, so rpm's
# scriptlets (run in that root, a chroot) change nothing on this machine.

# A stand-in for a RHEL root's system packages (glibc, bash, coreutils,
# gawk, sed): it provides what RPM requires of them, so that rpm resolves the
# dependencies a RHEL 9 node satisfies; the files come from this machine's
# /usr in the root. Prints its path.
rpm_standin_base() { # dir rpm
  local dir=$1 rpm=$2 arch
  arch=$(rpm -qp --qf '%{ARCH}' "$rpm")
  mkdir -p "$dir/base"
  {
    echo '%global debug_package %{nil}'
    echo 'Name: rhel-base-standin'; echo 'Version: 9'; echo 'Release: 1'
    echo 'Summary: stand-in for the system packages of a RHEL 9 root'; echo 'License: MIT'
    rpm -qp --requires "$rpm" | grep -v -e '^rpmlib(' -e '^(slurm' | sort -u | sed 's/^/Provides: /'
    echo '%description'; echo 'What RPM requires of glibc, bash, coreutils, gawk and sed.'
    echo '%files'
  } > "$dir/base/base.spec"
  rpmbuild -bb --quiet --target "$arch" --define "_topdir $dir/base" "$dir/base/base.spec" >/dev/null 2>&1 ||
    { echo "rpm tests: the stand-in base did not build" >&2; return 1; }
  find "$dir/base/RPMS" -name 'rhel-base-standin-*.rpm'
}

# A stand-in `slurm` package of VERSION for ARCH, in DIR; prints its path.
rpm_standin_slurm() { # dir version arch
  local dir=$1 version=$2 arch=$3
  mkdir -p "$dir/standin"
  cat > "$dir/standin/slurm.spec" <<SPEC
%global debug_package %{nil}
%global __os_install_post %{nil}
Name: slurm
Version: $version
Release: 1.el9
Summary: stand-in for Slurm $version (name, version and directories only)
License: GPL-2.0-or-later
%description
A stand-in for SchedMD's slurm package of this version, for slurm-imex's package tests.
%install
mkdir -p %{buildroot}/usr/lib64/slurm %{buildroot}/etc/slurm
%files
%dir /usr/lib64/slurm
%dir /etc/slurm
SPEC
  rpmbuild -bb --quiet --target "$arch" --define "_topdir $dir/standin" "$dir/standin/slurm.spec" >/dev/null 2>&1 ||
    { echo "rpm tests: the stand-in slurm $version did not build" >&2; return 1; }
  find "$dir/standin/RPMS" -name "slurm-$version-*.rpm"
}

# Runs a bash snippet in a RHEL-layout root at $R: a tmpfs, this machine's
# /usr under an overlay (its sh, awk and coreutils; what rpm writes to /usr
# stays in the overlay), /etc with what the scriptlets' tools need, and rpm's
# database. $RPMQ is `rpm --root $R --dbpath /var/lib/rpm`. The snippet's
# output comes back.
in_rhel_root() { # script
  unshare --mount --net --pid --fork --mount-proc --propagation private -- bash -c '
    set -e
    w=$(mktemp -d /var/tmp/slurm-imex-rpmroot.XXXXXX); R=$w/root
    mkdir -p "$w"/{upper,work} "$R"
    mount -t tmpfs -o mode=0755 tmpfs "$R"
    mkdir -p "$R"/{usr,etc/sysctl.d,etc/slurm,var/lib/rpm,var/tmp,proc,dev,tmp,run,root}; chmod 1777 "$R/tmp" "$R/var/tmp"
    mount -t overlay overlay -o "lowerdir=/usr,upperdir=$w/upper,workdir=$w/work" "$R/usr"
    for l in bin sbin lib lib64; do ln -s "usr/$l" "$R/$l"; done
    cp -a /etc/alternatives /etc/passwd /etc/group "$R/etc/"
    mount -t proc proc "$R/proc"; mount --rbind /dev "$R/dev"
    RPMQ="rpm --root $R --dbpath /var/lib/rpm"
    $RPMQ --initdb
    # What the root holds, but rpm'"'"'s database, the pseudo file systems and
    # the directories of this machine'"'"'s /usr that the overlay copied up.
    files() { (cd "$R" && find . -xdev \( -path ./var/lib/rpm -o -path ./proc -o -path ./dev -o -path ./tmp \) -prune -o -print; cd "$w/upper" && find . | while IFS= read -r f; do [ -d "$f" ] && [ -d "/usr/$f" ] || echo "./usr/${f#./}"; done) | sort; }
    trap "umount -R \"$R\" 2>/dev/null; rm -rf \"$w\"" EXIT
    set +e
    eval "$1"' rpm-root "$1" 2>&1 | grep -v -e "use Alien instead" -e "assuming you know what you are doing"
}

rpm_lint_clean() { # rpm
  local out
  out=$(rpmlint -c "$REPO/packaging/rpm/rpmlint.toml" "$1" 2>&1 | grep -E '^[^ ]+: [EW]: ')
  echo "    rpmlint: ${out:-nothing}"
  expect_eq "$out" "" "rpmlint on $(basename "$1")"
}

# The Slurm major.minor an RPM is built for, from its Release (1.slurm24.11).
rpm_slurm_mm() { rpm -qp --qf '%{RELEASE}' "$1" 2>/dev/null | sed 's/.*\.slurm//'; }

# Install beside its Slurm, verify, upgrade over an older slurm-imex, erase.
test_rpm_installs_verifies_upgrades_and_erases_clean() { # rpm older-rpm
  local rpm=$1 older=$2 mm arch dir standin base out
  mm=$(rpm_slurm_mm "$rpm"); arch=$(rpm -qp --qf '%{ARCH}' "$rpm")
  dir=$(mktemp -d /var/tmp/slurm-imex-rpmtest.XXXXXX)
  standin=$(rpm_standin_slurm "$dir" "$mm.5" "$arch") || { fail "no stand-in slurm"; rm -rf "$dir"; return; }
  base=$(rpm_standin_base "$dir" "$rpm") || { fail "no stand-in base"; rm -rf "$dir"; return; }
  out=$(in_rhel_root "
    \$RPMQ -i --ignorearch $base $standin
    echo 'net.ipv4.ip_local_reserved_ports = 7000-7010' > \$R/etc/sysctl.d/50-site.conf
    before=\$(files)
    echo '== install'; \$RPMQ -i --ignorearch $older
    \$RPMQ -U --ignorearch $rpm; echo \"rc=\$?\"
    for f in /usr/lib64/slurm/spank_imex.so /usr/sbin/slurm-imex-prolog /usr/sbin/slurm-imex-epilog /usr/sbin/slurm-imex-watch \
             /usr/sbin/slurm-imex-healthcheck /usr/bin/slurm-imex /etc/slurm/imex.toml \
             /usr/lib/sysctl.d/90-slurm-imex.conf /usr/share/man/man8/slurm-imex-prolog.8.gz \
             /usr/share/man/man8/slurm-imex-epilog.8.gz /usr/share/man/man8/slurm-imex-watch.8.gz /usr/share/man/man8/slurm-imex-healthcheck.8.gz \
             /usr/share/man/man1/slurm-imex.1.gz \
             /usr/share/doc/slurm-imex/docs/install.md /usr/share/doc/slurm-imex/examples/job_submit.lua \
             /usr/share/doc/slurm-imex/examples/nvidia-imex.service.d/slurm-imex.conf \
             /usr/share/doc/slurm-imex/examples/nvsentinel/slurm-drain-monitor.toml; do
      [ -e \$R\$f ] || echo \"missing: \$f\"
    done
    echo \"state: \$(stat -c '%a %U' \$R/var/lib/slurm-imex)\"
    echo \"sysctl file: \$(grep -v '^#' \$R/etc/sysctl.d/90-slurm-imex.conf)\"
    echo \"configs: \$(\$RPMQ -qc slurm-imex | tr '\n' ' ')\"
    echo \"requires: \$(\$RPMQ -q --requires slurm-imex | grep slurm | tr '\n' ' ')\"
    echo '== verify'; \$RPMQ -V slurm-imex; echo \"verify rc=\$?\"
    echo 'scontrol = \"/opt/site/scontrol\"' >> \$R/etc/slurm/imex.toml
    echo '== verify after edit'; \$RPMQ -V slurm-imex
    echo '== reinstall over itself'; \$RPMQ -U --replacepkgs --ignorearch $rpm
    echo \"kept edit: \$(grep -c /opt/site/scontrol \$R/etc/slurm/imex.toml)\"
    echo \"sysctl file after upgrade: \$(grep -v '^#' \$R/etc/sysctl.d/90-slurm-imex.conf)\"
    printf 'Prolog=/usr/sbin/slurm-imex-prolog\n' > \$R/etc/slurm/slurm.conf
    echo '== erase'; \$RPMQ -e slurm-imex; echo \"erase rc=\$?\"
    rm \$R/etc/slurm/slurm.conf
    after=\$(files)
    echo '== left'; diff <(echo \"\$before\") <(echo \"\$after\") | grep '^[<>]'
    echo '== end'")
  expect_contains "$out" "rc=0" "rpm -U over the older slurm-imex"
  expect_not_contains "$out" "missing: " "every file in place"
  expect_contains "$out" "in a chroot or image build" "no live sysctl in the root"
  expect_contains "$out" "state: 700 root" "state directory mode and owner"
  expect_contains "$out" "sysctl file: net.ipv4.ip_local_reserved_ports = 7000-7010,33792-50175" "the root's reservation merges the site's"
  expect_contains "$out" "configs: /etc/slurm/imex.toml" "imex.toml is the only config"
  expect_contains "$out" "requires: (slurm >= $mm with slurm < " "requires its Slurm's major.minor"
  expect_eq "$(sed -n '/^== verify$/,/^verify rc/p' <<<"$out" | sed '1d;$d')" "" "rpm -V says nothing after install"
  expect_contains "$out" "verify rc=0" "rpm -V passes"
  expect_contains "$(sed -n '/^== verify after edit$/,/^== reinstall/p' <<<"$out")" "c /etc/slurm/imex.toml" "rpm -V names the edited config"
  expect_contains "$out" "kept edit: 1" "an upgrade keeps the admin's imex.toml (noreplace)"
  expect_contains "$out" "sysctl file after upgrade: net.ipv4.ip_local_reserved_ports = 7000-7010,33792-50175" "an upgrade keeps the reservation"
  expect_contains "$out" "still names slurm-imex" "erase names the slurm.conf lines first"
  expect_contains "$out" "/etc/slurm/slurm.conf:1: Prolog=/usr/sbin/slurm-imex-prolog" "the line to remove"
  expect_contains "$out" "erase rc=0" "rpm -e"
  expect_eq "$(sed -n '/^== left$/,/^== end$/p' <<<"$out" | sed '1d;$d')" "> ./etc/slurm/imex.toml.rpmsave" \
    "after erase only the admin's edited imex.toml is left, as .rpmsave"
  echo "    rpm -V after an edit: $(sed -n '/^== verify after edit$/{n;p}' <<<"$out")"
  echo "    erase says: $(grep -m1 'still names' <<<"$out" | cut -c1-100)..."
  rm -rf "$dir"
}

test_rpm_for_another_slurm_is_refused() { # rpm other-version
  local rpm=$1 other=$2 arch dir standin base out
  arch=$(rpm -qp --qf '%{ARCH}' "$rpm")
  dir=$(mktemp -d /var/tmp/slurm-imex-rpmtest.XXXXXX)
  standin=$(rpm_standin_slurm "$dir" "$other" "$arch") || { fail "no stand-in slurm"; rm -rf "$dir"; return; }
  base=$(rpm_standin_base "$dir" "$rpm") || { fail "no stand-in base"; rm -rf "$dir"; return; }
  out=$(in_rhel_root "
    \$RPMQ -i --ignorearch $base $standin
    \$RPMQ -i --ignorearch $rpm; echo \"rc=\$?\"
    [ -e \$R/usr/lib64/slurm/spank_imex.so ] && echo plugin-installed")
  expect_not_contains "$out" "rc=0" "rpm refuses it beside slurm $other"
  expect_contains "$out" "Failed dependencies" "rpm names the dependency"
  expect_not_contains "$out" "plugin-installed" "nothing installed"
  echo "    rpm says: $(grep -m1 'is needed by' <<<"$out" | sed 's/^[[:space:]]*//')"
  rm -rf "$dir"
}

# An older slurm-imex for the upgrade test: the same RPM rebuilt as 0.0.1.
rpm_older() { # rpm -> path
  local rpm=$1 triple mm
  triple=$(rpm -qp --qf '%{ARCH}' "$rpm")-unknown-linux-gnu
  mm=$(rpm_slurm_mm "$rpm")
  RPM_VERSION=0.0.1 RPM_OUT=target/rpm-older RPM_ONLY="$mm" "$REPO/scripts/package-rpm.sh" "$triple" >/dev/null || return 1
  ls "$REPO"/target/rpm-older/slurm-imex-0.0.1-1.slurm"$mm".*.rpm
}

# Every RPM: rpmlint; the first (of each architecture) also through
# install, verify, upgrade and erase, and refused beside the next Slurm.
rpm_package_tests() { # rpm...
  local rpm older mm other seen=" "
  for rpm in "$@"; do
    run_package_test rpm_lint_clean "$rpm"
    local arch; arch=$(rpm -qp --qf '%{ARCH}' "$rpm")
    mm=$(rpm_slurm_mm "$rpm")
    # The next release we ship for (the previous one for the newest).
    other=$(release_next "$mm")
    run_package_test test_rpm_for_another_slurm_is_refused "$rpm" "$other.1"
    [[ $seen == *" $arch "* ]] && continue
    seen+="$arch "
    older=$(rpm_older "$rpm") || { TOTAL_FAILED=$((TOTAL_FAILED + 1)); echo "--- rpm_older $rpm: FAILED"; continue; }
    run_package_test test_rpm_installs_verifies_upgrades_and_erases_clean "$rpm" "$older"
  done
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -uo pipefail
  REPO=$(cd "$(dirname "$0")/../.." && pwd)
  cd "$REPO" || exit 1
  source tests/e2e/assert.sh
  source scripts/releases.sh
  TOTAL_PASSED=0 TOTAL_FAILED=0
  run_package_test() {
    CURRENT_OK=1; echo "--- $*"
    "$@"
    if [ "$CURRENT_OK" = 1 ]; then TOTAL_PASSED=$((TOTAL_PASSED + 1)); echo "    ok"; else TOTAL_FAILED=$((TOTAL_FAILED + 1)); echo "    FAILED"; fi
  }
  [ $# -gt 0 ] || set -- target/rpm/slurm-imex-*.rpm
  rpm_package_tests "$@"
  echo "rpm: $TOTAL_PASSED passed, $TOTAL_FAILED failed"
  [ "$TOTAL_FAILED" = 0 ]
fi
