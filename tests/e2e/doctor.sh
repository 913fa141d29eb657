# shellcheck shell=bash
# slurm-imex doctor on a node: PASS when healthy, one FAIL line naming each
# thing broken, and Slurm's side read from the node's slurm.conf when the
# controller does not answer.

# slurm-imex doctor on a healthy node: no FAIL, exit 0; then one thing at a
# time broken on n1 (and put back), each named by its own FAIL line.
test_doctor_passes_then_names_each_break() {
  local out rc d=$C/nodes/n1
  out=$(cli 1 doctor 2>&1); rc=$?
  echo "$out" | sed 's/^/       /'
  expect_eq "$rc" 0 "doctor exit status on a healthy node"
  expect_not_contains "$out" "FAIL  " "no FAIL on a healthy node"
  expect_contains "$out" "PASS  plugin          " "the plugin loads and is stamped for this Slurm"
  expect_contains "$out" "PASS  prolog-flags    PrologFlags=Alloc" "PrologFlags"
  expect_contains "$out" "WARN  private-data    PrivateData=none: any user can read any job's slurm-imex summary" "no PrivateData=jobs on the test cluster: said"
  out=$(cli 1 --json doctor 2>&1)
  expect_contains "$out" '"fail": 0' "doctor --json counts no FAIL"
  expect_contains "$out" '"check": "plugin"' "doctor --json names each check"
  # On the controller host (no IMEX daemon, no GPUs): the cluster-wide checks.
  # The test cluster's "shared" partition lets --imex jobs share nodes with
  # no job_submit.lua to steer them: that one FAIL (shared-nodes.sh wires it).
  out=$("$C/bin/slurm-imex" --config "$C/etc-slurm/imex.toml" doctor --cluster 2>&1); rc=$?
  expect_eq "$rc" 1 "doctor --cluster on the controller host"
  expect_eq "$(grep -c '^FAIL ' <<<"$out")" 1 "one FAIL from doctor --cluster: $out"
  expect_contains "$(grep shared-nodes <<<"$out")" "FAIL  shared-nodes    --imex jobs can start on a node another job shares in shared (OverSubscribe=NO)" "the partition without a guard"
  expect_contains "$out" "PASS  prolog-flags" "--cluster checks Slurm's configuration"
  expect_not_contains "$out" "channel-device" "--cluster leaves the node checks out"
  doctor_break_shows channel-device "grep -v nvidia-caps-imex-channels $d/hw/proc-devices > $d/hw/pd && mv $d/hw/proc-devices $d/hw/pd.ok && mv $d/hw/pd $d/hw/proc-devices" \
    "mv $d/hw/pd.ok $d/hw/proc-devices"
  doctor_break_shows imex-config "sed -i 's/^IMEX_CMD_ENABLED=.*/IMEX_CMD_ENABLED=0/' $d/etc-imex/config.cfg" \
    "sed -i 's/^IMEX_CMD_ENABLED=.*/IMEX_CMD_ENABLED=1/' $d/etc-imex/config.cfg"
  doctor_break_shows channel-dir "chmod 0777 $d/dev-channels" "chmod 0755 $d/dev-channels"
  doctor_break_shows database "chmod 0777 $d/var-lib" "chmod 0755 $d/var-lib"
  doctor_break_shows config "chmod 0666 $C/etc-slurm/imex.toml" "chmod 0644 $C/etc-slurm/imex.toml"
  doctor_break_shows nvml "sed -i 's/^expected_gpus = .*/expected_gpus = 9/' $C/etc-slurm/imex.toml" \
    "sed -i 's/^expected_gpus = .*/expected_gpus = $E2E_GPUS/' $C/etc-slurm/imex.toml"
  doctor_break_shows ports "nsenter --net=/run/netns/imex-n1 sysctl -qw net.ipv4.ip_local_reserved_ports=" \
    "nsenter --net=/run/netns/imex-n1 sysctl -qw net.ipv4.ip_local_reserved_ports=33792-50175"
  out=$(cli 1 doctor 2>&1); rc=$?
  expect_eq "$rc" 0 "doctor after every break was put back"
}

# Break (shell, run by the harness as root), run doctor on n1, expect its
# FAIL line and exit 1, put it back.
doctor_break_shows() { # check break restore
  local out rc
  bash -c "$2" || { fail "could not break $1: $2"; return; }
  out=$(cli 1 doctor 2>&1); rc=$?
  bash -c "$3"
  echo "$out" | grep "^FAIL  $1 " | sed 's/^/       /'
  expect_eq "$rc" 1 "doctor exit status with $1 broken"
  expect_contains "$out" "FAIL  $1 " "a FAIL line for $1"
}

