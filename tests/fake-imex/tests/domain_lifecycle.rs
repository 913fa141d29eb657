//! The prolog/epilog domain lifecycle (slurm_imex_domain::imex::domain) driven
//! against the fake nvidia-imex on loopback, one node: readiness, blame for
//! each kind of failure, ownership, and idempotent teardown.

mod common;
use slurm_imex_core::blame::Fault;
use slurm_imex_core::config::AutoPath;
use slurm_imex_core::slurm::env::JobEnv;
use slurm_imex_core::state::job_record::Outcome;
use slurm_imex_core::state::StateDir;
use slurm_imex_domain::config::DomainScope;
use slurm_imex_domain::context::{HookContext, Readers};
use slurm_imex_domain::imex::domain::{refuse_for_own_clique, setup, teardown, TeardownOutcome};
use slurm_imex_settings::Config;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The fake daemon is single-instance per run dir and the env is per
/// process, so these tests take turns.
static SERIAL: Mutex<()> = Mutex::new(());

struct Node {
    dir: tempfile::TempDir,
    config: Config,
}

impl Node {
    fn new(cmd_port: u16, extra_base: &str) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let p = |n: &str| dir.path().join(n);
        std::fs::create_dir_all(p("run-imex")).unwrap();
        std::env::set_var("FAKE_IMEX_RUN_DIR", p("run-imex"));
        std::fs::write(
            p("proc-devices"),
            "Character devices:\n195 nvidia\n507 nvidia-caps-imex-channels\n",
        )
        .unwrap();
        std::fs::write(p("map.toml"), "n1 = \"127.0.0.1\"\nn2 = \"127.0.0.2\"\n").unwrap();
        // Job ids within the channels, as rack-wide domains require.
        std::fs::write(p("slurm.conf"), "MaxJobId=2047\n").unwrap();
        // The admin's config.cfg names the nodes config, as a node's does:
        // the ctl reads it through this file (daemon_answers), -q too.
        std::fs::write(
            p("base.cfg"),
            format!(
                "LOG_FILE_NAME={}\nDAEMONIZE=1\nSERVER_PORT=50000\nIMEX_CMD_ENABLED=1\nIMEX_CMD_PORT={cmd_port}\n\
                 IMEX_NODE_CONFIG_FILE={}\n{extra_base}",
                p("imex.log").display(),
                p("nodes_config.cfg").display()
            ),
        )
        .unwrap();
        let toml = common::node_toml(dir.path());
        let config = Config::parse(&toml, Path::new("test.toml")).unwrap();
        Node { dir, config }
    }

    fn path(&self, n: &str) -> PathBuf {
        self.dir.path().join(n)
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

    fn daemon_answers(&self) -> bool {
        std::process::Command::new(env!("CARGO_BIN_EXE_nvidia-imex-ctl"))
            .args(["-c", self.path("base.cfg").to_str().unwrap(), "-q"])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    }

    fn assert_idle(&self) {
        assert_eq!(
            std::fs::read_to_string(self.path("nodes_config.cfg")).unwrap(),
            ""
        );
        assert!(
            !self.path("job.cfg").exists(),
            "per-job daemon config left behind"
        );
        assert!(
            !self.path("state/nvidia-imex.pid").exists(),
            "pid file left behind"
        );
        assert!(
            !self.path("state/domain.owner").exists(),
            "owner left behind"
        );
        assert!(!self.daemon_answers(), "daemon still running");
    }
}

