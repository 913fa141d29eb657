# shellcheck shell=bash
# Racks from the rack map (imex-racks.toml, written by slurm-imex topology
# --map from the cliques nodes publish): it splits a job without a topology
# file, and a topology file or a node's own GPUs that contradict it fail the
# job, naming both, without draining.

# The rack map from the cliques every node publishes, written where every
# node's prolog finds it (beside imex.toml), as an admin does.
write_rack_map() {
  publish_cliques
  "$C/bin/slurm-imex" --config "$C/etc-slurm/imex.toml" topology --map -o "$C/etc-slurm/imex-racks.toml" ||
    fail "slurm-imex topology --map"
}

# Where the nodes see $C/etc-slurm, which messages name: Slurm's sysconfdir
# when slurm-imex was installed there (a prefix or RPM install), else itself.
node_etc() { if installs_in_sysconfdir; then echo "$SLURM_SYSCONFDIR"; else echo "$C/etc-slurm"; fi; }

# Each of n1..n4's tasks in job output OUT names its rack as its domain:
# rack1 = n[1-2], rack2 = n[3-4] (WHAT says by which file).
expect_split_by_rack() { # out what
  local i line want
  for i in 1 2 3 4; do
    line=$(grep "^NODE=n$i " <<<"$1")
    case $i in 1|2) want="DOM=rack1 DOMN=n[1-2]";; *) want="DOM=rack2 DOMN=n[3-4]";; esac
    expect_contains "$line" "$want" "n$i names its rack as its domain$2"
  done
}

# Every node publishes its NVLink clique (the HealthCheckProgram path).
publish_cliques() {
  local i; for i in $(seq 1 "$E2E_NODES"); do
    expect_contains "$(cli "$i" check 2>&1)" "published in Slurm's node Extra" "n$i publishes its clique"
  done
}

