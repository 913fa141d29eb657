# shellcheck shell=bash
# One job's health across its nodes from a login node (E2E_PHASE=accounting,
# sourced by run.sh; host only: Debian's mariadb-server, slurmdbd,
# prometheus and prometheus-node-exporter). Real components end to end:
# MariaDB behind slurmdbd (PrivateData=jobs) so sacct and AdminComment are
# Slurm's own; each node's node_exporter serving its textfile directory in
# the node's network namespace; a Prometheus server scraping them every
# second; `slurm-imex job` as the job's user, as another user and as root;
# `slurm-imex job --store` storing the summary; then the nodes' databases
# deleted and Prometheus stopped, and the job still shown from the store.

ACCT_DB_PORT=13306
PROM_PORT=19090
NODE_EXPORTER_NODE_PORT=9100

# Started by cluster_up (inside the phase's cgroup) before slurmctld.
accounting_up() {
  local a=$C/acct c
  for c in mariadb-install-db mariadbd mariadb slurmdbd sacctmgr curl prometheus prometheus-node-exporter; do
    command -v "$c" >/dev/null || { echo "accounting_up: $c is not installed (scripts/install-deps.sh test installs it)" >&2; return 1; }
  done
  mkdir -p "$a"
  id "$SECOND_USER" >/dev/null 2>&1 || useradd -m -s /bin/bash "$SECOND_USER"
  rm -rf "$a/mysql"
  mariadb-install-db --no-defaults --user=root --datadir="$a/mysql" --auth-root-authentication-method=normal \
    > "$C/log/mariadb-install.log" 2>&1 || { echo "accounting_up: mariadb-install-db failed (log/mariadb-install.log)" >&2; return 1; }
  mariadbd --no-defaults --user=root --datadir="$a/mysql" --socket="$a/mysqld.sock" --pid-file="$a/mysqld.pid" \
    --bind-address=127.0.0.1 --port=$ACCT_DB_PORT --skip-log-bin > "$C/log/mariadb.log" 2>&1 &
  poll_until 60 mariadb --no-defaults --socket="$a/mysqld.sock" -e 'SELECT 1' >/dev/null 2>&1 ||
    { echo "accounting_up: MariaDB did not start (log/mariadb.log)" >&2; return 1; }
  mariadb --no-defaults --socket="$a/mysqld.sock" -e "
    CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'e2e-pass';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" || return 1
  install -m 600 /dev/stdin "$C/etc-slurm/slurmdbd.conf" <<CONF
AuthType=auth/munge
DbdAddr=127.0.0.1
DbdHost=localhost
SlurmUser=root
PidFile=$C/run/slurmdbd.pid
LogFile=$C/log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$ACCT_DB_PORT
StorageUser=slurm
StoragePass=e2e-pass
StorageLoc=slurm_acct_db
PrivateData=jobs
CONF
  slurmdbd || { echo "accounting_up: slurmdbd did not start" >&2; return 1; }
  poll_until 60 sacctmgr -n list cluster >/dev/null 2>&1 || { echo "accounting_up: slurmdbd does not answer (log/slurmdbd.log)" >&2; return 1; }
  sacctmgr -i add cluster imextest >/dev/null || return 1
  sacctmgr -i add account e2e >/dev/null || return 1
  sacctmgr -i add user root,"$TEST_USER","$SECOND_USER" account=e2e >/dev/null || return 1
}

# Each node's node_exporter (its textfile directory, in its network
# namespace; once a phase), and $C/acct/prometheus.yml, the scrape config
# that reads them every second.
node_exporters_up() {
  local i targets="" a=$C/acct
  for i in $(seq 1 "$E2E_NODES"); do
    targets+="${targets:+, }'$(node_ip "$i"):$NODE_EXPORTER_NODE_PORT'"
    [ -f "$a/node-exporter-n$i.pid" ] && kill -0 "$(cat "$a/node-exporter-n$i.pid")" 2>/dev/null && continue
    nsenter --net="/run/netns/imex-n$i" prometheus-node-exporter \
      --web.listen-address="$(node_ip "$i"):$NODE_EXPORTER_NODE_PORT" --collector.disable-defaults --collector.textfile \
      --collector.textfile.directory="$C/nodes/n$i/hw/textfile" > "$C/log/node-exporter-n$i.log" 2>&1 &
    echo $! > "$a/node-exporter-n$i.pid"
  done
  cat > "$a/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: node
    scrape_interval: 1s
    static_configs:
      - targets: [$targets]
YML
}

