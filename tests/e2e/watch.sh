# shellcheck shell=bash
# The job's IMEX domain while the job runs (E2E_PHASE=accounting: four
# nodes; sourced by run.sh): slurm-imex-watch on every node restarts a
# daemon killed mid-job, records what happened on the node and its peers,
# leaves a daemon down past [imex.watch] max_restarts and the epilog drains
# that node alone; a peer cut off the network is named, never drained.
# Each test prints its figure as a "figure:" line.

# The pid of node N's nvidia-imex (the process manager's pid file).
daemon_pid_of() { sed -n 's/^\([0-9]*\) .*/\1/p' "$C/nodes/n$1/run-slurm-imex/nvidia-imex.pid" 2>/dev/null; }

# Node N's daemon reports the job's domain UP with every one of its nodes READY.
domain_up_on() { # n nodes
  local out
  out=$(in_node "$1" "$C/bin/nvidia-imex-ctl" -c /run/slurm-imex/nvidia-imex.cfg -N -j 2>/dev/null) || return 1
  [[ "$out" == *'"status":"UP"'* ]] && [ "$(grep -o '"status":"READY"' <<<"$out" | wc -l)" = "$2" ]
}
domain_up_everywhere() { # nodes
  local i
  for i in $(seq 1 "$1"); do domain_up_on "$i" "$1" || return 1; done
}

# A 4-node --imex job that holds after its first step, then runs a step
# that asks each node's daemon for the domain.
hold_imex_job() {
  submit -N"$E2E_NODES" --imex "srun -N$E2E_NODES true; $STARTED_MARKER; $HOLD_UNTIL_RELEASED
srun -N$E2E_NODES $C/bin/nvidia-imex-ctl -c /etc/nvidia-imex/config.cfg -N -j"
}

expect_nothing_drained() {
  local i
  for i in $(seq 1 "$E2E_NODES"); do
    wait_node_free "n$i"
    case "$(node_state "n$i")" in drain*|down*) fail "n$i was drained: $(node_reason "n$i")";; esac
  done
}

test_a_killed_daemon_is_restarted_and_the_jobs_next_step_finds_its_domain() {
  local n=$E2E_NODES id pid t0 waited out
  # `slurm-imex job` on the login node reads the nodes' series in Prometheus.
  prometheus_has_targets_up || prometheus_up || { fail "Prometheus"; return; }
  sed -i -e "s#^prometheus_url = .*#prometheus_url = \"http://127.0.0.1:$PROM_PORT\"#" "$C/etc-slurm/imex.toml"
  id=$(hold_imex_job) || { fail "sbatch"; return; }
  wait_started "$id" || { fail "job $id never started"; return; }
  pid=$(daemon_pid_of 3)
  [ -n "$pid" ] || { fail "n3 has no daemon pid file"; return; }
  t0=$SECONDS
  kill -9 "$pid"
  # The documented reconnect back-off of its peers (15 s) plus 5 s.
  wait_until 20 "n3's daemon to be restarted with the domain UP on every node" domain_up_everywhere "$n"
  waited=$((SECONDS - t0))
  [ "$(daemon_pid_of 3)" != "$pid" ] || fail "n3's daemon has the pid it was killed with"
  release "$id"
  expect_eq "$(wait_done "$id" 60)" COMPLETED "job $id"
  expect_eq "$(grep -c '"status":"UP"' "$C/out/$id.out")" "$n" "the step after the kill found the domain UP on all $n nodes"
  expect_nothing_drained
  out=$(cli 3 show "$id")
  expect_contains "$out" "IMEX daemon died at " "n3's show names the death: $out"
  expect_contains "$out" "IMEX daemon restarted at " "n3's show names the restart"
  expect_contains "$out" "IMEX domain UP again at " "n3's show names the domain UP again"
  expect_contains "$out" "verdict WARN" "n3's verdict says the domain was interrupted"
  expect_contains "$(cli 3 history 2>&1 | grep -w "$id")" "interrupted" "n3's history marks the job"
  out=$(cli 1 show "$id")
  expect_contains "$out" "IMEX peer lost at " "n1's show names n3 lost: $out"
  expect_contains "$out" "(n3 " "n1's show names n3"
  expect_contains "$out" "IMEX peer back at " "n1's show names n3 back"
  expect_contains "$out" "IMEX domain UP again at " "n1's show ends with its domain UP again"
  # From the login node: every node's record, through Prometheus.
  poll_until 30 prometheus_knows_job "$id" || { fail "Prometheus never scraped job $id's series from all $n nodes"; return; }
  out=$(as_user "$C/bin/slurm-imex" job "$id" 2>&1)
  expect_contains "$out" "n3: IMEX daemon died at " "slurm-imex job names n3's event: $out"
  expect_contains "$out" "IMEX domain UP again at " "slurm-imex job names the domain UP again"
  echo "    figure: SIGKILL of n3's daemon mid-job: domain UP on all $n nodes again after $waited s; n3's record:"
  cli 3 show "$id" | grep -i 'imex' | sed 's/^/      /'
  echo "    figure: slurm-imex job $id on the login node:"; grep -A5 'IMEX events' <<<"$out" | sed 's/^/      /'
}

