#!/bin/bash
# Tests of what installing and removing slurm-imex does beyond its own files,
# with no cluster: the port reservation and the warning for an imex.toml the
# installed CLI refuses (packaging/maintainer-lib.sh, as the .deb, the RPM
# and install.sh run it) and install.sh's refusals (paths that
# Slurm's config cannot hold, a manifest that root does not own, an uninstall
# while slurm.conf still names us), plus install.sh into Debian 12's own Slurm.
# Each test runs in private mount, network and PID namespaces: tmpfs over the
# sysctl.d directories, and the reserved ports of a fresh network namespace,
# so this machine's configuration and its ports are untouched. Needs root.
#   bash tests/packaging/run.sh     # prints "packaging: N passed, M failed"
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO" || exit 1
source tests/e2e/assert.sh
[ "$(id -u)" = 0 ] || { echo "packaging tests: run as root" >&2; exit 1; }
OURS=$(sed -n 's/^net\.ipv4\.ip_local_reserved_ports = //p' conf-examples/sysctl.d/90-slurm-imex.conf)
KEY=/proc/sys/net/ipv4/ip_local_reserved_ports

# Runs a bash snippet (with maintainer-lib.sh sourced) where sysctl.d and the
# reserved ports are private: what it prints comes back.
isolated() { # script
  unshare --mount --net --pid --fork --mount-proc --propagation private -- bash -c '
    set -e
    for d in /etc/sysctl.d /usr/lib/sysctl.d /run/sysctl.d /usr/local/lib/sysctl.d; do
      [ -d "$d" ] && mount -t tmpfs -o mode=0755 tmpfs "$d"
    done
    [ -e /etc/sysctl.conf ] && { : > /run/slurm-imex-sysctl.conf; mount --bind /run/slurm-imex-sysctl.conf /etc/sysctl.conf; }
    source "$0/packaging/maintainer-lib.sh"
    eval "$1"' "$REPO" "$1" 2>&1
}

