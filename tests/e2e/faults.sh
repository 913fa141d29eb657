# shellcheck shell=bash
# Fault figures on the real multi-node Slurm (E2E_PHASE=faults, sourced by
# run.sh): kill -9 of the --imex prolog after each file or state change,
# 64 concurrent prolog+epilog pairs on one node, the job database on a full,
# read-only and corrupt filesystem, and a second user trying to open a
# running job's channel. Each test prints its figure as a "figure:" line.

SECOND_USER=imexother
as_second() { runuser -u "$SECOND_USER" -- env SLURM_CONF="$SLURM_CONF" "$@"; }

# open(2) of each path, one "path errno" line each (OK when it opened).
# A test channel device has no driver behind it, so the job's own user gets
# ENXIO (it passed every permission and visibility check); anyone else must
# get ENOENT or EACCES.
install_open_probe() {
  cat > "$C/bin/try-open" <<'PROBE'
#!/usr/bin/python3
import errno, os, sys
for p in sys.argv[1:]:
    try:
        os.close(os.open(p, os.O_RDWR))
        print(p, "OK")
    except OSError as e:
        print(p, errno.errorcode.get(e.errno, str(e.errno)))
PROBE
  chmod 755 "$C/bin/try-open"
}

in_imex_job_on_n1() { # job nodelist command... : run on n1 with an --imex job's hook environment
  local job=$1 list=$2; shift 2
  in_node 1 env -i SLURM_JOB_ID="$job" SLURMD_NODENAME=n1 SLURM_JOB_NODELIST="$list" SLURM_JOB_USER="$TEST_USER" \
    SPANK_IMEX=1 SLURM_JOB_GPUS=0 SLURM_CONF="$SLURM_CONF" "$@"
}

# Nothing of job $2 is left on node $1: files, records, and no daemon
# process tagged for this node (by environment, whatever its name).
expect_nothing_left() { # node label
  expect_idle "$1"
  local tagged
  tagged=$(grep -l -a "SLURM_IMEX_DAEMON=n$1:" /proc/[0-9]*/environ 2>/dev/null | wc -l)
  expect_eq "$tagged" 0 "$2: no daemon process left on n$1"
}

