# shellcheck shell=bash
# Fleet-wide health (E2E_PHASE=fleet, sourced by run.sh; host only, needs
# prometheus-node-exporter, promtool and python3): the Prometheus textfile
# the epilog and `slurm-imex check` write, scraped through the real
# node_exporter and compared with `slurm-imex gpus --json`, and the
# structured journal event the epilog sends per job per node.

NODE_EXPORTER_PORT=19117

test_node_exporter_serves_what_the_cli_reports() {
  local prom=$C/nodes/n1/hw/textfile/slurm_imex.prom id out
  # A clean job, a job with an application XID, a job with XID 79.
  id=$(submit -N1 -w n1 "srun true") || { fail "sbatch"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "job $id"
  wait_node_free n1
  id=$(submit -N1 -w n1 "srun true; $STARTED_MARKER; $HOLD_UNTIL_RELEASED") || { fail "sbatch"; return; }
  wait_started "$id" || fail "job $id never started"
  kmsg_append 1 "NVRM: Xid (PCI:0000:1b:00): 13, pid=4242, name=python3, Graphics SM Warp Exception"
  release "$id"; wait_done "$id" >/dev/null; wait_node_free n1
  id=$(submit -N1 -w n1 "srun true; $STARTED_MARKER; $HOLD_UNTIL_RELEASED") || { fail "sbatch"; return; }
  wait_started "$id" || fail "job $id never started"
  kmsg_append 1 "NVRM: Xid (PCI:0000:1a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
  release "$id"; wait_done "$id" >/dev/null; wait_node_free n1
  [ -s "$prom" ] || { fail "the epilog wrote no $prom"; return; }
  expect_eq "$(stat -c %a "$prom")" 644 "textfile mode"
  expect_eq "$(promtool check metrics < "$prom" 2>&1)" "" "promtool check metrics"
  expect_contains "$(cat "$prom")" "slurm_imex_node_drained 1" "the XID 79 drain is exported"
  expect_not_contains "$(cat "$prom")" "job_id" "no job-id label"
  # The real node_exporter serves it, with the values the CLI reports.
  prometheus-node-exporter --web.listen-address="127.0.0.1:$NODE_EXPORTER_PORT" \
    --collector.disable-defaults --collector.textfile \
    --collector.textfile.directory="$C/nodes/n1/hw/textfile" > "$C/out/node-exporter.log" 2>&1 &
  local ne=$!
  wait_until 5 "node_exporter to serve /metrics" python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$NODE_EXPORTER_PORT/metrics', timeout=1)" 2>/dev/null
  cli 1 --json gpus > "$C/out/gpus.json"
  out=$(python3 "$REPO/tests/e2e/metrics-compare.py" "http://127.0.0.1:$NODE_EXPORTER_PORT/metrics" "$C/out/gpus.json" 2>&1)
  expect_eq "$?" 0 "node_exporter values equal slurm-imex gpus: $out"
  echo "    figure: $(tail -1 <<<"$out"); textfile: $(grep -vc '^#' "$prom") series, $(wc -c < "$prom") bytes for $E2E_GPUS GPUs"
  local scrape; scrape=$(python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$NODE_EXPORTER_PORT/metrics').read().decode())")
  expect_contains "$scrape" 'node_textfile_scrape_error 0' "node_exporter read the textfile without error"
  # HealthCheckProgram path: the node is healthy again, check --undrain
  # resumes it and refreshes the export.
  kill "$ne"; wait "$ne" 2>/dev/null
  out=$(cli 1 check --undrain --node n1)
  expect_contains "$out" "resumed n1" "check --undrain"
  expect_contains "$(cat "$prom")" "slurm_imex_node_drained 0" "export after the undrain"
}

test_epilog_logs_one_structured_journal_event() {
  local job=62001 env out
  env="env -i SLURM_CONF=$SLURM_CONF SLURM_JOB_ID=$job SLURMD_NODENAME=n1 SLURM_JOB_NODELIST=n1 SLURM_JOB_USER=journaluser SLURM_JOB_GPUS=0,1"
  in_node 1 $env "$C/bin/slurm-imex-prolog" || { fail "prolog"; return; }
  kmsg_append 1 "NVRM: Xid (PCI:0000:1b:00): 13, pid=77, name=train, Graphics SM Warp Exception"
  # The job's program on gpu0; gpu1 stays idle.
  in_node 1 "$C/bin/fake-gpu-job" --gpu 0 --util 60 --memory-mib 512 --seconds 0.3 >/dev/null || fail "fake-gpu-job"
  # A private mount namespace of n1 where a stand-in journald listens on
  # the real socket path; the epilog finds it there as it would journald.
  in_node 1 unshare -m bash -c "
    mkdir -p /run/systemd/journal && mount -t tmpfs slurm-imex-journal /run/systemd/journal || exit 1
    python3 '$REPO/tests/e2e/journal-capture.py' /run/systemd/journal/socket 4 '$C/out/journal.jsonl' > '$C/out/journal-ready' &
    $(declare -f poll_until)
    poll_until 5 test -s '$C/out/journal-ready' || { echo 'the stand-in journald never listened' >&2; exit 1; }
    $env '$C/bin/slurm-imex-epilog'
    wait" || fail "epilog in the journal namespace"
  out=$(grep "\"JOB_ID\": \"$job\"" "$C/out/journal.jsonl" | grep "\"MESSAGE\": \"job $job on n1")
  expect_eq "$(grep -c . <<<"$out")" 1 "one summary event for the job"
  local field
  for field in '"NODE": "n1"' '"USER": "journaluser"' '"VERDICT": "WARN"' '"IMEX": "false"' \
               '"SYSLOG_IDENTIFIER": "slurm-imex-epilog"' "\"GPU_SERIALS\": \"1650924001000,1650924001001\"" \
               '"XIDS": "13:RESTART_APP:1650924001001"' '"ENERGY_J": "' '"GATE_MS": "' '"PROLOG_MS": "' '"EPILOG_MS": "' \
               '"GPU_UTIL_PCT": "30.0"' '"PEAK_MEMORY_MIB": "512"' '"IDLE_GPUS": "1"'; do
    expect_contains "$out" "$field" "journal field $field"
  done
  echo "    figure: journal event: $(python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print(' '.join(f'{k}={d[k]}' for k in ['JOB_ID','NODE','USER','VERDICT','GPU_SERIALS','XIDS','ENERGY_J','GPU_UTIL_PCT','PEAK_MEMORY_MIB','IDLE_GPUS','GATE_MS','PROLOG_MS','EPILOG_MS'] if k in d))" <<<"$out")"
}
