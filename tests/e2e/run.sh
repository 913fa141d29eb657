#!/bin/bash
# End-to-end tests of slurm-imex on a real Slurm cluster of $E2E_NODES nodes
# (tests/e2e/cluster.sh), whichever Slurm this machine (or rootfs) has.
# tests/e2e/versions.sh runs it on every supported Slurm. Needs root.
# E2E_PHASE picks the tests: base (default), switch (beside Slurm's
# switch/nvidia_imex), topology (topology/block racks), segments (both, with
# a channel per segment: Slurm 25.11+), containers (pyxis + enroot;
# tests/e2e/containers.sh), and the fault, fleet, rack, upgrade and systemd
# phases of their own files. Prints
# "e2e: N passed, M failed" and exits non-zero on any failure.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BIN=${BIN:-$REPO/target/release}
E2E_PHASE=${E2E_PHASE:-base}
case "$E2E_PHASE" in
  switch) export E2E_SWITCH=1;;
  # Two racks of two nodes; E2E_TOPOLOGY (conf or yaml) says how Slurm learns them.
  topology) export E2E_NODES=4 E2E_TOPOLOGY=${E2E_TOPOLOGY:-conf};;
  # The same racks beside switch/nvidia_imex, one channel per segment (25.11+).
  segments) export E2E_SWITCH=1 E2E_NODES=4 E2E_TOPOLOGY=${E2E_TOPOLOGY:-yaml};;
  # One NVL72 rack: 18 trays.
  rack) export E2E_NODES=18;;
  # pyxis + enroot (tests/e2e/containers.sh).
  containers) export E2E_NODES=2 E2E_CONTAINERS=1;;
esac
source "$HERE/cluster.sh"
source "$HERE/lib.sh"
source "$HERE/faults.sh"
source "$HERE/fleet.sh"
source "$HERE/containers.sh"
source "$HERE/upgrade.sh"
source "$HERE/systemd.sh"
source "$HERE/controller.sh"
source "$HERE/segments.sh"

# The script every test task runs: one line of facts (cluster.sh).
REPORT=$C/bin/imex-report

submit() { # extra sbatch args..., last arg is the script body
  local body=${*: -1}
  local args=("${@:1:$#-1}")
  local script; script=$(mktemp "$C/out/job.XXXXXX.sh")
  printf '#!/bin/bash\n%s\n' "$body" > "$script"
  chmod 755 "$script"
  as_user sbatch --parsable -o "$C/out/%j.out" -e "$C/out/%j.err" "${args[@]}" "$script"
}
hold_until_released='for i in $(seq 1 600); do [ -e '"$C"'/out/release-$SLURM_JOB_ID ] && break; sleep 0.1; done'
release() { touch "$C/out/release-$1"; }
# Slurm marks a job RUNNING at allocation while prologs may still run on
# other nodes; a step (srun) starts only once every prolog is done. Test jobs
# touch this marker after their first step.
started_marker='touch '"$C"'/out/started-$SLURM_JOB_ID'
wait_started() { local i; for i in $(seq 1 300); do [ -e "$C/out/started-$1" ] && return 0; sleep 0.1; done; return 1; }

test_imex_job_gets_private_channel_and_domain() {
  local id
  id=$(submit -N3 --imex "srun -N3 --ntasks-per-node=1 $REPORT
$started_marker
$hold_until_released") || { fail "sbatch failed"; return; }
  wait_started "$id" || fail "job $id never started its step"
  local ch; ch=$(channel_for "$id")
  # While the job runs: identical nodes_config with exactly the job's 3 addresses, domain UP.
  local want; want=$(printf '%s\n%s\n%s' "$(node_ip 1)" "$(node_ip 2)" "$(node_ip 3)")
  local i; for i in 1 2 3; do
    expect_eq "$(cat "$C/nodes/n$i/etc-imex/nodes_config.cfg")" "$want" "n$i nodes_config.cfg"
    local js; js=$(in_node "$i" "$C/bin/nvidia-imex-ctl" -c /run/slurm-imex/nvidia-imex.cfg -N -j)
    expect_contains "$js" '"status":"UP"' "n$i domain state"
    expect_eq "$(grep -c "" <<<"$(grep -o '"status":"READY"' <<<"$js")")" 3 "n$i sees 3 READY nodes"
    expect_eq "$(grep '^SERVER_PORT=' "$C/nodes/n$i/run-slurm-imex/nvidia-imex.cfg")" "SERVER_PORT=$((33792 + id % 16384))" "n$i per-job SERVER_PORT"
  done
  cmp -s "$C/nodes/n1/etc-imex/nodes_config.cfg" "$C/nodes/n3/etc-imex/nodes_config.cfg" || fail "nodes_config differs between n1 and n3"
  release "$id"
  expect_eq "$(wait_done "$id")" COMPLETED "job $id final state"
  local out; out=$(cat "$C/out/$id.out" "$C/out/$id.err")
  expect_eq "$(grep -c '^NODE=' <<<"$out")" 3 "one report per node"
  for i in 1 2 3; do
    local line; line=$(grep "^NODE=n$i " <<<"$out")
    expect_contains "$line" "CH=$ch NV=$ch " "n$i SLURM_IMEX_CHANNEL and NVIDIA_IMEX_CHANNELS"
    expect_contains "$line" "LS=[channel$ch ]" "n$i sees only channel$ch"
    expect_contains "$line" "STAT=[character special file:$CHANNEL_MAJOR:$ch:$TEST_USER:600 ]" "n$i channel device"
    expect_contains "$line" "TMPFS=1" "n$i: one tmpfs on the channel directory"
  done
  for i in 1 2 3; do wait_node_free "n$i"; expect_idle "$i"; done
}

test_job_without_imex_sees_no_channel() {
  local id
  id=$(submit -N3 "srun -N3 --ntasks-per-node=1 $REPORT") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "job $id final state"
  local out; out=$(cat "$C/out/$id.out")
  expect_eq "$(grep -c '^NODE=' <<<"$out")" 3 "one report per node"
  expect_eq "$(grep -c 'CH=none NV=none LS=\[\] STAT=\[\] TMPFS=1' <<<"$out")" 3 "empty channel dir, no channel env: $out"
  # The host's channel0 is still there; it was only hidden.
  [ -e "$C/nodes/n1/dev-channels/channel0" ] || fail "host channel0 vanished"
}

test_peer_that_never_connects_fails_job_without_draining() {
  echo "MODE=unreachable" > "$C/nodes/n3/run-imex/fake-fault"
  local id
  id=$(submit -N3 --imex "srun -N3 true; echo SHOULD-NOT-RUN") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id" 60)" FAILED "job $id final state"
  local err; err=$(cat "$C/out/$id.out" "$C/out/$id.err" 2>/dev/null)
  expect_contains "$err" "n3 ($(node_ip 3))" "message names the peer"
  expect_contains "$err" "never became ready" "message says why"
  expect_not_contains "$err" "SHOULD-NOT-RUN" "the job script did not run"
  local i; for i in 1 2 3; do
    wait_node_free "n$i"
    case "$(node_state "n$i")" in drain*|down*) fail "n$i was drained: $(node_reason "n$i")";; esac
    expect_idle "$i"
  done
}