test_reservation_merges_with_the_sites_and_leaves_them_on_removal() {
  local out
  out=$(isolated "
    echo 'net.ipv4.ip_local_reserved_ports = 8000-8100' > /etc/sysctl.d/50-site.conf
    sysctl -q --system >/dev/null
    echo 8000-8100,1234 > $KEY          # and one set at run time by hand
    imex_ports_reserve $OURS
    echo \"live after install: \$(cat $KEY)\"
    echo \"file: \$(grep -v '^#' /etc/sysctl.d/90-slurm-imex.conf)\"
    echo > $KEY; sysctl -q --system >/dev/null 2>&1
    echo \"live after boot: \$(cat $KEY)\"
    echo 8000-8100,1234,$OURS > $KEY
    imex_ports_release $OURS
    echo \"live after removal: \$(cat $KEY)\"
    ls /etc/sysctl.d")
  expect_contains "$out" "live after install: 1234,8000-8100,$OURS" "install adds our span to the live ranges"
  expect_contains "$out" "file: net.ipv4.ip_local_reserved_ports = 8000-8100,$OURS" "the boot file holds the site's ranges and ours"
  expect_contains "$out" "live after boot: 8000-8100,$OURS" "a boot (sysctl --system) applies both"
  expect_contains "$out" "live after removal: 1234,8000-8100" "removal takes out only our span"
  expect_eq "$(tail -1 <<<"$out")" "50-site.conf" "removal leaves the site's file and only it"
  echo "    $(grep 'live after install' <<<"$out")"
}

test_removal_keeps_a_site_range_inside_ours() {
  local out
  out=$(isolated "
    printf '# the site\nnet/ipv4/ip_local_reserved_ports=40000-40010\n' > /etc/sysctl.d/60-site.conf
    sysctl -q --system >/dev/null
    imex_ports_reserve $OURS >/dev/null
    imex_ports_release $OURS
    echo \"live after removal: \$(cat $KEY)\"")
  expect_eq "$out" "live after removal: 40000-40010" "a site range inside our span survives removal"
}

# An image build: a chroot whose / is not PID 1's. Nothing live changes,
# the image gets the boot file.
test_chroot_changes_no_sysctl() {
  local out
  out=$(isolated "
    r=\$(mktemp -d)
    mount -t tmpfs tmpfs \$r
    mkdir -p \$r/usr \$r/proc \$r/etc/sysctl.d \$r/etc/alternatives \$r/tmp \$r/dev \$r/repo
    mount --bind /usr \$r/usr; mount --bind /etc/alternatives \$r/etc/alternatives; mount -t proc proc \$r/proc; mount --rbind /dev \$r/dev; mount --bind $REPO \$r/repo
    for l in bin sbin lib lib64; do [ -L /\$l ] && ln -s \"\$(readlink /\$l)\" \$r/\$l; done
    echo 'net.ipv4.ip_local_reserved_ports = 8000' > \$r/etc/sysctl.d/50-site.conf
    echo 22 > $KEY
    chroot \$r /bin/sh -c '. /repo/packaging/maintainer-lib.sh; imex_ports_reserve $OURS'
    echo \"live: \$(cat $KEY)\"
    echo \"image file: \$(grep -v '^#' \$r/etc/sysctl.d/90-slurm-imex.conf)\"")
  expect_contains "$out" "in a chroot or image build" "the chroot is named"
  expect_contains "$out" "live: 22" "the live value is untouched"
  expect_contains "$out" "image file: net.ipv4.ip_local_reserved_ports = 8000,$OURS" "the image's boot file merges the image's ranges"
  echo "    $(grep chroot <<<"$out")"
}

test_copies_of_the_maintainer_lib_are_current() {
  local out
  out=$(packaging/sync-maintainer-lib.sh --check 2>&1) || fail "stale copies: $out"
  sh -n packaging/debian/postinst && sh -n packaging/debian/prerm || fail "a Debian maintainer script does not parse"
}

test_slurm_lines_are_named_but_not_comments() {
  local d out
  d=$(mktemp -d); mkdir "$d/plugstack.conf.d"
  printf 'ClusterName=x\n#Prolog=/usr/sbin/slurm-imex-prolog\nProlog=/usr/sbin/slurm-imex-prolog\n' > "$d/slurm.conf"
  echo 'required /usr/lib64/slurm/spank_imex.so config=/etc/slurm/imex.toml' > "$d/plugstack.conf.d/imex.conf"
  out=$(bash -c "source packaging/maintainer-lib.sh; imex_slurm_lines $d")
  expect_eq "$out" "$d/slurm.conf:3: Prolog=/usr/sbin/slurm-imex-prolog
$d/plugstack.conf.d/imex.conf:1: required /usr/lib64/slurm/spank_imex.so config=/etc/slurm/imex.toml" "the lines naming slurm-imex"
  rm -rf "$d"
}

# The install step's config check (imex_config_warn, as the postinst, %post
# and install.sh run it after installing): the installed CLI's refusal is a
# warning with its line, and the install goes on; a file that loads says
# nothing. The CLI is a stand-in answering as `slurm-imex config` does.
test_a_refused_imex_toml_is_a_warning_that_never_fails_the_install() {
  local d out
  d=$(mktemp -d); : > "$d/imex.toml"
  printf '#!/bin/sh\n[ "$3" = config ] || exit 9\necho "slurm-imex: bad config $2:12: [imex.watch] interval = 0ns is out of range: use 100ms to 10m" >&2\nexit 2\n' > "$d/slurm-imex"
  chmod 755 "$d/slurm-imex"
  out=$(bash -c "set -e; source packaging/maintainer-lib.sh; imex_config_warn $d/slurm-imex $d/imex.toml; echo went-on" 2>&1)
  expect_contains "$out" "slurm-imex: warning: bad config $d/imex.toml:12: [imex.watch] interval = 0ns is out of range" "the refused line, as a warning"
  expect_contains "$out" "went-on" "the install goes on"
  printf '#!/bin/sh\necho "$2: loads"\n' > "$d/slurm-imex"
  out=$(bash -c "set -e; source packaging/maintainer-lib.sh; imex_config_warn $d/slurm-imex $d/imex.toml; echo went-on" 2>&1)
  expect_eq "$out" "went-on" "a file that loads: nothing said"
  rm -rf "$d"
}

# A release payload as scripts/release.sh lays it out; the binaries are
# stand-ins (install.sh copies them, and runs only `slurm-imex config`,
# whose stand-in says nothing: the file loads).
payload() {
  local p; p=$(mktemp -d /var/tmp/slurm-imex-payload.XXXXXX)
  chmod 755 "$p"; mkdir -p "$p"/{bin,plugins/22.05}
  for b in slurm-imex-prolog slurm-imex-epilog slurm-imex-watch slurm-imex; do printf '#!/bin/sh\n' > "$p/bin/$b"; chmod 755 "$p/bin/$b"; done
  : > "$p/plugins/22.05/spank_imex.so"
  cp -r conf-examples "$p/"; echo test > "$p/VERSION"
  install -m 0755 scripts/install.sh "$p/install.sh"
  echo "$p"
}

# One line, and the reason in it, for every path Slurm's config cannot hold.
test_install_sh_refuses_paths_slurm_cannot_read() {
  local p out
  p=$(payload)
  out=$("$p/install.sh" --slurm-prefix /usr --prefix '/opt/a#b' --dry-run 2>&1) && fail "took a prefix with #"
  expect_eq "$(grep -c . <<<"$out")" 1 "'#' refused in one line"; expect_contains "$out" "start a comment" "why '#' is refused"
  out=$("$p/install.sh" --slurm-prefix '/opt/my slurm' --dry-run 2>&1) && fail "took a prefix with a space"
  expect_eq "$(grep -c . <<<"$out")" 1 "a space refused in one line"; expect_contains "$out" "whitespace" "why a space is refused"
  out=$("$p/install.sh" --slurm-prefix /usr --sysconfdir '/etc/sl"urm' --dry-run 2>&1) && fail "took a quote"
  expect_contains "$out" "quote" "why a quote is refused"
  out=$("$p/install.sh" --slurm-prefix /usr --prefix '/opt/a,b' --dry-run 2>&1) && fail "took a comma"
  expect_contains "$out" "holds ','" "a comma is named"
  out=$("$p/install.sh" --slurm-prefix /usr --prefix '/opt/a;b' --dry-run 2>&1) && fail "took a ;"
  expect_contains "$out" "holds ';'" "a shell character is named"
  echo "    says: $out"
  rm -rf "$p"
}

# A tarball for another CPU is refused in one line naming the right one;
# this CPU's is taken.
test_install_sh_refuses_a_tarball_for_another_cpu() {
  local p out other
  p=$(payload)
  case $(uname -m) in x86_64) other=aarch64;; *) other=x86_64;; esac
  echo "$other" > "$p/CPU"
  out=$("$p/install.sh" --slurm-prefix /nonexistent --dry-run 2>&1) && fail "took a tarball for $other"
  expect_eq "$(grep -c . <<<"$out")" 1 "refused in one line"
  expect_contains "$out" "this tarball is for $other CPUs, and this machine is $(uname -m): use slurm-imex-test-$(uname -m)-linux.tar.gz" "the line names the tarball to use"
  echo "    says: $out"
  uname -m > "$p/CPU"
  out=$("$p/install.sh" --slurm-prefix /nonexistent --dry-run 2>&1)
  expect_contains "$out" "no /nonexistent/bin/scontrol" "this CPU's tarball gets past the check"
  rm -rf "$p"
}

