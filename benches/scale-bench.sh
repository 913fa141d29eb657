#!/bin/bash
# What grows with the cluster, at 1,000, 25,000 and 100,000 nodes (a
# 100,000-GPU GB200 site has 25,000), each figure also as a ratio to the
# 1,000-node one, so growth shows at a glance:
#   topology --map   `slurm-imex topology --map -o imex-racks.d` over a fake
#                    scontrol printing realistic `scontrol show node -o`
#                    lines (~900 bytes each, racks of 18, each node's clique
#                    in Extra): wall time and peak RSS;
#   prolog           slurm-imex-prolog of a 4-node --imex job (the same 4
#                    nodes at every size), with the indexed map (what a site
#                    installs), with the same map as one file (the old
#                    layout, read whole), and with Slurm's topology.conf
#                    describing the same racks instead (read whole, as
#                    Slurm reads it), and with both, the indexed map written
#                    from that topology.conf (which the prolog then only
#                    hashes): wall time and peak RSS, medians of
#                    alternating runs (1,000, 25,000, 100,000, again); and
#                    the bytes of the indexed map the prolog opened (strace).
#                    No GPU gate and no daemon: the prolog stops right after
#                    the racks are known, at the missing nvidia-imex, so the
#                    difference between sizes is the rack read alone.
# Then the reports of job-view-bench.sh (`slurm-imex job` for 1,152- and
# 18,432-node jobs) and store-bench.sh (the store timer with 10,000 jobs),
# and the job database's bench (a big history against an empty one), when
# they are there.
# Usage: benches/scale-bench.sh [rounds]   (default 21)
#   SIZES="1000 25000 100000"  BIN=target/release  QUICK=1 (the prolog and
#   --map only)  KEEP=1 (keep the maps and configs, to time a prolog alone)
# Any user; release build.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
BIN=${BIN:-$REPO/target/release}
ROUNDS=${1:-21}
read -r -a SIZES <<< "${SIZES:-1000 25000 100000}"
for b in slurm-imex slurm-imex-prolog; do
  [ -x "$BIN/$b" ] || { echo "$BIN/$b missing: cargo build --release -p slurm-imex-cli -p slurm-imex-hooks" >&2; exit 1; }