test_local_daemon_crash_drains_only_its_node() {
  echo "MODE=crash" > "$C/nodes/n2/run-imex/fake-fault"
  local id
  id=$(submit -N3 --imex "srun -N3 true") || { fail "sbatch failed"; return; }
  local i s
  for i in $(seq 1 200); do
    s=$(node_state n2); case "$s" in drain*) break;; esac; sleep 0.1
  done
  case "$(node_state n2)" in drain*) ;; *) fail "n2 not drained: $(node_state n2)";; esac
  expect_contains "$(node_reason n2)" "rolog" "n2 drain reason"
  # The job goes back to the queue (held) rather than running on a broken node.
  s=$(wait_job "$id" 30 PENDING)
  expect_eq "$s" PENDING "job $id requeued"
  scancel "$id"
  for i in 1 3; do
    wait_node_free "n$i"
    case "$(node_state "n$i")" in drain*|down*) fail "healthy n$i drained: $(node_reason "n$i")";; esac
    expect_idle "$i"
  done
  grep -q "crashing at start" "$C/nodes/n2/run-imex/nvidia-imex.log" || fail "n2 daemon log lacks the crash"
}

test_misuse_is_rejected_at_submission() {
  local before out rc
  before=$(squeue -h | wc -l)
  out=$(submit --imex=foo "true" 2>&1); rc=$?
  [ $rc -ne 0 ] || fail "sbatch --imex=foo succeeded"
  expect_contains "$out" "imex" "error names the option"
  out=$(SLURM_SPANK__SLURM_SPANK_OPTION_imex_imex=foo submit "true" 2>&1); rc=$?
  [ $rc -ne 0 ] || fail "--imex with a value through the environment was accepted"
  expect_contains "$out" "--imex takes no value" "env misuse message"
  expect_eq "$(echo "$out" | grep -c 'imex: ')" 1 "one error line"
  expect_eq "$(squeue -h | wc -l)" "$before" "nothing was submitted"
  local help; help=$(as_user sbatch --help; as_user salloc --help; as_user srun --help)
  expect_eq "$(grep -c -- '--imex ' <<<"$help")" 3 "--imex listed in sbatch, salloc and srun --help"
}

test_second_imex_job_on_busy_node_is_refused() {
  local a b
  a=$(submit -p shared -w n1 -N1 -n1 --imex "srun true; $started_marker; $hold_until_released; srun true && echo A-OK") || { fail "sbatch A"; return; }
  wait_started "$a" || fail "job A never started its step"
  b=$(submit -p shared -w n1 -N1 -n1 --imex "echo SHOULD-NOT-RUN") || { fail "sbatch B"; return; }
  expect_eq "$(wait_done "$b" 60)" FAILED "job B final state"
  expect_contains "$(cat "$C/out/$b.err" "$C/out/$b.out")" "already serves the IMEX domain of job $a" "job B message"
  expect_eq "$(job_state "$a")" RUNNING "job A still running"
  expect_eq "$(cat "$C/nodes/n1/run-slurm-imex/domain.owner")" "$a" "n1 domain still owned by A"
  expect_eq "$(cat "$C/nodes/n1/etc-imex/nodes_config.cfg")" "$(node_ip 1)" "A's nodes_config intact"
  expect_contains "$(in_node 1 "$C/bin/nvidia-imex-ctl" -c /run/slurm-imex/nvidia-imex.cfg -N -j)" '"status":"UP"' "A's domain still UP"
  release "$a"
  expect_eq "$(wait_done "$a")" COMPLETED "job A final state"
  expect_contains "$(cat "$C/out/$a.out")" "A-OK" "job A's step ran after B was refused"
  case "$(node_state n1)" in drain*|down*) fail "n1 drained";; esac
  wait_node_free n1; expect_idle 1
}

test_srun_imex_inside_salloc() {
  local out rc ch
  out=$(as_user salloc -N2 --imex srun -N2 --ntasks-per-node=1 "$REPORT" 2>&1); rc=$?
  expect_eq "$rc" 0 "salloc --imex + srun exit code ($out)"
  expect_eq "$(grep -c "^NODE=" <<<"$out")" 2 "two reports"
  ch=$(grep -o 'CH=[0-9]*' <<<"$out" | sort -u)
  expect_eq "$(wc -l <<<"$ch")" 1 "same channel on both nodes"
  expect_contains "$out" "STAT=[character special file:$CHANNEL_MAJOR:${ch#CH=}:$TEST_USER:600 ]" "channel device in salloc"
  # srun --imex in an allocation made without --imex: a clear error, no hang.
  out=$(as_user timeout 60 salloc -N1 srun --imex true 2>&1); rc=$?
  [ $rc -ne 0 ] || fail "srun --imex without an --imex allocation succeeded"
  expect_contains "$out" "allocation was made without --imex" "message says what to do"
  local i; for i in 1 2 3; do wait_node_free "n$i"; expect_idle "$i"; done
}

