# shellcheck shell=bash
# The upgrade phase (E2E_PHASE=upgrade, Slurm 24.11 from the rootfs's
# packages): the cluster starts on the previous release's package
# (tests/e2e/previous-release.sh), an --imex job keeps running, and the
# current package ($E2E_UPGRADE_TO) is installed with apt over it.

# Job ids each node's database holds (the CLI of whatever is installed).
db_jobs() { cli "$1" history --json --limit 1000000 2>/dev/null | grep -o '"job_id": *[0-9]*' | grep -o '[0-9]*$' | sort -n | tr '\n' ' '; }

test_upgrade_with_a_running_imex_job() {
  [ -f "${E2E_UPGRADE_TO:-}" ] || { fail "E2E_UPGRADE_TO names no package"; return; }
  local old new id before i pid1 ch out
  old=$(dpkg-query -W -f='${Version}' slurm-imex); new=$(dpkg-deb -f "$E2E_UPGRADE_TO" Version)
  echo "    from $old to $new"
  # Rows in every node's database before, and an admin's edit of the conffile.
  id=$(submit -N3 "srun -N3 true") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "a GPU job on the old release"
  for i in 1 2 3; do wait_node_free "n$i"; done
  before=$(for i in 1 2 3; do echo "n$i: $(db_jobs "$i")"; done)
  echo "# edited by the admin before the upgrade" >> /etc/slurm/imex.toml
  # The job that keeps running through the upgrade.
  id=$(submit -N2 --imex "srun -N2 --ntasks-per-node=1 $REPORT
$STARTED_MARKER
$HOLD_UNTIL_RELEASED
srun -N2 --ntasks-per-node=1 $REPORT") || { fail "sbatch --imex failed"; return; }
  wait_started "$id" || { fail "job $id never started"; return; }
  ch=$(channel_for "$id")
  pid1=$(cat "$C/nodes/n1/run-slurm-imex/nvidia-imex.pid" 2>/dev/null)
  # (in a network namespace of its own: apt's dpkg triggers apply sysctl.d,
  # and the reserved ports are a per-namespace key of this machine)
  out=$(unshare --net -- env DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o Dpkg::Options::=--force-confold "$E2E_UPGRADE_TO" 2>&1) ||
    { fail "apt-get install of $E2E_UPGRADE_TO: $(tail -3 <<<"$out")"; release "$id"; return; }
  expect_eq "$(dpkg-query -W -f='${Version}' slurm-imex)" "$new" "installed version after the upgrade"
  expect_contains "$(cat /etc/slurm/imex.toml)" "# edited by the admin" "the edited conffile is kept"
  # The running job is untouched: its daemon (same process), domain and channel.
  expect_eq "$(cat "$C/nodes/n1/run-slurm-imex/nvidia-imex.pid" 2>/dev/null)" "$pid1" "n1 daemon pid file"
  # The pid file holds "pid start-time".
  [ -n "$pid1" ] && ! kill -0 "${pid1%% *}" 2>/dev/null && fail "n1's daemon (pid ${pid1%% *}) died in the upgrade"
  expect_contains "$(in_node 1 "$C/bin/nvidia-imex-ctl" -c /run/slurm-imex/nvidia-imex.cfg -N -j)" '"status":"UP"' "the domain is still UP"
  release "$id"
  expect_eq "$(wait_done "$id")" COMPLETED "job $id, prolog on the old release, epilog on the new"
  out=$(grep '^NODE=' "$C/out/$id.out")
  expect_eq "$(grep -c "CH=$ch NV=$ch .*LS=\[channel$ch \]" <<<"$out")" 4 "both steps, before and after the upgrade, see only channel$ch"
  for i in 1 2; do wait_node_free "n$i"; expect_idle "$i"; done
  # No row lost: every job each database held is still there, plus the new one.
  for i in 1 2 3; do
    local was now j; was=$(sed -n "s/^n$i: //p" <<<"$before"); now=$(db_jobs "$i")
    for j in $was; do [[ " $now " == *" $j "* ]] || fail "n$i lost job $j in the upgrade"; done
  done
  [[ " $(db_jobs 1) " == *" $id "* ]] || fail "n1's new epilog did not record job $id"
  # The next --imex job, wholly on the new release.
  id=$(submit -N3 --imex "srun -N3 --ntasks-per-node=1 $REPORT") || { fail "sbatch failed"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "the next --imex job"
  expect_eq "$(grep -c "CH=$(channel_for "$id") " "$C/out/$id.out")" 3 "its channel on every node"
  for i in 1 2 3; do wait_node_free "n$i"; expect_idle "$i"; done
}
