//! DCGM 4.6's IMEX health verdict, replayed against the states a slurm-imex
//! node really has (docs/guide.md, "Beside DCGM and NVSentinel").
//!
//! `dcgm` below re-implements, line for line, how DCGM 4.6.0 collects its
//! two IMEX fields and judges them (NVIDIA/DCGM @ 72fa3fe, "DCGM 4.6.0":
//! `dcgmlib/src/DcgmImexManager.{h,cpp}`, `common/DcgmUtilities.cpp`,
//! `modules/health/DcgmHealthWatch.cpp` `MonitorImex`). It runs the fake
//! `nvidia-imex-ctl` of this crate as DCGM runs the real one, against the
//! fake daemon started and stopped by slurm-imex's own prolog and epilog
//! code (`slurm_imex_domain::imex::domain::{setup, teardown}`), and sets
//! beside each verdict slurm-imex's "IMEX expected" signal
//! (`slurm_imex_domain::imex::status`) and the rule a site alerts on
//! (conf-examples/prometheus/slurm-imex.rules.yml,
//! `SlurmImexDcgmImexDaemonNotReady`): DCGM's daemon status is not READY
//! where slurm-imex expects IMEX.
//!
//! What it shows, honestly: an idle per-job node FAILS DCGM's IMEX check
//! (`IMEX daemon status is -3 (not READY)`), whether its nodes config is
//! empty (what the epilog leaves) or absent, because no daemon answers
//! `nvidia-imex-ctl -q` there by design and any non-zero exit is
//! COMMAND_ERROR. slurm-imex cannot change that reading without running a
//! daemon on idle nodes or hiding NVIDIA's ctl from DCGM; the signal says
//! where the reading matters, and the rule alerts only there.

mod common;
use slurm_imex_core::config::AutoPath;
use slurm_imex_core::slurm::env::JobEnv;
use slurm_imex_core::state::StateDir;
use slurm_imex_domain::config::DomainScope;
use slurm_imex_domain::context::HookContext;
use slurm_imex_domain::imex::domain::{setup, teardown, TeardownOutcome};
use slurm_imex_domain::imex::status::{expectation, node_status};
use slurm_imex_settings::Config;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// The fake daemon is single-instance per run dir and the env is per
/// process, so these tests take turns.
static SERIAL: Mutex<()> = Mutex::new(());

/// DCGM 4.6.0's IMEX collection and health rule (NVIDIA/DCGM @ 72fa3fe).
mod dcgm {
    use std::io::{Read, Seek};
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    // `DcgmImexDaemonStatus` (dcgmlib/src/DcgmImexManager.h): `-q`'s words
    // in order, then the error values.
    pub const DAEMON_STATES: [&str; 8] = [
        "INITIALIZING",
        "STARTING_AUTH_SERVER",
        "WAITING_FOR_PEERS",
        "WAITING_FOR_RECOVERY",
        "INIT_GPU",
        "READY",
        "SHUTTING_DOWN",
        "UNAVAILABLE",
    ];
    pub const READY: i64 = 5;
    pub const UNAVAILABLE: i64 = 7;
    /// "nvidia-imex-ctl command not found"
    pub const NOT_INSTALLED: i64 = -1;
    /// "IMEX not configured"
    pub const NOT_CONFIGURED: i64 = -2;
    /// "Command execution error"
    pub const COMMAND_ERROR: i64 = -3;

    /// The line both collectors look for (DcgmImexManager.cpp).
    const NOT_CONFIGURED_LINE: &str = "Failed to read node configuration file";