# A prefix whose manifest lists a file; ARG: how to spoil it.
spoiled_manifest() { # prefix
  local x=$1
  mkdir -p "$x/share/slurm-imex" "$x/bin"; chmod 755 "$x" "$x/share" "$x/share/slurm-imex" "$x/bin"
  : > "$x/bin/slurm-imex"
  printf '%s\n' "$x/bin/slurm-imex" "$x/share/slurm-imex/installed-files" > "$x/share/slurm-imex/installed-files"
}

test_install_sh_uninstall_refuses_a_manifest_root_does_not_own() {
  local p x out case
  p=$(payload)
  for case in owner dir-mode parent-owner listed-dir; do
    x=$(mktemp -d /var/tmp/slurm-imex-prefix.XXXXXX); spoiled_manifest "$x"
    case $case in
      owner) chown nobody "$x/share/slurm-imex/installed-files";;
      dir-mode) chmod 775 "$x/share/slurm-imex";;
      parent-owner) chown nobody "$x/share";;
      listed-dir) chown nobody "$x/bin";;
    esac
    out=$("$p/install.sh" --uninstall --prefix "$x" 2>&1) && fail "$case: --uninstall went ahead"
    expect_eq "$(grep -c . <<<"$out")" 1 "$case: refused in one line"
    expect_contains "$out" "refusing" "$case: says it refuses"
    [ -e "$x/bin/slurm-imex" ] || fail "$case: a listed file was removed"
    echo "    $case: $out"
    rm -rf "$x"
  done
  rm -rf "$p"
}

