# shellcheck shell=bash
# The metrics store a site runs (E2E_PHASE=accounting, sourced by run.sh;
# host only: Debian's prometheus, victoria-metrics, openssl and
# python3-bcrypt). The nodes' node_exporters (accounting.sh) scraped by two
# stores at once: Prometheus served over TLS with basic auth by its own
# web config (a CA and a certificate made by openssl, the password's bcrypt
# hash by python3-bcrypt), and VictoriaMetrics, a long-term store with
# Prometheus's query API. `slurm-imex job` gives the same answer from each;
# a wrong password, an untrusted certificate and a store that is down each
# give one line naming the cause.

PROM_TLS_PORT=19091
VM_PORT=18428
PROM_TLS_USER=slurm-imex

# A CA, and a certificate for 127.0.0.1 it signed, in $C/acct/tls; the CA
# also as $C/etc-slurm/prometheus-ca.pem, beside imex.toml.
store_tls_files() {
  local t=$C/acct/tls
  rm -rf "$t"; mkdir -p "$t"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=e2e metrics CA" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
    -keyout "$t/ca.key" -out "$t/ca.pem" 2>"$t/openssl.log" &&
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$t/prom.key" -out "$t/prom.csr" 2>>"$t/openssl.log" &&
  openssl x509 -req -in "$t/prom.csr" -CA "$t/ca.pem" -CAkey "$t/ca.key" -CAcreateserial -days 2 \
    -extfile <(printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n') \
    -out "$t/prom.crt" 2>>"$t/openssl.log" || { echo "    openssl failed ($t/openssl.log)" >&2; return 1; }
  install -m 644 "$t/ca.pem" "$C/etc-slurm/prometheus-ca.pem"
}

# Prometheus over TLS with basic auth (password $1), scraping the nodes.
prometheus_tls_up() {
  local a=$C/acct hash
  # Debian's python3, whose bcrypt is python3-bcrypt (not a python3 earlier in PATH).
  hash=$(/usr/bin/python3 -c 'import bcrypt, sys; print(bcrypt.hashpw(sys.argv[1].encode(), bcrypt.gensalt(rounds=10)).decode())' "$1") ||
    { echo "    no bcrypt hash (python3-bcrypt)" >&2; return 1; }
  cat > "$a/tls/web.yml" <<YML
tls_server_config:
  cert_file: prom.crt
  key_file: prom.key
basic_auth_users:
  $PROM_TLS_USER: '$hash'
YML
  rm -rf "$a/prometheus-tls-data"
  prometheus --config.file="$a/prometheus.yml" --storage.tsdb.path="$a/prometheus-tls-data" \
    --web.config.file="$a/tls/web.yml" --web.listen-address="127.0.0.1:$PROM_TLS_PORT" > "$C/log/prometheus-tls.log" 2>&1 &
  echo $! > "$a/prometheus-tls.pid"
}

# VictoriaMetrics scraping the nodes with the same scrape config (Prometheus's
# evaluation_interval, which it has no use for, ignored); data
# visible a second after it is scraped.
victoria_metrics_up() {
  local a=$C/acct
  rm -rf "$a/victoria-metrics-data"
  victoria-metrics -httpListenAddr="127.0.0.1:$VM_PORT" -storageDataPath="$a/victoria-metrics-data" \
    -promscrape.config="$a/prometheus.yml" -promscrape.config.strictParse=false -search.latencyOffset=1s -search.disableCache \
    > "$C/log/victoria-metrics.log" 2>&1 &
  echo $! > "$a/victoria-metrics.pid"
}

tls_query() { # password query
  curl -sf --max-time 5 --cacert "$C/acct/tls/ca.pem" -u "$PROM_TLS_USER:$1" \
    "https://127.0.0.1:$PROM_TLS_PORT/api/v1/query" --data-urlencode "query=$2"
}
vm_query() { curl -sf --max-time 5 "http://127.0.0.1:$VM_PORT/api/v1/query" --data-urlencode "query=$1"; }
# Both stores hold the job's series from every node.
stores_know_job() { # job password
  local q="count(slurm_imex_job_node_info{jobid=\"$1\"})"
  tls_query "$2" "$q" | grep "\"$E2E_NODES\"\]" >/dev/null && vm_query "$q" | grep "\"$E2E_NODES\"\]" >/dev/null
}

# imex.toml's [job] store keys: the URL, then each further line given.
set_store() { # url [line...]
  local f=$C/etc-slurm/imex.toml
  sed -i -e '/^prometheus_\(ca_file\|user\|password_file\|bearer_token_file\) = /d' \
    -e "s#^prometheus_url = .*#prometheus_url = \"$1\"#" "$f"
  shift
  local line
  for line in "$@"; do sed -i "/^prometheus_url = /a $line" "$f"; done
}

test_a_jobs_health_from_prometheus_over_tls_with_basic_auth_and_from_victoriametrics() {
  local id out vm tls n=$E2E_NODES pw=e2e-prom-pass a=$C/acct
  node_exporters_up
  store_tls_files || { fail "the store's certificate"; return; }
  prometheus_tls_up "$pw" || { fail "Prometheus over TLS"; return; }
  victoria_metrics_up
  install -m 600 /dev/stdin "$C/etc-slurm/prometheus.password" <<<"$pw"
  id=$(submit -N"$n" --imex "srun -N1 -w n1 $C/bin/fake-gpu-job --gpu 0 --util 60 --memory-mib 1024 --seconds 1") ||
    { fail "sbatch"; return; }
  expect_eq "$(wait_done "$id")" COMPLETED "job $id"
  poll_until 60 sacct_has_ended "$id" || fail "sacct never showed job $id ended on all $n nodes"
  poll_until 90 stores_know_job "$id" "$pw" ||
    { fail "the stores never held job $id's series from all $n nodes (log/prometheus-tls.log, log/victoria-metrics.log)"; return; }

  # Prometheus over TLS, its CA in prometheus_ca_file, basic auth: as root.
  set_store "https://127.0.0.1:$PROM_TLS_PORT" "prometheus_ca_file = \"$C/etc-slurm/prometheus-ca.pem\"" \
    "prometheus_user = \"$PROM_TLS_USER\"" "prometheus_password_file = \"$C/etc-slurm/prometheus.password\""
  tls=$("$C/bin/slurm-imex" job "$id" 2>&1)
  expect_contains "$tls" "job $id  user $TEST_USER  COMPLETED  nodes n[1-$n]  source: Prometheus" "root reads Prometheus over TLS: $tls"
  expect_contains "$(awk '$1 == "n1" && $2 == "0" { print "procs=" $6 " util=" $7 }' <<<"$tls")" "procs=1 util=60" "n1 gpu0's use over TLS"
  # The job's owner cannot read the root-only password: one line says so.
  out=$(as_user "$C/bin/slurm-imex" job "$id" 2>&1)
  expect_contains "$out" "prometheus_password_file = \"$C/etc-slurm/prometheus.password\" cannot be read by this user" "the owner, without the secret: $out"

  # VictoriaMetrics as the query backend: the same answer.
  set_store "http://127.0.0.1:$VM_PORT"
  vm=$("$C/bin/slurm-imex" job "$id" 2>&1)
  expect_eq "$vm" "$tls" "the same answer from VictoriaMetrics as from Prometheus"
  [ "$vm" = "$tls" ] || diff <(echo "$tls") <(echo "$vm") | sed 's/^/      /'
  out=$(as_user "$C/bin/slurm-imex" job "$id" 2>&1)
  expect_eq "$out" "$tls" "the owner reads VictoriaMetrics (no secret needed)"
  echo "    figure: slurm-imex job $id, the same from Prometheus over TLS and from VictoriaMetrics:"; sed 's/^/      /' <<<"$vm"

  # The three failures, one line each.
  expect_store_failure "$id" "wrong password" "401 Unauthorized: check [job] prometheus_user (\"$PROM_TLS_USER\") and the password in prometheus_password_file $C/etc-slurm/wrong.password" \
    "https://127.0.0.1:$PROM_TLS_PORT" "prometheus_ca_file = \"$C/etc-slurm/prometheus-ca.pem\"" \
    "prometheus_user = \"$PROM_TLS_USER\"" "prometheus_password_file = \"$C/etc-slurm/wrong.password\""
  expect_store_failure "$id" "untrusted certificate" "certificate not trusted (unknown issuer): set [job] prometheus_ca_file to the CA that signed it" \
    "https://127.0.0.1:$PROM_TLS_PORT" "prometheus_user = \"$PROM_TLS_USER\"" "prometheus_password_file = \"$C/etc-slurm/prometheus.password\""
  kill "$(cat "$a/prometheus-tls.pid")"; poll_until 10 not tls_query "$pw" up >/dev/null
  expect_store_failure "$id" "store down" "connection refused: is it running, and listening on that port?" \
    "https://127.0.0.1:$PROM_TLS_PORT" "prometheus_ca_file = \"$C/etc-slurm/prometheus-ca.pem\"" \
    "prometheus_user = \"$PROM_TLS_USER\"" "prometheus_password_file = \"$C/etc-slurm/prometheus.password\""
  set_store ""
}

# `slurm-imex job JOB` against the store set_store "$@" describes: the job
# as accounting knows it on stdout, exit 4, and on stderr one line,
# "slurm-imex: note: Prometheus at URL: <cause>".
expect_store_failure() { # job what cause url [line...]
  local id=$1 what=$2 cause=$3 rc out
  shift 3
  install -m 600 /dev/stdin "$C/etc-slurm/wrong.password" <<<"not-the-password"
  set_store "$@"
  out=$("$C/bin/slurm-imex" job "$id" 2>&1 >/dev/null); rc=$?
  expect_eq "$rc" 4 "$what: exit 4"
  expect_eq "$(wc -l <<<"$out")" 1 "$what: one line on stderr"
  expect_eq "$out" "slurm-imex: note: Prometheus at $1: $cause" "$what"
  echo "    figure: $what: $out"
}

metrics_stores_down() {
  local f
  for f in "$C/acct/prometheus-tls.pid" "$C/acct/victoria-metrics.pid"; do
    [ -f "$f" ] || continue
    kill "$(cat "$f")" 2>/dev/null
    poll_until 20 not kill -0 "$(cat "$f")" 2>/dev/null
    rm -f "$f"
  done
  rm -f "$C/etc-slurm/prometheus.password" "$C/etc-slurm/wrong.password" "$C/etc-slurm/prometheus-ca.pem"
  return 0
}
