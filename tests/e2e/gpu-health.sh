# shellcheck shell=bash
# The GPU health gate and the job database on every GPU job: history rows
# per node and per GPU, drains with our reason (row remap pending, XID 79)
# and undrain of ours only, XIDs during a job recorded with their class, and
# 64 concurrent epilogs that lose no row.

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
  local id i
  id=$(submit -N3 "srun -N3 true") || { fail "sbatch failed"; return; }
  wait_until 20 "n2 to drain" node_is_drained n2
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
  wait_until 20 "n3 to drain" node_is_drained n3
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
  id=$(submit -N1 -w n1 "srun true; $STARTED_MARKER; $HOLD_UNTIL_RELEASED") || { fail "sbatch failed"; return; }
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
  local j
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

# Per-job GPU use from NVML accounting, which is off after boot (the fake
# driver's default, as on the H100): the prolog turns it on, the job's
# programs run on gpu0 and gpu1, gpu2 and gpu3 stay idle. Then a job that
# never touches its GPUs shows zero on every one.
test_a_jobs_gpu_use_is_recorded_per_gpu() {
  local id out json
  id=$(submit -N1 -w n1 "srun $C/bin/fake-gpu-job --gpu 0 --util 80 --mem-util 30 --memory-mib 3072 --seconds 2 && srun $C/bin/fake-gpu-job --gpu 1 --util 40 --mem-util 10 --memory-mib 1024 --seconds 1") ||
    { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "job $id final state"
  wait_node_free n1
  # The human table (no python3 or jq inside every phase's root
  # filesystem): GPU, PROCS, GPU_UTIL%, PEAK_MEM_GIB and BUSY_S per GPU.
  out=$(cli 1 show "$id")
  local table
  table=$(awk '$1 ~ /^[0-9]+$/ && NF > 10 { print "gpu" $1 " procs=" $5 " util=" $6 " peak_gib=" $8 " busy_s=" $9 }' <<<"$out")
  echo "    figure: job $id per GPU: $(tr '\n' ';' <<<"$table")"
  expect_contains "$table" "gpu0 procs=1 util=80 peak_gib=3.0 busy_s=" "gpu0: one program, 80 %, 3 GiB peak"
  expect_contains "$table" "gpu1 procs=1 util=40 peak_gib=1.0 busy_s=" "gpu1: one program at 40 %"
  expect_contains "$table" "gpu2 procs=0 util=0 peak_gib=- busy_s=0.0" "gpu2 held, never used"
  expect_contains "$table" "gpu3 procs=0 util=0" "gpu3 held, never used"
  # 2 s at 80 %: 1.6 s busy (a loaded machine sleeps a little longer).
  awk '$1 == "gpu0" { split($5, b, "="); exit !(b[2] >= 1.5 && b[2] <= 2.2) }' <<<"$table" ||
    fail "gpu0 busy time not about 1.6 s: $table"
  local json; json=$(cli 1 --json show "$id")
  expect_eq "$(json_count '"processes": 0' <<<"$json")" 2 "--json: two GPUs with no process"
  expect_contains "$json" '"gpu_util_pct": 80.0' "--json: gpu0's utilization"
  expect_contains "$out" "idle gpu2 1650924001002: the job held this GPU but no process of it ran there (0% utilization)" "human show names the idle GPU"
  expect_contains "$out" "PEAK_MEM_GIB" "human show has the usage columns"
  expect_contains "$(grep -E '^ +0 ' <<<"$out")" " 3.0 " "gpu0's peak memory in GiB"
  out=$(cli 1 --json history --job "$id")
  expect_contains "$out" '"idle_gpus": 2' "history counts the idle GPUs"
  expect_contains "$out" "\"peak_memory_bytes\": $((3072 << 20))" "history keeps the peak"
  # A job that never touched its GPUs: zero, not unknown.
  id=$(submit -N1 -w n1 "true") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "job $id final state"
  wait_node_free n1
  out=$(cli 1 --json history --job "$id")
  expect_contains "$out" "\"idle_gpus\": $E2E_GPUS" "every GPU idle"
  expect_contains "$out" '"gpu_util_pct": 0.0' "utilization 0"
}