# E2E_INSTALL=prefix: install.sh --dry-run changes nothing, and
# --uninstall removes every file it installed but the admin's imex.toml
# (as dpkg keeps a conffile); a second install puts them back.
test_install_sh_uninstall_keeps_only_the_config() {
  local sh out f files
  sh=$(ls "$C"/release/slurm-imex-*/install.sh)
  files=$(cat /usr/local/share/slurm-imex/installed-files)
  expect_contains "$files" "$(scontrol show config | awk '$1 == "PluginDir" {print $3}')/spank_imex.so" "the manifest lists the plugin in Slurm's PluginDir"
  out=$("$sh" --slurm-prefix "$SLURM_PREFIX" --dry-run 2>&1) || fail "install.sh --dry-run: $out"
  expect_contains "$out" "kept $SLURM_SYSCONFDIR/imex.toml" "a second install keeps the admin's imex.toml"
  out=$("$sh" --uninstall 2>&1) || fail "install.sh --uninstall: $out"
  for f in $files; do [ -e "$f" ] && fail "$f left after --uninstall"; done
  [ -f "$SLURM_SYSCONFDIR/imex.toml" ] || fail "--uninstall removed the admin's imex.toml"
  out=$("$sh" --slurm-prefix "$SLURM_PREFIX" 2>&1) || fail "install.sh again: $out"
  for f in $files; do [ -e "$f" ] || fail "$f missing after installing again"; done
  out=$("$sh" --slurm-prefix relative/path 2>&1) && fail "install.sh took a relative prefix"
  expect_eq "$(grep -c . <<<"$out")" 1 "a bad option is one line"
}

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

test_epilog_is_idempotent_without_prolog() {
  # The epilog on a node where no prolog ran, twice: succeeds and stays idle.
  local i rc
  for i in 1 2; do
    in_node 1 env -i SLURM_CONF="$SLURM_CONF" SLURM_JOB_ID=999999 SLURMD_NODENAME=n1 SLURM_JOB_NODELIST=n1 SPANK_IMEX=1 \
      "$C/bin/slurm-imex-epilog" >/dev/null 2>&1; rc=$?
    expect_eq "$rc" 0 "epilog run $i exit code"
  done
  expect_idle 1
}

test_prolog_killed_midway_then_epilog_restores_idle() {
  # A prolog killed while waiting for a domain that can never form (peer n2
  # has no daemon), then the epilog: the node must return to idle.
  # Not through in_node: a backgrounded shell function is a subshell, and $!
  # would not be the prolog. nsenter execs its command, so $! is the prolog.
  # SLURM_CONF as slurmd gives it to a prolog: without it the prolog's
  # scontrol would look for a configless controller through DNS.
  local pid i prolog_env=(env -i SLURM_CONF="$SLURM_CONF" SLURM_JOB_ID=888888 SLURMD_NODENAME=n1
    SLURM_JOB_NODELIST='n[1-2]' SPANK_IMEX=1 "$C/bin/slurm-imex-prolog")
  if [ -n "${E2E_SYSTEMD_ROOTFS:-}" ]; then
    # A booted node: its systemctl must be in its pid namespace, so nsenter
    # forks; the prolog is nsenter's child. It is mid-start once the unit is up.
    nsenter -t "$(slurmd_pid 1)" -a -r -w -- "${prolog_env[@]}" >/dev/null 2>&1 &
    local ns=$!
    for i in $(seq 1 100); do pid=$(pgrep -P "$ns"); [ -n "$pid" ] && break; sleep 0.02; done
    for i in $(seq 1 200); do [ "$(in_node 1 systemctl is-active nvidia-imex)" = active ] && break; sleep 0.05; done
  else
    nsenter -t "$(slurmd_pid 1)" -n -m -u -r -w -- "${prolog_env[@]}" >/dev/null 2>&1 &
    pid=$!
    for i in $(seq 1 200); do [ -s "$C/nodes/n1/run-slurm-imex/nvidia-imex.pid" ] && break; sleep 0.05; done
  fi
  [ -s "$C/nodes/n1/etc-imex/nodes_config.cfg" ] || fail "prolog did not get as far as writing nodes_config"
  expect_eq "$(tr '\0' ' ' < "/proc/$pid/cmdline" | awk '{print $1}')" "$C/bin/slurm-imex-prolog" "the process killed is the prolog"
  kill -9 "$pid"; wait "$pid" ${ns:+"$ns"} 2>/dev/null
  for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.02; done
  kill -0 "$pid" 2>/dev/null && fail "prolog $pid survived SIGKILL"
  in_node 1 env -i SLURM_CONF="$SLURM_CONF" SLURM_JOB_ID=888888 SLURMD_NODENAME=n1 SLURM_JOB_NODELIST='n[1-2]' SPANK_IMEX=1 \
    "$C/bin/slurm-imex-epilog"
  expect_eq "$?" 0 "epilog exit code"
  expect_idle 1
}

test_gpu_history_recorded_on_every_node() {
  local id i out
  id=$(submit -N3 "srun -N3 true") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "job $id final state"
  for i in 1 2 3; do
    wait_node_free "n$i"
    out=$(cli "$i" --json history --job "$id")
    expect_eq "$(json_count "\"job_id\": $id" <<<"$out")" 1 "n$i: one history row for job $id"
    expect_contains "$out" "\"node\": \"n$i\"" "n$i row names its node"
    expect_contains "$out" "\"gpus\": $E2E_GPUS" "n$i recorded $E2E_GPUS GPUs"
    expect_contains "$out" '"verdict": "PASS"' "n$i verdict"
  done
  out=$(cli 2 history)
  expect_contains "$(grep "^$id " <<<"$out")" "PASS" "human history table on n2"
  out=$(cli 2 --json show "$id")
  expect_contains "$out" '"serial": "1650924002003"' "show lists n2's boards by serial"
  expect_contains "$out" '"energy_mj"' "show has per-GPU energy"
  out=$(cli 2 gpus)
  expect_contains "$out" "1650924002000" "gpus ranks n2's boards"
}

