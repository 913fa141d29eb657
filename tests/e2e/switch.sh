# shellcheck shell=bash
# Beside Slurm's switch/nvidia_imex (phase switch, Slurm 24.05+): Slurm hands
# out the channel and slurm-imex gives it to the job's user; jobs without
# --imex keep Slurm's channel; channels = "plugin" replaces Slurm's tmpfs
# in the task, never stacks on it.

# Slurm's switch/nvidia_imex is on and [imex] channels = "auto": Slurm
# hands out the channel; our plugin gives it to the job's user.
test_switch_imex_job_gets_slurms_channel_for_its_user() {
  local id
  id=$(submit -N3 --imex "$REPORT
srun -N3 --ntasks-per-node=1 $REPORT
srun -N3 --ntasks-per-node=1 $REPORT
$STARTED_MARKER
$HOLD_UNTIL_RELEASED") || { fail "sbatch failed"; return; }
  wait_started "$id" || fail "job $id never started its step"
  local i; for i in 1 2 3; do
    expect_contains "$(in_node "$i" "$C/bin/nvidia-imex-ctl" -c /run/slurm-imex/nvidia-imex.cfg -N -j)" '"status":"UP"' "n$i domain UP beside the switch plugin"
  done
  release "$id"
  expect_eq "$(wait_done "$id")" COMPLETED "job $id final state"
  local out steps ch
  out=$(cat "$C/out/$id.out" "$C/out/$id.err")
  steps=$(grep '^NODE=' <<<"$out" | grep -v 'STEP=batch')
  expect_eq "$(grep -c . <<<"$steps")" 6 "two srun steps on three nodes: $out"
  ch=$(grep -o ' CH=[^ ]*' <<<"$steps" | sort -u)
  expect_eq "$(grep -c . <<<"$ch")" 1 "one channel number on every node and in every step: $ch"
  ch=${ch# CH=}
  [ "$ch" != none ] || { fail "srun steps got no channel: $out"; return; }
  expect_eq "$(grep -c "CH=$ch NV=$ch LS=\[channel$ch \] STAT=\[character special file:$CHANNEL_MAJOR:$ch:$TEST_USER:600 \] TMPFS=1" <<<"$steps")" 6 \
    "each srun task sees only Slurm's channel$ch, owned by the user, 0600, under one tmpfs: $steps"
  # The channel is the one Slurm allocated, handed over in "slurm" mode (slurmstepd's log).
  for i in 1 2 3; do
    expect_contains "$(cat "$C/log/slurmd-n$i.log")" "job $id task uses IMEX channel $ch on n$i (channels = \"slurm\")" "n$i: channel from switch/nvidia_imex"
  done
  # The batch step: Slurm < 25.11 gives it no channel; where it does, the same one.
  local batch; batch=$(grep 'STEP=batch' <<<"$out")
  expect_contains "$batch" "TMPFS=" "batch step reported"
  case "$batch" in
    *"CH=none"*) expect_contains "$batch" "LS=[] STAT=[] TMPFS=" "batch step without a Slurm channel sees none";;
    *) expect_contains "$batch" "CH=$ch NV=$ch LS=[channel$ch ]" "batch step's channel equals the srun steps'";;
  esac
  expect_not_contains "$batch" "TMPFS=2" "batch step: at most one tmpfs"
  for i in 1 2 3; do wait_node_free "n$i"; expect_idle "$i"; done
}

test_switch_job_without_imex_keeps_slurms_channel() {
  local id out
  id=$(submit -N3 "srun -N3 --ntasks-per-node=1 $REPORT") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "job $id final state"
  out=$(grep '^NODE=' "$C/out/$id.out")
  expect_eq "$(grep -c . <<<"$out")" 3 "one report per node"
  expect_eq "$(grep -cE "CH=none NV=none LS=\[channel[0-9]+ \] STAT=\[character special file:$CHANNEL_MAJOR:[0-9]+:root:666 \] TMPFS=1" <<<"$out")" 3 \
    "exactly the channel Slurm made (root, 0666), not hidden, one tmpfs: $out"
}

# channels = "plugin" forced while the switch plugin runs: ours replaces
# Slurm's tmpfs in the task, never stacks on it.
test_plugin_mode_beside_switch_keeps_one_tmpfs() {
  sed -i 's/^channels = .*/channels = "plugin"/' "$C/etc-slurm/imex.toml"
  local id out ch
  id=$(submit -N2 --imex "srun -N2 --ntasks-per-node=1 $REPORT") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "job $id final state"
  ch=$(channel_for "$id")
  out=$(grep '^NODE=' "$C/out/$id.out")
  expect_eq "$(grep -c "CH=$ch NV=$ch LS=\[channel$ch \] STAT=\[character special file:$CHANNEL_MAJOR:$ch:$TEST_USER:600 \] TMPFS=1" <<<"$out")" 2 \
    "our channel$ch alone, under one tmpfs: $out"
  id=$(submit -N2 "srun -N2 --ntasks-per-node=1 $REPORT") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "job $id final state"
  out=$(grep '^NODE=' "$C/out/$id.out")
  expect_eq "$(grep -c 'CH=none NV=none LS=\[\] STAT=\[\] TMPFS=1' <<<"$out")" 2 "other jobs: Slurm's channel hidden by one tmpfs: $out"
  local i; for i in 1 2; do wait_node_free "n$i"; expect_idle "$i"; done
}
