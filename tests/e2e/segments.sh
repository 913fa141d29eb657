# shellcheck shell=bash
# Slurm 25.11+: switch/nvidia_imex gives each segment of a job its own
# channel (`--network=unique-channel-per-segment` with topology/block), and
# slurmstepd mounts, on each node, the channel whose node list holds it
# (src/plugins/switch/nvidia_imex). Phase `segments`: two blocks of two
# nodes (b1 = n[1-2], b2 = n[3-4]), the switch on, `--segment=2`, so each
# block is one segment. With [imex] channels = "slurm" (or "auto" beside the
# switch) slurm-imex hands each node's segment channel to the job's user and
# names it in the task's variables; the IMEX domain is the rack.

# One 4-node --imex job over both blocks, one segment each: every task (the
# batch step's too: Slurm 25.11 gives it the channel) sees exactly its own
# node's segment channel, the user's, 0600, under one tmpfs, with
# SLURM_IMEX_CHANNEL and NVIDIA_IMEX_CHANNELS naming it; the two segments'
# channels differ; each node's domain is its rack.
expect_a_channel_per_segment() { # label
  local label=$1 id out i line ch1 ch3
  id=$(submit -N4 --segment=2 --network=unique-channel-per-segment --imex "$REPORT
srun -N4 --ntasks-per-node=1 $REPORT
srun -N4 --ntasks-per-node=1 $REPORT") || { fail "$label: sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "$label: job $id final state"
  out=$(cat "$C/out/$id.out" "$C/out/$id.err")
  expect_eq "$(grep -c '^NODE=' <<<"$out")" 9 "$label: the batch step and two srun steps on four nodes: $out"
  ch1=$(grep '^NODE=n1 ' <<<"$out" | grep -v STEP=batch | sed -n 1p | sed -n 's/.* CH=\([^ ]*\) .*/\1/p')
  ch3=$(grep '^NODE=n3 ' <<<"$out" | sed -n 1p | sed -n 's/.* CH=\([^ ]*\) .*/\1/p')
  case "$ch1$ch3" in *none*|"") fail "$label: a segment got no channel: $out"; return;; esac
  [ "$ch1" != "$ch3" ] || fail "$label: both segments got channel $ch1"
  for i in 1 2 3 4; do
    local ch=$ch1 block=b1 nodes='n[1-2]'
    [ "$i" -gt 2 ] && { ch=$ch3; block=b2; nodes='n[3-4]'; }
    while read -r line; do
      expect_contains "$line" "CH=$ch NV=$ch LS=[channel$ch ] STAT=[character special file:$CHANNEL_MAJOR:$ch:$TEST_USER:600 ] TMPFS=1" \
        "$label: n$i sees only its segment's channel $ch, the user's"
      expect_contains "$line" "DOM=$block DOMN=$nodes" "$label: n$i's domain is its rack"
    done < <(grep "^NODE=n$i " <<<"$out")
    expect_contains "$(cat "$C/log/slurmd-n$i.log")" "job $id task uses IMEX channel $ch on n$i (channels = \"slurm\")" \
      "$label: n$i hands Slurm's segment channel over"
  done
  expect_nodes_up_and_idle_in "$(cat "$C/etc-slurm/imex.toml" | sed -n 's/^domain = "\(.*\)"/\1/p')"
}

# After a job: nodes up; per-job domains torn down, rack daemons kept.
expect_nodes_up_and_idle_in() { # job|rack
  if [ "$1" = rack ]; then expect_nodes_up_and_idle_but_rack_daemons; else expect_nodes_up_and_idle; fi
}

test_each_segment_gets_its_own_channel_in_per_job_domains() {
  local mode
  for mode in slurm auto; do
    sed -i "s/^channels = .*/channels = \"$mode\"/" "$C/etc-slurm/imex.toml"
    expect_a_channel_per_segment "per-job domains, channels = $mode"
  done
}

test_each_segment_gets_its_own_channel_in_rack_domains() {
  local mode
  sed -i 's/^domain = .*/domain = "rack"/' "$C/etc-slurm/imex.toml"
  for mode in slurm auto; do
    sed -i "s/^channels = .*/channels = \"$mode\"/" "$C/etc-slurm/imex.toml"
    expect_a_channel_per_segment "rack domains, channels = $mode"
  done
  stop_rack_daemons
}
