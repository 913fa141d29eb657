#!/bin/bash
# The prolog every job pays on every node, for the common job: no --imex, on
# a node without NVIDIA GPUs (NVML not installed, the real PCI bus), beside a
# bare /bin/true started the same way (hyperfine -N: no shell in between).
# Also an empty Rust program (benches/empty-main), the floor any Rust binary
# pays here. Prints hyperfine's table and the ratios of the means.
# Needs a release build and hyperfine (cargo install hyperfine --version
# 1.20.0 --locked; 2.x needs a newer rustc than Debian 12 CI has).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$REPO/target/release}
RUNS=${RUNS:-2000}
command -v hyperfine >/dev/null || { echo "plain-prolog-bench: needs hyperfine (cargo install hyperfine --version 1.20.0 --locked)" >&2; exit 1; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
chmod 755 "$W"
cat > "$W/imex.toml" <<TOML
[node]
state_dir = "$W/state"
[gpu]
nvml_library = "$W/no-nvml/libnvidia-ml.so.1"
[database]
path = "$W/db/jobs.db"
[metrics]
textfile_dir = "none"
[slurm]
config = "none"
topology = "none"
TOML
chmod 644 "$W/imex.toml"
export SLURM_IMEX_CONFIG=$W/imex.toml SLURM_JOB_ID=77 SLURMD_NODENAME=n1 SLURM_JOB_NODELIST=n1
export SLURM_JOB_UID=1000 SLURM_JOB_USER=user1
"$BIN/slurm-imex-prolog" || { echo "plain-prolog-bench: the prolog failed" >&2; exit 1; }
cargo build --release --quiet --manifest-path "$REPO/benches/empty-main/Cargo.toml" --target-dir "$REPO/target/empty-main"
EMPTY=$REPO/target/empty-main/release/empty-main
echo "== plain prolog (no --imex, no GPU on the node; $(ls /sys/bus/pci/devices | wc -l) PCI devices) vs /bin/true, $RUNS runs each"
hyperfine -N --warmup 100 --runs "$RUNS" --export-json "$W/h.json" /bin/true "$EMPTY" "$BIN/slurm-imex-prolog"
python3 - "$W/h.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
true, empty, prolog = (x["mean"] for x in r)
print(f"/bin/true {true * 1e3:.3f} ms; empty Rust main {empty * 1e3:.3f} ms ({empty / true:.2f}x); "
      f"prolog {prolog * 1e3:.3f} ms ({prolog / true:.2f}x); "
      f"the prolog's own cost above an empty Rust program: {(prolog - empty) * 1e6:.0f} us")
PY