# Without a topology file, the rack map (written by `slurm-imex topology
# --map` from the published cliques) splits the job; tasks name their rack.
test_rack_map_splits_a_job_without_a_topology_file() {
  sed -i 's/^topology = .*/topology = "none"/' "$C/etc-slurm/imex.toml"
  write_rack_map
  expect_contains "$(scontrol show node n3 -o)" "\"nvlink_clique\":\"$CLUSTER_UUID.2\"" "n3's Extra holds its clique"
  expect_contains "$(cat "$C/etc-slurm/imex-racks.toml")" "nodes = \"n[3-4]\"" "the map holds the second rack"
  local id i
  id=$(submit -N4 --imex "srun -N4 --ntasks-per-node=1 $REPORT
$STARTED_MARKER
$HOLD_UNTIL_RELEASED") || { fail "sbatch failed"; return; }
  wait_started "$id" || fail "job $id never started its step"
  expect_rack_nodes_configs
  release "$id"
  expect_eq "$(wait_done "$id")" COMPLETED "job $id final state"
  expect_split_by_rack "$(cat "$C/out/$id.out")" ""
  for i in 1 2 3 4; do wait_node_free "n$i"; expect_idle "$i"; done
  expect_contains "$(cli 1 show "$id")" "imex-racks.toml (sha256 " "n1's record names the map and its digest"
}

# The indexed map (`topology --map -o imex-racks.d`, what a big site
# installs): found beside imex.toml before the one-file map, read in
# pieces, it splits the job the same way and names its own digest, the
# sha256 of its map.toml.
test_the_indexed_rack_map_splits_a_job_the_same_way() {
  sed -i 's/^topology = .*/topology = "none"/' "$C/etc-slurm/imex.toml"
  publish_cliques
  "$C/bin/slurm-imex" --config "$C/etc-slurm/imex.toml" topology --map -o "$C/etc-slurm/imex-racks.d" ||
    fail "slurm-imex topology --map -o imex-racks.d"
  local digest id i err
  digest=$(sha256sum "$C/etc-slurm/imex-racks.d/map.toml" | cut -c1-12)
  expect_contains "$(cat "$C/etc-slurm/imex-racks.d/racks/rack2.toml")" "nodes = \"n[3-4]\"" "rack2's piece holds its nodes"
  id=$(submit -N4 --imex "srun -N4 --ntasks-per-node=1 $REPORT") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "job $id final state"
  expect_split_by_rack "$(cat "$C/out/$id.out")" " (indexed map)"
  for i in 1 2 3 4; do wait_node_free "n$i"; expect_idle "$i"; done
  expect_contains "$(cli 3 show "$id")" "$(node_etc)/imex-racks.d (sha256 $digest" "n3's record names the indexed map and map.toml's sha256"
  # A piece cut short fails the next job, naming the piece; nothing drains.
  cp "$C/etc-slurm/imex-racks.d/racks/rack2.toml" "$C/rack2.piece"
  head -c 40 "$C/rack2.piece" > "$C/etc-slurm/imex-racks.d/racks/rack2.toml"
  id=$(submit -N4 --imex "set -e; srun -N4 true; echo SHOULD-NOT-RUN") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id" 60)" FAILED "job $id final state (a piece cut short)"
  err=$(cat "$C/out/$id.out" "$C/out/$id.err" 2>/dev/null)
  expect_contains "$err" "bad rack map $(node_etc)/imex-racks.d (sha256 $digest): racks/rack2.toml: it is truncated or corrupt" "the job's error names the map, its digest and the bad piece"
  expect_not_contains "$err" "SHOULD-NOT-RUN" "the job did not run"
  expect_nodes_up_and_idle
  rm -rf "$C/etc-slurm/imex-racks.d" "$C/rack2.piece"
}

# An indexed map written where a topology file is in force whose blocks
# are exactly the racks: the map names the file by its sha256, and a prolog
# whose topology file hashes the same takes its domains from the map alone
# (the record names the map); once the file changes, the file is parsed
# again and named.
test_an_indexed_map_written_from_the_topology_file_stands_for_it() {
  # The phase's topology.yaml when it has one (it holds these blocks), else
  # a topology.conf of them.
  local topo=$C/etc-slurm/topology.yaml kept="" err id out i
  [ -f "$topo" ] || topo=$C/etc-slurm/topology.conf
  [ -f "$topo" ] && kept=$(cat "$topo")
  [ "${topo##*.}" = yaml ] || printf 'BlockName=b1 Nodes=n[1-2]\nBlockName=b2 Nodes=n[3-4]\n' > "$topo"
  sed -i 's/^topology = .*/topology = "auto"/' "$C/etc-slurm/imex.toml"
  publish_cliques
  err=$("$C/bin/slurm-imex" --config "$C/etc-slurm/imex.toml" topology --map -o "$C/etc-slurm/imex-racks.d" 2>&1 >/dev/null) ||
    fail "slurm-imex topology --map -o imex-racks.d: $err"
  expect_contains "$err" "$(node_etc)/${topo##*/} has exactly these racks" "topology --map says the map stands for the topology file"
  expect_contains "$(cat "$C/etc-slurm/imex-racks.d/index.toml")" "topology = \"$(sha256sum "$topo" | cut -d' ' -f1)\"" "the index holds the file's sha256"
  id=$(submit -N4 --imex "srun -N4 --ntasks-per-node=1 $REPORT") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "job $id final state"
  out=$(cat "$C/out/$id.out")
  expect_contains "$(grep '^NODE=n3 ' <<<"$out")" "DOM=b2 DOMN=n[3-4]" "n3's domain is its block, by the map"
  expect_contains "$(cli 3 show "$id")" "imex domain members from $(node_etc)/imex-racks.d (sha256 " "n3 took its domain from the map, not by parsing the file"
  for i in 1 2 3 4; do wait_node_free "n$i"; done
  echo "# changed" >> "$topo"
  id=$(submit -N4 --imex "srun -N4 --ntasks-per-node=1 $REPORT") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "job $id final state (file changed)"
  expect_contains "$(grep '^NODE=n3 ' <<<"$(cat "$C/out/$id.out")")" "DOM=b2 DOMN=n[3-4]" "n3's domain is still its block"
  expect_contains "$(cli 3 show "$id")" "imex domain members from $(node_etc)/${topo##*/}" "a changed file is parsed and named"
  for i in 1 2 3 4; do wait_node_free "n$i"; expect_idle "$i"; done
  rm -rf "$C/etc-slurm/imex-racks.d"
  if [ -n "$kept" ]; then printf '%s\n' "$kept" > "$topo"; else rm -f "$topo"; fi
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
