# shellcheck shell=bash
# Partitions that share nodes, steered at submission by the shipped
# job_submit.lua in slurmctld (JobSubmitPlugins=lua): in per-job domains a
# second --imex job on a busy node pends, then runs; a partition with
# OverSubscribe=FORCE (or [imex] shared_nodes = "refuse") refuses it in one
# line; in rack-wide domains two --imex jobs share a node, a channel each.
# Without the script, the prolog's refusal stays the backstop (jobs.sh).

# This Slurm's job_submit/lua plugin, in PluginDir as slurmctld sees it.
slurm_has_job_submit_lua() {
  local dir
  for dir in $(scontrol show config | sed -n 's/^PluginDir *= *//p' | tr ':' ' '); do
    [ -e "$dir/job_submit_lua.so" ] && return 0
  done
  return 1
}

job_submit_is_lua() {
  local config; config=$(scontrol show config)
  grep -q '^JobSubmitPlugins *= *\(job_submit/\)\?lua' <<<"$config"
}
job_submit_is_unset() { ! job_submit_is_lua; }

# The shipped script beside slurm.conf, JobSubmitPlugins=lua and a partition
# that forces sharing; guard_off puts slurm.conf back.
guard_on() {
  cp "$REPO/conf-examples/job_submit.lua" "$C/etc-slurm/job_submit.lua"
  cp -p "$C/etc-slurm/slurm.conf" "$C/out/slurm.conf.before-guard"
  {
    echo "JobSubmitPlugins=lua"
    echo "PartitionName=forced Nodes=n[1-$E2E_NODES] OverSubscribe=FORCE:2 MaxTime=INFINITE State=UP"
  } >> "$C/etc-slurm/slurm.conf"
  scontrol reconfigure || fail "scontrol reconfigure (guard on)"
  poll_until 60 job_submit_is_lua || fail "slurmctld never ran with JobSubmitPlugins=lua"
}
guard_off() {
  cp -p "$C/out/slurm.conf.before-guard" "$C/etc-slurm/slurm.conf"
  rm -f "$C/etc-slurm/job_submit.lua"
  scontrol reconfigure || fail "scontrol reconfigure (guard off)"
  poll_until 60 job_submit_is_unset || fail "slurmctld kept JobSubmitPlugins=lua"
}

# squeue's view of jobs, one timestamped line each, into the test's log.
squeue_states() { # ids...
  local ids; ids=$(IFS=,; echo "$*")
  squeue -h -j "$ids" -o '%i %T %R' 2>/dev/null | sed "s/^/      $(date +%T) /"
}

# Per-job domains, a partition that shares nodes (OverSubscribe=NO under
# cons_tres): the second --imex job on n1 is made whole-node at submission,
# pends while the first runs, then runs; neither fails, nothing drains.
# FORCE and shared_nodes = "refuse" refuse at submission in one line.
test_a_second_imex_job_on_a_shared_node_waits_instead_of_failing() {
  if ! slurm_has_job_submit_lua; then
    fail "this Slurm's build has no job_submit_lua.so (scripts/slurm-prefix.sh builds with Lua)"
    return
  fi
  local out
  out=$("$C/bin/slurm-imex" --config "$C/etc-slurm/imex.toml" doctor --cluster 2>&1)
  expect_contains "$(grep shared-nodes <<<"$out")" "FAIL  shared-nodes    --imex jobs can start on a node another job shares in shared (OverSubscribe=NO)" \
    "doctor --cluster names the partition that shares nodes with nothing steering"
  guard_on
  out=$("$C/bin/slurm-imex" --config "$C/etc-slurm/imex.toml" doctor --cluster 2>&1)
  expect_contains "$(grep shared-nodes <<<"$out")" "PASS  shared-nodes    job_submit.lua makes --imex jobs whole-node in shared (OverSubscribe=NO); refuses them at submission in forced (OverSubscribe=FORCE:2)" \
    "doctor --cluster with the guard wired"
  shared_partition_jobs_wait
  forced_and_refused_at_submission
  guard_off
  expect_nodes_up_and_idle
}