#[test]
fn ready_domain_then_teardown_twice() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(46001, "");
    let job = node.job(4242, "n1");
    let outcome = setup(&job, &HookContext::new(&node.config));
    let Ok(_) = outcome else {
        panic!("{outcome:?}")
    };
    let record = StateDir::of(&node.config)
        .read_record(4242)
        .unwrap()
        .unwrap();
    assert_eq!(record.channel, Some(1 + 4242 % 2047));
    assert_eq!(
        std::fs::read_to_string(node.path("nodes_config.cfg")).unwrap(),
        "127.0.0.1\n"
    );
    let rendered = std::fs::read_to_string(node.path("job.cfg")).unwrap();
    assert!(
        rendered.contains(&format!("SERVER_PORT={}", 33792 + 4242)),
        "{rendered}"
    );
    assert!(rendered.contains("DAEMONIZE=0"));
    assert!(rendered.contains(&format!(
        "IMEX_NODE_CONFIG_FILE={}",
        node.path("nodes_config.cfg").display()
    )));
    // The admin's base config is never modified.
    assert!(std::fs::read_to_string(node.path("base.cfg"))
        .unwrap()
        .contains("SERVER_PORT=50000"));
    let state = StateDir::of(&node.config);
    assert!(matches!(
        state.read_record(4242).unwrap().unwrap().outcome,
        Outcome::Ready { .. }
    ));
    assert!(node.daemon_answers());

    assert_eq!(
        teardown(4242, &node.config).unwrap(),
        TeardownOutcome::TornDown
    );
    node.assert_idle();
    assert_eq!(state.read_record(4242).unwrap(), None);
    assert_eq!(
        teardown(4242, &node.config).unwrap(),
        TeardownOutcome::AlreadyIdle
    );
    node.assert_idle();
}

#[test]
fn daemon_exiting_at_start_is_a_node_fault_with_its_log() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(46002, "");
    node.fault("MODE=exit\nEXIT_CODE=3\n");
    let outcome = setup(&node.job(100, "n1"), &HookContext::new(&node.config));
    let Err(Fault::Node(msg)) = outcome else {
        panic!("{outcome:?}")
    };
    let msg = msg.to_string();
    assert!(msg.contains("exited with status 3"), "{msg}");
    assert!(
        msg.contains("fake fault injection"),
        "log tail missing: {msg}"
    );
    assert!(!msg.contains('\n'));
    teardown(100, &node.config).unwrap();
    node.assert_idle();
}

#[test]
fn local_daemon_never_ready_is_a_node_fault() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(46003, "");
    node.fault("MODE=never-ready\n");
    let outcome = setup(&node.job(101, "n1"), &HookContext::new(&node.config));
    let Err(Fault::Node(msg)) = outcome else {
        panic!("{outcome:?}")
    };
    let msg = msg.to_string();
    assert!(
        msg.contains("not READY after 1s 500ms") && msg.contains("INITIALIZING"),
        "{msg}"
    );
    teardown(101, &node.config).unwrap();
    node.assert_idle();
}

#[test]
fn missing_peer_is_a_job_failure_naming_it() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(46004, "");
    let outcome = setup(&node.job(102, "n[1-2]"), &HookContext::new(&node.config));
    let Err(Fault::Job(msg)) = outcome else {
        panic!("{outcome:?}")
    };
    assert!(msg.contains("n2 (127.0.0.2)"), "{msg}");
    assert!(!msg.contains("n1 (127.0.0.1)"), "{msg}");
    assert_eq!(
        std::fs::read_to_string(node.path("nodes_config.cfg")).unwrap(),
        "127.0.0.1\n127.0.0.2\n"
    );
    let state = StateDir::of(&node.config);
    match state.read_record(102).unwrap().unwrap().outcome {
        Outcome::Failed { node_fault, cause } => assert!(!node_fault && cause == msg),
        o => panic!("{o:?}"),
    }
    teardown(102, &node.config).unwrap();
    node.assert_idle();
}

