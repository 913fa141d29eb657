#!/bin/bash
# Every slurm-imex benchmark report. Root, Debian 12 (installs Slurm for the
# multi-node prolog bench through scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo build --release --workspace --quiet
echo "=== the common prolog (no --imex, no GPU on the node) beside /bin/true"
command -v hyperfine >/dev/null || cargo install hyperfine --version 1.20.0 --locked --quiet
bash benches/plain-prolog-bench.sh
echo "=== IMEX prolog/epilog (3 namespaced nodes, fake nvidia-imex)"
bash benches/prolog-bench.sh "${ROUNDS:-10}"
echo "=== the domain watcher while an --imex job runs (3 namespaced nodes)"
bash benches/watch-bench.sh "${WATCH_SECONDS:-60}"
echo "=== one NVL72 rack: --imex jobs on 4, 8 and 18 namespaced nodes"
bash benches/rack-bench.sh "${RACK_JOBS:-5}"
echo "=== two NVL72 racks: --imex jobs on 18 and 36 namespaced nodes (one domain per rack)"
RACKS=2 bash benches/rack-bench.sh "${RACK_JOBS:-5}"
echo "=== the same 36 nodes as one domain (no racks known): the cost of the nodes alone"
RACKS=2 ONE_DOMAIN=1 bash benches/rack-bench.sh "${RACK_JOBS:-5}"
echo "=== GPU health gate beside the IMEX domain start (slow NVML, slow daemon)"
bash benches/overlap-bench.sh "${ROUNDS_OVERLAP:-5}"
echo "=== slurmctld under one 1,152-node --imex job's prologs (4,608 nodes; before and after)"
bash benches/ctld-bench.sh
echo "=== the rack map at 25,000 and 100,000 nodes (topology --map, the prolog's read)"
bash benches/rack-map-bench.sh "${ROUNDS_RACK_MAP:-5}"
echo "=== GPU health gate (8 fake GPUs)"
cargo bench --quiet -p fake-nvml --bench gate
echo "=== job database (1M job x GPU rows; the epilog's figures empty and full)"
cargo bench --quiet -p slurm-imex-jobdb --bench jobdb
echo "=== the store timer at scale: one job --store pass over 10,000 ended jobs (1 in 100 on 1,000 nodes)"
bash benches/store-bench.sh
