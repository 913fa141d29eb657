#!/bin/bash
# slurm.conf as slurmctld reads it, beside what slurm-imex reads: for each
# test file (octal/hex/k-suffixed job ids, a quoted SwitchType, Include after
# a tab, a continued line, and ranges slurmctld refuses), a throwaway
# slurmctld (this machine's, e.g. Debian's 22.05) runs in a private network
# and mount namespace (auth/none, one veth address, its own hosts file) and
# `scontrol show config` prints what it runs with; slurm-imex's doctor reads
# the same file (its switch and rack-channels lines, which use the reader
# the prolog uses). Prints a Markdown report. Root; run it under the e2e lock:
#   flock /tmp/slurm-imex-e2e.lock bash scripts/slurm-conf-vs-slurmctld.sh
# (tests/bad-input/tests/slurm_conf.rs pins the same cases without Slurm.)
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
CLI=${CLI:-$REPO/target/debug/slurm-imex}
W=$(mktemp -d /tmp/slurm-conf-vs-slurmctld.XXXXXX)
trap 'rm -rf "$W"' EXIT
printf '127.0.0.1 localhost\n10.99.0.1 %s\n' "$(hostname -s)" > "$W/hosts"
base() { # base DIR PORT
  cat <<CONF
ClusterName=cmp
SlurmctldHost=$(hostname -s)(10.99.0.1)
SlurmUser=root
SlurmctldPort=$2
AuthType=auth/none
CredType=cred/none
StateSaveLocation=$1/state
SlurmctldPidFile=$1/slurmctld.pid
SlurmctldLogFile=$1/slurmctld.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
NodeName=c1 NodeAddr=10.99.0.1 CPUs=1 State=UNKNOWN
PartitionName=p Nodes=c1 Default=YES
CONF
}
n=0
case_() { # case_ LABEL TEXT [INCLUDE_NAME INCLUDE_TEXT]
  n=$((n + 1)); local d=$W/c$n; mkdir -p "$d/state"
  { base "$d" $((7100 + n)); printf '%b' "$2"; } > "$d/slurm.conf"
  [ $# -ge 4 ] && printf '%b' "$4" > "$d/$3"
  printf '[imex]\ndomain = "rack"\nchannels = "plugin"\n[slurm]\nconfig = "%s"\nscontrol = "/bin/false"\ntopology = "none"\n' "$d/slurm.conf" > "$d/imex.toml"
  local ctld
  ctld=$(unshare --net --mount --propagation private /bin/bash -c "
    mount --bind '$W/hosts' /etc/hosts
    ip link set lo up; ip link add v0 type veth peer name v1; ip addr add 10.99.0.1/24 dev v0; ip link set v1 up; ip link set v0 up
    timeout 40 slurmctld -D -c -f '$d/slurm.conf' > '$d/ctld.out' 2>&1 &
    for i in \$(seq 1 120); do SLURM_CONF='$d/slurm.conf' scontrol show config > '$d/show' 2>'$d/show.err' && break; kill -0 \$! 2>/dev/null || break; sleep 0.25; done
    kill %1 2>/dev/null; wait 2>/dev/null
    grep -o 'Resetting MaxJobCount from [0-9]* to [0-9]*' '$d/ctld.out' | sed -n 1p | tr '\n' ';'
    if [ -s '$d/show' ]; then grep -E '^(FirstJobId|MaxJobId|SwitchType) ' '$d/show' | tr -s ' ' | tr '\n' ';'
    elif grep -q 'Running as primary controller' '$d/ctld.out'; then echo -n \"started (scontrol: \$(head -c 150 '$d/show.err'))\"
    else echo -n 'REFUSED: '; grep -E 'fatal|error' '$d/ctld.out' '$d/slurmctld.log' 2>/dev/null | grep -v 'Unable to open\|Address already' | sed -n 1,2p | sed 's/^[^:]*://' | tr '\n' ' '; fi")
  local ours
  ours=$(env -i PATH=/usr/bin:/bin "$CLI" --config "$d/imex.toml" doctor --cluster 2>&1 | grep -E '^(PASS|WARN|FAIL) +(switch|rack-channels)' | sed 's/  */ /g' | tr '\n' ';')
  printf '### %s\n```\n%s```\n- scontrol show config: %s\n- slurm-imex reads:     %s\n\n' "$1" "$(printf '%b' "$2" | sed 's/\t/<TAB>/g')$([ $# -ge 4 ] && printf '\n# %s:\n%s' "$3" "$(printf '%b' "$4")")
" "$ctld" "$ours"
}
case_ "octal and hex job ids" 'FirstJobId=010\nMaxJobId=0x7ff\n'
case_ "octal MaxJobId" 'MaxJobId=03777\n'
case_ "a k suffix" 'FirstJobId=1\nMaxJobId=2k\n'
case_ "UNLIMITED" 'MaxJobId=UNLIMITED\n'
case_ "quoted SwitchType" 'SwitchType="switch/none"\nMaxJobId=2047\n'
case_ "Include after a tab" 'Include\tids.conf\n' ids.conf 'MaxJobId=2047\n'
case_ "an escaped # and a continued line" 'MaxJobId=20\\\n47 # 2047\n'
case_ "FirstJobId above MaxJobId" 'FirstJobId=5000\nMaxJobId=2047\n'
case_ "FirstJobId 0" 'FirstJobId=0\nMaxJobId=2047\n'
case_ "08 is no octal number" 'MaxJobId=08\n'