#[test]
fn busy_node_refuses_second_job_and_keeps_the_first() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(46005, "");
    assert!(setup(&node.job(200, "n1"), &HookContext::new(&node.config)).is_ok());
    let outcome = setup(&node.job(201, "n1"), &HookContext::new(&node.config));
    let Err(Fault::Job(msg)) = outcome else {
        panic!("{outcome:?}")
    };
    assert!(
        msg.contains("already serves the IMEX domain of job 200"),
        "{msg}"
    );
    // The refused job's epilog leaves job 200's domain alone.
    assert_eq!(
        teardown(201, &node.config).unwrap(),
        TeardownOutcome::LeftToOwner(200)
    );
    assert!(node.daemon_answers());
    assert_eq!(
        std::fs::read_to_string(node.path("nodes_config.cfg")).unwrap(),
        "127.0.0.1\n"
    );
    assert_eq!(
        teardown(200, &node.config).unwrap(),
        TeardownOutcome::TornDown
    );
    node.assert_idle();
}

#[test]
fn node_problems_are_node_faults_with_what_to_do() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(46006, "IMEX_CMD_ENABLED=0\n");
    let outcome = setup(&node.job(300, "n1"), &HookContext::new(&node.config));
    let Err(Fault::Node(msg)) = outcome else {
        panic!("{outcome:?}")
    };
    let msg = msg.to_string();
    assert!(msg.contains("set IMEX_CMD_ENABLED=1"), "{msg}");
    teardown(300, &node.config).unwrap();

    std::fs::write(
        node.path("proc-devices"),
        "Character devices:\n195 nvidia\n",
    )
    .unwrap();
    let outcome = setup(&node.job(301, "n1"), &HookContext::new(&node.config));
    let Err(Fault::Node(msg)) = outcome else {
        panic!("{outcome:?}")
    };
    let msg = msg.to_string();
    assert!(msg.contains("IMEX channel device missing on n1"), "{msg}");
    teardown(301, &node.config).unwrap();
    node.assert_idle();
}

#[test]
fn unknown_node_address_is_a_job_failure() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(46007, "");
    let outcome = setup(
        &node.job(400, "n1,gb-r9-01"),
        &HookContext::new(&node.config),
    );
    let Err(Fault::Job(msg)) = outcome else {
        panic!("{outcome:?}")
    };
    assert!(
        msg.contains("gb-r9-01") && msg.contains("map.toml"),
        "{msg}"
    );
    teardown(400, &node.config).unwrap();
    node.assert_idle();
}

#[test]
fn systemd_manager_restarts_checks_and_stops_the_unit() {
    use std::os::unix::fs::PermissionsExt;
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut node = Node::new(46008, "");
    // A stand-in systemctl for a unit whose drop-in runs the daemon on the
    // per-job config (conf-examples/nvidia-imex.service.d): Type=forking.
    let log = node.path("systemctl.log");
    let pid = node.path("unit.pid");
    let script = format!(
        r#"#!/bin/sh
echo "$*" >> {log}
stop() {{ if [ -f {pid} ]; then p=$(cat {pid}); kill $p 2>/dev/null; for i in $(seq 1 100); do kill -0 $p 2>/dev/null || break; sleep 0.02; done; rm -f {pid}; fi; }}
case "$1" in
  restart) stop; FAKE_IMEX_PID_FILE={pid} {daemon} -c {cfg} </dev/null >/dev/null 2>&1 ;;
  stop) stop ;;
  is-active) if [ -f {pid} ] && kill -0 $(cat {pid}) 2>/dev/null; then echo active; else echo inactive; exit 3; fi ;;