# kill -9 at every file or state change the prolog makes: strace injects
# SIGKILL at the Nth call of each syscall that changes a file or a process
# (rename*, fsync, unlink*, mkdir, fchmod, flock, kill, clone, write), for
# N = 1, 2, ... until the prolog gets past its last one. After each kill:
# the epilog succeeds, nothing is left, and a real --imex job on the node
# completes.
test_prolog_kill_9_at_every_state_change() {
  local points=0 recovered=0 sc n rc job=700000 out id per=()
  for sc in rename renameat renameat2 fsync unlink unlinkat mkdir fchmod fchmodat flock kill clone clone3 write; do
    for n in $(seq 1 8); do
      job=$((job + 1))
      in_imex_job_on_n1 "$job" n1 strace -o /dev/null -qq \
        -e trace="$sc" -e inject="$sc:signal=KILL:when=$n" "$C/bin/slurm-imex-prolog" >/dev/null 2>&1
      rc=$?
      if [ "$rc" != 137 ]; then
        # The prolog made fewer than $n such calls and finished.
        in_imex_job_on_n1 "$job" n1 "$C/bin/slurm-imex-epilog" >/dev/null 2>&1
        break
      fi
      [ "$n" = 1 ] && per+=("$sc")
      per[${#per[@]}-1]="$sc:$n"
      points=$((points + 1))
      out=$(in_imex_job_on_n1 "$job" n1 "$C/bin/slurm-imex-epilog" 2>&1)
      rc=$?
      [ "$rc" = 0 ] || { fail "epilog after kill at $sc #$n: rc $rc: $out"; continue; }
      local before=$CURRENT_OK
      expect_nothing_left 1 "kill at $sc #$n"
      id=$(submit -N1 -w n1 --imex "srun true") || { fail "sbatch after kill at $sc #$n"; continue; }
      expect_eq "$(wait_done "$id" 60)" COMPLETED "next --imex job after kill at $sc #$n"
      wait_node_free n1
      [ "$CURRENT_OK" = "$before" ] && [ "$CURRENT_OK" = 1 ] && recovered=$((recovered + 1))
    done
  done
  echo "    figure: kill -9 of the --imex prolog at $points distinct points; $recovered/$points recovered (epilog ok, nothing left, next job COMPLETED); points per syscall: ${per[*]}"
  [ "$points" -ge 20 ] || fail "only $points kill points (want >= 20)"
}

# 64 prolog+epilog pairs at once on one node, each pair one GPU job.
test_64_concurrent_prolog_epilog_pairs() {
  local j db=$C/nodes/n1/var-lib/jobs.db
  for j in $(seq 1 64); do
    (
      e="env -i SLURM_CONF=$SLURM_CONF SLURM_JOB_ID=$((61000 + j)) SLURMD_NODENAME=n1 SLURM_JOB_NODELIST=n1 SLURM_JOB_USER=pairs SLURM_JOB_GPUS=$((j % E2E_GPUS))"
      in_node 1 $e "$C/bin/slurm-imex-prolog" > "$C/out/pair-$j.log" 2>&1 || echo "prolog rc $?" >> "$C/out/pair-$j.log"
      in_node 1 $e "$C/bin/slurm-imex-epilog" >> "$C/out/pair-$j.log" 2>&1 || echo "epilog rc $?" >> "$C/out/pair-$j.log"
    ) &
  done
  wait
  local out rows lock_errors failures integrity
  out=$(cli 1 --json history --user pairs --limit 1000)
  rows=$(json_count '"job_id": 610' <<<"$out")
  lock_errors=$(cat "$C"/out/pair-*.log | grep -ci 'locked\|busy')
  failures=$(cat "$C"/out/pair-*.log | grep -c 'rc [0-9]')
  integrity=$(sqlite3 "file:$db?mode=ro" 'PRAGMA integrity_check;' 2>&1)
  echo "    figure: 64 concurrent prolog+epilog pairs: $rows/64 rows, $((64 - rows)) lost, $lock_errors lock errors, $failures failed runs, integrity_check: $integrity"
  expect_eq "$rows" 64 "rows for 64 concurrent pairs"
  expect_eq "$lock_errors" 0 "lock errors"
  expect_eq "$failures" 0 "failed prologs or epilogs"
  expect_eq "$integrity" ok "PRAGMA integrity_check"
}

# One GPU job on n1 with the database in trouble: it must complete, and
# the CLI must name the trouble.
db_fault_job() { # what needle
  local id out
  id=$(submit -N1 -w n1 "srun true") || { fail "sbatch ($1)"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "GPU job with $1"
  wait_node_free n1
  out=$(cli 1 history 2>&1)
  expect_contains "$out" "$2" "CLI with $1"
  echo "    figure: $1: job $id COMPLETED; CLI says: $out"
}

# The job database on a tiny full tmpfs, then read-only, then corrupt: GPU
# jobs still complete, and the CLI says what is wrong.
test_database_full_readonly_corrupt_never_fails_a_job() {
  local dir=$C/nodes/n1/var-lib
  in_node 1 mount -t tmpfs -o size=64k,mode=700 imexdb /var/lib/slurm-imex || { fail "cannot mount the small tmpfs"; return; }
  # Full: a fresh database cannot even be created.
  in_node 1 dd if=/dev/zero of=/var/lib/slurm-imex/filler bs=4k count=64 >/dev/null 2>&1
  db_fault_job "the database filesystem full" "free"
  in_node 1 rm -f /var/lib/slurm-imex/filler
  in_node 1 mount -o remount,ro /var/lib/slurm-imex
  db_fault_job "the database filesystem read-only" "read-only"
  in_node 1 umount /var/lib/slurm-imex
  # Corrupt: garbage where the database was.
  cp "$dir/jobs.db" "$C/out/jobs.db.saved" 2>/dev/null
  head -c 65536 /dev/urandom > "$dir/jobs.db"
  db_fault_job "a corrupt database" "jobs.db"
  case "$(node_state n1)" in drain*|down*) fail "a database fault drained n1: $(node_reason n1)";; esac
  if [ -e "$C/out/jobs.db.saved" ]; then mv "$C/out/jobs.db.saved" "$dir/jobs.db"; else rm -f "$dir/jobs.db"; fi
}

# While user A's --imex job runs, user B tries open(2) on A's channel from
# a job of B's on the same node and from a login shell there; A can.
test_second_user_cannot_open_the_channel() {
  install_open_probe
  id "$SECOND_USER" >/dev/null 2>&1 || useradd -m -s /bin/bash "$SECOND_USER"
  local a b ch dev pid out
  a=$(submit -N1 -w n1 -p shared --imex "srun bash -c 'echo \$\$ > $C/out/task-\$SLURM_JOB_ID.pid; $C/bin/try-open /dev/nvidia-caps-imex-channels/channel\$SLURM_IMEX_CHANNEL > $C/out/own-\$SLURM_JOB_ID.txt; $STARTED_MARKER; $HOLD_UNTIL_RELEASED'") \
    || { fail "sbatch A"; return; }
  wait_started "$a" || { fail "job $a never started"; return; }
  ch=$(channel_for "$a"); dev=/dev/nvidia-caps-imex-channels/channel$ch
  pid=$(cat "$C/out/task-$a.pid")
  expect_contains "$(cat "$C/out/own-$a.txt")" "$dev ENXIO" "A opens its own channel (reaches the device)"
  # B from its own job on the same node: its namespace has no such node, and
  # A's task namespace is closed to it.
  b=$(as_second sbatch --parsable -N1 -w n1 -p shared -o "$C/out/%j.out" \
        --wrap "$C/bin/try-open $dev /proc/$pid/root$dev") || { fail "sbatch B"; release "$a"; return; }
  expect_eq "$(wait_done "$b")" COMPLETED "job B"
  out=$(cat "$C/out/$b.out")
  expect_contains "$out" "$dev ENOENT" "B's job: A's channel is not in B's namespace"
  expect_contains "$out" "/proc/$pid/root$dev EACCES" "B's job: A's namespace via /proc is closed"
  # B from a login shell on the node.
  local login
  login=$(in_node 1 runuser -u "$SECOND_USER" -- "$C/bin/try-open" "$dev" "/proc/$pid/root$dev")
  expect_contains "$login" "$dev ENOENT" "B's login shell: no such device on the node"
  expect_contains "$login" "/proc/$pid/root$dev EACCES" "B's login shell: A's namespace via /proc is closed"
  echo "    figure: user B opening A's channel$ch: from B's job: $(tr '\n' ';' <<<"$out") from a login shell: $(tr '\n' ';' <<<"$login") (A itself: $(cat "$C/out/own-$a.txt"))"
  release "$a"
  expect_eq "$(wait_done "$a")" COMPLETED "job A"
}
