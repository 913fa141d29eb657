# shellcheck shell=bash
# install.sh into a Slurm prefix (E2E_INSTALL=prefix): --dry-run, --uninstall
# and a second install, as an admin without packages runs them.

# E2E_INSTALL=prefix: install.sh --dry-run changes nothing, --uninstall
# refuses while slurm.conf names us, and then removes every file it
# installed but the admin's imex.toml
# (as dpkg keeps a conffile); a second install puts them back. The port
# reservation follows: reserved live and in /etc/sysctl.d by the install,
# released by --uninstall, reserved again, all on the node install.sh ran on
# (cluster.sh's admin_install_sh: its own network namespace and sysctl.d)
# and none of it on this machine.
test_install_sh_uninstall_keeps_only_the_config() {
  local sh out f files ours sysctl_file=$C/admin/sysctl.d/90-slurm-imex.conf
  sh=$(ls "$C"/release/slurm-imex-*/install.sh)
  ours=$(sed -n 's/^net\.ipv4\.ip_local_reserved_ports *= *//p' "$(dirname "$sh")/conf-examples/sysctl.d/90-slurm-imex.conf")
  [ -n "$ours" ] || fail "the release ships no port span in conf-examples/sysctl.d/90-slurm-imex.conf"
  files=$(cat /usr/local/share/slurm-imex/installed-files)
  expect_contains "$files" "$(scontrol show config | awk '$1 == "PluginDir" {print $3}')/spank_imex.so" "the manifest lists the plugin in Slurm's PluginDir"
  expect_reserved "$ours" "the install"
  out=$(admin_install_sh "$sh" --slurm-prefix "$SLURM_PREFIX" --dry-run 2>&1) || fail "install.sh --dry-run: $out"
  expect_contains "$out" "kept $SLURM_SYSCONFDIR/imex.toml" "a second install keeps the admin's imex.toml"
  # The node install.sh runs on is on the cluster's network: install.sh
  # learns the layout from the controller, as on a live cluster.
  expect_eq "$(nsenter --net="/run/netns/$E2E_ADMIN_NETNS" timeout 10 scontrol show config 2>&1 | awk '$1 == "PluginDir" {print $3}')" \
    "$(scontrol show config | awk '$1 == "PluginDir" {print $3}')" "the node install.sh runs on asks the controller"
  # While slurm.conf and plugstack.conf name us, --uninstall refuses and
  # lists the lines; the admin takes them out (here: copies kept and put
  # back for the rest of the phase), then it removes everything.
  out=$(admin_install_sh "$sh" --uninstall 2>&1) && fail "--uninstall went ahead while slurm.conf names the prolog"
  expect_contains "$out" "refusing to uninstall while Slurm's configuration names slurm-imex" "--uninstall refuses first"
  expect_contains "$out" "$SLURM_SYSCONFDIR/slurm.conf:" "it names the slurm.conf line"
  for f in $files; do [ -e "$f" ] || fail "$f removed by a refused --uninstall"; done
  local saved conf; saved=$(mktemp -d)
  for conf in "$SLURM_SYSCONFDIR"/slurm.conf "$SLURM_SYSCONFDIR"/plugstack.conf "$SLURM_SYSCONFDIR"/plugstack.conf.d/*.conf; do
    [ -f "$conf" ] || continue
    cp -a "$conf" "$saved/$(basename "$conf")"
    sed -i '/spank_imex\|slurm-imex-\(prolog\|epilog\|healthcheck\)/d' "$conf"
  done
  out=$(admin_install_sh "$sh" --uninstall 2>&1) || fail "install.sh --uninstall: $out"
  for conf in "$saved"/*; do
    case $conf in */slurm.conf|*/plugstack.conf) cp -a "$conf" "$SLURM_SYSCONFDIR/";; *) cp -a "$conf" "$SLURM_SYSCONFDIR/plugstack.conf.d/";; esac
  done
  rm -rf "$saved"
  for f in $files; do [ -e "$f" ] && fail "$f left after --uninstall"; done
  [ -f "$SLURM_SYSCONFDIR/imex.toml" ] || fail "--uninstall removed the admin's imex.toml"
  expect_eq "$(admin_reserved_ports)" "" "--uninstall released the node's reserved ports"
  [ -e "$sysctl_file" ] && fail "--uninstall left $sysctl_file"
  out=$(admin_install_sh "$sh" --slurm-prefix "$SLURM_PREFIX" 2>&1) || fail "install.sh again: $out"
  for f in $files; do [ -e "$f" ] || fail "$f missing after installing again"; done
  expect_reserved "$ours" "the second install"
  out=$(admin_install_sh "$sh" --slurm-prefix relative/path 2>&1) && fail "install.sh took a relative prefix"
  expect_eq "$(grep -c . <<<"$out")" 1 "a bad option is one line"
  expect_eq "$(cat /proc/sys/net/ipv4/ip_local_reserved_ports)" "$(cat "$C/admin/host-reserved-before")" \
    "this machine's reserved ports are as they were before install.sh first ran"
}

# OURS reserved on the node install.sh ran on, live and for its next boot
# (this machine reserves no ports of its own, so the span is the whole value).
expect_reserved() { # ours after-what
  expect_eq "$(admin_reserved_ports)" "$1" "$2 reserved $1 live in the node's network namespace"
  expect_eq "$(grep -v '^#' "$C/admin/sysctl.d/90-slurm-imex.conf" 2>&1)" "net.ipv4.ip_local_reserved_ports = $1" \
    "$2 wrote the reservation to the node's /etc/sysctl.d/90-slurm-imex.conf"
}