esac
"#,
        log = log.display(),
        pid = pid.display(),
        daemon = env!("CARGO_BIN_EXE_nvidia-imex"),
        cfg = node.path("job.cfg").display()
    );
    let systemctl = node.path("systemctl");
    std::fs::write(&systemctl, script).unwrap();
    std::fs::set_permissions(&systemctl, std::fs::Permissions::from_mode(0o755)).unwrap();
    node.config.engine.daemon.manager = slurm_imex_domain::config::DaemonManager::Systemd;
    node.config.engine.daemon.systemctl = systemctl;

    let outcome = setup(&node.job(500, "n1"), &HookContext::new(&node.config));
    assert!(outcome.is_ok(), "{outcome:?}");
    // The base config's DAEMONIZE=1 is kept: systemd expects the daemon to fork.
    let rendered = std::fs::read_to_string(node.path("job.cfg")).unwrap();
    assert!(
        rendered.contains("DAEMONIZE=1") && !rendered.contains("DAEMONIZE=0"),
        "{rendered}"
    );
    assert!(node.daemon_answers());
    assert_eq!(
        teardown(500, &node.config).unwrap(),
        TeardownOutcome::TornDown
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(calls.starts_with("restart nvidia-imex\n"), "{calls}");
    assert!(calls.contains("is-active nvidia-imex\n"), "{calls}");
    // The teardown is verified: the unit must be inactive after the stop.
    assert!(
        calls.ends_with("stop nvidia-imex\nis-active nvidia-imex\n"),
        "{calls}"
    );
    node.assert_idle();

    // A unit that fails to start is this node's fault.
    node.fault("MODE=exit\nEXIT_CODE=4\n");
    let outcome = setup(&node.job(501, "n1"), &HookContext::new(&node.config));
    let Err(Fault::Node(msg)) = outcome else {
        panic!("{outcome:?}")
    };
    let msg = msg.to_string();
    assert!(
        msg.contains(
            "nvidia-imex could not start on n1: systemctl restart nvidia-imex failed: exit status"
        ),
        "{msg}"
    );
    assert!(
        msg.contains("exiting with status 4"),
        "log tail missing: {msg}"
    );
    assert!(
        msg.contains("(journalctl -u nvidia-imex says why)"),
        "{msg}"
    );
    teardown(501, &node.config).unwrap();
    node.assert_idle();
}

#[test]
fn with_span_refuse_a_job_across_two_blocks_fails_before_claiming_or_starting_anything() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut node = Node::new(46007, "");
    let topo = node.path("topology.conf");
    std::fs::write(&topo, "BlockName=r1 Nodes=n1\nBlockName=r2 Nodes=n2\n").unwrap();
    node.config.slurm.topology = slurm_imex_core::config::AutoPath::Path(topo);
    node.config.engine.span = slurm_imex_domain::config::Span::Refuse;
    let job = node.job(4343, "n[1-2]");
    let Err(Fault::Job(cause)) = setup(&job, &HookContext::new(&node.config)) else {
        panic!("a job spanning two blocks must fail as the job's problem");
    };
    assert!(cause.contains("r1 (n1), r2 (n2)"), "{cause}");
    let state = StateDir::of(&node.config);
    let lock = state.lock().unwrap();
    assert_eq!(state.owner(&lock).unwrap(), None, "domain claimed");
    assert!(!state.pid_file().exists(), "a daemon was started");
    assert_eq!(
        std::fs::read_to_string(node.path("nodes_config.cfg")).unwrap_or_default(),
        ""
    );
}

#[test]
fn a_job_across_two_blocks_gets_one_domain_per_block() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut node = Node::new(46009, "");
    let topo = node.path("topology.conf");
    std::fs::write(&topo, "BlockName=r1 Nodes=n1\nBlockName=r2 Nodes=n2\n").unwrap();
    node.config.slurm.topology = slurm_imex_core::config::AutoPath::Path(topo);
    let job = node.job(4344, "n[1-2]");
    // n1 is alone in its block: its domain is itself, and it forms at once.
    let outcome = setup(&job, &HookContext::new(&node.config));
    let Ok(_) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(
        std::fs::read_to_string(node.path("nodes_config.cfg")).unwrap(),
        "127.0.0.1\n"
    );
    let record = StateDir::of(&node.config)
        .read_record(4344)
        .unwrap()
        .unwrap();
    assert_eq!(record.nodes, ["n1"]);
    assert_eq!(record.domain.as_deref(), Some("r1"));
    assert_eq!(record.domain_name(), "r1");
    teardown(4344, &node.config).unwrap();
    node.assert_idle();
}

