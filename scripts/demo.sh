#!/bin/bash
# The slurm-imex demo: a local 3-node Slurm 22.05 cluster (each node in its
# own network, mount and UTS namespace) with fake IMEX daemons, one
# `sbatch -N3 --imex` job, and what the job and the nodes saw. Root, Debian 12.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
bash scripts/install-deps.sh
cargo build --release --workspace --quiet
E2E_NODES=3
source tests/e2e/cluster.sh
cluster_down >/dev/null 2>&1 || true
cluster_install "$REPO/target/release"
cluster_up
trap 'cluster_down >/dev/null 2>&1 || true' EXIT
sinfo

cat > "$C/out/demo-job.sh" <<'JOB'
#!/bin/bash
#SBATCH -N3 --imex
echo "job $SLURM_JOB_ID on $SLURM_JOB_NODELIST as $(id -un)"
srun -N3 --ntasks-per-node=1 bash -c 'echo "  $(hostname): SLURM_IMEX_CHANNEL=$SLURM_IMEX_CHANNEL NVIDIA_IMEX_CHANNELS=$NVIDIA_IMEX_CHANNELS; $(ls -l /dev/nvidia-caps-imex-channels | tail -n +2)"'
echo "nodes_config.cfg on $(hostname):"; sed 's/^/  /' /etc/nvidia-imex/nodes_config.cfg
echo "IMEX domain as nvidia-imex-ctl -N shows it:"
DEMO_BIN/nvidia-imex-ctl -c /run/slurm-imex/nvidia-imex.cfg -N | sed -n '/^Nodes:/,$p' | sed 's/^/  /'
JOB
sed -i "s#DEMO_BIN#$C/bin#" "$C/out/demo-job.sh"
chmod 755 "$C/out/demo-job.sh"
echo "\$ sbatch $C/out/demo-job.sh   (as $TEST_USER)"
id=$(as_user sbatch --parsable -o "$C/out/demo-%j.out" "$C/out/demo-job.sh")
for i in $(seq 1 300); do
  s=$(scontrol show job -o "$id" | grep -o 'JobState=[A-Z]*' | cut -d= -f2)
  case "$s" in COMPLETED|FAILED|CANCELLED) break;; esac
  sleep 0.1
done
echo "job $id: $s"
cat "$C/out/demo-$id.out"
echo "after the job, the epilog restored idle: nodes_config.cfg on n1 has $(wc -l < "$C/nodes/n1/etc-imex/nodes_config.cfg") lines"
echo "and a job without --imex sees an empty channel directory:"
as_user srun -N1 ls -la /dev/nvidia-caps-imex-channels

# GPU health: an application XID during a job, then the history an admin reviews.
echo
echo "\$ sbatch -N1 -w n1 (a job during which GPU 1 logs XID 13)"
hid=$(as_user sbatch --parsable -N1 -w n1 -o "$C/out/demo-%j.out" --wrap "sleep 1")
sleep 0.5
kmsg_append 1 "NVRM: Xid (PCI:0000:1b:00): 13, pid=4242, name=python3, Graphics SM Warp Exception on (GPC 1, TPC 0, SM 0): Out Of Range Address"
for i in $(seq 1 300); do
  case "$(scontrol show job -o "$hid" | grep -o 'JobState=[A-Z]*' | cut -d= -f2)" in COMPLETED|FAILED) break;; esac
  sleep 0.1
done
sleep 0.5
cli_demo() { nsenter -t "$(slurmd_pid 1)" -n -m -u -- "$C/bin/slurm-imex" --config "$C/etc-slurm/imex.toml" "$@"; }
echo; echo "\$ slurm-imex history            (on n1)"; cli_demo history
echo; echo "\$ slurm-imex show $hid           (on n1)"; cli_demo show "$hid"
echo; echo "\$ slurm-imex gpus               (on n1)"; cli_demo gpus
echo; echo "\$ slurm-imex check              (on n1)"; cli_demo check || true