test_pending_row_remap_drains_with_our_reason_and_requeues() {
  write_scenario 2 "1:remap_pending = true"
  local id i s
  id=$(submit -N3 "srun -N3 true") || { fail "sbatch failed"; return; }
  for i in $(seq 1 200); do case "$(node_state n2)" in drain*) break;; esac; sleep 0.1; done
  case "$(node_state n2)" in drain*) ;; *) fail "n2 not drained: $(node_state n2)";; esac
  expect_contains "$(node_reason n2)" "imex-health: row_remap gpu1 1650924002001: row remap pending: GPU reset needed" "n2 drain reason"
  expect_eq "$(wait_job "$id" 30 PENDING)" PENDING "job $id requeued"
  scancel "$id"
  for i in 1 3; do
    wait_node_free "n$i"
    case "$(node_state "n$i")" in drain*|down*) fail "healthy n$i drained: $(node_reason "n$i")";; esac
  done
  # The board was reset: undrain clears our drain ...
  write_scenario 2
  expect_contains "$(cli 2 undrain --node n2)" "resumed n2" "undrain of our drain"
  wait_node_free n2
  expect_eq "$(node_state n2)" idle "n2 back in service"
  # ... and never a drain someone else set.
  scontrol update nodename=n3 state=drain reason="manual: cable swap"
  local out rc
  out=$(cli 3 undrain --node n3); rc=$?
  expect_eq "$rc" 1 "undrain exit code for a foreign drain"
  expect_contains "$out" "not ours" "undrain explains"
  expect_contains "$(node_reason n3)" "manual: cable swap" "foreign drain kept"
  scontrol update nodename=n3 state=resume
}

test_xid_79_before_a_job_drains_the_node() {
  kmsg_append 3 "NVRM: Xid (PCI:0000:1c:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
  local id i
  id=$(submit -N1 -w n3 "true") || { fail "sbatch failed"; return; }
  for i in $(seq 1 200); do case "$(node_state n3)" in drain*) break;; esac; sleep 0.1; done
  expect_contains "$(node_reason n3)" "imex-health: xid gpu2 1650924003002: XID 79 (REBOOT)" "n3 drain reason"
  expect_eq "$(wait_job "$id" 30 PENDING)" PENDING "job $id requeued"
  scancel "$id"
  # As HealthCheckProgram: the XID was already judged, the node is healthy again.
  local out rc
  out=$(cli 3 check --undrain --node n3); rc=$?
  expect_eq "$rc" 0 "check exit code"
  expect_contains "$out" "n3: PASS" "check verdict"
  expect_contains "$out" "resumed n3" "check --undrain resumed our drain"
}

test_xid_during_job_is_recorded_with_its_class() {
  local id out
  id=$(submit -N1 -w n1 "srun true; $started_marker; $hold_until_released") || { fail "sbatch failed"; return; }
  wait_started "$id" || fail "job $id never started"
  kmsg_append 1 "NVRM: Xid (PCI:0000:1b:00): 13, pid=4242, name=python3, Graphics SM Warp Exception on (GPC 1, TPC 0, SM 0): Out Of Range Address"
  release "$id"
  expect_eq "$(wait_done "$id")" COMPLETED "job $id final state"
  wait_node_free n1
  out=$(cli 1 --json show "$id")
  expect_contains "$out" '"xid": 13' "XID recorded"
  expect_contains "$out" '"bucket": "RESTART_APP"' "XID class"
  expect_contains "$out" '"pid": 4242' "XID pid"
  expect_contains "$(cli 1 --json history --job "$id")" '"verdict": "WARN"' "job verdict"
  case "$(node_state n1)" in drain*|down*) fail "an application XID drained n1";; esac
  expect_contains "$(cli 1 show "$id")" "xid gpu1 1650924001001: XID 13 (RESTART_APP) pid 4242 python3" "human show"
}

test_64_concurrent_epilogs_lose_no_rows() {
  local j envs
  for j in $(seq 1 64); do
    in_node 1 env -i SLURM_CONF="$SLURM_CONF" SLURM_JOB_ID=$((60000 + j)) SLURMD_NODENAME=n1 SLURM_JOB_NODELIST=n1 SLURM_JOB_USER=load \
      SLURM_JOB_GPUS=$((j % E2E_GPUS)) "$C/bin/slurm-imex-prolog" 2>/dev/null || fail "prolog $j"
  done
  for j in $(seq 1 64); do
    in_node 1 env -i SLURM_CONF="$SLURM_CONF" SLURM_JOB_ID=$((60000 + j)) SLURMD_NODENAME=n1 SLURM_JOB_NODELIST=n1 SLURM_JOB_USER=load \
      SLURM_JOB_GPUS=$((j % E2E_GPUS)) "$C/bin/slurm-imex-epilog" > "$C/out/epilog-$j.log" 2>&1 &
  done
  wait
  local out; out=$(cli 1 --json history --user load --limit 1000)
  expect_eq "$(json_count '"job_id": 600' <<<"$out")" 64 "rows for 64 concurrent epilogs"
  expect_eq "$(json_count '"gpus": 1,' <<<"$out")" 64 "each job recorded its one GPU"
  expect_eq "$(cat "$C"/out/epilog-*.log | grep -c 'not recorded')" 0 "no epilog failed to write"
}

# Each built plugin is loaded by the Slurm it was built for: the version
# this cluster runs is the one the plugin was stamped for (E2E_SLURM_VERSION,
# read by versions.sh from the Slurm's own header), and no client or daemon
# refused it.
test_plugin_is_accepted_by_this_slurm() {
  local running help
  running=$(sinfo -V | awk '{print $2}')
  [ -n "${E2E_SLURM_VERSION:-}" ] && expect_eq "$running" "$E2E_SLURM_VERSION" "Slurm running the cluster"
  help=$(as_user sbatch --help 2>&1; as_user srun --help 2>&1; as_user salloc --help 2>&1)
  expect_eq "$(grep -c -- '--imex ' <<<"$help")" 3 "--imex in sbatch, srun and salloc --help"
  expect_not_contains "$help" "Incompatible" "clients load the plugin"
  local id; id=$(submit -N3 --imex "srun -N3 true") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "an --imex job on Slurm $running"
  expect_not_contains "$(cat "$C"/log/*.log)" "Incompatible" "slurmctld, slurmd and slurmstepd load the plugin"
  local i; for i in 1 2 3; do wait_node_free "n$i"; expect_idle "$i"; done
}