#[test]
fn a_missing_nodes_config_directory_names_the_key_and_the_file() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut node = Node::new(46010, "");
    let missing = node.path("no-such-dir/nodes_config.cfg");
    node.config.engine.daemon.nodes_config = missing.clone();
    let outcome = setup(&node.job(4345, "n1"), &HookContext::new(&node.config));
    let Err(Fault::Node(msg)) = outcome else {
        panic!("{outcome:?}")
    };
    let msg = msg.to_string();
    assert!(msg.contains("[imex.daemon] nodes_config"), "{msg}");
    assert!(msg.contains(&missing.display().to_string()), "{msg}");
    assert!(msg.contains("its directory does not exist"), "{msg}");
    teardown(4345, &node.config).unwrap();
}

#[test]
fn a_rack_wide_domain_starts_once_serves_every_job_and_outlives_them() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut node = Node::new(46011, "");
    let topo = node.path("topology.conf");
    // n2 is in the rack but runs no daemon: a rack is often DEGRADED.
    std::fs::write(&topo, "BlockName=rack7 Nodes=n[1-2]\n").unwrap();
    node.config.slurm.topology = slurm_imex_core::config::AutoPath::Path(topo);
    node.config.engine.domain = slurm_imex_domain::config::DomainScope::Rack;
    let state = StateDir::of(&node.config);
    let ready = |id: u32, nodes: &str| {
        let outcome = setup(&node.job(id, nodes), &HookContext::new(&node.config));
        assert!(outcome.is_ok(), "{outcome:?}");
    };
    ready(700, "n1");
    // The whole rack, at the base config's port, whatever the job.
    assert_eq!(
        std::fs::read_to_string(node.path("nodes_config.cfg")).unwrap(),
        "127.0.0.1\n127.0.0.2\n"
    );
    let rendered = std::fs::read_to_string(node.path("job.cfg")).unwrap();
    assert!(rendered.contains("SERVER_PORT=50000\n"), "{rendered}");
    let record = state.read_record(700).unwrap().unwrap();
    assert_eq!(
        (record.nodes, record.domain),
        (vec!["n1".to_string()], Some("rack7".into()))
    );
    let daemon = std::fs::read_to_string(state.pid_file()).unwrap();

    // A second job on the same node shares the daemon: no refusal, no restart.
    ready(701, "n1");
    assert_eq!(std::fs::read_to_string(state.pid_file()).unwrap(), daemon);
    assert_eq!(
        state.read_record(701).unwrap().unwrap().channel,
        Some(702) // its own channel: 1 + 701 mod 2047
    );

    // The epilog leaves the rack's daemon up.
    assert_eq!(
        teardown(700, &node.config).unwrap(),
        TeardownOutcome::RackDomainKept
    );
    assert!(
        node.daemon_answers(),
        "the rack daemon was stopped by a job's epilog"
    );
    assert_eq!(state.read_record(700).unwrap(), None);
    assert!(state.read_record(701).unwrap().is_some());

    // A job that needs n2, whose daemon never connects: the job's failure, naming it.
    let outcome = setup(&node.job(702, "n[1-2]"), &HookContext::new(&node.config));
    let Err(Fault::Job(msg)) = outcome else {
        panic!("a peer that is not ready is the job's problem: {outcome:?}");
    };
    assert!(
        msg.contains("n2 (127.0.0.2)") && msg.contains("rack7"),
        "{msg}"
    );

    // A daemon that died is started again by the next prolog.
    let pid: i32 = daemon.split_whitespace().next().unwrap().parse().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    for _ in 0..100 {
        if !node.daemon_answers() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    ready(703, "n1");
    assert_ne!(std::fs::read_to_string(state.pid_file()).unwrap(), daemon);

    // Back to per-job domains: the next epilog stops the daemon.
    node.config.engine.domain = slurm_imex_domain::config::DomainScope::Job;
    for id in [701, 702, 703] {
        teardown(id, &node.config).unwrap();
    }
    node.assert_idle();
}