done
D=$(mktemp -d /tmp/scale-bench.XXXXXX)
chmod 755 "$D"
if [ -n "${KEEP:-}" ]; then echo "keeping $D (KEEP): each size's configs under $D/<nodes>/{idx,file,topo,both}"
else trap 'rm -rf "$D"' EXIT; fi
UUID=dc6e40c4-d722-4357-9ba6-5291dd461278
# The job: 4 nodes of the second rack, at every size.
JOB_NODES="gb[000019-000022]"
JOB_NODE=gb000019

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ms() { awk -v us="$1" 'BEGIN { printf "%.1f ms", us / 1000 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }

# fake_scontrol N DIR: DIR/scontrol prints N node lines on `show node -o`.
fake_scontrol() {
  cat > "$2/scontrol" <<EOF
#!/bin/sh
[ "\$*" = "show node -o" ] || exit 1
exec awk 'BEGIN { for (i = 1; i <= $1; i++) printf "NodeName=gb%06d Arch=aarch64 CoresPerSocket=72 CPUAlloc=0 CPUEfctv=144 CPUTot=144 CPULoad=0.01 AvailableFeatures=gb200,nvl72 ActiveFeatures=gb200,nvl72 Gres=gpu:gb200:4 NodeAddr=gb%06d NodeHostName=gb%06d Version=24.11.5 OS=Linux 6.8.0-1017-nvidia-64k #18-Ubuntu SMP RealMemory=884000 AllocMem=0 FreeMem=870000 Sockets=2 Boards=1 State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu BootTime=2026-11-20T08:00:00 SlurmdStartTime=2026-11-20T08:01:00 LastBusyTime=2026-11-24T10:00:00 ResumeAfterTime=None CfgTRES=cpu=144,mem=884000M,billing=144,gres/gpu=4 AllocTRES= CurrentWatts=0 AveWatts=0 Comment=(null) Extra={\"nvlink_clique\":\"$UUID.%d\",\"site\":\"hall 3\"}\n", i, i, i, int((i - 1) / 18) + 1 }'
EOF
  chmod 755 "$2/scontrol"
}

# config DIR MAP TOPOLOGY: DIR/imex.toml for the CLI and the prolog.
config() {
  printf '[node]\nstate_dir = "%s/state"\n[imex]\nproc_devices = "%s/proc-devices"\nrack_map = "%s"\nchannels = "plugin"\n[imex.addresses]\nsource = "hostname"\n[imex.daemon]\nmanager = "process"\nbinary = "%s/no-nvidia-imex"\n[slurm]\nscontrol = "%s/scontrol"\nconfig = "none"\ntopology = "%s"\n[health]\nenabled = false\n' \
    "$1" "$D" "$2" "$1" "$1" "$3" > "$1/imex.toml"
}
printf 'Character devices:\n507 nvidia-caps-imex-channels\n' > "$D/proc-devices"

# prolog CONFIG_DIR: one prolog run; prints "wall_us rss_kib".
prolog() {
  rm -rf "$1/state"
  local t0 t1
  t0=$(date +%s%N)
  /usr/bin/time -f %M -o "$1/rss" env -i PATH=/usr/bin:/bin SLURM_IMEX_CONFIG="$1/imex.toml" \
    SLURM_JOB_ID=$RANDOM SLURMD_NODENAME="$JOB_NODE" SLURM_JOB_NODELIST="$JOB_NODES" SPANK_IMEX=1 \
    "$BIN/slurm-imex-prolog" > /dev/null 2> "$1/prolog.err" || true
  t1=$(date +%s%N)
  if grep -Eq "rack map|topology" "$1/prolog.err"; then
    echo "the prolog refused the racks in $1: $(cat "$1/prolog.err")" >&2; exit 1
  fi
  echo "$(( (t1 - t0) / 1000 )) $(tail -1 "$1/rss")"
}

echo "slurm-imex scale benchmark: $(nproc) cores, $(uname -m), $ROUNDS alternating rounds, medians"
echo
# Per size: the indexed map (topology --map -o), the same map as one file,
# and a topology.conf of the same racks.
declare -A MAP_MS MAP_KIB MAP_KB
for n in "${SIZES[@]}"; do
  S=$D/$n; mkdir -p "$S/idx" "$S/file" "$S/topo"
  chmod 755 "$S" "$S/idx" "$S/file" "$S/topo"
  fake_scontrol "$n" "$S"
  config "$S" "$S/imex-racks.d" none
  walls=(); rss=()
  for _ in 1 2 3; do
    t0=$(date +%s%N)
    /usr/bin/time -f %M -o "$S/rss" env -i PATH=/usr/bin:/bin SLURM_IMEX_CONFIG="$S/imex.toml" \
      "$BIN/slurm-imex" topology --map -o "$S/imex-racks.d"
    walls+=("$(( ($(date +%s%N) - t0) / 1000000 ))"); rss+=("$(tail -1 "$S/rss")")
  done
  MAP_MS[$n]=$(printf '%s\n' "${walls[@]}" | median)
  MAP_KIB[$n]=$(printf '%s\n' "${rss[@]}" | median)
  MAP_KB[$n]=$(( $(wc -c < "$S/imex-racks.d/map.toml") / 1024 ))
  cp "$S/scontrol" "$S/idx/"; config "$S/idx" "$S/imex-racks.d" none
  cp "$S/imex-racks.d/map.toml" "$S/file/imex-racks.toml"
  cp "$S/scontrol" "$S/file/"; config "$S/file" "$S/file/imex-racks.toml" none
  awk -F'"' '/^name = /{name=$2} /^nodes = /{print "BlockName=" name " Nodes=" $2}' \
    "$S/imex-racks.d/map.toml" > "$S/topo/topology.conf"
  cp "$S/scontrol" "$S/topo/"; config "$S/topo" none "$S/topo/topology.conf"
  # The indexed map written where that topology.conf is in force: it names
  # the file (same racks), so the prolog hashes it instead of parsing it.
  mkdir -p "$S/both"; chmod 755 "$S/both"; cp "$S/scontrol" "$S/both/"
  config "$S/both" "$S/both/imex-racks.d" "$S/topo/topology.conf"
  env -i PATH=/usr/bin:/bin SLURM_IMEX_CONFIG="$S/both/imex.toml" \
    "$BIN/slurm-imex" topology --map -o "$S/both/imex-racks.d" 2> "$S/both/map.err"
  grep -q "hashes it instead of parsing it" "$S/both/map.err" ||
    { echo "topology --map did not name topology.conf in the map: $(cat "$S/both/map.err")" >&2; exit 1; }
done

declare -A RUNS
for _ in $(seq "$ROUNDS"); do
  for n in "${SIZES[@]}"; do
    for kind in idx file topo both; do
      RUNS[$n.$kind]+="$(prolog "$D/$n/$kind")"$'\n'
    done
  done
done
col() { printf '%s' "${RUNS[$1]}" | awk -v c="$2" 'NF {print $c}' | median; }

# Bytes of the indexed map the prolog opened, by strace.
opened_bytes() {
  local S=$D/$1/idx
  strace -f -qq -e trace=openat -o "$S/strace" env -i PATH=/usr/bin:/bin \
    SLURM_IMEX_CONFIG="$S/imex.toml" SLURM_JOB_ID=7 SLURMD_NODENAME="$JOB_NODE" \
    SLURM_JOB_NODELIST="$JOB_NODES" SPANK_IMEX=1 "$BIN/slurm-imex-prolog" > /dev/null 2>&1 || true
  grep -o "\"$D/$1/imex-racks.d/[^\"]*\"" "$S/strace" | tr -d '"' | sort -u \
    | while read -r f; do [ -f "$f" ] && wc -c < "$f"; done | awk '{s += $1} END {print s + 0}'
}

base=${SIZES[0]}
printf '%-9s %-44s %-26s %s\n' nodes figure value "ratio to $base nodes"
for n in "${SIZES[@]}"; do
  printf '%-9s %-44s %-26s %s\n' "$n" "topology --map -o imex-racks.d: wall" "${MAP_MS[$n]} ms" "$(ratio "${MAP_MS[$n]}" "${MAP_MS[$base]}")"
  printf '%-9s %-44s %-26s %s\n' "$n" "topology --map: peak RSS" "$(( MAP_KIB[$n] / 1024 )) MiB" "$(ratio "${MAP_KIB[$n]}" "${MAP_KIB[$base]}")"
  printf '%-9s %-44s %-26s %s\n' "$n" "prolog, indexed map: wall" "$(ms "$(col "$n.idx" 1)")" "$(ratio "$(col "$n.idx" 1)" "$(col "$base.idx" 1)")"
  printf '%-9s %-44s %-26s %s\n' "$n" "prolog, indexed map: peak RSS" "$(( $(col "$n.idx" 2) / 1024 )) MiB" "$(ratio "$(col "$n.idx" 2)" "$(col "$base.idx" 2)")"
  b=$(opened_bytes "$n")
  printf '%-9s %-44s %-26s %s\n' "$n" "prolog, indexed map: bytes of it read" "$b B (whole map ${MAP_KB[$n]} KiB)" "$(ratio "$b" "$(opened_bytes "$base")")"
  printf '%-9s %-44s %-26s %s\n' "$n" "prolog, one-file map (read whole): wall" "$(ms "$(col "$n.file" 1)")" "$(ratio "$(col "$n.file" 1)" "$(col "$base.file" 1)")"
  printf '%-9s %-44s %-26s %s\n' "$n" "prolog, topology.conf (read whole): wall" "$(ms "$(col "$n.topo" 1)")" "$(ratio "$(col "$n.topo" 1)" "$(col "$base.topo" 1)")"
  printf '%-9s %-44s %-26s %s\n' "$n" "prolog, topology.conf: peak RSS" "$(( $(col "$n.topo" 2) / 1024 )) MiB" "$(ratio "$(col "$n.topo" 2)" "$(col "$base.topo" 2)")"
  printf '%-9s %-44s %-26s %s\n' "$n" "prolog, topology.conf + map written from it" "$(ms "$(col "$n.both" 1)")" "$(ratio "$(col "$n.both" 1)" "$(col "$base.both" 1)")"
done
echo "(where the prolog stops: $(tail -1 "$D/$base/idx/prolog.err" | cut -c1-160))"

[ -n "${QUICK:-}" ] && exit 0
(cd "$REPO" && cargo build --release --quiet -p slurm-imex-jobsummary --example synth-job)
for part in job-view-bench.sh store-bench.sh; do
  if [ -x "$HERE/$part" ] || [ -f "$HERE/$part" ]; then
    echo; echo "== $part"; bash "$HERE/$part"
  fi
done
echo; echo "== the job database, a big history against an empty one (cargo bench -p slurm-imex-jobdb --bench jobdb)"
(cd "$REPO" && cargo bench -q -p slurm-imex-jobdb --bench jobdb 2>/dev/null)