# Slurm's switch/nvidia_imex is on and [imex] channels = "auto": Slurm
# hands out the channel; our plugin gives it to the job's user.
test_switch_imex_job_gets_slurms_channel_for_its_user() {
  local id
  id=$(submit -N3 --imex "$REPORT
srun -N3 --ntasks-per-node=1 $REPORT
srun -N3 --ntasks-per-node=1 $REPORT
$started_marker
$hold_until_released") || { fail "sbatch failed"; return; }
  wait_started "$id" || fail "job $id never started its step"
  local i; for i in 1 2 3; do
    expect_contains "$(in_node "$i" "$C/bin/nvidia-imex-ctl" -c /run/slurm-imex/nvidia-imex.cfg -N -j)" '"status":"UP"' "n$i domain UP beside the switch plugin"
  done
  release "$id"
  expect_eq "$(wait_done "$id")" COMPLETED "job $id final state"
  local out steps ch
  out=$(cat "$C/out/$id.out" "$C/out/$id.err")
  steps=$(grep '^NODE=' <<<"$out" | grep -v 'STEP=batch')
  expect_eq "$(grep -c . <<<"$steps")" 6 "two srun steps on three nodes: $out"
  ch=$(grep -o ' CH=[^ ]*' <<<"$steps" | sort -u)
  expect_eq "$(grep -c . <<<"$ch")" 1 "one channel number on every node and in every step: $ch"
  ch=${ch# CH=}
  [ "$ch" != none ] || { fail "srun steps got no channel: $out"; return; }
  expect_eq "$(grep -c "CH=$ch NV=$ch LS=\[channel$ch \] STAT=\[character special file:$CHANNEL_MAJOR:$ch:$TEST_USER:600 \] TMPFS=1" <<<"$steps")" 6 \
    "each srun task sees only Slurm's channel$ch, owned by the user, 0600, under one tmpfs: $steps"
  # The channel is the one Slurm allocated, handed over in "slurm" mode (slurmstepd's log).
  for i in 1 2 3; do
    expect_contains "$(cat "$C/log/slurmd-n$i.log")" "job $id task uses IMEX channel $ch on n$i (channels = \"slurm\")" "n$i: channel from switch/nvidia_imex"
  done
  # The batch step: Slurm < 25.11 gives it no channel; where it does, the same one.
  local batch; batch=$(grep 'STEP=batch' <<<"$out")
  expect_contains "$batch" "TMPFS=" "batch step reported"
  case "$batch" in
    *"CH=none"*) expect_contains "$batch" "LS=[] STAT=[] TMPFS=" "batch step without a Slurm channel sees none";;
    *) expect_contains "$batch" "CH=$ch NV=$ch LS=[channel$ch ]" "batch step's channel equals the srun steps'";;
  esac
  expect_not_contains "$batch" "TMPFS=2" "batch step: at most one tmpfs"
  for i in 1 2 3; do wait_node_free "n$i"; expect_idle "$i"; done
}

test_switch_job_without_imex_keeps_slurms_channel() {
  local id out
  id=$(submit -N3 "srun -N3 --ntasks-per-node=1 $REPORT") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "job $id final state"
  out=$(grep '^NODE=' "$C/out/$id.out")
  expect_eq "$(grep -c . <<<"$out")" 3 "one report per node"
  expect_eq "$(grep -cE "CH=none NV=none LS=\[channel[0-9]+ \] STAT=\[character special file:$CHANNEL_MAJOR:[0-9]+:root:666 \] TMPFS=1" <<<"$out")" 3 \
    "exactly the channel Slurm made (root, 0666), not hidden, one tmpfs: $out"
}

# channels = "plugin" forced while the switch plugin runs: ours replaces
# Slurm's tmpfs in the task, never stacks on it.
test_plugin_mode_beside_switch_keeps_one_tmpfs() {
  sed -i 's/^channels = .*/channels = "plugin"/' "$C/etc-slurm/imex.toml"
  local id out ch
  id=$(submit -N2 --imex "srun -N2 --ntasks-per-node=1 $REPORT") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "job $id final state"
  ch=$(channel_for "$id")
  out=$(grep '^NODE=' "$C/out/$id.out")
  expect_eq "$(grep -c "CH=$ch NV=$ch LS=\[channel$ch \] STAT=\[character special file:$CHANNEL_MAJOR:$ch:$TEST_USER:600 \] TMPFS=1" <<<"$out")" 2 \
    "our channel$ch alone, under one tmpfs: $out"
  id=$(submit -N2 "srun -N2 --ntasks-per-node=1 $REPORT") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "job $id final state"
  out=$(grep '^NODE=' "$C/out/$id.out")
  expect_eq "$(grep -c 'CH=none NV=none LS=\[\] STAT=\[\] TMPFS=1' <<<"$out")" 2 "other jobs: Slurm's channel hidden by one tmpfs: $out"
  local i; for i in 1 2; do wait_node_free "n$i"; expect_idle "$i"; done
}

# topology/block with two racks (b1 = n[1-2], b2 = n[3-4]). reset_nodes
# sets span back to "split" after each test.
set_span() { sed -i "s/^span = .*/span = \"$1\"/" "$C/etc-slurm/imex.toml"; }