#[test]
fn a_rack_wide_domain_without_a_rack_fails_the_job_before_starting_anything() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut node = Node::new(46012, "");
    let topo = node.path("topology.conf");
    std::fs::write(&topo, "BlockName=rack9 Nodes=n5\n").unwrap();
    node.config.slurm.topology = slurm_imex_core::config::AutoPath::Path(topo);
    node.config.engine.domain = slurm_imex_domain::config::DomainScope::Rack;
    // No rack map either; and the prolog never asks Slurm (an scontrol that fails).
    node.config.slurm.scontrol = "/bin/false".into();
    let Err(Fault::Job(cause)) = setup(&node.job(710, "n1"), &HookContext::new(&node.config))
    else {
        panic!("a node in no rack is the job's problem, not the node's");
    };
    assert!(
        cause.contains("nothing places n1 in a rack") && cause.contains("topology.conf"),
        "{cause}"
    );
    let state = StateDir::of(&node.config);
    assert!(!state.pid_file().exists(), "a daemon was started");
    assert!(!node.daemon_answers());
    teardown(710, &node.config).unwrap();
}

const CLIQUE_A: &str = "dc6e40c4-d722-4357-9ba6-5291dd461278.1";
const CLIQUE_B: &str = "dc6e40c4-d722-4357-9ba6-5291dd461278.2";

impl Node {
    /// A rack map beside the test's config: n1 in r1 (clique A), n2 in r2 (B).
    fn with_rack_map(&mut self) {
        let map = self.path("imex-racks.toml");
        std::fs::write(
            &map,
            format!(
                "[[rack]]\nname = \"r1\"\nclique = \"{CLIQUE_A}\"\nnodes = \"n1\"\n\
                 [[rack]]\nname = \"r2\"\nclique = \"{CLIQUE_B}\"\nnodes = \"n2\"\n"
            ),
        )
        .unwrap();
        self.config.engine.rack_map = AutoPath::Path(map);
    }
}

#[test]
fn a_rack_map_splits_the_job_and_the_record_names_it_with_its_digest() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut node = Node::new(46013, "");
    node.with_rack_map();
    // The prolog never asks Slurm: an scontrol that would fail is never run.
    node.config.slurm.scontrol = "/bin/false".into();
    let outcome = setup(&node.job(4400, "n[1-2]"), &HookContext::new(&node.config));
    assert!(outcome.is_ok(), "{outcome:?}");
    assert_eq!(
        std::fs::read_to_string(node.path("nodes_config.cfg")).unwrap(),
        "127.0.0.1\n"
    );
    let record = StateDir::of(&node.config)
        .read_record(4400)
        .unwrap()
        .unwrap();
    assert_eq!(
        (record.nodes, record.domain.as_deref()),
        (vec!["n1".to_string()], Some("r1"))
    );
    let source = record.rack_source.unwrap();
    assert!(source.contains("imex-racks.toml (sha256 "), "{source}");
    teardown(4400, &node.config).unwrap();
    node.assert_idle();
}