test_a_daemon_killed_past_the_bound_drains_only_its_node_after_the_job() {
  sed -i -e 's/^max_restarts = .*/max_restarts = 1/' -e 's/^interval = "2s"/interval = "500ms"/' "$C/etc-slurm/imex.toml"
  grep -q '^max_restarts = 1' "$C/etc-slurm/imex.toml" || { fail "imex.toml has no [imex.watch] max_restarts"; return; }
  local id pid
  id=$(submit -N"$E2E_NODES" --imex "srun -N$E2E_NODES true; $STARTED_MARKER; $HOLD_UNTIL_RELEASED; srun -N$E2E_NODES true") ||
    { fail "sbatch"; return; }
  wait_started "$id" || { fail "job $id never started"; return; }
  pid=$(daemon_pid_of 3)
  kill -9 "$pid"
  wait_until 10 "n3's daemon to be restarted" eval '[ -n "$(daemon_pid_of 3)" ] && [ "$(daemon_pid_of 3)" != "$pid" ] && kill -0 "$(daemon_pid_of 3)"'
  kill -9 "$(daemon_pid_of 3)"
  sleep 3
  in_node 3 "$C/bin/nvidia-imex-ctl" -c /run/slurm-imex/nvidia-imex.cfg -q >/dev/null 2>&1 &&
    fail "n3's daemon answers after its second death (bound 1): it should be left down"
  release "$id"
  expect_eq "$(wait_done "$id" 60)" COMPLETED "job $id still ends"
  wait_until 20 "n3 to drain after the job" node_is_drained n3
  expect_contains "$(node_reason n3)" "nvidia-imex died 2 times while the job ran (restart bound 1)" "n3's reason: $(node_reason n3)"
  expect_contains "$(node_reason n3)" "(job $id)" "n3's reason names the job"
  local i
  for i in 1 2 4; do
    wait_node_free "n$i"
    case "$(node_state "n$i")" in drain*|down*) fail "peer n$i drained: $(node_reason "n$i")";; esac
  done
  expect_contains "$(cli 3 show "$id")" "IMEX daemon left down at " "n3's record says it was left down"
  echo "    figure: n3's daemon killed twice with max_restarts = 1: job $id COMPLETED, n3 drained after it: $(node_reason n3)"
}

