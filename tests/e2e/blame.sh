# shellcheck shell=bash
# Who is blamed for a failure (docs/blame.md): a peer that never connects
# fails the job and drains nothing; a daemon that crashes on its own node
# drains that node alone; the epilog returns a node to idle whatever the
# prolog left, even when it was killed midway or never ran.

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
  wait_until 20 "n2 to drain" node_is_drained n2
  case "$(node_state n2)" in drain*) ;; *) fail "n2 not drained: $(node_state n2)";; esac
  expect_contains "$(node_reason n2)" "imex-health: imex n2: " "n2 drain reason is ours ([health] set_drain_reason = true here)"
  expect_contains "$(node_reason n2)" "(job $id)" "n2 drain reason names the job"
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

# An IMEX fault on every node of a job with the default set_drain_reason =
# false: the prologs ask slurmctld nothing, so Slurm shows its own "Prolog
# error"; each node's next health check (slurm-imex check --drain --undrain,
# as the shipped HealthCheckProgram runs it) sets our reason with one read and
# one update, and leaves the node drained (an idle node cannot re-test an IMEX
# fault); undrain resumes ours, an admin's drain is left alone.
test_an_imex_node_fault_drain_explains_itself_without_a_controller_storm() {
  sed -i 's/^set_drain_reason = .*/set_drain_reason = false/' "$C/etc-slurm/imex.toml"
  grep -q '^set_drain_reason = false' "$C/etc-slurm/imex.toml" || { fail "imex.toml has no set_drain_reason key"; return; }
  # Every node of the cluster (3 in the base phase, 4 in the accounting
  # phase); the last one is the admin's.
  local n=$E2E_NODES i id rpcs ours
  ours=$(seq 1 $((n - 1)))
  # A first GPU job publishes each node's NVLink clique (one Extra update per
  # node and boot): done before counting.
  id=$(submit -N"$n" "true") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "warm-up job $id"
  for i in $(seq 1 "$n"); do wait_node_free "n$i"; echo "MODE=crash" > "$C/nodes/n$i/run-imex/fake-fault"; done
  sdiag -r >/dev/null 2>&1 || { fail "sdiag -r failed"; return; }
  id=$(submit -N"$n" --imex "srun -N$n true") || { fail "sbatch failed"; return; }
  for i in $(seq 1 "$n"); do wait_until 30 "n$i to drain" node_is_drained "n$i"; done
  scancel "$id"
  # (The harness itself polls sinfo meanwhile, so only node updates count.)
  rpcs=$(rpc_counts)
  echo "    figure: a node fault on all $n nodes of job $id: $(grep '^REQUEST_UPDATE_NODE ' <<<"$rpcs" | rpc_total) node updates while the prologs failed"
  expect_eq "$(grep '^REQUEST_UPDATE_NODE ' <<<"$rpcs" | rpc_total)" 0 "the failing prologs asked slurmctld nothing"
  for i in $(seq 1 "$n"); do expect_contains "$(node_reason "n$i")" "Prolog error" "n$i shows Slurm's reason first"; done
  # An admin takes the last node for their own reason meanwhile.
  scontrol update nodename="n$n" state=drain reason="manual: cable swap"
  sdiag -r >/dev/null 2>&1
  for i in $(seq 1 "$n"); do rm -f "$C/nodes/n$i/run-imex/fake-fault"; cli "$i" check --drain --undrain --node "n$i" >/dev/null; done
  rpcs=$(rpc_counts)
  echo "    figure: the next health check on each of the $n nodes: $(grep -E "$HOOK_RPCS" <<<"$rpcs" | tr '\n' ' ')"
  expect_eq "$(grep '^REQUEST_UPDATE_NODE ' <<<"$rpcs" | rpc_total)" $((n - 1)) "one reason update per node of ours, none for the admin's"
  for i in $ours; do
    expect_contains "$(node_reason "n$i")" "imex-health: imex n$i: " "n$i: our reason"
    expect_contains "$(node_reason "n$i")" "(job $id)" "n$i: the reason names the job"
  done
  expect_contains "$(sinfo -R -h -o '%n %E' -n n1)" "imex-health: imex n1" "sinfo -R shows our reason"
  expect_contains "$(node_reason "n$n")" "manual: cable swap" "the admin's reason stays"
  # The health check a second time: nothing asked, and the nodes stay
  # drained for the admin.
  sdiag -r >/dev/null 2>&1
  for i in $ours; do
    expect_contains "$(cli "$i" check --drain --undrain --node "n$i")" "stays drained until an admin runs slurm-imex undrain" "n$i: a second check"
  done
  expect_eq "$(rpc_counts | grep -E "$HOOK_RPCS" | rpc_total)" 0 "a second check asks nothing"
  for i in $ours; do expect_contains "$(node_state "n$i")" drain "n$i stays drained after its health checks"; done
  for i in $ours; do expect_contains "$(cli "$i" undrain --node "n$i")" "resumed n$i" "undrain n$i"; done
  local rc
  cli "$n" undrain --node "n$n" >/dev/null; rc=$?
  expect_eq "$rc" 1 "undrain refuses the admin's drain"
  expect_contains "$(node_reason "n$n")" "manual: cable swap" "the admin's drain kept"
  for i in $ours; do wait_node_free "n$i"; expect_eq "$(node_state "n$i")" idle "n$i back in service"; done
  scontrol update nodename="n$n" state=resume
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

# The child of process PARENT that runs the prolog, in $pid (any other,
# short-lived child nsenter may have is not it).
prolog_child_of() {
  local c
  for c in $(pgrep -P "$1"); do
    [ "$(process_program "$c" 2>/dev/null)" = "$C/bin/slurm-imex-prolog" ] && { pid=$c; return 0; }
  done
  return 1
}
# The program a process runs, as its command line names it. Under qemu-user
# (the arm64 phase) binfmt_misc puts its interpreter first, then the program.
process_program() { # pid
  local argv=()
  mapfile -d '' argv < "/proc/$1/cmdline"
  case ${argv[0]:-} in */qemu-binfmt/*|*/qemu-*-static) echo "${argv[1]:-}";; *) echo "${argv[0]:-}";; esac
}
unit_is_active() { [ "$(in_node "$1" systemctl is-active "$2")" = active ]; }