    /// What DCGM reads of a node's IMEX and what `MonitorImex` says of it.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Reading {
        /// `DCGM_FI_IMEX_DOMAIN_STATUS` (field 1502).
        pub domain: String,
        /// `DCGM_FI_IMEX_DAEMON_STATUS` (field 1503).
        pub daemon: i64,
        /// `MonitorImex`'s failures, `DCGM_FR_IMEX_UNHEALTHY_MSG` each; none
        /// is a PASS (there is no WARN level).
        pub failures: Vec<String>,
    }

    /// Both fields through `ctl`, and the verdict on them. `timeout` is
    /// `CMD_TIMEOUT` (30 s in DCGM; shorter here).
    pub fn read(ctl: &Path, timeout: Duration) -> Reading {
        let (domain, daemon) = match find_imex_ctl(ctl) {
            None => ("NOT_INSTALLED".to_string(), NOT_INSTALLED),
            Some(ctl) => (domain_status(ctl, timeout), daemon_status(ctl, timeout)),
        };
        let failures = monitor_imex(&domain, daemon);
        Reading {
            domain,
            daemon,
            failures,
        }
    }

    /// `FindImexCtlExecutable`: the ctl in DCGM's trusted paths (here: the
    /// one path given), `stat()` succeeding with an execute bit
    /// (`S_IXUSR | S_IXGRP | S_IXOTH`); else NOT_INSTALLED.
    pub fn find_imex_ctl(ctl: &Path) -> Option<&Path> {
        let meta = std::fs::metadata(ctl).ok()?;
        (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(ctl)
    }

    /// `GetDomainStatus`: `<ctl> -N -j`. A timeout or any other non-OK run
    /// is UNAVAILABLE; then the NOT_CONFIGURED line; then the JSON.
    pub fn domain_status(ctl: &Path, timeout: Duration) -> String {
        match run(ctl, &["-N", "-j"], timeout) {
            None => "UNAVAILABLE".into(),
            Some(out) if out.contains(NOT_CONFIGURED_LINE) => "NOT_CONFIGURED".into(),
            Some(out) => parse_domain_status_json(&out).into(),
        }
    }

    /// `ParseDomainStatusJson`: the LAST `"status":` ("top-level status,
    /// not nested node status"), its quoted value uppercased; UP, DOWN or
    /// DEGRADED, anything else (or none) UNAVAILABLE.
    fn parse_domain_status_json(out: &str) -> &'static str {
        const KEY: &str = "\"status\":";
        let Some(at) = out.rfind(KEY) else {
            return "UNAVAILABLE";
        };
        let value = out[at + KEY.len()..].split('"').nth(1).unwrap_or("");
        match value.to_uppercase().as_str() {
            "UP" => "UP",
            "DOWN" => "DOWN",
            "DEGRADED" => "DEGRADED",
            _ => "UNAVAILABLE",
        }
    }

    /// `GetDaemonStatus`: `<ctl> -q`. A timeout or any other non-OK run is
    /// COMMAND_ERROR, before the output is looked at; a run that exited 0
    /// and printed the NOT_CONFIGURED line is NOT_CONFIGURED; else the word.
    pub fn daemon_status(ctl: &Path, timeout: Duration) -> i64 {
        match run(ctl, &["-q"], timeout) {
            None => COMMAND_ERROR,
            Some(out) if out.contains(NOT_CONFIGURED_LINE) => NOT_CONFIGURED,
            Some(out) => parse_daemon_status_text(&out),
        }
    }

    /// `ParseDaemonStatusText`: trimmed of " \t\n\r", uppercased, matched
    /// exactly; an unknown word is UNAVAILABLE (7).
    fn parse_daemon_status_text(out: &str) -> i64 {
        let word = out.trim_matches([' ', '\t', '\n', '\r']).to_uppercase();
        DAEMON_STATES
            .iter()
            .position(|s| *s == word)
            .map_or(UNAVAILABLE, |i| i as i64)
    }

    /// `RunCmdAndGetOutputWithTimeout` over `ForkAndExecCommand(…,
    /// stderrToStdout = true)`: stdout and stderr in one capture. None is
    /// DCGM's non-OK: a timeout (`DCGM_ST_TIMEOUT`), or what
    /// `CheckChildExitStatus` refuses (a non-zero exit, a signal), or a
    /// failure to start.
    fn run(ctl: &Path, args: &[&str], timeout: Duration) -> Option<String> {
        let mut capture = tempfile::tempfile().ok()?;
        let mut child = Command::new(ctl)
            .args(args)
            .stdin(Stdio::null())
            .stdout(capture.try_clone().ok()?)
            .stderr(capture.try_clone().ok()?)
            .spawn()
            .ok()?;
        let deadline = Instant::now() + timeout;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return None;
                }
            }
        };
        if !status.success() {
            return None;
        }
        let mut out = Vec::new();
        capture.rewind().ok()?;
        capture.read_to_end(&mut out).ok()?;
        Some(String::from_utf8_lossy(&out).into_owned())
    }

    /// `DcgmHealthWatch::MonitorImex`: the domain passes on UP,
    /// NOT_INSTALLED, NOT_CONFIGURED and UNAVAILABLE; the daemon on READY
    /// (5), UNAVAILABLE (7), NOT_INSTALLED (-1) and NOT_CONFIGURED (-2).
    /// Every other value FAILs with `DCGM_FR_IMEX_UNHEALTHY_MSG`, "IMEX %s
    /// status is %s (%s)".
    pub fn monitor_imex(domain: &str, daemon: i64) -> Vec<String> {
        let mut failures = Vec::new();
        let domain_ok = matches!(
            domain,
            "UP" | "NOT_INSTALLED" | "NOT_CONFIGURED" | "UNAVAILABLE"
        );
        if !domain_ok {
            failures.push(format!("IMEX domain status is {domain} (unhealthy)"));
        }
        let daemon_ok = matches!(daemon, READY | UNAVAILABLE | NOT_INSTALLED | NOT_CONFIGURED);
        if !daemon_ok {
            failures.push(format!("IMEX daemon status is {daemon} (not READY)"));
        }
        failures
    }
}

