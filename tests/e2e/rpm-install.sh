# shellcheck shell=bash
# The RPM on a RHEL-family node (E2E_INSTALL=rpm: Slurm built in
# slurm.spec's layout, laid over / by tests/e2e/in-prefix.sh --root, and our
# RPM installed with rpm by cluster.sh's rpm_install): where it puts the
# plugin, the prolog and the config, what `rpm -V` says, and what `rpm -e`
# says and leaves, as the admin sees it.

# What Slurm's own configuration says it uses (`scontrol show config`; the
# first of several Prologs is "Prolog[0]" since Slurm 24.05).
slurm_config_value() { scontrol show config | awk -v k="$1" '$1 == k || $1 == k "[0]" { print $3 }'; }

# The RPM's files are where this Slurm looks: the plugin in its PluginDir,
# the prolog and epilog slurm.conf names, plugstack.conf's line from
# docs/install.md, owned by the package; `rpm -V` said nothing right after
# the install and now names only imex.toml, which the admin edited (the
# test's rendered config).
test_rpm_installs_where_this_slurm_looks_and_verifies() {
  local plugin_dir owner key
  plugin_dir=$(slurm_config_value PluginDir)
  expect_eq "$plugin_dir" /usr/lib64/slurm "this Slurm's PluginDir is slurm.spec's"
  expect_contains "$(cat "$C/rpm-files")" "$plugin_dir/spank_imex.so" "the RPM put the plugin in Slurm's PluginDir"
  owner=$(e2e_rpm -qf "$plugin_dir/spank_imex.so")
  expect_contains "$owner" "slurm-imex-" "rpm -qf names our package as the plugin's owner"
  expect_eq "$(grep -v '^#' "$SLURM_SYSCONFDIR/plugstack.conf")" \
    "required /usr/lib64/slurm/spank_imex.so config=/etc/slurm/imex.toml" "plugstack.conf names the RPM's plugin and config"
  for key in Prolog Epilog; do
    local prog; prog=$(slurm_config_value "$key")
    expect_eq "$prog" "/usr/sbin/slurm-imex-$(tr '[:upper:]' '[:lower:]' <<<"$key")" "slurm.conf's $key is the RPM's"
    expect_contains "$(e2e_rpm -qf "$prog")" "slurm-imex-" "rpm -qf $prog names our package"
  done
  expect_contains "$(as_user srun --help 2>&1)" "--imex" "srun --help shows the plugin's option"
  expect_eq "$(cat "$C/rpm-install.out")" "" "rpm -i printed nothing"
  expect_eq "$(cat "$C/rpm-verify.out")" "rc=0" "rpm -V said nothing right after rpm -i"
  local verify; verify=$(e2e_rpm -V --nodeps slurm-imex)
  expect_eq "$(awk '{ print $(NF - 1), $NF }' <<<"$verify")" "c /etc/slurm/imex.toml" "rpm -V now names only the edited config"
  expect_contains "$(cat /etc/sysctl.d/90-slurm-imex.conf 2>&1)" "33792-50175" "%post reserved the IMEX ports in /etc/sysctl.d"
  echo "    rpm -V after configuring: $verify"
}

# rpm -e while slurm.conf and plugstack.conf still name slurm-imex: the
# erase lists those lines before anything is removed, removes every file of
# the package and nothing of Slurm's, and keeps the admin's edited imex.toml
# as imex.toml.rpmsave; erased unedited, it leaves no imex.toml at all.
test_rpm_erase_names_slurms_lines_first_and_keeps_only_an_edited_config() {
  local out rc edited slurm_plugins f left="" prolog_line
  edited=$(cat /etc/slurm/imex.toml)
  slurm_plugins=$(find /usr/lib64/slurm -mindepth 1 -maxdepth 1 ! -name spank_imex.so -printf '%f\n' | sort)
  prolog_line=$(grep -n '^Prolog=' /etc/slurm/slurm.conf | cut -d: -f1)
  out=$(e2e_rpm -e slurm-imex); rc=$?
  expect_eq "$rc" 0 "rpm -e: $out"
  expect_contains "$(head -1 <<<"$out")" "Slurm's configuration still names slurm-imex" "the erase says first that Slurm still names us"
  expect_contains "$out" "/etc/slurm/slurm.conf:$prolog_line: Prolog=/usr/sbin/slurm-imex-prolog" "it lists the Prolog line"
  expect_contains "$out" "/etc/slurm/plugstack.conf:1: required /usr/lib64/slurm/spank_imex.so" "it lists the plugstack line"
  expect_contains "$out" "warning: /etc/slurm/imex.toml saved as /etc/slurm/imex.toml.rpmsave" "rpm says where the edited config went"
  while IFS= read -r f; do [ -e "$f" ] && left+="$f "; done < "$C/rpm-files"
  expect_eq "$left" "" "every file of the package is gone"
  expect_eq "$(cat /etc/slurm/imex.toml.rpmsave 2>&1)" "$edited" "the admin's imex.toml is kept as .rpmsave"
  expect_eq "$(ls /usr/lib64/slurm)" "$slurm_plugins" "Slurm's own plugins are untouched"
  [ -e /etc/sysctl.d/90-slurm-imex.conf ] && fail "the port reservation's sysctl.d file is left"
  expect_contains "$(e2e_rpm -q slurm-imex)" "package slurm-imex is not installed" "rpm -q after the erase"
  echo "    rpm -e says: $(head -1 <<<"$out" | cut -c1-100)..."
  # Unedited, nothing of it stays.
  rm /etc/slurm/imex.toml.rpmsave
  out=$(e2e_rpm -i --nodeps "$(rpm_for_this_slurm)") || fail "rpm -i again: $out"
  out=$(e2e_rpm -e slurm-imex) || fail "rpm -e again: $out"
  [ -e /etc/slurm/imex.toml ] && fail "an unedited imex.toml is left after rpm -e"
  [ -e /etc/slurm/imex.toml.rpmsave ] && fail "an unedited imex.toml was saved as .rpmsave"
  expect_not_contains "$out" "rpmsave" "rpm -e of an unedited config says nothing of .rpmsave"
}