test_prolog_killed_midway_then_epilog_restores_idle() {
  # A prolog killed while waiting for a domain that can never form (peer n2
  # has no daemon), then the epilog: the node must return to idle.
  # Not through in_node: a backgrounded shell function is a subshell, and $!
  # would not be the prolog. nsenter execs its command, so $! is the prolog.
  # SLURM_CONF as slurmd gives it to a prolog: without it the prolog's
  # scontrol would look for a configless controller through DNS.
  local pid i prolog_env=(env -i SLURM_CONF="$SLURM_CONF" SLURM_JOB_ID=888888 SLURMD_NODENAME=n1
    SLURM_JOB_NODELIST='n[1-2]' SPANK_IMEX=1 "$C/bin/slurm-imex-prolog")
  # Waiting for the domain at most the phase's ready_timeout (seconds), the
  # prolog could give up on its own before it is killed on a busy machine
  # (the unit's start counts too): here it waits longer than this test can.
  # reset_nodes restores the phase's config.
  sed -i 's/^ready_timeout = .*/ready_timeout = "600s"/' "$C/etc-slurm/imex.toml"
  grep -q '^ready_timeout = "600s"' "$C/etc-slurm/imex.toml" || { fail "imex.toml has no ready_timeout key"; return; }
  if [ -n "${E2E_SYSTEMD_ROOTFS:-}" ]; then
    # A booted node: its systemctl must be in its pid namespace, so nsenter
    # forks; the prolog is nsenter's child. It is mid-start once the unit is up.
    nsenter -t "$(slurmd_pid 1)" -a -r -w -- "${prolog_env[@]}" >/dev/null 2>&1 &
    local ns=$!
    wait_until 10 "the prolog under nsenter $ns" prolog_child_of "$ns"
    wait_until 10 "n1's nvidia-imex unit to be active" unit_is_active 1 nvidia-imex
  else
    nsenter -t "$(slurmd_pid 1)" -n -m -u -r -w -- "${prolog_env[@]}" >/dev/null 2>&1 &
    pid=$!
    wait_until 10 "the prolog to start n1's daemon" test -s "$C/nodes/n1/run-slurm-imex/nvidia-imex.pid"
  fi
  [ -s "$C/nodes/n1/etc-imex/nodes_config.cfg" ] || fail "prolog did not get as far as writing nodes_config"
  expect_eq "$(process_program "$pid")" "$C/bin/slurm-imex-prolog" "the process killed is the prolog"
  kill -9 "$pid"; wait "$pid" ${ns:+"$ns"} 2>/dev/null
  poll_until 1 not kill -0 "$pid" 2>/dev/null
  kill -0 "$pid" 2>/dev/null && fail "prolog $pid survived SIGKILL"
  in_node 1 env -i SLURM_CONF="$SLURM_CONF" SLURM_JOB_ID=888888 SLURMD_NODENAME=n1 SLURM_JOB_NODELIST='n[1-2]' SPANK_IMEX=1 \
    "$C/bin/slurm-imex-epilog"
  expect_eq "$?" 0 "epilog exit code"
  expect_idle 1
}