test_a_peer_cut_off_mid_job_is_named_on_its_peers_and_nothing_is_drained() {
  local n=$E2E_NODES id out cut
  id=$(hold_imex_job) || { fail "sbatch"; return; }
  wait_started "$id" || { fail "job $id never started"; return; }
  ip -n imex-n4 link set vn4 down
  cut=$SECONDS
  # Two looks of the watchers ([imex.watch] interval = 2s) and the daemons' staleness.
  sleep 6
  ip -n imex-n4 link set vn4 up
  wait_until 40 "the domain to be UP on every node again" domain_up_everywhere "$n"
  echo "    figure: n4 cut off for 6 s: the domain UP on all $n nodes again $((SECONDS - cut)) s after the cut"
  release "$id"
  expect_eq "$(wait_done "$id" 60)" COMPLETED "job $id"
  expect_nothing_drained
  for i in 1 2 3; do
    out=$(cli "$i" show "$id")
    expect_contains "$out" "IMEX peer lost at " "n$i's show names the lost peer: $out"
    expect_contains "$out" "(n4 " "n$i's show names n4"
  done
  expect_contains "$out" "IMEX domain UP again at " "n3's record ends with its domain UP again"
  out=$(cli 4 show "$id")
  expect_not_contains "$out" "IMEX daemon died" "n4's daemon never died"
  echo "    figure: n4 cut off mid-job, as n1 and n4 recorded it:"
  { cli 1 show "$id"; cli 4 show "$id"; } | grep 'imex event' | sed 's/^/      /'
}

test_the_command_port_refuses_other_nodes() {
  local id out
  id=$(submit -N2 --imex "srun -N2 true; $STARTED_MARKER; $HOLD_UNTIL_RELEASED") || { fail "sbatch"; return; }
  wait_started "$id" || { fail "job $id never started"; return; }
  in_node 1 "$C/bin/nvidia-imex-ctl" -c /etc/nvidia-imex/config.cfg -q >/dev/null 2>&1 || fail "n1's daemon does not answer on loopback"
  if out=$(in_node 2 timeout 5 bash -c "exec 3<>/dev/tcp/$(node_ip 1)/50005" 2>&1); then
    fail "n2 connected to n1's IMEX command port $(node_ip 1):50005"
  fi
  expect_contains "$out" "Connection refused" "n2's connection to n1's command port is refused"
  echo "    figure: from n2, n1's command port $(node_ip 1):50005 while n1's daemon serves job $id: ${out##*: }"
  out=$(cli 1 doctor 2>&1)
  expect_contains "$(grep 'imex-command' <<<"$out")" "PASS" "doctor's command-service check passes with the shipped config: $(grep 'imex-command' <<<"$out")"
  release "$id"
  expect_eq "$(wait_done "$id" 60)" COMPLETED "job $id"
}

test_check_does_not_drain_a_node_whose_daemon_is_being_restarted() {
  local id pid out rc
  id=$(hold_imex_job) || { fail "sbatch"; return; }
  wait_started "$id" || { fail "job $id never started"; return; }
  # The restarted daemon takes 10 s to be READY (read at its start).
  printf 'MODE=slow-start\nDELAY_MS=10000\n' > "$C/nodes/n3/run-imex/fake-fault"
  pid=$(daemon_pid_of 3)
  kill -9 "$pid"
  wait_until 10 "n3's daemon to be restarted" eval '[ -n "$(daemon_pid_of 3)" ] && [ "$(daemon_pid_of 3)" != "$pid" ]'
  out=$(cli 3 check --drain 2>&1); rc=$?
  rm -f "$C/nodes/n3/run-imex/fake-fault"
  echo "    figure: slurm-imex check --drain on n3 while its watcher restarts the daemon (rc $rc): $(grep -i 'imex' <<<"$out" | sed -n 1p)"
  expect_contains "$out" "its watcher is restarting it" "check names the restart"
  case "$(node_state n3)" in drain*|down*) fail "n3 drained during a restart within the bound: $(node_reason n3)";; esac
  wait_until 40 "the domain to be UP on every node again" domain_up_everywhere "$E2E_NODES"
  release "$id"
  expect_eq "$(wait_done "$id" 60)" COMPLETED "job $id"
  expect_nothing_drained
}