#[test]
fn a_rack_map_that_contradicts_the_nodes_own_gpus_fails_the_job_not_the_node() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut node = Node::new(46014, "");
    node.with_rack_map();
    let job = node.job(4401, "n[1-2]");
    // One prolog: the setup and the clique check share its context.
    let ctx = HookContext::new(&node.config);
    let outcome = setup(&job, &ctx);
    assert!(outcome.is_ok(), "{outcome:?}");
    // The GPUs agree with the map: nothing to refuse.
    assert_eq!(refuse_for_own_clique(&job, &ctx, CLIQUE_A), Ok(()));
    assert!(node.daemon_answers());
    // n1's tray now reports the other rack's clique.
    let Err(Fault::Job(cause)) = refuse_for_own_clique(&job, &ctx, CLIQUE_B) else {
        panic!("the map contradicts the GPUs: a job failure");
    };
    assert!(
        cause.contains(&format!("n1's GPUs report NVLink clique {CLIQUE_B}")),
        "{cause}"
    );
    assert!(cause.contains("puts n1 in rack r1"), "{cause}");
    let record = StateDir::of(&node.config)
        .read_record(4401)
        .unwrap()
        .unwrap();
    assert_eq!(
        record.outcome,
        Outcome::Failed {
            cause,
            node_fault: false
        }
    );
    // The domain stays for the epilog, so no peer sees this node vanish.
    assert!(node.daemon_answers());
    teardown(4401, &node.config).unwrap();
    node.assert_idle();
}

#[test]
fn rack_wide_domains_refuse_channels_that_could_collide() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut node = Node::new(46015, "");
    let topo = node.path("topology.conf");
    std::fs::write(&topo, "BlockName=rack7 Nodes=n[1-2]\n").unwrap();
    node.config.slurm.topology = AutoPath::Path(topo);
    node.config.engine.domain = DomainScope::Rack;
    // Slurm's default job ids (1..67043328) over 2047 channels.
    std::fs::write(node.path("slurm.conf"), "ClusterName=c\n").unwrap();
    let Err(Fault::Job(cause)) = setup(&node.job(720, "n1"), &HookContext::new(&node.config))
    else {
        panic!("the cluster's configuration is not the node's fault");
    };
    assert!(cause.contains("set MaxJobId=2047"), "{cause}");
    assert!(!node.daemon_answers(), "a daemon was started");
    // Within range: jobs 5 and 5 + 2047 would share channel 6; the second is refused.
    std::fs::write(node.path("slurm.conf"), "MaxJobId=2047\n").unwrap();
    assert!(setup(&node.job(5, "n1"), &HookContext::new(&node.config)).is_ok());
    let Err(Fault::Job(cause)) = setup(&node.job(5 + 2047, "n1"), &HookContext::new(&node.config))
    else {
        panic!("an id outside the range must not share a channel");
    };
    assert!(
        cause.contains("job id 2052 lies outside FirstJobId..MaxJobId = 1..2047"),
        "{cause}"
    );
    node.config.engine.domain = DomainScope::Job;
    for id in [720, 5, 2052] {
        teardown(id, &node.config).unwrap();
    }
    node.assert_idle();
}