# n1 cannot reach slurmctld (a route that refuses it): doctor still checks
# Slurm's side, from the slurm.conf n1 reads, says so, and names what that
# file lacks (PrologFlags without Alloc, no plugstack line).
test_doctor_reads_the_nodes_slurm_conf_when_the_controller_is_away() {
  local out rc conf=$C/etc-slurm/slurm.conf stack=$C/etc-slurm/plugstack.conf
  # A controller that cannot be reached is given up on after [slurm]
  # scontrol_timeout: 3 s here (the default 15 s only makes the test longer).
  sed -i 's/^scontrol_timeout = .*/scontrol_timeout = "3s"/' "$C/etc-slurm/imex.toml"
  ip -n imex-n1 route add prohibit "$NET.1/32" || { fail "cannot cut n1 off"; return; }
  out=$(cli 1 doctor 2>&1); rc=$?
  echo "$out" | grep -E '^(WARN|FAIL)  ' | sed 's/^/       /'
  expect_contains "$out" "WARN  slurm" "doctor says the controller did not answer"
  expect_contains "$out" "so the Slurm checks below read $SLURM_CONF" "doctor names the file it read"
  expect_contains "$out" "PASS  prolog-flags    PrologFlags=Alloc" "PrologFlags from the node's slurm.conf"
  expect_contains "$out" "PASS  plugstack" "the plugstack line, found without the controller"
  expect_contains "$out" "PASS  prolog " "Prolog from the node's slurm.conf"
  expect_eq "$rc" 0 "doctor exit status with only the controller away"
  cp -p "$conf" "$C/out/slurm.conf.saved"; cp -p "$stack" "$C/out/plugstack.conf.saved"
  # Serial does not turn Alloc on (Contain would: read_config.c prolog_str2flags)
  sed -i 's/^PrologFlags=.*/PrologFlags=Serial/' "$conf"
  : > "$stack"
  out=$(cli 1 doctor 2>&1); rc=$?
  cp -p "$C/out/slurm.conf.saved" "$conf"; cp -p "$C/out/plugstack.conf.saved" "$stack"
  ip -n imex-n1 route del prohibit "$NET.1/32"
  echo "$out" | grep -E '^FAIL  ' | sed 's/^/       /'
  expect_eq "$rc" 1 "doctor exit status with a broken slurm.conf and no controller"
  expect_contains "$out" "FAIL  prolog-flags    PrologFlags=Serial lacks Alloc" "PrologFlags without Alloc is a FAIL"
  expect_contains "$out" "FAIL  plugstack" "no plugstack line is a FAIL"
}

# The command service asks for no credentials. n1's base config, from
# conf-examples, binds it to loopback: PASS. Opened to every interface
# (IMEX_CMD_BIND_INTERFACE_IP=0.0.0.0), doctor FAILs imex-command naming the
# key to set and the file. Then, with the config put back, a stray listener
# on 0.0.0.0:50005 in n1's namespace (what a daemon started on the old
# config shows) FAILs too, read from /proc/net/tcp. Assumes n1 idle in a
# per-job-domain phase (no daemon on 50005) and python3 on the host.
test_doctor_fails_a_command_service_open_to_the_network() {
  local out rc pid i cfg=$C/nodes/n1/etc-imex/config.cfg
  out=$(cli 1 doctor 2>&1)
  expect_contains "$out" "PASS  imex-command    " "the shipped config keeps the command service on loopback"
  sed -i 's/^IMEX_CMD_BIND_INTERFACE_IP=.*/IMEX_CMD_BIND_INTERFACE_IP=0.0.0.0/' "$cfg"
  out=$(cli 1 doctor 2>&1); rc=$?
  sed -i 's/^IMEX_CMD_BIND_INTERFACE_IP=.*/IMEX_CMD_BIND_INTERFACE_IP=127.0.0.1/' "$cfg"
  echo "$out" | grep '^FAIL  imex-command ' | sed 's/^/       /'
  expect_eq "$rc" 1 "doctor exit status with the command service open to every interface"
  expect_contains "$out" "FAIL  imex-command    /etc/nvidia-imex/config.cfg: IMEX_CMD_BIND_INTERFACE_IP=0.0.0.0, which is every interface" "the setting is named"
  expect_contains "$out" "set IMEX_CMD_BIND_INTERFACE_IP=127.0.0.1 in /etc/nvidia-imex/config.cfg" "the key to set and its file are named"
  nsenter --net=/run/netns/imex-n1 python3 -c 'import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 50005)); s.listen(); time.sleep(60)' &
  pid=$!
  for i in $(seq 1 50); do
    grep ':C355 00000000:0000 0A' "/proc/$pid/net/tcp" >/dev/null 2>&1 && break
    sleep 0.1
  done
  out=$(cli 1 doctor 2>&1); rc=$?
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  echo "$out" | grep '^FAIL  imex-command ' | sed 's/^/       /'
  expect_eq "$rc" 1 "doctor exit status with 0.0.0.0:50005 listening on n1 (after $i polls)"
  expect_contains "$out" "FAIL  imex-command    the IMEX command port listens on 0.0.0.0:50005 (every interface)" "the open port is named"
}