test_span_refuse_fails_a_job_across_two_blocks_before_any_daemon_starts() {
  set_span refuse
  local i; for i in 1 2 3 4; do rm -f "$C/nodes/n$i/run-imex/nvidia-imex.log"; done
  local id err
  id=$(submit -N4 --imex "srun -N4 true; echo SHOULD-NOT-RUN") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id" 60)" FAILED "job $id final state"
  err=$(cat "$C/out/$id.out" "$C/out/$id.err" 2>/dev/null)
  expect_contains "$err" "span 2 NVLink blocks" "message says why"
  expect_contains "$err" "b1 (n1,n2), b2 (n3,n4)" "message names the blocks and their nodes"
  expect_contains "$err" "--segment" "message says how to ask for one rack"
  expect_not_contains "$err" "SHOULD-NOT-RUN" "the job script did not run"
  expect_eq "$(grep -c . <<<"$(grep 'imex:' <<<"$err")")" 1 "one error line"
  for i in 1 2 3 4; do
    wait_node_free "n$i"
    case "$(node_state "n$i")" in drain*|down*) fail "n$i was drained: $(node_reason "n$i")";; esac
    [ -e "$C/nodes/n$i/run-imex/nvidia-imex.log" ] && fail "an IMEX daemon started on n$i"
    expect_idle "$i"
  done
}

# While a 4-node job over racks n[1-2] and n[3-4] runs: each node's
# nodes_config holds exactly its own rack's addresses.
expect_rack_nodes_configs() {
  local i want
  for i in 1 2 3 4; do
    case $i in
      1|2) want=$(printf '%s\n%s' "$(node_ip 1)" "$(node_ip 2)");;
      *) want=$(printf '%s\n%s' "$(node_ip 3)" "$(node_ip 4)");;
    esac
    expect_eq "$(cat "$C/nodes/n$i/etc-imex/nodes_config.cfg")" "$want" "n$i nodes_config.cfg holds its own rack"
  done
}

# span = "split" (the default): one IMEX domain per rack, one channel.
test_imex_job_across_two_blocks_forms_one_domain_per_block() {
  local id
  id=$(submit -N4 --imex "srun -N4 --ntasks-per-node=1 $REPORT
$started_marker
$hold_until_released") || { fail "sbatch failed"; return; }
  wait_started "$id" || fail "job $id never started its step"
  local ch; ch=$(channel_for "$id")
  expect_rack_nodes_configs
  local i js
  for i in 1 2 3 4; do
    js=$(in_node "$i" "$C/bin/nvidia-imex-ctl" -c /run/slurm-imex/nvidia-imex.cfg -N -j)
    expect_contains "$js" '"status":"UP"' "n$i domain state"
    expect_eq "$(grep -o '"status":"READY"' <<<"$js" | wc -l)" 2 "n$i sees its rack's 2 READY nodes"
  done
  cmp -s "$C/nodes/n3/etc-imex/nodes_config.cfg" "$C/nodes/n4/etc-imex/nodes_config.cfg" || fail "nodes_config differs inside b2"
  release "$id"
  expect_eq "$(wait_done "$id")" COMPLETED "job $id final state"
  local out line block nodes; out=$(cat "$C/out/$id.out" "$C/out/$id.err")
  expect_eq "$(grep -c '^NODE=' <<<"$out")" 4 "one report per node"
  for i in 1 2 3 4; do
    line=$(grep "^NODE=n$i " <<<"$out")
    case $i in 1|2) block=b1 nodes='n[1-2]';; *) block=b2 nodes='n[3-4]';; esac
    expect_contains "$line" "CH=$ch NV=$ch " "n$i: the job's one channel"
    expect_contains "$line" "STAT=[character special file:$CHANNEL_MAJOR:$ch:$TEST_USER:600 ]" "n$i channel device"
    expect_contains "$line" "DOM=$block DOMN=$nodes" "n$i SLURM_IMEX_DOMAIN and SLURM_IMEX_DOMAIN_NODES"
  done
  for i in 1 2 3 4; do wait_node_free "n$i"; expect_idle "$i"; done
  expect_contains "$(cli 1 show "$id")" "imex yes (domain b1)" "n1's record names its domain"
  expect_contains "$(cli 4 show "$id")" "imex yes (domain b2)" "n4's record names its domain"
}

test_peer_fault_in_one_rack_names_the_peer_and_its_rack_and_drains_nothing() {
  echo "MODE=unreachable" > "$C/nodes/n4/run-imex/fake-fault"
  local id err
  # The batch step runs on n1, whose rack b1 is fine: the step that touches
  # rack b2 is what fails.
  id=$(submit -N4 --imex "set -e; srun -N4 true; echo SHOULD-NOT-RUN") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id" 60)" FAILED "job $id final state"
  err=$(cat "$C/out/$id.out" "$C/out/$id.err" 2>/dev/null)
  expect_contains "$err" "n4 ($(node_ip 4))" "message names the peer"
  expect_contains "$err" "in NVLink block b2" "message names its rack"
  expect_not_contains "$err" "SHOULD-NOT-RUN" "nothing ran after the failed step"
  expect_nodes_up_and_idle
}

test_slurm_accepts_the_topology_the_fabric_describes() {
  publish_cliques
  local f ext out
  f=$(ls "$C"/etc-slurm/topology.yaml "$C"/etc-slurm/topology.conf 2>/dev/null | head -1)
  ext=${f##*.}
  cp "$f" "$C/out/topology.saved"
  if [ "$ext" = yaml ]; then cli 1 topology --yaml > "$f.new"; else cli 1 topology > "$f.new"; fi
  expect_contains "$(cat "$f.new")" "rack1" "a generated $ext file"
  sed 's/^/      | /' "$f.new"
  mv "$f.new" "$f"
  expect_eq "$(cli 1 topology --check | tail -1)" "$f agrees with the NVLink cliques of 2 rack(s)" "the generated file agrees with the fabric"
  scontrol reconfigure || fail "scontrol reconfigure"
  sleep 1
  out=$(scontrol show topology 2>&1)
  expect_contains "$out" "rack1" "Slurm knows rack1: $out"
  expect_contains "$out" "n[1-2]" "rack1 holds n[1-2]"
  expect_contains "$out" "n[3-4]" "rack2 holds n[3-4]"
  cp "$C/out/topology.saved" "$f"
  scontrol reconfigure || fail "scontrol reconfigure back"
}

test_imex_job_inside_one_block_runs() {
  local id out ch
  id=$(submit -N2 --imex "srun -N2 --ntasks-per-node=1 $REPORT") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "job $id final state"
  out=$(grep '^NODE=' "$C/out/$id.out")
  expect_eq "$(grep -c 'STAT=\[character special file' <<<"$out")" 2 "both tasks got a channel: $out"
  case "$(grep -o 'NODE=n[0-9]' <<<"$out" | sort | tr '\n' ' ')" in
    "NODE=n1 NODE=n2 "|"NODE=n3 NODE=n4 ") ;;
    *) fail "job $id was not placed inside one block: $out";;
  esac
  local i; for i in 1 2 3 4; do wait_node_free "n$i"; expect_idle "$i"; done
}

