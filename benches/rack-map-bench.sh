#!/bin/bash
# The rack map at the size big sites run: `slurm-imex topology --map` over
# 25,000 and 100,000 nodes (a 100,000-GPU GB200 site has 25,000), and the
# prolog's read of the map it wrote.
#   --map    a fake scontrol prints realistic `scontrol show node -o` lines
#            (~900 bytes each, racks of 18, each node's clique in Extra);
#            wall time and peak RSS of the whole command, and the fake's own
#            time printing the lines alone (so the difference is ours);
#   prolog   slurm-imex-prolog of an --imex job on the last rack's 18 nodes,
#            with that map installed (no topology file, no GPU gate, no
#            daemon: it stops right after the map read, at the missing
#            nvidia-imex), beside the same prolog with a one-rack map: the
#            difference is the map read, which must grow no faster than the
#            map's size.
# Usage: benches/rack-map-bench.sh [rounds]   (default 5; medians printed).
# Any user; release build (BIN=target/release by default).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
BIN=${BIN:-$REPO/target/release}
ROUNDS=${1:-5}
SIZES=${SIZES:-"25000 100000"}
for b in slurm-imex slurm-imex-prolog; do
  [ -x "$BIN/$b" ] || { echo "$BIN/$b missing: cargo build --release -p slurm-imex-cli -p slurm-imex-hooks" >&2; exit 1; }
done
D=$(mktemp -d /tmp/rack-map-bench.XXXXXX)
chmod 755 "$D"
trap 'rm -rf "$D"' EXIT
UUID=dc6e40c4-d722-4357-9ba6-5291dd461278

ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# fake_scontrol N: prints N node lines on `show node -o`.
fake_scontrol() {
  cat > "$D/scontrol" <<EOF
#!/bin/sh
[ "\$*" = "show node -o" ] || exit 1
exec awk 'BEGIN { for (i = 1; i <= $1; i++) printf "NodeName=gb%06d Arch=aarch64 CoresPerSocket=72 CPUAlloc=0 CPUEfctv=144 CPUTot=144 CPULoad=0.01 AvailableFeatures=gb200,nvl72 ActiveFeatures=gb200,nvl72 Gres=gpu:gb200:4 NodeAddr=gb%06d NodeHostName=gb%06d Version=24.11.5 OS=Linux 6.8.0-1017-nvidia-64k #18-Ubuntu SMP RealMemory=884000 AllocMem=0 FreeMem=870000 Sockets=2 Boards=1 State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu BootTime=2026-11-20T08:00:00 SlurmdStartTime=2026-11-20T08:01:00 LastBusyTime=2026-11-24T10:00:00 ResumeAfterTime=None CfgTRES=cpu=144,mem=884000M,billing=144,gres/gpu=4 AllocTRES= CurrentWatts=0 AveWatts=0 Comment=(null) Extra={\"nvlink_clique\":\"$UUID.%d\",\"site\":\"hall 3\"}\n", i, i, i, int((i - 1) / 18) + 1 }'
EOF
  chmod 755 "$D/scontrol"
}

config() { # config MAP: an imex.toml for the CLI and the prolog
  printf '[node]\nstate_dir = "%s/state"\n[imex]\nproc_devices = "%s/proc-devices"\nrack_map = "%s"\nchannels = "plugin"\n[imex.addresses]\nsource = "hostname"\n[imex.daemon]\nmanager = "process"\nbinary = "%s/no-nvidia-imex"\n[slurm]\nscontrol = "%s/scontrol"\nconfig = "none"\ntopology = "none"\n[health]\nenabled = false\n' \
    "$D" "$D" "$1" "$D" "$D" > "$D/imex.toml"
}
printf 'Character devices:\n507 nvidia-caps-imex-channels\n' > "$D/proc-devices"

prolog_ms() { # prolog_ms MAP NODELIST: one prolog's wall time
  config "$1"
  rm -rf "$D/state"
  local t; t=$(date +%s%N)
  env -i PATH=/usr/bin:/bin SLURM_IMEX_CONFIG="$D/imex.toml" SLURM_JOB_ID=$RANDOM \
    SLURMD_NODENAME="${3}" SLURM_JOB_NODELIST="$2" SPANK_IMEX=1 \
    "$BIN/slurm-imex-prolog" > /dev/null 2> "$D/prolog.err" || true
  ms "$t"
}

echo "slurm-imex rack map benchmark: $(nproc) cores, $(uname -m), $ROUNDS rounds, medians"
# The baseline: a one-rack map, the job on its 18 nodes.
printf '[[rack]]\nname = "rack1"\nclique = "%s.1"\nnodes = "gb[000001-000018]"\n' "$UUID" > "$D/one-rack.toml"
base=$(for _ in $(seq "$ROUNDS"); do prolog_ms "$D/one-rack.toml" "gb[000001-000018]" gb000001; done | median)
if grep -q "rack map" "$D/prolog.err"; then echo "the prolog refused the one-rack map: $(cat "$D/prolog.err")" >&2; exit 1; fi
printf '%-8s %-40s %s\n' "1 rack" "prolog, job on 18 nodes" "${base} ms"
echo "         (where it stops: $(tail -1 "$D/prolog.err" | cut -c1-160))"

for n in $SIZES; do
  fake_scontrol "$n"
  config "$D/imex-racks.toml"
  fake=$(for _ in $(seq "$ROUNDS"); do t=$(date +%s%N); "$D/scontrol" show node -o > /dev/null; ms "$t"; done | median)
  bytes=$("$D/scontrol" show node -o | wc -c)
  walls=(); rss=()
  for _ in $(seq "$ROUNDS"); do
    rm -f "$D/imex-racks.toml"
    t=$(date +%s%N)
    /usr/bin/time -f %M -o "$D/rss" env -i PATH=/usr/bin:/bin SLURM_IMEX_CONFIG="$D/imex.toml" \
      "$BIN/slurm-imex" topology --map -o "$D/imex-racks.toml"
    walls+=("$(ms "$t")"); rss+=("$(cat "$D/rss")")
  done
  wall=$(printf '%s\n' "${walls[@]}" | median)
  kib=$(printf '%s\n' "${rss[@]}" | median)
  racks=$(grep -c '^\[\[rack\]\]' "$D/imex-racks.toml")
  map_bytes=$(wc -c < "$D/imex-racks.toml")
  printf '%-8s %-40s %s\n' "$n" "topology --map (scontrol answer $((bytes / 1048576)) MiB)" \
    "${wall} ms wall (the fake scontrol alone ${fake} ms), peak RSS $((kib / 1024)) MiB, $racks racks, map $((map_bytes / 1024)) KiB"
  last=$(( (n + 17) / 18 ))
  first_node=$(( (last - 1) * 18 + 1 ))
  list=$(printf 'gb[%06d-%06d]' "$first_node" "$n")
  p=$(for _ in $(seq "$ROUNDS"); do prolog_ms "$D/imex-racks.toml" "$list" "$(printf gb%06d "$first_node")"; done | median)
  if grep -q "rack map" "$D/prolog.err"; then echo "the prolog refused the map: $(cat "$D/prolog.err")" >&2; exit 1; fi
  echo "         (where it stops: $(tail -1 "$D/prolog.err" | cut -c1-160))"
  extra=$((p - base))
  printf '%-8s %-40s %s\n' "$n" "prolog, job on the last rack's nodes" \
    "${p} ms (+${extra} ms over 1 rack: $(awk -v e="$extra" -v n="$n" 'BEGIN {printf "%.2f", e * 1000 / n}') us per node of the map)"
done
