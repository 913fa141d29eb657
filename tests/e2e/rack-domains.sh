# shellcheck shell=bash
# [imex] domain = "rack": one long-lived daemon per rack holding the whole
# rack, started by the first job that needs it and kept by every epilog;
# jobs are kept apart by channel alone, so channels must never collide.

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
$STARTED_MARKER
$HOLD_UNTIL_RELEASED") || { fail "sbatch a failed"; return; }
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

# Rack-wide domains keep jobs apart by channel alone. With 3 channels
# (channel_count = 4) job ids a and a + 3 share channel 1 + id mod 3 while
# Slurm's ids run to MaxJobId=2047: the configuration is refused, every job
# fails saying what to set, nothing is drained. With the channels the
# driver has by default (2048) and MaxJobId=2047 (this cluster's slurm.conf,
# as docs/guide.md says), two jobs at once in one rack hold different channels.
test_rack_wide_channels_never_collide() {
  sed -i -e 's/^domain = .*/domain = "rack"/' -e 's/^channel_count = .*/channel_count = 4/' "$C/etc-slurm/imex.toml"
  grep -q '^channel_count = 4' "$C/etc-slurm/imex.toml" || { fail "imex.toml has no channel_count key"; return; }
  local ids=() id out i
  for i in 1 2 3 4; do
    id=$(submit -p shared -n1 -w n$(( (i - 1) % 2 + 1 )) --imex "set -e; srun -n1 true; echo SHOULD-NOT-RUN") || { fail "sbatch $i"; return; }
    ids+=("$id")
  done
  expect_eq "$(( ${ids[3]} - ${ids[0]} ))" 3 "jobs ${ids[0]} and ${ids[3]} share a channel under 1 + id mod 3"
  for id in "${ids[@]}"; do
    expect_eq "$(wait_done "$id" 60)" FAILED "job $id with 3 channels for 2047 job ids"
    out=$(cat "$C/out/$id.out" "$C/out/$id.err" 2>/dev/null)
    expect_contains "$out" "repeats within job ids 1..2047 (FirstJobId..MaxJobId" "job $id: why"
    expect_contains "$out" "set MaxJobId=3 in slurm.conf" "job $id: what to set"
    expect_not_contains "$out" "SHOULD-NOT-RUN" "job $id did not run"
  done
  for i in 1 2 3 4; do
    wait_node_free "n$i"
    case "$(node_state "n$i")" in drain*|down*) fail "n$i was drained: $(node_reason "n$i")";; esac
  done
  sed -i 's/^channel_count = .*/channel_count = 2048/' "$C/etc-slurm/imex.toml"
  local a b
  a=$(submit -p shared -n1 -w n1 --imex "srun -n1 $REPORT
$STARTED_MARKER
$HOLD_UNTIL_RELEASED") || { fail "sbatch a"; return; }
  wait_started "$a" || fail "job $a never started its step"
  b=$(submit -p shared -n1 -w n2 --imex "srun -n1 $REPORT") || { fail "sbatch b"; release "$a"; return; }
  expect_eq "$(wait_done "$b")" COMPLETED "job $b beside job $a in rack b1"
  release "$a"
  expect_eq "$(wait_done "$a")" COMPLETED "job $a final state"
  expect_contains "$(cat "$C/out/$a.out")" "LS=[channel$(channel_for "$a") ]" "job $a sees only its own channel"
  expect_contains "$(cat "$C/out/$b.out")" "LS=[channel$(channel_for "$b") ]" "job $b sees only its own channel"
  [ "$(channel_for "$a")" != "$(channel_for "$b")" ] || fail "jobs $a and $b share channel $(channel_for "$a")"
  stop_rack_daemons
}

# After rack-wide domains: one per-job --imex job takes every node's daemon
# over, and its epilog returns the node to idle.
stop_rack_daemons() {
  cp -p "$C/imex.toml.pristine" "$C/etc-slurm/imex.toml"
  local id; id=$(submit -N"$E2E_NODES" --imex "srun -N$E2E_NODES true") || { fail "sbatch"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "per-job --imex job after rack-wide domains"
  expect_nodes_up_and_idle
}