# install.sh with Debian 12's own Slurm (--slurm-prefix /usr): the plugin
# goes where Debian's slurmd looks (the directory of its auth_munge.so, as
# dpkg lists it); the sysctl is merged; --uninstall refuses while slurm.conf
# names the prolog, then removes everything and only our ports.
test_install_sh_into_debians_slurm_and_uninstall_after_the_lines_go() {
  command -v slurmd >/dev/null && dpkg -L slurm-wlm-basic-plugins >/dev/null 2>&1 || { echo "    (no Debian Slurm here: skipped)"; return; }
  local p x plugindir out
  p=$(payload); x=$(mktemp -d /var/tmp/slurm-imex-prefix.XXXXXX); chmod 755 "$x"
  plugindir=$(dirname "$(dpkg -L slurm-wlm-basic-plugins | grep '/auth_munge.so$')")
  out=$(isolated "
    mkdir -p /run/pd /run/pd-w /run/etc /run/etc-w
    mount -t overlay overlay -o lowerdir=$plugindir,upperdir=/run/pd,workdir=/run/pd-w $plugindir
    mount -t overlay overlay -o lowerdir=/etc/slurm,upperdir=/run/etc,workdir=/run/etc-w /etc/slurm
    echo 'net.ipv4.ip_local_reserved_ports = 9000' > /etc/sysctl.d/50-site.conf; sysctl -q --system >/dev/null
    printf 'ClusterName=t\nProlog=$x/sbin/slurm-imex-prolog\n' > /etc/slurm/slurm.conf
    $p/install.sh --slurm-prefix /usr --prefix $x | sed 's/^/install: /'
    [ -f $plugindir/spank_imex.so ] && echo plugin-in-debians-plugindir
    echo \"live: \$(cat $KEY)\"
    { $p/install.sh --uninstall --prefix $x || echo uninstall1-refused; } | sed 's/^/uninstall1: /'
    [ -f $plugindir/spank_imex.so ] && echo plugin-still-there
    printf 'ClusterName=t\n' > /etc/slurm/slurm.conf
    $p/install.sh --uninstall --prefix $x | sed 's/^/uninstall2: /'
    [ -f $plugindir/spank_imex.so ] || echo plugin-gone
    echo \"live after: \$(cat $KEY)\"
    ls $x/sbin 2>/dev/null | sed 's/^/left: /'")
  expect_contains "$out" "install: required $plugindir/spank_imex.so config=/etc/slurm/imex.toml" "the plugstack line names Debian's PluginDir"
  expect_contains "$out" "plugin-in-debians-plugindir" "the plugin is where Debian's slurmd looks"
  expect_contains "$out" "live: 9000,$OURS" "install merges our span with the site's"
  expect_contains "$out" "uninstall1-refused" "--uninstall refuses while slurm.conf names the prolog"
  expect_contains "$out" "/etc/slurm/slurm.conf:2: Prolog=$x/sbin/slurm-imex-prolog" "it names the line to remove"
  expect_contains "$out" "plugin-still-there" "nothing removed while refused"
  expect_contains "$out" "plugin-gone" "--uninstall removes the plugin once the lines are gone"
  expect_contains "$out" "live after: 9000" "--uninstall leaves the site's reservation"
  expect_not_contains "$out" "left: " "no program left"
  grep -A1 'refusing to uninstall' <<<"$out" | sed 's/^/    /'
  rm -rf "$p" "$x"
}

main() {
  local t
  for t in $(declare -F | awk '$3 ~ /^test_/ { print $3 }'); do
    CURRENT_OK=1; echo "--- $t"
    "$t"
    if [ "$CURRENT_OK" = 1 ]; then PASSED=$((PASSED + 1)); echo "    ok"; else FAILED=$((FAILED + 1)); echo "    FAILED"; fi
  done
  echo "packaging: $PASSED passed, $FAILED failed"
  [ "$FAILED" = 0 ]
}
main "$@"