daemon_pid_of() { cut -d' ' -f1 "$C/nodes/n$1/run-slurm-imex/nvidia-imex.pid" 2>/dev/null; }

# [imex] domain = "rack": one long-lived daemon per rack with the whole rack
# in nodes_config, started by the first job that needs it, kept by every
# epilog; jobs are kept apart by channel alone, even on one node.
test_rack_wide_domains_outlive_jobs_and_share_a_node_by_channel() {
  sed -i 's/^domain = .*/domain = "rack"/' "$C/etc-slurm/imex.toml"
  grep -q '^domain = "rack"' "$C/etc-slurm/imex.toml" || { fail "imex.toml has no domain key"; return; }
  local id out i pid1
  # A job on n1 alone: n1 gets its whole rack; n2's daemon is not needed.
  id=$(submit -N1 -w n1 --imex "srun -N1 $REPORT") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "job $id (n1) final state"
  expect_eq "$(cat "$C/nodes/n1/etc-imex/nodes_config.cfg")" "$(printf '%s\n%s' "$(node_ip 1)" "$(node_ip 2)")" \
    "n1 nodes_config holds its whole rack after the job"
  in_node 1 "$C/bin/nvidia-imex-ctl" -c /run/slurm-imex/nvidia-imex.cfg -q >/dev/null 2>&1 \
    || fail "n1: the rack daemon did not outlive the job"
  pid1=$(daemon_pid_of 1)
  expect_contains "$(grep '^NODE=n1 ' "$C/out/$id.out")" "DOM=b1 DOMN=n1" "n1's task names its rack and the job's nodes in it"
  # Two jobs on one node at once (the shared partition): one daemon, two channels.
  local a b
  a=$(submit -p shared -n1 -w n1 --imex "srun -n1 $REPORT
$started_marker
$hold_until_released") || { fail "sbatch a failed"; return; }
  wait_started "$a" || fail "job $a never started its step"
  b=$(submit -p shared -n1 -w n1 --imex "srun -n1 $REPORT") || { fail "sbatch b failed"; return; }
  expect_eq "$(wait_done "$b")" COMPLETED "job $b, beside job $a on n1"
  release "$a"
  expect_eq "$(wait_done "$a")" COMPLETED "job $a final state"
  expect_contains "$(cat "$C/out/$a.out")" "LS=[channel$(channel_for "$a") ]" "job $a sees only its channel"
  expect_contains "$(cat "$C/out/$b.out")" "LS=[channel$(channel_for "$b") ]" "job $b sees only its channel"
  # The whole 4 nodes: n2 and n4 start their rack daemons, n1's keeps running.
  id=$(submit -N4 --imex "srun -N4 --ntasks-per-node=1 $REPORT") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "job $id (4 nodes) final state"
  expect_eq "$(daemon_pid_of 1)" "$pid1" "n1's rack daemon was never restarted"
  local js; js=$(in_node 1 "$C/bin/nvidia-imex-ctl" -c /run/slurm-imex/nvidia-imex.cfg -N -j)
  expect_contains "$js" '"status":"UP"' "rack b1 is UP once both its nodes run daemons"
  expect_contains "$(cli 1 status)" "daemon serves:    the rack" "slurm-imex status names the rack daemon"
  expect_not_contains "$(cli 1 check 2>&1)" "imex" "the health check finds the READY rack daemon healthy"
  expect_nodes_up_and_idle_but_rack_daemons
  # Back to per-job domains: the next --imex job takes the daemons over, its
  # epilogs return every node to idle.
  sed -i 's/^domain = .*/domain = "job"/' "$C/etc-slurm/imex.toml"
  id=$(submit -N4 --imex "srun -N4 true") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "job $id after switching back to domain = job"
  for i in 1 2 3 4; do wait_node_free "n$i"; expect_idle "$i"; done
}

# No node drained, and each node's rack daemon up.
expect_nodes_up_and_idle_but_rack_daemons() {
  local i
  for i in 1 2 3 4; do
    wait_node_free "n$i"
    case "$(node_state "n$i")" in drain*|down*) fail "n$i was drained: $(node_reason "n$i")";; esac
    in_node "$i" "$C/bin/nvidia-imex-ctl" -c /run/slurm-imex/nvidia-imex.cfg -q >/dev/null 2>&1 || fail "n$i: no rack daemon"
    [ -n "$(ls -A "$C/nodes/n$i/run-slurm-imex/jobs" 2>/dev/null)" ] && fail "n$i still has job records"
  done
  return 0
}