/// What the tests compare: DCGM's reading, slurm-imex's signal, and the
/// site's rule (`SlurmImexDcgmImexDaemonNotReady`) on the two.
#[derive(Debug, PartialEq)]
struct Seen {
    dcgm: dcgm::Reading,
    imex_expected: bool,
    alert: bool,
}

fn read_both(node: &Node) -> Seen {
    let dcgm = dcgm::read(&node.installed_ctl(), Duration::from_secs(10));
    let status = node_status(&node.config);
    let signal = expectation(&node.config);
    assert_eq!(
        (status.imex_expected, &status.imex_expected_because),
        (signal.expected, &signal.because),
        "`slurm-imex status` and the export decide alike"
    );
    Seen {
        alert: signal.expected && dcgm.daemon != dcgm::READY,
        imex_expected: signal.expected,
        dcgm,
    }
}

fn reading(domain: &str, daemon: i64, failures: &[&str]) -> dcgm::Reading {
    dcgm::Reading {
        domain: domain.into(),
        daemon,
        failures: failures.iter().map(|f| f.to_string()).collect(),
    }
}

/// One node with slurm-imex's config over the fake daemon on loopback, and
/// the node's `nvidia-imex-ctl` as DCGM finds it.
struct Node {
    dir: tempfile::TempDir,
    config: Config,
}