# The node_exporters and the Prometheus server that scrapes them.
prometheus_up() {
  local a=$C/acct
  node_exporters_up
  rm -rf "$a/prometheus-data"
  prometheus --config.file="$a/prometheus.yml" --storage.tsdb.path="$a/prometheus-data" \
    --web.listen-address="127.0.0.1:$PROM_PORT" > "$C/log/prometheus.log" 2>&1 &
  echo $! > "$a/prometheus.pid"
  poll_until 60 prometheus_has_targets_up || { echo "    Prometheus never scraped the $E2E_NODES nodes (log/prometheus.log)" >&2; return 1; }
}

prometheus_query() { curl -sf --max-time 5 "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1"; }
prometheus_has_targets_up() { prometheus_query 'sum(up)' | grep "\"$E2E_NODES\"\]" >/dev/null; }

test_a_jobs_health_across_its_nodes_for_its_owner_and_root_after_the_nodes_forget_it() {
  id "$SECOND_USER" >/dev/null 2>&1 || useradd -m -s /bin/bash "$SECOND_USER"
  prometheus_up || { fail "Prometheus"; return; }
  sed -i -e "s#^prometheus_url = .*#prometheus_url = \"http://127.0.0.1:$PROM_PORT\"#" -e 's#^store_wait = .*#store_wait = "1m"#' "$C/etc-slurm/imex.toml"
  grep -q "^prometheus_url = \"http://127.0.0.1:$PROM_PORT\"" "$C/etc-slurm/imex.toml" || { fail "imex.toml [job] prometheus_url not set"; return; }
  local id out json n=$E2E_NODES
  # Every node (4), one IMEX domain; gpu0 of n1 busy at 70 %, every other
  # GPU held but idle; an application XID on n2 while it runs.
  id=$(submit -N"$n" --imex "srun -N1 -w n1 $C/bin/fake-gpu-job --gpu 0 --util 70 --memory-mib 2048 --seconds 1; $STARTED_MARKER; $HOLD_UNTIL_RELEASED") ||
    { fail "sbatch"; return; }
  wait_started "$id" || { fail "job $id never started"; return; }
  kmsg_append 2 "NVRM: Xid (PCI:0000:1b:00): 13, pid=4242, name=python3, Graphics SM Warp Exception"
  release "$id"
  expect_eq "$(wait_done "$id")" COMPLETED "job $id"
  for i in $(seq 1 "$n"); do wait_node_free "n$i"; done
  # A healthy job's domain is never called interrupted, whatever the skew
  # between its epilogs (each stops its node's daemon).
  for i in $(seq 1 "$n"); do
    expect_not_contains "$(cli "$i" show "$id")" "imex event" "n$i records no IMEX event for a healthy job"
  done
  # (SlurmDBD 22.05 may get a short job's end before its start: the record
  # shows one node and UID 0 until the start arrives)
  poll_until 60 sacct_has_ended "$id" || fail "sacct never showed job $id ended on all $n nodes"
  poll_until 30 prometheus_knows_job "$id" || { fail "Prometheus never scraped job $id's series from all $n nodes"; return; }
  local prom=$C/nodes/n1/hw/textfile/slurm_imex_jobs.prom
  echo "    figure: per-job series on n1: $(grep -vc '^#' "$prom") for its $(grep -c '^slurm_imex_job_node_info' "$prom") jobs of the last [metrics] job_series_for"

  # The job's owner, from the host (a login node): Prometheus, every node.
  out=$(as_user "$C/bin/slurm-imex" job "$id" 2>&1)
  expect_contains "$out" "job $id  user $TEST_USER  COMPLETED  nodes n[1-$n]  source: Prometheus" "owner sees the job from Prometheus: $out"
  expect_contains "$out" "IMEX domain job  channel " "the job's IMEX domain and channel"
  expect_contains "$out" "ready in " "the domain's readiness time"
  expect_contains "$(grep -E '^n1 +PASS +PASS +none' <<<"$out")" "n1" "n1's prolog and epilog verdicts and blame"
  expect_contains "$(grep -E '^n2 +PASS +(PASS|WARN) +none' <<<"$out")" "n2" "n2's verdicts"
  expect_eq "$(grep -cE '^n[0-9]+ +PASS +(PASS|WARN) +none' <<<"$out")" "$n" "a row for each of the $n nodes"
  expect_contains "$(awk '$1 == "n1" && $2 == "0" { print "procs=" $6 " util=" $7 " peak=" $9 }' <<<"$out")" "procs=1 util=70 peak=2.0" "n1 gpu0's use"
  expect_eq "$(awk '$1 == "n1" && $2 == "1" { print "procs=" $6 " util=" $7 " throttle=" $14 }' <<<"$out")" "procs=0 util=0 throttle=0.0" "n1 gpu1, held and never used"
  expect_contains "$out" "XIDs your code caused (application errors, restart it): 13 RESTART_APP on n2/gpu1" "the XID, blamed on the code"
  expect_eq "$(awk '$1 == "n2" && $2 == "1" { print $10 }' <<<"$out")" "13(RESTART_APP)x1" "n2 gpu1's XID with its class"
  expect_eq "$(awk '$1 == "n1" && $2 == "PASS" { print $7 }' <<<"$out")" job "n1's IMEX domain"
  expect_contains "$out" "GPUs were never used" "idle GPUs are called out"
  expect_contains "$out" "summary: $n nodes, $((n * E2E_GPUS)) GPUs, mean GPU utilization" "the summary line"
  json=$(as_user "$C/bin/slurm-imex" --json job "$id" 2>/dev/null)
  expect_contains "$json" '"source": "Prometheus"' "--json source"
  expect_contains "$json" '"gpu_util_pct": 70.0' "--json gpu0 utilization"
  # Another user: PrivateData=jobs hides the job, and we refuse anyway.
  out=$(as_second "$C/bin/slurm-imex" job "$id" 2>&1); local rc=$?
  expect_eq "$rc" 2 "another user's job: exit 2"
  expect_contains "$out" "slurm-imex: job $id: not in Slurm's accounting" "another user is told nothing of it: $out"

  # Root on the controller host stores the summary, and asks slurmctld nothing.
  sdiag -r >/dev/null 2>&1
  out=$("$C/bin/slurm-imex" job --store 2>&1)
  expect_contains "$out" "stored job $id: $n nodes, $((n * E2E_GPUS)) GPUs" "job --store: $out"
  echo "    figure: $(grep "stored job $id" <<<"$out")"
  out=$("$C/bin/slurm-imex" job --store 2>&1)
  expect_not_contains "$out" "stored job $id" "stored once"
  local rpcs; rpcs=$(rpc_counts)
  echo "    figure: slurmctld RPCs during two job --store passes: $(rpc_total <<<"$rpcs") ($(tr '\n' ' ' <<<"$rpcs"))"
  expect_eq "$(rpc_total <<<"$rpcs")" 0 "job --store asks slurmctld nothing"
  expect_contains "$(sacct -X -n -P -j "$id" --format=AdminComment)" "slurm-imex:1:" "sacct shows the stored summary"

  # The nodes forget the job and Prometheus goes away: the store remains.
  rm -f "$C"/nodes/n*/var-lib/jobs.db*
  kill "$(cat "$C/acct/prometheus.pid")"; poll_until 10 not prometheus_query 'up' >/dev/null
  sdiag -r >/dev/null 2>&1
  out=$(as_user "$C/bin/slurm-imex" job "$id" 2>&1)
  expect_contains "$out" "source: stored summary (AdminComment)" "owner reads the stored summary: $out"
  echo "    figure: the owner's slurm-imex job $id after the nodes forgot it:"; sed 's/^/      /' <<<"$out"
  expect_contains "$(awk '$1 == "n1" && $2 == "0" { print "procs=" $6 " util=" $7 }' <<<"$out")" "procs=1 util=70" "the same numbers"
  expect_contains "$out" "13 RESTART_APP on n2/gpu1" "the same XID"
  expect_contains "$out" "summary: $n nodes, $((n * E2E_GPUS)) GPUs" "the same summary line"
  out=$("$C/bin/slurm-imex" job "$id" 2>&1)
  expect_contains "$out" "source: stored summary (AdminComment)" "root reads it too"
  rpcs=$(rpc_counts)
  echo "    figure: slurmctld RPCs during slurm-imex job as the user and as root: $(rpc_total <<<"$rpcs")"
  expect_eq "$(rpc_total <<<"$rpcs")" 0 "slurm-imex job asks slurmctld nothing"
}

sacct_has_ended() { sacct -X -n -P -j "$1" --format=State,End,NodeList | grep "^COMPLETED|2.*|n\\[1-$E2E_NODES\\]\$" >/dev/null; }
prometheus_knows_job() { prometheus_query "count(slurm_imex_job_node_info{jobid=\"$1\"})" | grep "\"$E2E_NODES\"\]" >/dev/null; }

accounting_down() {
  local f
  metrics_stores_down
  for f in "$C/acct/prometheus.pid" "$C/run/slurmdbd.pid" "$C/acct/mysqld.pid"; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
  done
  pkill -f "collector.textfile.directory=$C/nodes/" 2>/dev/null
  rm -f "$C"/acct/node-exporter-n*.pid
  for f in "$C/acct/prometheus.pid" "$C/run/slurmdbd.pid" "$C/acct/mysqld.pid"; do
    [ -f "$f" ] && poll_until 20 not kill -0 "$(cat "$f")" 2>/dev/null
    rm -f "$f"
  done
  return 0
}
