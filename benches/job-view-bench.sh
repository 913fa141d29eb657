#!/bin/bash
# `slurm-imex job JOBID` on big jobs: a 1,152-node job (64 NVL72 racks of
# 18) and an 18,432-node job (1,024 racks, 73,728 GPUs), 4 GPUs a node,
# a few nodes that warned or failed, built by the product's own code
# (jobsummary's synth-job example).
#   stored      the summary `job --store` would write (comment::encode,
#               trimmed to 60,000 characters), printed by a stand-in sacct
#               as Slurm's `sacct -X -n -P` prints an AdminComment;
#   Prometheus  the series every node's epilog exports, written into a real
#               local Prometheus's TSDB (promtool tsdb create-blocks-from
#               openmetrics: the same samples a scrape would store, without
#               waiting for 18,432 scrapes), read back by `job` in parts.
# Each row: median wall time and peak RSS of the whole command (GNU time)
# over ROUNDS runs, after one warm-up run.
# Usage: benches/job-view-bench.sh [rounds]   (default 3; SIZES="1152 18432";
# KEEP=DIR keeps each view's output there as job-<nodes>-<stored|prom>.txt).
# Root (the stand-in sacct must pass the trust check as root's program),
# release build (BIN=target/release by default), /usr/bin/prometheus and
# /usr/bin/promtool (Debian's prometheus package).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
BIN=${BIN:-${CARGO_TARGET_DIR:-$REPO/target}/release}
SYNTH=${SYNTH:-$BIN/examples/synth-job}
ROUNDS=${1:-3}
SIZES=${SIZES:-"1152 18432"}
PORT=${PORT:-19190}
[ "$(id -u)" = 0 ] || { echo "job-view-bench: run as root (the stand-in sacct must be root's)" >&2; exit 1; }
for b in "$BIN/slurm-imex" "$SYNTH"; do
  [ -x "$b" ] || { echo "$b missing: cargo build --release -p slurm-imex-cli && cargo build --release -p slurm-imex-jobsummary --example synth-job" >&2; exit 1; }
done
for p in prometheus promtool; do
  command -v "$p" >/dev/null || { echo "job-view-bench: $p missing (apt install prometheus)" >&2; exit 1; }
done
[ -x /usr/bin/time ] || { echo "job-view-bench: /usr/bin/time missing (apt install time)" >&2; exit 1; }

D=$(mktemp -d /tmp/job-view-bench.XXXXXX)
chmod 755 "$D"
PROM_PID=
cleanup() {
  if [ -n "$PROM_PID" ]; then kill "$PROM_PID" 2>/dev/null || true; wait "$PROM_PID" 2>/dev/null || true; fi
  rm -rf "$D"
}
trap cleanup EXIT
mkdir -m 755 "$D/bin" "$D/jobs"