impl Node {
    fn new(cmd_port: u16) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let p = |n: &str| dir.path().join(n);
        std::fs::create_dir_all(p("run-imex")).unwrap();
        std::fs::create_dir_all(p("bin")).unwrap();
        std::env::set_var("FAKE_IMEX_RUN_DIR", p("run-imex"));
        std::fs::write(
            p("proc-devices"),
            "Character devices:\n195 nvidia\n507 nvidia-caps-imex-channels\n",
        )
        .unwrap();
        std::fs::write(p("map.toml"), "n1 = \"127.0.0.1\"\nn2 = \"127.0.0.2\"\n").unwrap();
        std::fs::write(p("slurm.conf"), "MaxJobId=2047\n").unwrap();
        // The admin's config.cfg: what the ctl reads when DCGM runs it
        // without -c, naming the nodes config slurm-imex writes. A rack's
        // SERVER_PORT beside the command port, away from IMEX's 50000.
        std::fs::write(
            p("base.cfg"),
            format!(
                "LOG_FILE_NAME={}\nDAEMONIZE=1\nSERVER_PORT={}\nIMEX_CMD_ENABLED=1\n\
                 IMEX_CMD_PORT={cmd_port}\nIMEX_NODE_CONFIG_FILE={}\n",
                p("imex.log").display(),
                cmd_port + 50,
                p("nodes_config.cfg").display()
            ),
        )
        .unwrap();
        // DCGM runs `nvidia-imex-ctl -N -j` and `-q` with no -c: the real
        // ctl then reads /etc/nvidia-imex/config.cfg, which is base.cfg here.
        std::fs::write(
            p("bin/nvidia-imex-ctl"),
            format!(
                "#!/bin/sh\nexec '{}' -c '{}' \"$@\"\n",
                env!("CARGO_BIN_EXE_nvidia-imex-ctl"),
                p("base.cfg").display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(
            p("bin/nvidia-imex-ctl"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let config = Config::parse(&common::node_toml(dir.path()), Path::new("test.toml")).unwrap();
        Node { dir, config }
    }

    fn path(&self, n: &str) -> PathBuf {
        self.dir.path().join(n)
    }

    fn installed_ctl(&self) -> PathBuf {
        self.path("bin/nvidia-imex-ctl")
    }

    fn fault(&self, text: &str) {
        std::fs::write(self.path("run-imex/fake-fault"), text).unwrap();
    }

    fn job(&self, id: u32, nodes: &str) -> JobEnv {
        JobEnv {
            job_id: id,
            node_name: "n1".into(),
            node_list: nodes.into(),
            uid: Some(1000),
            user: None,
            imex_requested: true,
            gpus: None,
        }
    }

    /// The prolog's domain step for `id`, which must end as `ok` says.
    fn prolog(&self, id: u32, nodes: &str, ok: bool) {
        let outcome = setup(&self.job(id, nodes), &HookContext::new(&self.config));
        assert_eq!(outcome.is_ok(), ok, "{outcome:?}");
    }

    /// SIGKILL the daemon slurm-imex started, and wait until it is gone.
    fn kill_daemon(&self) {
        let pid_file = StateDir::of(&self.config).pid_file();
        let text = std::fs::read_to_string(pid_file).unwrap();
        let pid: i32 = text.split_whitespace().next().unwrap().parse().unwrap();
        let pid = nix::unistd::Pid::from_raw(pid);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
        for _ in 0..200 {
            if dcgm::daemon_status(&self.installed_ctl(), Duration::from_secs(5)) < 0 {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the killed daemon still answers");
    }

    /// The installed ctl's own answer to `args`: (exit code, output).
    fn ctl(&self, args: &[&str]) -> (i32, String) {
        let out = std::process::Command::new(self.installed_ctl())
            .args(args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.code().unwrap_or(-1), text)
    }
}

const MINUS_3: &str = "IMEX daemon status is -3 (not READY)";

/// (a) What slurm-imex's epilog leaves on a per-job node: no daemon, the
/// nodes config empty. The ctl cannot reach a daemon (exit 1), so DCGM
/// reads COMMAND_ERROR and FAILs the node; slurm-imex expects no IMEX
/// here, so the rule stays quiet.
#[test]
fn an_idle_per_job_node_fails_dcgm_with_minus_3_and_expects_no_imex() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(46901);
    node.prolog(1101, "n1", true);
    assert_eq!(
        teardown(1101, &node.config).unwrap(),
        TeardownOutcome::TornDown
    );
    assert_eq!(
        std::fs::read_to_string(node.path("nodes_config.cfg")).unwrap(),
        ""
    );
    let (rc, out) = node.ctl(&["-q"]);
    assert_eq!(rc, 1, "{out}");
    assert!(
        out.starts_with("Query Status returned error code: 14"),
        "{out}"
    );
    let seen = read_both(&node);
    assert_eq!(seen.dcgm, reading("UNAVAILABLE", -3, &[MINUS_3]));
    assert!(!seen.imex_expected && !seen.alert, "{seen:?}");
}

/// (b) An idle node whose nodes config is absent (a node no job has used,
/// or a site that removes it): the ctl prints "Failed to read node
/// configuration file" with rc 255 (docs/imex.md §2). DCGM's NOT_CONFIGURED
/// (which passes) needs exit 0, so it is COMMAND_ERROR again: a FAIL.
#[test]
fn an_idle_node_without_a_nodes_config_fails_dcgm_the_same_way() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(46902);
    assert!(!node.path("nodes_config.cfg").exists());
    for args in [&["-q"][..], &["-N", "-j"][..]] {
        let (rc, out) = node.ctl(args);
        assert_eq!(rc, 255, "{args:?}: {out}");
        assert!(
            out.starts_with("Failed to read node configuration file"),
            "{args:?}: {out}"
        );
    }
    let seen = read_both(&node);
    assert_eq!(seen.dcgm, reading("UNAVAILABLE", -3, &[MINUS_3]));
    assert!(!seen.imex_expected && !seen.alert, "{seen:?}");
}

/// (c) A job owns the per-job domain and its daemon is READY: DCGM passes,
/// IMEX is expected, no alert.
#[test]
fn a_job_owning_a_ready_domain_passes_dcgm_and_expects_imex() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(46903);
    node.prolog(1103, "n1", true);
    let seen = read_both(&node);
    assert_eq!(seen.dcgm, reading("UP", dcgm::READY, &[]));
    assert!(seen.imex_expected && !seen.alert, "{seen:?}");
    assert_eq!(
        node_status(&node.config).imex_expected_because,
        "job 1103 owns this node's per-job IMEX domain"
    );
    teardown(1103, &node.config).unwrap();
}

/// (d) A job owns the domain, and its daemon is not READY (it never
/// became READY: the prolog failed this node) or is gone (killed while
/// the job runs): DCGM FAILs, IMEX is expected, and the rule alerts.
#[test]
fn a_job_owning_a_domain_whose_daemon_is_not_ready_or_gone_alerts() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(46904);
    node.fault("MODE=never-ready\n");
    node.prolog(1104, "n1", false);
    let seen = read_both(&node);
    assert_eq!(
        seen.dcgm,
        reading(
            "DOWN",
            0,
            &[
                "IMEX domain status is DOWN (unhealthy)",
                "IMEX daemon status is 0 (not READY)"
            ]
        )
    );
    assert!(seen.imex_expected && seen.alert, "{seen:?}");
    teardown(1104, &node.config).unwrap();

    node.fault("");
    node.prolog(1105, "n1", true);
    node.kill_daemon();
    let seen = read_both(&node);
    assert_eq!(seen.dcgm, reading("UNAVAILABLE", -3, &[MINUS_3]));
    assert!(seen.imex_expected && seen.alert, "{seen:?}");
    teardown(1105, &node.config).unwrap();
}

/// Beside (d): a job's domain whose peer never came (the job's fault,
/// not this node's). This node's daemon is READY and the domain DEGRADED:
/// DCGM FAILs the domain; the daemon rule stays quiet here (the peer's own
/// node, which a job owns too, is where its daemon reads not READY).
#[test]
fn a_job_domain_missing_a_peer_fails_dcgm_on_the_domain_only() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(46905);
    node.prolog(1106, "n[1-2]", false);
    let seen = read_both(&node);
    assert_eq!(
        seen.dcgm,
        reading(
            "DEGRADED",
            dcgm::READY,
            &["IMEX domain status is DEGRADED (unhealthy)"]
        )
    );
    assert!(seen.imex_expected && !seen.alert, "{seen:?}");
    teardown(1106, &node.config).unwrap();
}

