# shellcheck shell=bash
# install.sh into a Slurm prefix (E2E_INSTALL=prefix): --dry-run, --uninstall
# and a second install, as an admin without packages runs them.

# E2E_INSTALL=prefix: install.sh --dry-run changes nothing, --uninstall
# refuses while slurm.conf names us, and then removes every file it
# installed but the admin's imex.toml
# (as dpkg keeps a conffile); a second install puts them back.
test_install_sh_uninstall_keeps_only_the_config() {
  local sh out f files
  sh=$(ls "$C"/release/slurm-imex-*/install.sh)
  files=$(cat /usr/local/share/slurm-imex/installed-files)
  expect_contains "$files" "$(scontrol show config | awk '$1 == "PluginDir" {print $3}')/spank_imex.so" "the manifest lists the plugin in Slurm's PluginDir"
  out=$("$sh" --slurm-prefix "$SLURM_PREFIX" --dry-run 2>&1) || fail "install.sh --dry-run: $out"
  expect_contains "$out" "kept $SLURM_SYSCONFDIR/imex.toml" "a second install keeps the admin's imex.toml"
  # While slurm.conf and plugstack.conf name us, --uninstall refuses and
  # lists the lines; the admin takes them out (here: copies kept and put
  # back for the rest of the phase), then it removes everything.
  out=$("$sh" --uninstall 2>&1) && fail "--uninstall went ahead while slurm.conf names the prolog"
  expect_contains "$out" "refusing to uninstall while Slurm's configuration names slurm-imex" "--uninstall refuses first"
  expect_contains "$out" "$SLURM_SYSCONFDIR/slurm.conf:" "it names the slurm.conf line"
  for f in $files; do [ -e "$f" ] || fail "$f removed by a refused --uninstall"; done
  local saved conf; saved=$(mktemp -d)
  for conf in "$SLURM_SYSCONFDIR"/slurm.conf "$SLURM_SYSCONFDIR"/plugstack.conf "$SLURM_SYSCONFDIR"/plugstack.conf.d/*.conf; do
    [ -f "$conf" ] || continue
    cp -a "$conf" "$saved/$(basename "$conf")"
    sed -i '/spank_imex\|slurm-imex-\(prolog\|epilog\|healthcheck\)/d' "$conf"
  done
  out=$("$sh" --uninstall 2>&1) || fail "install.sh --uninstall: $out"
  for conf in "$saved"/*; do
    case $conf in */slurm.conf|*/plugstack.conf) cp -a "$conf" "$SLURM_SYSCONFDIR/";; *) cp -a "$conf" "$SLURM_SYSCONFDIR/plugstack.conf.d/";; esac
  done
  rm -rf "$saved"
  for f in $files; do [ -e "$f" ] && fail "$f left after --uninstall"; done
  [ -f "$SLURM_SYSCONFDIR/imex.toml" ] || fail "--uninstall removed the admin's imex.toml"
  out=$("$sh" --slurm-prefix "$SLURM_PREFIX" 2>&1) || fail "install.sh again: $out"
  for f in $files; do [ -e "$f" ] || fail "$f missing after installing again"; done
  out=$("$sh" --slurm-prefix relative/path 2>&1) && fail "install.sh took a relative prefix"
  expect_eq "$(grep -c . <<<"$out")" 1 "a bad option is one line"
}
