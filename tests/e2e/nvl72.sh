# shellcheck shell=bash
# One NVL72 rack (phase rack): an --imex job on all 18 trays forms one domain.

# One NVL72 rack: an --imex job on all 18 trays (E2E_PHASE=rack).
test_rack_of_18_nodes_forms_one_domain() {
  local id i n=$E2E_NODES
  id=$(submit -N"$n" --imex "srun -N$n --ntasks-per-node=1 $REPORT
$STARTED_MARKER
$HOLD_UNTIL_RELEASED") || { fail "sbatch failed"; return; }
  wait_started "$id" || { fail "job $id never started its step"; return; }
  local ch; ch=$(channel_for "$id") ms=()
  for i in $(seq 1 "$n"); do
    expect_eq "$(grep -c . "$C/nodes/n$i/etc-imex/nodes_config.cfg")" "$n" "n$i nodes_config.cfg holds the $n nodes"
    ms+=("$(sed -n 's/.*"prolog_ms": \([0-9]*\).*/\1/p' "$C/nodes/n$i/run-slurm-imex/jobs/$id.json")")
  done
  local js; js=$(in_node "$n" "$C/bin/nvidia-imex-ctl" -c /run/slurm-imex/nvidia-imex.cfg -N -j)
  expect_contains "$js" '"status":"UP"' "n$n sees the domain UP"
  expect_eq "$(grep -o '"status":"READY"' <<<"$js" | wc -l)" "$n" "n$n sees $n READY nodes"
  release "$id"
  expect_eq "$(wait_done "$id")" COMPLETED "job $id on $n nodes"
  local out; out=$(cat "$C/out/$id.out")
  expect_eq "$(grep -c "CH=$ch NV=$ch LS=\[channel$ch \]" <<<"$out")" "$n" "every tray's task sees exactly channel$ch"
  echo "    figure: $n-node --imex job: prolog wall ms per node: $(printf '%s\n' "${ms[@]}" | sort -n | paste -sd ' ')"
  for i in $(seq 1 "$n"); do wait_node_free "n$i"; expect_idle "$i"; done
}
