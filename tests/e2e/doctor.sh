# shellcheck shell=bash
# slurm-imex doctor on a node: PASS when healthy, one FAIL line naming each
# thing broken, and Slurm's side read from the node's slurm.conf when the
# controller does not answer.

# slurm-imex doctor on a healthy node: no FAIL, exit 0; then one thing at a
# time broken on n1 (and put back), each named by its own FAIL line.
test_doctor_passes_then_names_each_break() {
  local out rc d=$C/nodes/n1
  out=$(cli 1 doctor 2>&1); rc=$?
  echo "$out" | sed 's/^/       /'
  expect_eq "$rc" 0 "doctor exit status on a healthy node"
  expect_not_contains "$out" "FAIL  " "no FAIL on a healthy node"
  expect_contains "$out" "PASS  plugin          " "the plugin loads and is stamped for this Slurm"
  expect_contains "$out" "PASS  prolog-flags    PrologFlags=Alloc" "PrologFlags"
  expect_contains "$out" "WARN  private-data    PrivateData=none: any user can read any job's slurm-imex summary" "no PrivateData=jobs on the test cluster: said"
  out=$(cli 1 --json doctor 2>&1)
  expect_contains "$out" '"fail": 0' "doctor --json counts no FAIL"
  expect_contains "$out" '"check": "plugin"' "doctor --json names each check"
  # On the controller host (no IMEX daemon, no GPUs): the cluster-wide checks.
  out=$("$C/bin/slurm-imex" --config "$C/etc-slurm/imex.toml" doctor --cluster 2>&1); rc=$?
  expect_eq "$rc" 0 "doctor --cluster on the controller host"
  expect_contains "$out" "PASS  prolog-flags" "--cluster checks Slurm's configuration"
  expect_not_contains "$out" "channel-device" "--cluster leaves the node checks out"
  doctor_break_shows channel-device "grep -v nvidia-caps-imex-channels $d/hw/proc-devices > $d/hw/pd && mv $d/hw/proc-devices $d/hw/pd.ok && mv $d/hw/pd $d/hw/proc-devices" \
    "mv $d/hw/pd.ok $d/hw/proc-devices"
  doctor_break_shows imex-config "sed -i 's/^IMEX_CMD_ENABLED=.*/IMEX_CMD_ENABLED=0/' $d/etc-imex/config.cfg" \
    "sed -i 's/^IMEX_CMD_ENABLED=.*/IMEX_CMD_ENABLED=1/' $d/etc-imex/config.cfg"
  doctor_break_shows channel-dir "chmod 0777 $d/dev-channels" "chmod 0755 $d/dev-channels"
  doctor_break_shows database "chmod 0777 $d/var-lib" "chmod 0755 $d/var-lib"
  doctor_break_shows config "chmod 0666 $C/etc-slurm/imex.toml" "chmod 0644 $C/etc-slurm/imex.toml"
  doctor_break_shows nvml "sed -i 's/^expected_gpus = .*/expected_gpus = 9/' $C/etc-slurm/imex.toml" \
    "sed -i 's/^expected_gpus = .*/expected_gpus = $E2E_GPUS/' $C/etc-slurm/imex.toml"
  doctor_break_shows ports "nsenter --net=/run/netns/imex-n1 sysctl -qw net.ipv4.ip_local_reserved_ports=" \
    "nsenter --net=/run/netns/imex-n1 sysctl -qw net.ipv4.ip_local_reserved_ports=33792-50175"
  out=$(cli 1 doctor 2>&1); rc=$?
  expect_eq "$rc" 0 "doctor after every break was put back"
}

# Break (shell, run by the harness as root), run doctor on n1, expect its
# FAIL line and exit 1, put it back.
doctor_break_shows() { # check break restore
  local out rc
  bash -c "$2" || { fail "could not break $1: $2"; return; }
  out=$(cli 1 doctor 2>&1); rc=$?
  bash -c "$3"
  echo "$out" | grep "^FAIL  $1 " | sed 's/^/       /'
  expect_eq "$rc" 1 "doctor exit status with $1 broken"
  expect_contains "$out" "FAIL  $1 " "a FAIL line for $1"
}

# n1 cannot reach slurmctld (a route that refuses it): doctor still checks
# Slurm's side, from the slurm.conf n1 reads, says so, and names what that
# file lacks (PrologFlags without Alloc, no plugstack line).
test_doctor_reads_the_nodes_slurm_conf_when_the_controller_is_away() {
  local out rc conf=$C/etc-slurm/slurm.conf stack=$C/etc-slurm/plugstack.conf
  ip -n imex-n1 route add prohibit "$NET.1/32" || { fail "cannot cut n1 off"; return; }
  out=$(cli 1 doctor 2>&1); rc=$?
  echo "$out" | grep -E '^(WARN|FAIL)  ' | sed 's/^/       /'
  expect_contains "$out" "WARN  slurm" "doctor says the controller did not answer"
  expect_contains "$out" "so the Slurm checks below read $SLURM_CONF" "doctor names the file it read"
  expect_contains "$out" "PASS  prolog-flags    PrologFlags=Alloc" "PrologFlags from the node's slurm.conf"
  expect_contains "$out" "PASS  plugstack" "the plugstack line, found without the controller"
  expect_contains "$out" "PASS  prolog " "Prolog from the node's slurm.conf"
  expect_eq "$rc" 0 "doctor exit status with only the controller away"
  cp -p "$conf" "$C/out/slurm.conf.saved"; cp -p "$stack" "$C/out/plugstack.conf.saved"
  # Serial does not turn Alloc on (Contain would: read_config.c prolog_str2flags)
  sed -i 's/^PrologFlags=.*/PrologFlags=Serial/' "$conf"
  : > "$stack"
  out=$(cli 1 doctor 2>&1); rc=$?
  cp -p "$C/out/slurm.conf.saved" "$conf"; cp -p "$C/out/plugstack.conf.saved" "$stack"
  ip -n imex-n1 route del prohibit "$NET.1/32"
  echo "$out" | grep -E '^FAIL  ' | sed 's/^/       /'
  expect_eq "$rc" 1 "doctor exit status with a broken slurm.conf and no controller"
  expect_contains "$out" "FAIL  prolog-flags    PrologFlags=Serial lacks Alloc" "PrologFlags without Alloc is a FAIL"
  expect_contains "$out" "FAIL  plugstack" "no plugstack line is a FAIL"
}
