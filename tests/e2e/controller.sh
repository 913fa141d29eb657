# shellcheck shell=bash
# What slurm-imex asks slurmctld (docs/controller-calls.md), counted by
# slurmctld itself: `sdiag -r` resets its RPC counters, the job runs with no
# other client asking anything (its end is seen in each node's own job
# database, never through Slurm), then `sdiag` says which RPCs arrived.
# Also: racks from the rack map and the topology file only, a controller
# too slow to answer, and channels in rack-wide domains.

# RPC counts by message type since the last reset, "TYPE COUNT" per line,
# sorted; sdiag's own request left out.
rpc_counts() {
  sdiag 2>/dev/null | awk '
    /statistics by message type/ { f = 1; next }
    /statistics by user/ { f = 0 }
    f && /count:/ { for (i = 1; i <= NF; i++) if ($i ~ /^count:/) { sub("count:", "", $i); print $1, $i } }' |
    grep -v '^REQUEST_STATS_INFO ' | sort
}
rpc_total() { awk '{ s += $2 } END { print s + 0 }'; }
# The RPC types slurm-imex's own calls arrive as: scontrol show node (node
# and partition tables), scontrol update node, scontrol show job/config.
HOOK_RPCS='^(REQUEST_NODE_INFO|REQUEST_NODE_INFO_SINGLE|REQUEST_PARTITION_INFO|REQUEST_UPDATE_NODE|REQUEST_JOB_INFO|REQUEST_BUILD_INFO) '

# Wait, without asking Slurm, until job ID's epilogs are over on nodes
# n1..nN: each node's database holds the job's row (written at the end of
# the epilog), no epilog runs any more, and slurmd has had time to report.
wait_recorded_quietly() { # id nodes
  local id=$1 n=$2 i t
  for i in $(seq 1 "$n"); do
    for t in $(seq 1 300); do
      cli "$i" --json history --job "$id" 2>/dev/null | grep -q "\"job_id\": $id" && break
      sleep 0.1
    done
  done
  for t in $(seq 1 100); do pgrep -f slurm-imex-epilog >/dev/null || break; sleep 0.1; done
  sleep 2
}

# The RPCs slurmctld received for one N-node job (sbatch ARGS), start to
# the end of its epilogs, as rpc_counts lines.
job_rpcs() { # nodes sbatch-args...
  local n=$1; shift
  sdiag -r >/dev/null 2>&1 || { fail "sdiag -r"; return 1; }
  local id; id=$(submit -N"$n" "$@" "srun -N$n true") || { fail "sbatch $*"; return 1; }
  wait_recorded_quietly "$id" "$n"
  rpc_counts
  echo "JOB $id"
}

# Print two jobs' RPCs side by side, and hold the --imex job to the plain
# job's count, with none of the types our hooks' calls would be.
expect_no_more_rpcs_than_plain() { # label plain-counts imex-counts
  local label=$1 plain=$2 imex=$3
  echo "      $label: RPC type, plain job, --imex job"
  join -a1 -a2 -e0 -o 0,1.2,2.2 <(grep -v '^JOB' <<<"$plain") <(grep -v '^JOB' <<<"$imex") | sed 's/^/        /'
  local p i
  p=$(grep -v '^JOB' <<<"$plain" | rpc_total); i=$(grep -v '^JOB' <<<"$imex" | rpc_total)
  echo "      $label: plain $p RPCs, --imex $i RPCs"
  [ "$i" -le "$p" ] || fail "$label: the --imex job made $i RPCs, a plain job $p"
  expect_eq "$(grep -E "$HOOK_RPCS" <<<"$imex" | rpc_total)" 0 "$label: node, partition, job or config reads and node updates during the --imex job"
  [ "$p" -gt 0 ] || fail "$label: sdiag counted no RPC at all for a plain job"
}

# The rack map from the cliques every node publishes, written where every
# node's prolog finds it (beside imex.toml), as an admin does.
write_rack_map() {
  publish_cliques
  "$C/bin/slurm-imex" --config "$C/etc-slurm/imex.toml" topology --map -o "$C/etc-slurm/imex-racks.toml" ||
    fail "slurm-imex topology --map"
}

# Every node publishes its NVLink clique (the HealthCheckProgram path).
publish_cliques() {
  local i; for i in $(seq 1 "$E2E_NODES"); do
    expect_contains "$(cli "$i" check 2>&1)" "published in Slurm's node Extra" "n$i publishes its clique"
  done
}

