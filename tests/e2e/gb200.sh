# shellcheck shell=bash
# GB200 as sites run it in 2026 (drivers R595-R620): the driver's recovery
# actions, RECOVER_IMEX_DOMAIN restored by an --imex job's fresh domain (or
# a drain of that node alone when it persists), and a fabric probe still
# IN_PROGRESS when a job starts. The fake NVML clears RECOVER_IMEX_DOMAIN
# once the node's fake nvidia-imex has come up READY after it was raised
# (its events file, /run/nvidia-imex/fake-events). No Slurm release changes
# any of it: the fleet phase runs these once.

test_recovery_action_5_cleared_by_the_fresh_domain_lets_the_imex_job_run() {
  write_scenario 2 "1:recovery_action = 5" '1:recovery_clears_on_imex_ready = "/run/nvidia-imex/fake-events"'
  local id i out
  id=$(submit -N3 --imex "srun -N3 true") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "job $id final state"
  expect_nodes_up_and_idle
  out=$(cli 2 show "$id")
  expect_contains "$out" "imex-health: recovery_action gpu1 1650924002001: driver asks for recovery action RECOVER_IMEX_DOMAIN (5)" "n2's record names the action the gate read"
  expect_contains "$out" "imex-health: recovery_action gpu1: RECOVER_IMEX_DOMAIN (5) cleared once the job's fresh IMEX domain was UP" "n2's record says it cleared"
  for i in 1 3; do
    out=$(cli "$i" show "$id")
    case "$out" in *RECOVER_IMEX_DOMAIN*) fail "n$i's record names n2's action: $out";; esac
  done
}

test_recovery_action_5_that_persists_drains_only_its_node() {
  write_scenario 2 "1:recovery_action = 5"
  local id i out rc
  id=$(submit -N3 --imex "srun -N3 true") || { fail "sbatch failed"; return; }
  wait_until 60 "n2 to drain" node_is_drained n2
  expect_eq "$(wait_job "$id" 30 PENDING)" PENDING "job $id requeued"
  scancel "$id"
  for i in 1 3; do
    wait_node_free "n$i"
    case "$(node_state "n$i")" in drain*|down*) fail "healthy n$i drained: $(node_reason "n$i")";; esac
  done
  # The next health check names the cause in Slurm, and keeps the drain
  # while the GPU still reads the action (a warning at idle).
  out=$(cli 2 check --drain --undrain --node n2); rc=$?
  expect_eq "$rc" 0 "check exit code: action 5 alone is no drain finding"
  expect_contains "$(node_reason n2)" "imex-health: recovery_action gpu1 1650924002001: driver still asks for recovery action RECOVER_IMEX_DOMAIN (5) after the job's fresh IMEX domain came UP" "n2 drain reason"
  out=$(cli 2 check --drain --undrain --node n2)
  expect_contains "$out" "stays drained until every GPU reads recovery action NONE (gpu1 reads RECOVER_IMEX_DOMAIN (5))" "held while the GPU reads it"
  case "$(node_state n2)" in drain*) ;; *) fail "n2 resumed while GPU 1 reads action 5: $(node_state n2)";; esac
  # Reset: every GPU reads NONE, and the check lifts its own drain.
  write_scenario 2
  out=$(cli 2 check --drain --undrain --node n2)
  expect_contains "$out" "resumed n2" "check --undrain once every GPU reads NONE"
  wait_node_free n2
  expect_eq "$(node_state n2)" idle "n2 back in service"
}

test_a_fabric_probe_completing_10s_into_the_prolog_starts_the_job() {
  local id out ms fabric
  fabric="0:fabric = { state = \"in_progress\", completes_after_s = 10, clique_id = $(clique_of 1), cluster_uuid = \"$CLUSTER_UUID\" }"
  write_scenario 1 "$fabric"
  id=$(submit -N1 -w n1 "true") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id" 90)" COMPLETED "job $id final state"
  expect_nodes_up_and_idle
  out=$(cli 1 --json show "$id")
  ms=$(sed -n 's/.*"prolog": *{[^}]*"ms": *\([0-9]*\).*/\1/p' <<<"$(tr -d '\n' <<<"$out")")
  [ -n "$ms" ] && [ "$ms" -ge 3000 ] || fail "the prolog's gate did not wait for the probe (gate ms: ${ms:-none})"
  expect_contains "$out" '"verdict": "PASS"' "nothing drained, nothing warned"
}

test_check_on_a_driver_615_node_names_every_recovery_action() {
  local out rc
  # Action 5 and a first IN_PROGRESS on an idle node: warnings only.
  E2E_DRIVER=615.20.01 write_scenario 3 "0:recovery_action = 5" \
    "1:fabric = { state = \"in_progress\", clique_id = $(clique_of 3), cluster_uuid = \"$CLUSTER_UUID\" }"
  out=$(cli 3 check --drain --undrain --node n3); rc=$?
  expect_eq "$rc" 0 "check exit code"
  expect_contains "$out" "RECOVER_IMEX_DOMAIN (5)" "action 5 named"
  expect_contains "$out" "fabric state IN_PROGRESS" "the probe named"
  case "$(node_state n3)" in drain*) fail "n3 drained for a warning: $(node_reason n3)";; esac
  # 6, 7 and a value this release does not know: each named, and drained.
  E2E_DRIVER=615.20.01 write_scenario 3 "1:recovery_action = 6" "2:recovery_action = 7" "3:recovery_action = 8"
  out=$(cli 3 check --node n3); rc=$?
  expect_eq "$rc" 1 "check exit code for a drain finding"
  expect_contains "$out" "BUS_RESET (6)" "action 6 named"
  expect_contains "$out" "SYSTEM_REBOOT (7)" "action 7 named"
  expect_contains "$out" "recovery action 8, unknown to this slurm-imex" "action 8 by its number"
  write_scenario 3
}