/// A second fake daemon standing for n2 on 127.0.0.2, with its own node map.
fn spawn_peer(
    node: &Node,
    nodes_config: &str,
    server_port: u16,
    cmd_port: u16,
) -> std::process::Child {
    let dir = node.path("peer");
    std::fs::create_dir_all(dir.join("run")).unwrap();
    std::fs::write(dir.join("nodes_config.cfg"), nodes_config).unwrap();
    let cfg = dir.join("config.cfg");
    std::fs::write(
        &cfg,
        format!(
            "LOG_FILE_NAME={}\nDAEMONIZE=0\nSERVER_PORT={server_port}\nIMEX_CMD_ENABLED=1\n\
             IMEX_CMD_PORT={cmd_port}\nIMEX_NODE_CONFIG_FILE={}\n",
            dir.join("imex.log").display(),
            dir.join("nodes_config.cfg").display()
        ),
    )
    .unwrap();
    std::process::Command::new(env!("CARGO_BIN_EXE_nvidia-imex"))
        .args(["-c", cfg.to_str().unwrap()])
        .env("FAKE_IMEX_RUN_DIR", dir.join("run"))
        .env("FAKE_IMEX_LOCAL_IPS", "127.0.0.2")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn a_peer_with_another_node_map_is_named_as_such_not_blamed() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut node = Node::new(46016, "");
    node.with_rack_map();
    // n1 and n2 are one rack in n1's map; n2 read another file.
    let map = node.path("imex-racks.toml");
    std::fs::write(
        &map,
        format!("[[rack]]\nname = \"r1\"\nclique = \"{CLIQUE_A}\"\nnodes = \"n[1-2]\"\n"),
    )
    .unwrap();
    let job_id = 4402u32;
    let port = slurm_imex_domain::imex::port::server_port(job_id, 33792, 16384, Some(46016));
    let mut peer = spawn_peer(&node, "127.0.0.1\n127.0.0.2\n127.0.0.3\n", port, 46017);
    let outcome = setup(&node.job(job_id, "n[1-2]"), &HookContext::new(&node.config));
    let _ = peer.kill();
    let _ = peer.wait();
    let Err(Fault::Job(msg)) = outcome else {
        panic!("different node maps are not this node's fault: {outcome:?}")
    };
    assert!(
        msg.contains("n2 (127.0.0.2) hold(s) another node map (NODE_MAP_MISMATCH)"),
        "{msg}"
    );
    assert!(msg.contains("this node n1 put n[1-2] in it from"), "{msg}");
    assert!(msg.contains("imex-racks.toml (sha256 "), "{msg}");
    assert!(
        !msg.contains("never became ready"),
        "an innocent peer is blamed: {msg}"
    );
    teardown(job_id, &node.config).unwrap();
    node.assert_idle();
}

static SLURM_CONF_READS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static RACK_READS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The production readers, counted.
fn counting_readers() -> Readers {
    use std::sync::atomic::Ordering::SeqCst;
    Readers {
        slurm_conf: |path| {
            SLURM_CONF_READS.fetch_add(1, SeqCst);
            (Readers::FILES.slurm_conf)(path)
        },
        racks: |cfg, nodes| {
            RACK_READS.fetch_add(1, SeqCst);
            (Readers::FILES.racks)(cfg, nodes)
        },
    }
}

#[test]
fn a_rack_wide_prolog_reads_slurm_conf_and_the_rack_files_once() {
    use std::sync::atomic::Ordering::SeqCst;
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut node = Node::new(46016, "");
    node.with_rack_map();
    // Every question slurm.conf answers is asked: "auto" channels (the
    // switch), then the rack's channel guarantee (the switch, the job ids).
    node.config.imex.channels = slurm_imex_core::config::ChannelMode::Auto;
    node.config.engine.domain = DomainScope::Rack;
    SLURM_CONF_READS.store(0, SeqCst);
    RACK_READS.store(0, SeqCst);
    let ctx = HookContext::with_readers(&node.config, counting_readers());
    let job = node.job(730, "n1");
    let outcome = setup(&job, &ctx);
    assert!(outcome.is_ok(), "{outcome:?}");
    let record = StateDir::of(&node.config)
        .read_record(730)
        .unwrap()
        .unwrap();
    assert_eq!(
        record.channel,
        Some(731),
        "slurm-imex's channel, from \"auto\""
    );
    assert_eq!(record.domain.as_deref(), Some("r1"));
    // The files go; the prolog's clique check still knows the map it read.
    std::fs::remove_file(node.path("slurm.conf")).unwrap();
    std::fs::remove_file(node.path("imex-racks.toml")).unwrap();
    let Err(Fault::Job(cause)) = refuse_for_own_clique(&job, &ctx, CLIQUE_B) else {
        panic!("the map read at the start contradicts the GPUs");
    };
    assert!(cause.contains("puts n1 in rack r1"), "{cause}");
    assert_eq!(SLURM_CONF_READS.load(SeqCst), 1, "slurm.conf reads");
    assert_eq!(RACK_READS.load(SeqCst), 1, "rack file reads");
    node.config.engine.domain = DomainScope::Job;
    teardown(730, &node.config).unwrap();
    node.assert_idle();
}
