#!/bin/bash
# The controller-host store pass at scale: one `slurm-imex job --store` over
# JOBS ended jobs waiting for their summary (default 10,000), one in BIG_EVERY
# (default 100) a 1,000-node job, the others 4-node jobs, every node with 4
# GPUs. It must store them all within the timer's 5-minute period.
#   sacct     a stand-in printing the listing (`sacct -X -P` lines);
#   sacctmgr  jobview/testdata/sacctmgr, the stand-in the unit tests use
#             (answers as Slurm's, on its command line or on stdin), costing
#             START_S per process (a SlurmDBD connection) and COMMAND_S per
#             modify (a commit);
#   Prometheus a stand-in on 127.0.0.1 answering /api/v1/query with each
#             node's per-job series (28 a node: node info, start, end,
#             epilog, and 6 for each GPU).
# Prints wall time, peak RSS, sacctmgr processes and jobs stored.
# Usage: benches/store-bench.sh   (JOBS=, BIG_EVERY=, START_S=, COMMAND_S=,
# BIN= a directory holding slurm-imex, default target/release; PROFILE= a
# command to run it under, e.g. "perf record -g -o /tmp/perf.data"). Root (the
# pass refuses otherwise); python3 and GNU time (/usr/bin/time).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
BIN=${BIN:-$REPO/target/release}
JOBS=${JOBS:-10000}
BIG_EVERY=${BIG_EVERY:-100}
START_S=${START_S:-0.02}
COMMAND_S=${COMMAND_S:-0.002}
[ -x "$BIN/slurm-imex" ] || { echo "$BIN/slurm-imex missing: cargo build --release -p slurm-imex-cli" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "store-bench: run as root (job --store refuses otherwise)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "store-bench: needs python3" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "store-bench: needs GNU time (apt install time)" >&2; exit 1; }
D=$(mktemp -d /tmp/store-bench.XXXXXX)
chmod 755 "$D"
PROM_PID=
cleanup() {
  if [ -n "$PROM_PID" ]; then kill "$PROM_PID" 2>/dev/null || true; fi
  rm -rf "$D"
}
trap cleanup EXIT
mkdir -m 755 "$D/bin"
now=$(date +%s)

# The listing: every job ended an hour ago, none with an AdminComment.
awk -v n="$JOBS" -v big="$BIG_EVERY" -v now="$now" 'BEGIN {
  for (i = 1; i <= n; i++) {
    nodes = (i % big == 0) ? "gb[0001-1000]" : "gb[0001-0004]"
    printf "%d|user%d|%d|COMPLETED|%d|%d|%s|\n", 100000 + i, i % 97, 1000 + i % 97, now - 7200, now - 3600, nodes
  }
}' >"$D/sacct.out"
printf '#!/bin/sh\nexec cat %s/sacct.out\n' "$D" >"$D/bin/sacct"
printf '#!/bin/sh\nexit 1\n' >"$D/bin/scontrol"
cp "$REPO/jobview/testdata/sacctmgr" "$D/bin/sacctmgr"
chmod 755 "$D/bin/sacct" "$D/bin/sacctmgr" "$D/bin/scontrol"

cat >"$D/prometheus.py" <<'PY'
import http.server, json, re, sys, urllib.parse
BIG = int(sys.argv[2])
def series(job, name):
    """The job's series of the metric `name` (every metric when None), as
    Prometheus selects on __name__."""
    nodes = 1000 if (job - 100000) % BIG == 0 else 4
    out = []
    for n in range(1, nodes + 1):
        node = {"jobid": str(job), "node": "gb%04d" % n}
        def s(metric, v, **extra):
            if name is None or metric == name:
                out.append({"metric": dict(node, __name__=metric, **extra), "value": [0, v]})
        s("slurm_imex_job_node_info", "1", user="alice", imex="true", domain="", channel="",
          prolog="pass", epilog="pass", blame="none", cause="", imex_events="")
        s("slurm_imex_job_node_start_timestamp_seconds", "1790000000")
        s("slurm_imex_job_node_end_timestamp_seconds", "1790003600")
        s("slurm_imex_job_epilog_duration_seconds", "0.120")
        for g in range(4):
            gpu = dict(gpu=str(g), serial="16509240%05d%d" % (n, g))
            s("slurm_imex_job_gpu_info", "1", name="NVIDIA GB200", verdict="pass", **gpu)
            for family, v in (("energy_joules", "2500000.000"), ("utilization_percent", "87.50"),
                            ("memory_utilization_percent", "41.00"), ("peak_memory_bytes", "150000000000"),
                            ("busy_seconds", "3300.000")):
                s("slurm_imex_job_gpu_" + family, v, **gpu)
    return out
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        self.answer(urllib.parse.urlparse(self.path).query)
    def do_POST(self):  # slurm-imex POSTs its queries as a form
        self.answer(self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode())
    def answer(self, form):
        q = urllib.parse.parse_qs(form).get("query", [""])[0]
        m = re.search(r'jobid=~"([0-9|]+)"', q)
        name = re.search(r'__name__="([a-z_]+)"', q)
        result = [x for j in (m.group(1).split("|") if m else [])
                  for x in series(int(j), name.group(1) if name else None)]
        body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(srv.server_address[1]))
srv.serve_forever()
PY
python3 "$D/prometheus.py" "$D/port" "$BIG_EVERY" &
PROM_PID=$!
for _ in $(seq 100); do [ -s "$D/port" ] && break; sleep 0.1; done
[ -s "$D/port" ] || { echo "store-bench: the Prometheus stand-in did not start" >&2; exit 1; }

cat >"$D/imex.toml" <<TOML
[slurm]
scontrol = "$D/bin/scontrol"

[job]
prometheus_url = "http://127.0.0.1:$(cat "$D/port")"
query_timeout = "60s"
TOML
chmod 644 "$D/imex.toml"

echo "store-bench: $JOBS ended jobs (1 in $BIG_EVERY on 1,000 nodes, the rest on 4), sacctmgr ${START_S}s a process + ${COMMAND_S}s a command"
rc=0
read -ra profile <<<"${PROFILE:-}" # a profiler's command line, e.g. perf record -g
STANDIN_START_S=$START_S STANDIN_COMMAND_S=$COMMAND_S /usr/bin/time -v -o "$D/time" \
  "${profile[@]}" "$BIN/slurm-imex" --config "$D/imex.toml" job --store >"$D/out" 2>"$D/err" || rc=$?
wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$D/time")
rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2 / 1024}' "$D/time")
cpu=$(awk -F': ' '/User time|System time/ {t += $2} END {printf "%.1f", t}' "$D/time")
prom_cpu=$(ps -o times= -p "$PROM_PID" | tr -d ' ')
procs=0 stored=0
if [ -f "$D/bin/calls" ]; then procs=$(wc -l <"$D/bin/calls"); fi
if [ -f "$D/bin/stored" ]; then stored=$(wc -l <"$D/bin/stored"); fi
echo "exit status $rc: $(tail -n 1 "$D/out")"
if [ -s "$D/err" ]; then sed -n 1,5p "$D/err"; fi
echo "wall $wall, peak RSS $rss MiB, $procs sacctmgr processes, $stored of $JOBS stored"
echo "CPU: the pass and its sacctmgr stand-ins ${cpu}s, the Prometheus stand-in ${prom_cpu}s"
[ "$stored" = "$JOBS" ] || { echo "store-bench: not every job was stored" >&2; exit 1; }
