# shellcheck shell=bash
# Racks from Slurm's topology file (phase topology: topology/block with two
# blocks, b1 = n[1-2] and b2 = n[3-4]): one IMEX domain per block a job
# touches (span = "split"), span = "refuse", a peer fault named with its
# rack, and the topology file slurm-imex writes is one Slurm accepts.

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
$STARTED_MARKER
$HOLD_UNTIL_RELEASED") || { fail "sbatch failed"; return; }
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

slurm_topology_holds() { scontrol show topology 2>&1 | grep "$1" >/dev/null; }

test_slurm_accepts_the_topology_the_fabric_describes() {
  publish_cliques
  local f ext out
  f=$(ls "$C"/etc-slurm/topology.yaml "$C"/etc-slurm/topology.conf 2>/dev/null | sed -n 1p)
  ext=${f##*.}
  cp "$f" "$C/out/topology.saved"
  if [ "$ext" = yaml ]; then cli 1 topology --yaml > "$f.new"; else cli 1 topology > "$f.new"; fi
  expect_contains "$(cat "$f.new")" "rack1" "a generated $ext file"
  sed 's/^/      | /' "$f.new"
  mv "$f.new" "$f"
  # (named as the node reads it: beside its slurm.conf, /opt/slurm/etc in a prefix install)
  expect_eq "$(cli 1 topology --check | tail -1)" "$(dirname "$SLURM_CONF")/${f##*/} agrees with the NVLink cliques of 2 rack(s)" "the generated file agrees with the fabric"
  scontrol reconfigure || fail "scontrol reconfigure"
  poll_until 10 slurm_topology_holds rack1
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