main() {
  [ "$(id -u)" = 0 ] || { echo "e2e: must run as root" >&2; exit 1; }
  for f in slurm-imex-prolog slurm-imex-epilog slurm-imex nvidia-imex nvidia-imex-ctl libnvidia_ml.so; do
    [ -e "$BIN/$f" ] || { echo "e2e: $BIN/$f missing: run cargo build --release --workspace" >&2; exit 1; }
  done
  cluster_down >/dev/null 2>&1 || true
  cluster_install "$BIN" || exit 1
  if [ "$E2E_PHASE" = containers ]; then containers_setup || exit 1; fi
  local t0=$SECONDS
  if ! cluster_up; then cluster_down; exit 1; fi
  echo "cluster of $E2E_NODES nodes up in $((SECONDS - t0)) s: $(sinfo -V), phase $E2E_PHASE, from $E2E_INSTALL"
  local tests
  case "$E2E_PHASE" in
    base) tests=(
      test_plugin_is_accepted_by_this_slurm
      test_imex_job_gets_private_channel_and_domain
      test_job_without_imex_sees_no_channel
      test_misuse_is_rejected_at_submission
      test_srun_imex_inside_salloc
      test_second_imex_job_on_busy_node_is_refused
      test_peer_that_never_connects_fails_job_without_draining
      test_local_daemon_crash_drains_only_its_node
      test_epilog_is_idempotent_without_prolog
      test_doctor_passes_then_names_each_break
      test_prolog_killed_midway_then_epilog_restores_idle
      test_gpu_history_recorded_on_every_node
      test_pending_row_remap_drains_with_our_reason_and_requeues
      test_xid_79_before_a_job_drains_the_node
      test_xid_during_job_is_recorded_with_its_class
      test_64_concurrent_epilogs_lose_no_rows
      test_an_imex_jobs_prologs_and_epilogs_ask_the_controller_nothing
      test_health_check_asks_the_controller_nothing_the_second_time
      test_doctor_reads_the_nodes_slurm_conf_when_the_controller_is_away
    );;
    # Beside switch/nvidia_imex: channels, plus the domain, readiness gate,
    # blame and teardown exactly as without it.
    switch) tests=(
      test_switch_imex_job_gets_slurms_channel_for_its_user
      test_switch_job_without_imex_keeps_slurms_channel
      test_plugin_mode_beside_switch_keeps_one_tmpfs
      test_second_imex_job_on_busy_node_is_refused
      test_peer_that_never_connects_fails_job_without_draining
      test_local_daemon_crash_drains_only_its_node
      test_prolog_killed_midway_then_epilog_restores_idle
      test_an_imex_jobs_prologs_and_epilogs_ask_the_controller_nothing
      test_health_check_asks_the_controller_nothing_the_second_time
    );;
    # Fault figures (tests/e2e/faults.sh).
    faults) tests=(
      test_prolog_kill_9_at_every_state_change
      test_64_concurrent_prolog_epilog_pairs
      test_database_full_readonly_corrupt_never_fails_a_job
      test_second_user_cannot_open_the_channel
    );;
    fleet) tests=(
      test_node_exporter_serves_what_the_cli_reports
      test_epilog_logs_one_structured_journal_event
    );;
    rack) tests=(
      test_rack_of_18_nodes_forms_one_domain
    );;
    topology) tests=(
      test_imex_job_across_two_blocks_forms_one_domain_per_block
      test_peer_fault_in_one_rack_names_the_peer_and_its_rack_and_drains_nothing
      test_span_refuse_fails_a_job_across_two_blocks_before_any_daemon_starts
      test_imex_job_inside_one_block_runs
      test_rack_map_splits_a_job_without_a_topology_file
      test_a_topology_file_that_contradicts_the_rack_map_fails_the_job_and_check_lists_it
      test_a_rack_map_that_contradicts_a_nodes_gpus_fails_the_job
      test_slurm_accepts_the_topology_the_fabric_describes
      test_rack_wide_domains_outlive_jobs_and_share_a_node_by_channel
      test_rack_wide_channels_never_collide
      test_a_slow_controller_changes_no_rack
      test_an_imex_jobs_prologs_and_epilogs_ask_the_controller_nothing
      test_health_check_asks_the_controller_nothing_the_second_time
    );;
    # Slurm 25.11+: a channel per segment (tests/e2e/segments.sh).
    segments) tests=(
      test_each_segment_gets_its_own_channel_in_per_job_domains
      test_each_segment_gets_its_own_channel_in_rack_domains
      test_an_imex_jobs_prologs_and_epilogs_ask_the_controller_nothing
      test_health_check_asks_the_controller_nothing_the_second_time
    );;
    containers) tests=(
      test_container_sees_only_its_channel_with_enroots_default_dev
      test_plugin_order_does_not_matter
      test_restricted_dev_loses_the_channel_without_the_shipped_fstab
      test_restricted_dev_with_the_shipped_fstab_gives_back_exactly_the_channel
    );;
    upgrade) tests=(
      test_upgrade_with_a_running_imex_job
    );;
    # Nodes booted with systemd 252 as PID 1 (E2E_SYSTEMD_ROOTFS), manager = "systemd".
    systemd) tests=(
      test_systemd_starts_the_unit_on_the_job_config_and_stops_it
      test_imex_job_gets_private_channel_and_domain
      test_job_without_imex_sees_no_channel
      test_systemd_unit_that_fails_to_start_is_a_node_fault
      test_systemd_runs_a_burst_of_short_imex_jobs
      test_peer_that_never_connects_fails_job_without_draining
      test_prolog_killed_midway_then_epilog_restores_idle
      test_epilog_is_idempotent_without_prolog
      test_gpu_history_recorded_on_every_node
    );;
    *) echo "e2e: unknown E2E_PHASE '$E2E_PHASE' (base, switch, topology, segments, faults, fleet, rack, containers, upgrade or systemd)" >&2; exit 2;;
  esac
  [ "$E2E_INSTALL" = prefix ] && tests+=(test_install_sh_uninstall_keeps_only_the_config)
  local t
  for t in "${tests[@]}"; do
    if [ -n "${E2E_ONLY:-}" ] && [[ "$t" != *"$E2E_ONLY"* ]]; then continue; fi
    run_test "$t"
  done
  cluster_down || { FAILED=$((FAILED + 1)); FAILED_NAMES+=(cluster_down_leftovers); }
  echo "e2e run time: $((SECONDS - t0)) s"
  [ ${#FAILED_NAMES[@]} -gt 0 ] && echo "failed: ${FAILED_NAMES[*]}"
  echo "e2e: $PASSED passed, $FAILED failed"
  [ "$FAILED" = 0 ]
}
main "$@"
