# shellcheck shell=bash
# An --imex job and its neighbours (phases base, systemd): the plugin loads
# into this Slurm, the job's tasks see only its private channel (the user's,
# 0600) and one per-job IMEX domain of exactly its nodes, jobs without
# --imex see none, misuse is refused at submission, and a second --imex job
# on a busy node is refused without touching the first.

# Each built plugin is loaded by the Slurm it was built for: the version
# this cluster runs is the one the plugin was stamped for (E2E_SLURM_VERSION,
# read by versions.sh from the Slurm's own header), and no client or daemon
# refused it.
test_plugin_is_accepted_by_this_slurm() {
  local running help
  running=$(sinfo -V | awk '{print $2}')
  [ -n "${E2E_SLURM_VERSION:-}" ] && expect_eq "$running" "$E2E_SLURM_VERSION" "Slurm running the cluster"
  help=$(as_user sbatch --help 2>&1; as_user srun --help 2>&1; as_user salloc --help 2>&1)
  expect_eq "$(grep -c -- '--imex ' <<<"$help")" 3 "--imex in sbatch, srun and salloc --help"
  expect_not_contains "$help" "Incompatible" "clients load the plugin"
  local id; id=$(submit -N3 --imex "srun -N3 true") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "an --imex job on Slurm $running"
  expect_not_contains "$(cat "$C"/log/*.log)" "Incompatible" "slurmctld, slurmd and slurmstepd load the plugin"
  local i; for i in 1 2 3; do wait_node_free "n$i"; expect_idle "$i"; done
}