# A plain job, then an --imex job of every kind this phase has: per-job and
# rack-wide domains, racks from the topology file (topology phase) and from
# the rack map alone.
test_an_imex_jobs_prologs_and_epilogs_ask_the_controller_nothing() {
  local n=$E2E_NODES plain counts mode source
  write_rack_map
  plain=$(job_rpcs "$n") || return
  local sources=(map)
  [ -n "$E2E_TOPOLOGY" ] && sources=(topology map)
  for mode in job rack; do
    for source in "${sources[@]}"; do
      cp -p "$C/imex.toml.pristine" "$C/etc-slurm/imex.toml"
      sed -i "s/^domain = .*/domain = \"$mode\"/" "$C/etc-slurm/imex.toml"
      [ "$source" = map ] && sed -i 's/^topology = .*/topology = "none"/' "$C/etc-slurm/imex.toml"
      counts=$(job_rpcs "$n" --imex) || return
      expect_eq "$(job_state "$(sed -n 's/^JOB //p' <<<"$counts")")" COMPLETED "$n-node --imex job ($mode domain, racks from the $source)"
      expect_no_more_rpcs_than_plain "$mode domain, racks from the $source" "$plain" "$counts"
    done
  done
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

test_health_check_asks_the_controller_nothing_the_second_time() {
  local first second out
  # As after a reboot: n1's state directory (a tmpfs) knows nothing yet.
  rm -f "$C/nodes/n1/run-slurm-imex/node-metrics.json" "$C/nodes/n1/run-slurm-imex/published-clique"
  sdiag -r >/dev/null 2>&1 || { fail "sdiag -r"; return; }
  out=$(cli 1 check --drain --undrain 2>&1) || fail "check: $out"
  first=$(rpc_counts)
  sdiag -r >/dev/null 2>&1
  out=$(cli 1 check --drain --undrain 2>&1) || fail "check again: $out"
  second=$(rpc_counts)
  echo "      first run since boot: $(rpc_total <<<"$first") RPCs ($(tr '\n' ' ' <<<"$first"))"
  echo "      second run: $(rpc_total <<<"$second") RPCs"
  [ "$(rpc_total <<<"$first")" -gt 0 ] || fail "the first check since boot asked nothing (it must learn the node's standing and publish its clique)"
  expect_eq "$(rpc_total <<<"$second")" 0 "RPCs of a health check with nothing changed"
  expect_contains "$out" "n1: PASS" "the second check still checks"
  expect_contains "$out" "published in Slurm's node Extra (unchanged)" "the clique is known to be published"
}

# [health] scontrol is a controller that answers only after 30 s on n3
# (and logs every call): the racks of a 2-rack job come from the files on
# each node, so the job forms the right two domains and never waits for it.
test_a_slow_controller_changes_no_rack() {
  write_rack_map
  local calls=$C/out/scontrol-calls real
  real=$(command -v scontrol)
  : > "$calls"; chmod 644 "$calls"
  printf '#!/bin/sh\necho "$(hostname) $*" >> %s\n[ "$(hostname)" = n3 ] && sleep 30\nexec %s "$@"\n' "$calls" "$real" > "$C/bin/slow-scontrol"
  chmod 755 "$C/bin/slow-scontrol"
  sed -i "s#^scontrol = .*#scontrol = \"$C/bin/slow-scontrol\"#" "$C/etc-slurm/imex.toml"
  grep -q "^scontrol = \"$C/bin/slow-scontrol\"" "$C/etc-slurm/imex.toml" || { fail "imex.toml has no scontrol key"; return; }
  local source id start
  for source in topology map; do
    [ "$source" = map ] && sed -i 's/^topology = .*/topology = "none"/' "$C/etc-slurm/imex.toml"
    start=$SECONDS
    id=$(submit -N4 --imex "srun -N4 --ntasks-per-node=1 $REPORT
$started_marker
$hold_until_released") || { fail "sbatch failed"; return; }
    wait_started "$id" || fail "job $id never started its step"
    expect_rack_nodes_configs
    release "$id"
    expect_eq "$(wait_done "$id")" COMPLETED "2-rack job with a slow controller, racks from the $source"
    [ $((SECONDS - start)) -lt 25 ] || fail "the job took $((SECONDS - start)) s: something waited for the slow controller"
    expect_nodes_up_and_idle
  done
  expect_eq "$(cat "$calls")" "" "scontrol calls by the prologs and epilogs"
}

# Rack-wide domains keep jobs apart by channel alone. With 3 channels
# (channel_count = 4) job ids a and a + 3 share channel 1 + id mod 3 while
# Slurm's ids run to MaxJobId=2047: the configuration is refused, every job
# fails saying what to set, nothing is drained. With the channels the
# driver has by default (2048) and MaxJobId=2047 (this cluster's slurm.conf,
# as the README says), two jobs at once in one rack hold different channels.
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
$started_marker
$hold_until_released") || { fail "sbatch a"; return; }
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

# Without a topology file, the rack map (written by `slurm-imex topology
# --map` from the published cliques) splits the job; tasks name their rack.
test_rack_map_splits_a_job_without_a_topology_file() {
  sed -i 's/^topology = .*/topology = "none"/' "$C/etc-slurm/imex.toml"
  write_rack_map
  expect_contains "$(scontrol show node n3 -o)" "\"nvlink_clique\":\"$CLUSTER_UUID.2\"" "n3's Extra holds its clique"
  expect_contains "$(cat "$C/etc-slurm/imex-racks.toml")" "nodes = \"n[3-4]\"" "the map holds the second rack"
  local id i want line out
  id=$(submit -N4 --imex "srun -N4 --ntasks-per-node=1 $REPORT
$started_marker
$hold_until_released") || { fail "sbatch failed"; return; }
  wait_started "$id" || fail "job $id never started its step"
  expect_rack_nodes_configs
  release "$id"
  expect_eq "$(wait_done "$id")" COMPLETED "job $id final state"
  out=$(cat "$C/out/$id.out")
  for i in 1 2 3 4; do
    line=$(grep "^NODE=n$i " <<<"$out")
    case $i in 1|2) want="DOM=rack1 DOMN=n[1-2]";; *) want="DOM=rack2 DOMN=n[3-4]";; esac
    expect_contains "$line" "$want" "n$i names its rack as its domain"
  done
  for i in 1 2 3 4; do wait_node_free "n$i"; expect_idle "$i"; done
  expect_contains "$(cli 1 show "$id")" "imex-racks.toml (sha256 " "n1's record names the map and its digest"
}

# n2 is cabled into the second rack, but the topology file puts it in b1:
# the rack map (from the fabric) says otherwise, so every prolog refuses
# the job before any daemon starts, naming both files; --check lists it.
test_a_topology_file_that_contradicts_the_rack_map_fails_the_job_and_check_lists_it() {
  echo 2 > "$C/nodes/n2/clique"; write_scenario 2
  write_rack_map
  local i; for i in 1 2 3 4; do rm -f "$C/nodes/n$i/run-imex/nvidia-imex.log"; done
  local id err check rc
  id=$(submit -N4 --imex "set -e; srun -N4 true; echo SHOULD-NOT-RUN") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id" 60)" FAILED "job $id final state"
  err=$(cat "$C/out/$id.out" "$C/out/$id.err" 2>/dev/null)
  expect_contains "$err" "block b1 holds 2 NVLink cliques: n1 (clique $CLUSTER_UUID.1), n2 (clique $CLUSTER_UUID.2)" "the message names the nodes and their cliques"
  expect_contains "$err" "topology." "the message names the topology file"
  expect_contains "$err" "imex-racks.toml (sha256 " "the message names the rack map"
  expect_not_contains "$err" "SHOULD-NOT-RUN" "the job did not run"
  expect_nodes_up_and_idle
  for i in 1 2 3 4; do
    [ -e "$C/nodes/n$i/run-imex/nvidia-imex.log" ] && fail "an IMEX daemon started on n$i"
  done
  check=$(cli 1 topology --check); rc=$?
  sed 's/^/      | /' <<<"$check"
  expect_eq "$rc" 1 "topology --check exits 1"
  expect_contains "$check" "block b1 holds 2 NVLink cliques" "topology --check lists the split block"
  expect_contains "$check" "NVLink clique $CLUSTER_UUID.2 spans 2 blocks: n2 (block b1), n3 (block b2), n4 (block b2)" "topology --check lists the spanning clique"
}

# The map was right when written; then n2's tray moved to the other rack.
# n2's prolog sees its own GPUs' clique (the gate) disagree with the map:
# the job fails naming both, and no node is drained.
test_a_rack_map_that_contradicts_a_nodes_gpus_fails_the_job() {
  sed -i 's/^topology = .*/topology = "none"/' "$C/etc-slurm/imex.toml"
  write_rack_map
  echo 2 > "$C/nodes/n2/clique"; write_scenario 2
  local id err check
  id=$(submit -N4 --imex "set -e; srun -N4 true; echo SHOULD-NOT-RUN") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id" 60)" FAILED "job $id final state"
  err=$(cat "$C/out/$id.out" "$C/out/$id.err" 2>/dev/null)
  expect_contains "$err" "n2's GPUs report NVLink clique $CLUSTER_UUID.2 (NVML fabric info), but the rack map" "the message names n2's own clique"
  expect_contains "$err" "puts n2 in rack rack1 (clique $CLUSTER_UUID.1)" "the message names what the map says"
  expect_not_contains "$err" "SHOULD-NOT-RUN" "the job did not run"
  expect_nodes_up_and_idle
  check=$(cli 1 topology --check 2>&1)
  expect_contains "$check" "the rack map puts n2 in rack rack1 (clique $CLUSTER_UUID.1), but it publishes clique $CLUSTER_UUID.2" "topology --check finds the stale map"
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
  sed -i 's/^PrologFlags=.*/PrologFlags=Contain/' "$conf"
  : > "$stack"
  out=$(cli 1 doctor 2>&1); rc=$?
  cp -p "$C/out/slurm.conf.saved" "$conf"; cp -p "$C/out/plugstack.conf.saved" "$stack"
  ip -n imex-n1 route del prohibit "$NET.1/32"
  echo "$out" | grep -E '^FAIL  ' | sed 's/^/       /'
  expect_eq "$rc" 1 "doctor exit status with a broken slurm.conf and no controller"
  expect_contains "$out" "FAIL  prolog-flags    PrologFlags=Contain lacks Alloc" "PrologFlags without Alloc is a FAIL"
  expect_contains "$out" "FAIL  plugstack" "no plugstack line is a FAIL"
}