# Certificates for n1's daemon in $1 (n1's /etc/nvidia-imex/tls): node.key
# (0600), node.crt valid a year (0640), ca.crt (its copy), and expired.crt
# (the same name, valid 2020-01-01 to 2020-01-02, through `openssl ca`,
# since `openssl req -days` takes no past dates).
tls_test_files() { # dir
  local t=$1
  rm -rf "$t" && install -d -m 0700 "$t" || return 1
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=n1 -days 365 \
    -keyout "$t/node.key" -out "$t/node.crt" 2>/dev/null || return 1
  cp "$t/node.crt" "$t/ca.crt"
  printf '%s\n' '[ca]' 'default_ca = d' '[d]' "database = $t/index.txt" "new_certs_dir = $t" \
    "serial = $t/serial" 'default_md = sha256' 'policy = p' '[p]' 'commonName = supplied' > "$t/ca.cnf"
  : > "$t/index.txt"; echo 01 > "$t/serial"
  openssl req -new -key "$t/node.key" -subj /CN=n1 -out "$t/node.csr" 2>/dev/null || return 1
  openssl ca -config "$t/ca.cnf" -selfsign -keyfile "$t/node.key" -in "$t/node.csr" -batch -notext \
    -startdate 20200101000000Z -enddate 20200102000000Z -out "$t/expired.crt" 2>/dev/null || return 1
  chmod 0600 "$t/node.key"; chmod 0640 "$t/node.crt" "$t/ca.crt" "$t/expired.crt"
}

# TLS between the daemons turned on in n1's base config (SSL_TLS, files):
# good files PASS imex-tls; an expired certificate, then a key others can
# read, each FAIL naming the file and the fix. Needs the openssl CLI; the
# daemon is not started (n1 idle), so only doctor reads the files.
test_doctor_checks_the_daemons_tls_files() {
  local out rc cfg=$C/nodes/n1/etc-imex/config.cfg t=$C/nodes/n1/etc-imex/tls
  command -v openssl >/dev/null || { fail "no openssl CLI to make test certificates"; return; }
  tls_test_files "$t" || { fail "cannot make test certificates in $t"; return; }
  cp -p "$cfg" "$C/out/config.cfg.saved"
  printf '%s\n' IMEX_ENABLE_AUTH_ENCRYPTION=1 IMEX_AUTH_ENCRYPTION_MODE=SSL_TLS IMEX_AUTH_SOURCE=FILE \
    IMEX_SERVER_KEY=/etc/nvidia-imex/tls/node.key IMEX_SERVER_CERT=/etc/nvidia-imex/tls/node.crt \
    IMEX_SERVER_CERT_AUTH=/etc/nvidia-imex/tls/ca.crt >> "$cfg"
  out=$(cli 1 doctor 2>&1)
  expect_contains "$out" "PASS  imex-tls        /etc/nvidia-imex/config.cfg: SSL_TLS, 3 files" "good TLS files pass"
  cp "$t/node.crt" "$t/good.crt"; cp -p "$t/expired.crt" "$t/node.crt"
  out=$(cli 1 doctor 2>&1); rc=$?
  echo "$out" | grep '^FAIL  imex-tls ' | sed 's/^/       /'
  expect_eq "$rc" 1 "doctor exit status with an expired certificate"
  expect_contains "$out" "FAIL  imex-tls        /etc/nvidia-imex/tls/node.crt (IMEX_SERVER_CERT), certificate 1 (CN=n1) expired on 2020-01-02" "the expired certificate is named"
  expect_contains "$out" "systemctl kill -s USR1 nvidia-imex" "the fix reloads without a restart"
  cp -p "$t/good.crt" "$t/node.crt"; chmod 0644 "$t/node.key"
  out=$(cli 1 doctor 2>&1); rc=$?
  cp -p "$C/out/config.cfg.saved" "$cfg"; rm -rf "$t"
  echo "$out" | grep '^FAIL  imex-tls ' | sed 's/^/       /'
  expect_eq "$rc" 1 "doctor exit status with a key others can read"
  expect_contains "$out" "FAIL  imex-tls        /etc/nvidia-imex/tls/node.key (IMEX_SERVER_KEY) is open to its group or others (mode 0644)" "the open key is named"
  expect_contains "$out" "chmod 0600 /etc/nvidia-imex/tls/node.key" "the fix is named"
}