/// (e) `[imex] domain = "rack"`: the rack daemon runs READY, with a job on
/// the node and after its epilog alike: DCGM passes, IMEX is expected. A
/// rack node whose daemon is not running and that has no job reads -3 in
/// DCGM like an idle per-job node, and expects nothing (the next prolog
/// starts the daemon).
#[test]
fn a_rack_node_expects_imex_while_its_daemon_serves_the_rack() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut node = Node::new(46906);
    let topo = node.path("topology.conf");
    std::fs::write(&topo, "BlockName=rack7 Nodes=n1\n").unwrap();
    node.config.slurm.topology = AutoPath::Path(topo);
    node.config.engine.domain = DomainScope::Rack;
    node.prolog(1107, "n1", true);
    let seen = read_both(&node);
    assert_eq!(seen.dcgm, reading("UP", dcgm::READY, &[]));
    assert!(seen.imex_expected && !seen.alert, "{seen:?}");
    assert_eq!(
        node_status(&node.config).imex_expected_because,
        "--imex job(s) 1107 on this node use the rack-wide IMEX domain"
    );
    assert_eq!(
        teardown(1107, &node.config).unwrap(),
        TeardownOutcome::RackDomainKept
    );
    let seen = read_both(&node);
    assert_eq!(seen.dcgm, reading("UP", dcgm::READY, &[]));
    assert!(seen.imex_expected && !seen.alert, "{seen:?}");

    node.kill_daemon();
    let seen = read_both(&node);
    assert_eq!(seen.dcgm, reading("UNAVAILABLE", -3, &[MINUS_3]));
    assert!(!seen.imex_expected && !seen.alert, "{seen:?}");
    // Back to per-job domains: the next epilog stops what is left.
    node.config.engine.domain = DomainScope::Job;
    teardown(1107, &node.config).unwrap();
}