# The stand-in sacct: the line for `-j ID` from jobs/ID.<mode>, mode being
# what $D/mode holds (stored: with its AdminComment; prom: without).
cat > "$D/bin/sacct" <<EOF
#!/bin/sh
id=
while [ \$# -gt 0 ]; do
  if [ "\$1" = -j ]; then id=\$2; fi
  shift
done
exec cat "$D/jobs/\$id.\$(cat "$D/mode")"
EOF
chmod 755 "$D/bin/sacct"
printf '[slurm]\nscontrol = "%s/bin/scontrol"\n[job]\nprometheus_url = "http://127.0.0.1:%s"\n' "$D" "$PORT" > "$D/imex.toml"

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
NOW=$(date +%s)
END=$((NOW - 600))
START=$((NOW - 1200))

echo "slurm-imex job view benchmark: $(nproc) cores, $(uname -m), $ROUNDS rounds (medians), $(prometheus --version 2>&1 | sed -n 1p)"
for n in $SIZES; do
  id=$((700000 + n))
  nodes=$("$SYNTH" nodelist "$id" "$n")
  comment=$("$SYNTH" comment "$id" "$n" "$END")
  printf '%s|alice|1000|COMPLETED|%s|%s|%s|%s\n' "$id" "$START" "$END" "$nodes" "$comment" > "$D/jobs/$id.stored"
  printf '%s|alice|1000|COMPLETED|%s|%s|%s|\n' "$id" "$START" "$END" "$nodes" > "$D/jobs/$id.prom"
  echo "job $id: $n nodes, stored summary ${#comment} characters"
  "$SYNTH" openmetrics "$id" "$n" "$END" > "$D/series-$n.om"
  t=$(date +%s%N)
  promtool tsdb create-blocks-from openmetrics "$D/series-$n.om" "$D/tsdb" > "$D/promtool.log" 2>&1 \
    || { echo "promtool failed:" >&2; cat "$D/promtool.log" >&2; exit 1; }
  echo "  $(grep -c . "$D/series-$n.om") series lines ($(du -m "$D/series-$n.om" | cut -f1) MiB) into the TSDB in $(( ($(date +%s%N) - t) / 1000000 )) ms"
  rm -f "$D/series-$n.om"
done

printf 'global:\n  scrape_interval: 1m\n' > "$D/prometheus.yml"
prometheus --config.file="$D/prometheus.yml" --storage.tsdb.path="$D/tsdb" \
  --storage.tsdb.retention.time=30d --web.listen-address="127.0.0.1:$PORT" > "$D/prometheus.log" 2>&1 &
PROM_PID=$!
for _ in $(seq 1 120); do
  if curl -sf "http://127.0.0.1:$PORT/-/ready" > /dev/null 2>&1; then break; fi
  sleep 0.5
done
curl -sf "http://127.0.0.1:$PORT/-/ready" > /dev/null \
  || { echo "Prometheus did not become ready:" >&2; tail -n 20 "$D/prometheus.log" >&2; exit 1; }

# one MODE ID: "wall_s rss_mib" of one `slurm-imex job ID`, its output in $D/out
one() {
  echo "$1" > "$D/mode"
  local rc=0
  /usr/bin/time -f '%e %M' -o "$D/time" "$BIN/slurm-imex" --config "$D/imex.toml" job "$2" > "$D/out" 2> "$D/err" || rc=$?
  if [ "$rc" != 0 ]; then
    echo "slurm-imex job $2 ($1) exited $rc:" >&2; cat "$D/err" >&2; exit 1
  fi
  awk '{printf "%s %.0f\n", $1, $2 / 1024}' "$D/time"
}

printf '\n%-7s %-12s %8s %10s %8s  %s\n' NODES SOURCE WALL_S RSS_MIB LINES "first line of the rollup"
for n in $SIZES; do
  id=$((700000 + n))
  for mode in stored prom; do
    one "$mode" "$id" > /dev/null
    : > "$D/walls"; : > "$D/rss"
    for _ in $(seq 1 "$ROUNDS"); do
      read -r wall rss < <(one "$mode" "$id")
      echo "$wall" >> "$D/walls"; echo "$rss" >> "$D/rss"
    done
    source=stored; [ "$mode" = prom ] && source=Prometheus
    if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP"; cp "$D/out" "$KEEP/job-$n-$mode.txt"; fi
    grep "source: $( [ "$mode" = prom ] && echo Prometheus || echo 'stored summary')" "$D/out" > /dev/null \
      || { echo "job $id ($mode) did not come from its source:" >&2; sed -n 1p "$D/out" >&2; exit 1; }
    printf '%-7s %-12s %8s %10s %8s  %s\n' "$n" "$source" "$(median < "$D/walls")" "$(median < "$D/rss")" \
      "$(wc -l < "$D/out")" "$(grep '^racks:' "$D/out" || echo -)"
  done
  echo "  ($n nodes, from Prometheus) $(grep '^summary:' "$D/out")"
done
echo
echo "the $n-node view from the stored summary, its notes:"
echo stored > "$D/mode"
"$BIN/slurm-imex" --config "$D/imex.toml" job $((700000 + n)) > "$D/out" 2>&1 || true
sed -n '/^notes:/,$p' "$D/out"