shared_partition_jobs_wait() {
  local a b i
  a=$(submit -p shared -w n1 -N1 -n1 --imex "srun true; $STARTED_MARKER; $HOLD_UNTIL_RELEASED; srun true && echo A-OK") || { fail "sbatch A"; return; }
  wait_started "$a" || fail "job A never started its step"
  b=$(submit -p shared -w n1 -N1 -n1 --imex "srun true && echo B-OK") || { fail "sbatch B"; return; }
  echo "    squeue over time (job A $a, job B $b):"
  for i in 1 2 3 4; do squeue_states "$a" "$b"; sleep 1; done
  expect_eq "$(job_state "$b")" PENDING "job B waits while job A holds n1"
  expect_eq "$(job_field "$b" OverSubscribe)" NO "job B was made whole-node at submission"
  # job_modify: a pending --imex job keeps whole nodes and no FORCE partition.
  local out rc
  out=$(as_user scontrol update JobId="$b" OverSubscribe=YES 2>&1); rc=$?
  echo "$out" | sed 's/^/      | /'
  [ "$rc" != 0 ] || fail "scontrol update OverSubscribe=YES of --imex job B succeeded"
  out=$(scontrol update JobId="$b" Partition=forced 2>&1); rc=$?
  echo "$out" | sed 's/^/      | /'
  [ "$rc" != 0 ] || fail "scontrol update Partition=forced of --imex job B succeeded"
  expect_eq "$(job_field "$b" OverSubscribe) $(job_field "$b" Partition)" "NO shared" "job B after the refused updates"
  release "$a"
  expect_eq "$(wait_done "$a")" COMPLETED "job A final state"
  wait_job "$b" 60 RUNNING COMPLETED >/dev/null
  squeue_states "$a" "$b"
  expect_eq "$(wait_done "$b")" COMPLETED "job B final state, after A"
  squeue_states "$a" "$b"
  expect_contains "$(cat "$C/out/$b.out")" "B-OK" "job B's step ran"
  case "$(node_state n1)" in drain*|down*) fail "n1 drained: $(node_reason n1)";; esac
}

forced_and_refused_at_submission() {
  local out rc id
  out=$(as_user sbatch --parsable -p forced -N1 --imex --wrap true 2>&1); rc=$?
  expect_eq "$rc" 1 "sbatch --imex to a FORCE partition"
  expect_contains "$out" "slurm-imex: --imex needs whole nodes (one IMEX domain per job), and partition forced shares them (OverSubscribe=FORCE): submit to a partition without FORCE" "the one line"
  echo "$out" | sed 's/^/      | /'
  id=$(submit -p forced -N1 "true" 2>&1) || fail "a job without --imex is refused in forced: $id"
  expect_eq "$(wait_done "$id")" COMPLETED "a job without --imex in forced"
  sed -i 's/^shared_nodes = .*/shared_nodes = "refuse"/' "$C/etc-slurm/imex.toml"
  grep -q '^shared_nodes = "refuse"' "$C/etc-slurm/imex.toml" || fail "imex.toml has no shared_nodes key"
  out=$(as_user sbatch --parsable -p shared -N1 --imex --wrap true 2>&1); rc=$?
  expect_eq "$rc" 1 "sbatch --imex without --exclusive, shared_nodes = refuse"
  expect_contains "$out" "slurm-imex: --imex needs whole nodes (one IMEX domain per job): add --exclusive" "the refusal says what to add"
  echo "$out" | sed 's/^/      | /'
  id=$(submit -p shared -N1 --exclusive --imex "srun true" 2>&1) || fail "--exclusive --imex refused: $id"
  expect_eq "$(wait_done "$id")" COMPLETED "--exclusive --imex job with shared_nodes = refuse"
  sed -i 's/^shared_nodes = .*/shared_nodes = "exclusive"/' "$C/etc-slurm/imex.toml"
}

# Rack-wide domains: the script lets two --imex jobs share a node; both run
# at once, each with its own channel.
test_rack_wide_imex_jobs_share_a_node_through_the_guard() {
  if ! slurm_has_job_submit_lua; then
    fail "this Slurm's build has no job_submit_lua.so (scripts/slurm-prefix.sh builds with Lua)"
    return
  fi
  sed -i 's/^domain = .*/domain = "rack"/' "$C/etc-slurm/imex.toml"
  guard_on
  local a b
  a=$(submit -p shared -n1 -w n1 --imex "srun -n1 $REPORT
$STARTED_MARKER
$HOLD_UNTIL_RELEASED") || { fail "sbatch a"; guard_off; return; }
  wait_started "$a" || fail "job $a never started its step"
  b=$(submit -p shared -n1 -w n1 --imex "srun -n1 $REPORT") || { fail "sbatch b"; release "$a"; guard_off; return; }
  expect_eq "$(wait_done "$b")" COMPLETED "job $b ran on n1 beside job $a"
  expect_eq "$(job_state "$a")" RUNNING "job $a still running when $b ended"
  release "$a"
  expect_eq "$(wait_done "$a")" COMPLETED "job $a final state"
  expect_contains "$(cat "$C/out/$a.out")" "LS=[channel$(channel_for "$a") ]" "job $a sees only its channel"
  expect_contains "$(cat "$C/out/$b.out")" "LS=[channel$(channel_for "$b") ]" "job $b sees only its channel"
  guard_off
  sed -i 's/^domain = .*/domain = "job"/' "$C/etc-slurm/imex.toml"
  local id i
  # Back to per-job domains: the next job takes the rack daemons over.
  id=$(submit -N4 --imex "srun -N4 true") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "job $id after switching back to domain = job"
  for i in 1 2 3 4; do wait_node_free "n$i"; expect_idle "$i"; done
}