/// A node without NVIDIA's ctl (or one DCGM may not run): NOT_INSTALLED
/// passes; slurm-imex expects nothing there either.
#[test]
fn a_node_without_the_imex_ctl_passes_dcgm() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(46907);
    let ctl = node.installed_ctl();
    std::fs::set_permissions(&ctl, std::fs::Permissions::from_mode(0o644)).unwrap();
    let seen = read_both(&node);
    assert_eq!(seen.dcgm, reading("NOT_INSTALLED", -1, &[]));
    assert!(!seen.imex_expected && !seen.alert, "{seen:?}");
    std::fs::remove_file(&ctl).unwrap();
    assert_eq!(read_both(&node).dcgm, reading("NOT_INSTALLED", -1, &[]));
}

/// The replay itself, on stand-in ctls: NOT_CONFIGURED only from a run
/// that exited 0, the last "status", words trimmed and uppercased, unknown
/// words UNAVAILABLE, timeouts and signals non-OK, stderr captured.
#[test]
fn the_replay_classifies_as_dcgm_4_6_does() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let stub = |name: &str, body: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    };
    let t = Duration::from_millis(800);
    let not_configured = stub(
        "nc",
        "echo 'Failed to read node configuration file /x' >&2; exit 0",
    );
    assert_eq!(dcgm::daemon_status(&not_configured, t), -2);
    assert_eq!(dcgm::domain_status(&not_configured, t), "NOT_CONFIGURED");
    assert!(dcgm::monitor_imex("NOT_CONFIGURED", -2).is_empty());
    let words = stub("w", "printf ' ready \\r\\n'");
    assert_eq!(dcgm::daemon_status(&words, t), dcgm::READY);
    let odd = stub("odd", "echo Waiting_For_Peers");
    assert_eq!(dcgm::daemon_status(&odd, t), 2);
    let unknown = stub("u", "echo SOMETHING_NEW");
    assert_eq!(dcgm::daemon_status(&unknown, t), dcgm::UNAVAILABLE);
    let json = stub(
        "j",
        r#"echo '{"nodes":{"0":{"status":"READY"}},"timestamp":"t","status":"degraded"}'"#,
    );
    assert_eq!(dcgm::domain_status(&json, t), "DEGRADED");
    let slow = stub("slow", "sleep 5; echo READY");
    assert_eq!(dcgm::daemon_status(&slow, t), dcgm::COMMAND_ERROR);
    assert_eq!(dcgm::domain_status(&slow, t), "UNAVAILABLE");
    let killed = stub("k", "echo READY; kill -9 $$");
    assert_eq!(dcgm::daemon_status(&killed, t), dcgm::COMMAND_ERROR);
    let fails = stub("f", "echo READY; exit 1");
    assert_eq!(dcgm::daemon_status(&fails, t), dcgm::COMMAND_ERROR);
    for (daemon, passes) in [(5, true), (7, true), (-1, true), (-2, true), (-3, false)] {
        assert_eq!(
            dcgm::monitor_imex("UP", daemon).is_empty(),
            passes,
            "{daemon}"
        );
    }
    for daemon in [0, 1, 2, 3, 4, 6, 999] {
        assert_eq!(
            dcgm::monitor_imex("UP", daemon),
            [format!("IMEX daemon status is {daemon} (not READY)")]
        );
    }
    assert_eq!(
        dcgm::monitor_imex("INVALID_GARBAGE", 5),
        ["IMEX domain status is INVALID_GARBAGE (unhealthy)"]
    );
}