test_imex_job_gets_private_channel_and_domain() {
  local id
  id=$(submit -N3 --imex "srun -N3 --ntasks-per-node=1 $REPORT
$STARTED_MARKER
$HOLD_UNTIL_RELEASED") || { fail "sbatch failed"; return; }
  wait_started "$id" || fail "job $id never started its step"
  local ch; ch=$(channel_for "$id")
  # While the job runs: identical nodes_config with exactly the job's 3 addresses, domain UP.
  local want; want=$(printf '%s\n%s\n%s' "$(node_ip 1)" "$(node_ip 2)" "$(node_ip 3)")
  local i; for i in 1 2 3; do
    expect_eq "$(cat "$C/nodes/n$i/etc-imex/nodes_config.cfg")" "$want" "n$i nodes_config.cfg"
    local js; js=$(in_node "$i" "$C/bin/nvidia-imex-ctl" -c /run/slurm-imex/nvidia-imex.cfg -N -j)
    expect_contains "$js" '"status":"UP"' "n$i domain state"
    expect_eq "$(grep -c "" <<<"$(grep -o '"status":"READY"' <<<"$js")")" 3 "n$i sees 3 READY nodes"
    expect_eq "$(grep '^SERVER_PORT=' "$C/nodes/n$i/run-slurm-imex/nvidia-imex.cfg")" "SERVER_PORT=$((33792 + id % 16384))" "n$i per-job SERVER_PORT"
  done
  cmp -s "$C/nodes/n1/etc-imex/nodes_config.cfg" "$C/nodes/n3/etc-imex/nodes_config.cfg" || fail "nodes_config differs between n1 and n3"
  release "$id"
  expect_eq "$(wait_done "$id")" COMPLETED "job $id final state"
  local out; out=$(cat "$C/out/$id.out" "$C/out/$id.err")
  expect_eq "$(grep -c '^NODE=' <<<"$out")" 3 "one report per node"
  for i in 1 2 3; do
    local line; line=$(grep "^NODE=n$i " <<<"$out")
    expect_contains "$line" "CH=$ch NV=$ch " "n$i SLURM_IMEX_CHANNEL and NVIDIA_IMEX_CHANNELS"
    expect_contains "$line" "LS=[channel$ch ]" "n$i sees only channel$ch"
    expect_contains "$line" "STAT=[character special file:$CHANNEL_MAJOR:$ch:$TEST_USER:600 ]" "n$i channel device"
    expect_contains "$line" "TMPFS=1" "n$i: one tmpfs on the channel directory"
  done
  for i in 1 2 3; do wait_node_free "n$i"; expect_idle "$i"; done
}

test_job_without_imex_sees_no_channel() {
  local id
  id=$(submit -N3 "srun -N3 --ntasks-per-node=1 $REPORT") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "job $id final state"
  local out; out=$(cat "$C/out/$id.out")
  expect_eq "$(grep -c '^NODE=' <<<"$out")" 3 "one report per node"
  expect_eq "$(grep -c 'CH=none NV=none LS=\[\] STAT=\[\] TMPFS=1' <<<"$out")" 3 "empty channel dir, no channel env: $out"
  # The host's channel0 is still there; it was only hidden.
  [ -e "$C/nodes/n1/dev-channels/channel0" ] || fail "host channel0 vanished"
}

test_misuse_is_rejected_at_submission() {
  local before out rc
  before=$(squeue -h | wc -l)
  out=$(submit --imex=foo "true" 2>&1); rc=$?
  [ $rc -ne 0 ] || fail "sbatch --imex=foo succeeded"
  expect_contains "$out" "imex" "error names the option"
  out=$(SLURM_SPANK__SLURM_SPANK_OPTION_imex_imex=foo submit "true" 2>&1); rc=$?
  [ $rc -ne 0 ] || fail "--imex with a value through the environment was accepted"
  expect_contains "$out" "--imex takes no value" "env misuse message"
  expect_eq "$(echo "$out" | grep -c 'imex: ')" 1 "one error line"
  expect_eq "$(squeue -h | wc -l)" "$before" "nothing was submitted"
  local help; help=$(as_user sbatch --help; as_user salloc --help; as_user srun --help)
  expect_eq "$(grep -c -- '--imex ' <<<"$help")" 3 "--imex listed in sbatch, salloc and srun --help"
}

test_srun_imex_inside_salloc() {
  local out rc ch
  out=$(as_user salloc -N2 --imex srun -N2 --ntasks-per-node=1 "$REPORT" 2>&1); rc=$?
  expect_eq "$rc" 0 "salloc --imex + srun exit code ($out)"
  expect_eq "$(grep -c "^NODE=" <<<"$out")" 2 "two reports"
  ch=$(grep -o 'CH=[0-9]*' <<<"$out" | sort -u)
  expect_eq "$(wc -l <<<"$ch")" 1 "same channel on both nodes"
  expect_contains "$out" "STAT=[character special file:$CHANNEL_MAJOR:${ch#CH=}:$TEST_USER:600 ]" "channel device in salloc"
  # srun --imex in an allocation made without --imex: a clear error, no hang.
  out=$(as_user timeout 60 salloc -N1 srun --imex true 2>&1); rc=$?
  [ $rc -ne 0 ] || fail "srun --imex without an --imex allocation succeeded"
  expect_contains "$out" "allocation was made without --imex" "message says what to do"
  local i; for i in 1 2 3; do wait_node_free "n$i"; expect_idle "$i"; done
}

test_second_imex_job_on_busy_node_is_refused() {
  local a b
  a=$(submit -p shared -w n1 -N1 -n1 --imex "srun true; $STARTED_MARKER; $HOLD_UNTIL_RELEASED; srun true && echo A-OK") || { fail "sbatch A"; return; }
  wait_started "$a" || fail "job A never started its step"
  b=$(submit -p shared -w n1 -N1 -n1 --imex "echo SHOULD-NOT-RUN") || { fail "sbatch B"; return; }
  expect_eq "$(wait_done "$b" 60)" FAILED "job B final state"
  expect_contains "$(cat "$C/out/$b.err" "$C/out/$b.out")" "already serves the IMEX domain of job $a" "job B message"
  expect_eq "$(job_state "$a")" RUNNING "job A still running"
  expect_eq "$(cat "$C/nodes/n1/run-slurm-imex/domain.owner")" "$a" "n1 domain still owned by A"
  expect_eq "$(cat "$C/nodes/n1/etc-imex/nodes_config.cfg")" "$(node_ip 1)" "A's nodes_config intact"
  expect_contains "$(in_node 1 "$C/bin/nvidia-imex-ctl" -c /run/slurm-imex/nvidia-imex.cfg -N -j)" '"status":"UP"' "A's domain still UP"
  # B's epilog left A's domain watcher alone.
  local watcher; watcher=$(cat "$C/nodes/n1/run-slurm-imex/watch.pid" 2>/dev/null)
  expect_eq "${watcher##* }" "$a" "n1's watch.pid names job A"
  kill -0 "${watcher%% *}" 2>/dev/null || fail "A's watcher (pid ${watcher%% *}) is gone after B's epilog"
  release "$a"
  expect_eq "$(wait_done "$a")" COMPLETED "job A final state"
  expect_contains "$(cat "$C/out/$a.out")" "A-OK" "job A's step ran after B was refused"
  case "$(node_state n1)" in drain*|down*) fail "n1 drained";; esac
  wait_node_free n1; expect_idle 1
}
