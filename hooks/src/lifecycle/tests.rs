//! The decision table of docs/blame.md, row by row: what the prolog and
//! epilog do (exit status, stderr lines, the job record written, the
//! node's standing) with each outcome of their steps. The drain decision
//! (`drain::act`, `drain::imex_node_fault`) and the record's outcome
//! (`domain::outcome_of`) are the real ones, under a default config
//! (`set_drain_reason = false`: no scontrol call).
//!
//! For each row whose fault the IMEX domain decides, the prolog's domain
//! steps are the real ones (`Live::form_domain`, that is `domain::form`,
//! with `Live::write_record` and `Live::own_clique_disagreement`) on
//! node n1's own files in a temporary directory (`node::TestNode`): the
//! row's condition is put in those files (a rack map, slurm.conf, the
//! address map, the state directory) or in the answers of the stand-ins
//! for `nvidia-imex`, `nvidia-imex-ctl` and `scontrol`, and the decision
//! the code makes from it meets the lifecycle. Only the GPU health gate
//! is a fake for these rows (it passes, reading the clique a row names).
//! So making a job fault a node fault, or the reverse, where the row's
//! decision is made fails the row's test. The other rows' steps are fakes
//! that hand the lifecycle a canned outcome (no Slurm, NVML or daemon).
//!
//! | docs/blame.md row | test | the decision it drives, from |
//! |---|---|---|
//! | this node's daemon cannot start, or is not READY; no channel device; bad local config | `row_this_nodes_daemon_or_channel_fails_the_prolog`, `row_bad_local_config_fails_the_prolog`, `row_bad_state_directory_fails_the_prolog` (and `row_this_node_cannot_write_the_job_record`) | `DomainPlan::wait_ready` (`poll_until_ready(…).node()?`), from a daemon that exits at start; `DomainPlan::start` in `job_domain::form`, from a daemon binary that is not there; `DomainPlan::blame_not_ready`, from a ctl that says n1 is INITIALIZING; `domain::form` (`channel_major(…).node()?`), from a /proc/devices without the channel device; `DomainPlan::render` and `DomainPlan::write` in `job_domain::form` and `rack_domain::join`, from a base config with IMEX_CMD_ENABLED=0, one that is not text (a NUL, an escape sequence: `DaemonConfigFile::read`) and a nodes config path whose directory does not exist; `state.lock()` in `job_domain::claim` and `rack_domain::join`, from a state directory whose lock is a directory; `state.owner` in `claim`, from an owner file that is not a job id |
//! | (the prolog cannot write the job's record) | `row_this_node_cannot_write_the_job_record` | `domain::record_fault` in `setup_domain`, from a record path in the state directory that a directory holds |
//! | a drain-class GPU health finding | `row_gpu_drain_finding_fails_the_prolog`, `row_gpu_drain_finding_tears_down_the_imex_domain` (and `gate_that_panics_is_a_drain_finding`) | `drain::act`, from a canned gate verdict |
//! | a GPU still asks to restore its IMEX domain after the job's fresh domain is UP | `row_recovery_action_5_that_persists_after_the_fresh_domain_drains_this_node` (and `rack_domain_restart_that_fails_is_blamed_as_any_domain_failure`) | `recover_imex_domain`, from a gate whose GPU 1 reads RECOVER_IMEX_DOMAIN and a canned read again that still does; `drain::act` |
//! | a GPU asked to restore its IMEX domain at the gate and reads NONE once the job's fresh domain is UP | `row_recovery_action_5_cleared_once_the_fresh_domain_is_up_lets_the_job_run` (and `rack_domain_restarted_for_recovery_action_5_lets_the_job_run_once_it_clears`, `a_job_without_imex_is_never_held_for_recovery_action_5`) | `recover_imex_domain`, from the same gate and a read again that reads NONE |
//! | a peer never becomes READY or connected | `row_peer_never_ready_is_the_jobs` | `DomainPlan::blame_not_ready`, from a ctl that says n1 is READY and n2 UNAVAILABLE, never connected |
//! | the node already serves another running job's domain | `row_node_serving_another_jobs_domain_is_the_jobs` | `job_domain::claim`, from a state directory that job 4100 owns and an scontrol that says it is RUNNING |
//! | the job's nodes span racks, with `[imex] span = "refuse"` | `row_job_spanning_racks_is_the_jobs` | `domain::nvlink_domain` (`chosen.job()?`), from a rack map, and from a topology file, that put n1 and n2 in two racks |
//! | `[imex] domain = "rack"` and nothing places the node in a rack | `row_node_in_no_rack_is_the_jobs` | `rack_domain::rack_of` in `rack_domain::join`, from no topology file and no rack map |
//! | `[imex] domain = "rack"` with channels that could collide | `row_rack_channels_that_could_collide_are_the_jobs` | `rack_channels::guarantee` in `rack_domain::join`, from a slurm.conf without MaxJobId; `RackChannels::refuses`, from one with MaxJobId=2047 (job 4242 outside) |
//! | the nodes of one domain read different rack files (NODE_MAP_MISMATCH) | `row_node_map_mismatch_is_the_jobs` | `DomainPlan::blame_not_ready`, from a ctl that says n1's link to n2 is NODE_MAP_MISMATCH |
//! | the rack map puts this node in a clique its own GPUs do not report | `row_rack_map_contradicting_own_gpus_is_the_jobs` | `RackSources::live_clique_disagreement` (`domain::own_clique_disagreement`), from a rack map that puts n1 in clique 7 and a gate that reads clique 8, then the lifecycle's `check_own_clique` |
//! | `[imex] domain = "rack"`: this node's rack daemon is down or never READY | `row_rack_daemon_down_is_this_nodes` | `DomainPlan::start` in `rack_domain::join`, from a daemon binary that is not there; `DomainPlan::blame_not_ready`, from a ctl that says n1 is INITIALIZING |
//! | the rack map or the topology file cannot be read, is refused, or does not parse | `row_unreadable_rack_files_are_the_jobs` | `domain::nvlink_domain` (`ctx.racks(&nodes).job()?`), from a group-writable rack map, one that does not parse, and a topology file that does not parse |
//! | the address map cannot be read or parsed | `row_unreadable_address_map_is_the_jobs` | `plan::domain_addresses` (`Resolver::new(…).job()?`), from a group-writable address map and one that does not parse; its `resolve_all` blame, from one that does not list n2 |
//! | the topology file and the rack map disagree about the job's nodes | `row_rack_files_disagreeing_are_the_jobs` | `domain::nvlink_domain` (`RackSources::disagreement`), from a block holding n1 and n2 that the rack map puts in two cliques |
//! | a domain left by a job that has ended | `row_stale_domain_reclaimed_lets_the_job_run` (and `stale_domain_that_will_not_go_is_this_nodes`) | `job_domain::claim`, from a state directory that job 4100 owns and an scontrol that says it COMPLETED; its reclaim (`stop_daemon(…).node()?`), from a command port something still listens on |
//! | a drain-class finding after the job | `row_drain_finding_after_the_job_fails_the_epilog_with_drain_from_epilog`, `row_drain_finding_after_the_job_is_recorded_without_drain_from_epilog` | `drain::act`, from a canned verdict |
//! | imex.toml cannot be loaded: a bad key in any section (an unknown name, a value outside its type or range), bad syntax, or a program or file it names that root must not trust | `row_imex_toml_the_hooks_cannot_load_fails_the_hook_and_keeps_the_reason` (and `crate::drain`'s `a_config_drain_is_shown_once_and_lifted_by_check_undrain_once_the_file_loads`) | `config_fault::fail_hook` from `run_hook`'s `Config::load_trusted`, from a file whose `[gpu]` has a misspelt key |
//! | a finding between jobs (`slurm-imex check`) | not a prolog or epilog: `crate::drain`'s tests `check_drains_once_when_asked_and_never_for_a_warning`, `only_our_drains_are_resumed_and_a_known_standing_asks_nothing`, `a_recovery_action_drain_is_lifted_only_once_every_gpu_reads_none`, `a_config_drain_is_shown_once_and_lifted_by_check_undrain_once_the_file_loads` | `drain::act_on_check`, `drain::awaits_recovery`, `config_fault::check` |
//! | the epilog cannot return IMEX to idle | `row_epilog_that_cannot_return_imex_to_idle_fails` | the lifecycle's `teardown_domain`, from a canned teardown error |
//! | the job database is full, read-only or corrupt | `row_job_database_refusing_the_row_fails_nothing` | the lifecycle's epilog, from a canned database error |

mod node;

use super::*;
use node::{TestNode, CLIQUE_7, CLIQUE_8};
use slurm_imex_core::error::Error;
use slurm_imex_core::state::job_record::Outcome;
use slurm_imex_core::state::StateDir;
use slurm_imex_domain::config::{DomainScope, Span};
use std::os::unix::fs::PermissionsExt;
use std::sync::Mutex;

const JOB: u32 = 4242;
const NODE: &str = "n1";

fn job(imex: bool) -> JobEnv {
    JobEnv {
        job_id: JOB,
        node_name: NODE.into(),
        node_list: "n[1-2]".into(),
        uid: Some(1000),
        user: Some("alice".into()),
        imex_requested: imex,
        gpus: Some(vec![0]),
    }
}

/// What the fake GPU health gate does.
#[derive(Clone, Copy)]
enum Gate {
    Pass {
        clique: Option<&'static str>,
    },
    Drain(&'static str),
    Panic,
    /// GPU 1's driver asks for its IMEX domain to be restored (recovery
    /// action 5): a warning at the gate.
    AsksToRestoreImex,
}

/// GPU 1 of the gate that asks to restore its IMEX domain.
fn gpu1() -> GpuRef {
    GpuRef {
        index: 1,
        serial: "1650924060001".into(),
        uuid: "GPU-1".into(),
    }
}

/// What GPU 1 still asks for, once the job's domain is UP.
const STILL_ASKS: &str = "imex-health: recovery_action gpu1 1650924060001: driver still asks for \
                          recovery action RECOVER_IMEX_DOMAIN (5) after the job's fresh IMEX \
                          domain came UP: reset the GPU or reboot the node";

/// A prolog's steps, as a row has them turn out, and what the lifecycle
/// did with them.
struct Prolog<'a> {
    cfg: Config,
    gate: Gate,
    domain: DomainStep<'a>,
    /// What the rack map says against this node's own clique (a canned
    /// domain step only).
    map_disagrees: Option<&'static str>,
    /// How many record writes succeed before the state directory fails.
    writes_ok: usize,
    teardown: Result<TeardownOutcome>,
    records: Mutex<Vec<JobRecord>>,
    drains: Mutex<Vec<DrainAction>>,
    teardowns: Mutex<usize>,
    /// What starting the domain's watcher does, and how often it was asked.
    watch: Result<()>,
    watches: Mutex<usize>,
    /// What each read of the recovery action again finds, in turn (Ok:
    /// every GPU reads NONE), and the GPUs each was asked about.
    rereads: Mutex<Vec<std::result::Result<(), String>>>,
    reread_gpus: Mutex<Vec<Vec<u32>>>,
    /// What restoring the domain does (None: a per-job domain, nothing).
    restore: Option<Blamed<Duration>>,
    restores: Mutex<usize>,
    /// Lines added to what the gate concluded.
    gate_notes: Mutex<Vec<String>>,
}

/// Where the prolog's domain steps (the domain, its record, the own-clique
/// check) get their outcome.
enum DomainStep<'a> {
    /// The outcome a row hands them.
    Canned(Blamed<Duration>),
    /// [`Live`]'s, on a [`TestNode`]'s files: the real decisions.
    Real {
        job: &'a JobEnv,
        ctx: Box<HookContext<'a>>,
    },
}

impl<'a> Prolog<'a> {
    fn new(gate: Gate, domain: Blamed<Duration>) -> Prolog<'a> {
        Prolog {
            cfg: Config::default(),
            gate,
            domain: DomainStep::Canned(domain),
            map_disagrees: None,
            writes_ok: usize::MAX,
            teardown: Ok(TeardownOutcome::TornDown),
            records: Mutex::default(),
            drains: Mutex::default(),
            teardowns: Mutex::default(),
            watch: Ok(()),
            watches: Mutex::default(),
            rereads: Mutex::default(),
            reread_gpus: Mutex::default(),
            restore: None,
            restores: Mutex::default(),
            gate_notes: Mutex::default(),
        }
    }

    /// The prolog of `node.job` on `node`, its domain steps the real ones
    /// over one context, as [`Live`] runs them.
    fn on(node: &'a TestNode, gate: Gate) -> Prolog<'a> {
        let mut steps = Prolog::new(gate, up());
        steps.cfg = node.cfg.clone();
        steps.domain = DomainStep::Real {
            job: &node.job,
            ctx: Box::new(HookContext::new(&node.cfg)),
        };
        steps
    }

    /// The real steps, when the domain step is.
    fn live(&self) -> Option<Live<'_>> {
        match &self.domain {
            DomainStep::Real { job, ctx } => Some(Live::new(job, &self.cfg, ctx)),
            DomainStep::Canned(_) => None,
        }
    }

    fn records(&self) -> Vec<JobRecord> {
        self.records.lock().unwrap().clone()
    }

    fn last_outcome(&self) -> Option<Outcome> {
        self.records().last().map(|r| r.outcome.clone())
    }

    fn drains(&self) -> Vec<DrainAction> {
        self.drains.lock().unwrap().clone()
    }

    fn teardowns(&self) -> usize {
        *self.teardowns.lock().unwrap()
    }
}

impl PrologSteps for Prolog<'_> {
    fn gate(&self) -> GpuOutcome {
        match self.gate {
            Gate::Pass { clique } => GpuOutcome::Done {
                verdict: Verdict::Pass,
                drain_reason: None,
                warnings: Vec::new(),
                clique: clique.map(String::from),
                restore_imex: Vec::new(),
            },
            Gate::Drain(reason) => GpuOutcome::Done {
                verdict: Verdict::Drain,
                drain_reason: Some(reason.into()),
                warnings: Vec::new(),
                clique: None,
                restore_imex: Vec::new(),
            },
            Gate::AsksToRestoreImex => GpuOutcome::Done {
                verdict: Verdict::Warn,
                drain_reason: None,
                warnings: vec![
                    "imex-health: recovery_action gpu1 1650924060001: driver asks for \
                                recovery action RECOVER_IMEX_DOMAIN (5): …"
                        .into(),
                ],
                clique: None,
                restore_imex: vec![gpu1()],
            },
            Gate::Panic => panic!("index out of bounds in the gate"),
        }
    }
    fn form_domain(&self) -> (JobRecord, Blamed<Duration>) {
        let outcome = match &self.domain {
            DomainStep::Canned(outcome) => outcome.clone(),
            DomainStep::Real { job, ctx } => return Live::new(job, &self.cfg, ctx).form_domain(),
        };
        let record = JobRecord {
            job_id: JOB,
            channel: Some(4242),
            server_port: 50000,
            nodes: vec!["n1".into(), "n2".into()],
            domain: Some("rack7".into()),
            rack_source: None,
            outcome: domain::outcome_of(&outcome),
            prolog_ms: None,
        };
        (record, outcome)
    }
    fn write_record(&self, record: &JobRecord) -> Result<()> {
        let mut records = self.records.lock().unwrap();
        if records.len() >= self.writes_ok {
            return Err(Error::new("/run/slurm-imex/jobs: No space left on device"));
        }
        if let Some(live) = self.live() {
            live.write_record(record)?;
        }
        records.push(record.clone());
        Ok(())
    }
    fn own_clique_disagreement(&self, live: &str) -> Option<String> {
        match self.live() {
            Some(steps) => steps.own_clique_disagreement(live),
            None => self.map_disagrees.map(String::from),
        }
    }
    fn act_on_gate(&self, drain_reason: Option<String>) -> DrainAction {
        drain::act(&self.cfg, NODE, JOB, drain_reason, Hook::Prolog)
    }
    fn imex_node_fault(&self, line: &str) -> DrainAction {
        drain::imex_node_fault(&self.cfg, NODE, JOB, line)
    }
    fn note_drained(&self, action: &DrainAction) {
        self.drains.lock().unwrap().push(action.clone());
    }
    fn teardown(&self) -> Result<TeardownOutcome> {
        *self.teardowns.lock().unwrap() += 1;
        self.teardown.clone()
    }
    fn watch_domain(&self) -> Result<()> {
        *self.watches.lock().unwrap() += 1;
        self.watch.clone()
    }
    fn reread_recovery(&self, gpus: &[GpuRef]) -> std::result::Result<(), String> {
        let indexes = gpus.iter().map(|g| g.index).collect();
        self.reread_gpus.lock().unwrap().push(indexes);
        let mut answers = self.rereads.lock().unwrap();
        if answers.is_empty() {
            Ok(())
        } else {
            answers.remove(0)
        }
    }
    fn restore_domain(&self) -> Option<Blamed<Duration>> {
        *self.restores.lock().unwrap() += 1;
        self.restore.clone()
    }
    fn note_gate(&self, line: String) {
        self.gate_notes.lock().unwrap().push(line);
    }
}

fn node_fault(line: &str) -> Blamed<Duration> {
    Err(Fault::Node(Error::new(line)))
}

fn up() -> Blamed<Duration> {
    Ok(Duration::from_millis(1200))
}

/// Our drain, as the node's standing keeps it (a long reason cut to what
/// Slurm keeps).
fn drained(reason: &str) -> DrainAction {
    DrainAction::Drain {
        reason: drain::for_job(reason, JOB),
        shown: false,
    }
}

/// The outcome n1's record says, on disk, where the SPANK plugin reads it.
fn recorded(node: &TestNode) -> Option<Outcome> {
    let record = StateDir::of(&node.cfg).read_record(JOB).unwrap();
    record.map(|r| r.outcome)
}

/// The prolog on `node`'s files, its domain steps the real ones, with a
/// gate that passes (and reads `clique`).
fn prolog_on<'a>(node: &'a TestNode, clique: Option<&'static str>) -> (Exit, Prolog<'a>) {
    let steps = Prolog::on(node, Gate::Pass { clique });
    (prolog_with(&node.job, &steps), steps)
}

/// A row whose fault the real domain step on `node` finds this node's:
/// the prolog exits 1 with the one line, the standing says why, the record
/// says it was the node's. The line.
fn node_fault_on(node: &TestNode) -> String {
    let (exit, steps) = prolog_on(node, None);
    let Some(Outcome::Failed {
        cause: line,
        node_fault: true,
    }) = steps.last_outcome()
    else {
        panic!("not this node's fault: {exit:?} {:?}", steps.records());
    };
    assert_eq!(exit.code, 1);
    assert_eq!(exit.errors, [format!("slurm-imex-prolog: {line}")]);
    assert_eq!(
        steps.drains(),
        [drained(&format!("imex-health: imex {NODE}: {line}"))]
    );
    assert_eq!(recorded(node), steps.last_outcome());
    assert_eq!(
        steps.teardowns(),
        0,
        "a failed setup cleans up after itself"
    );
    line
}

/// A row whose fault the real domain step on `node` finds not this node's:
/// the prolog exits 0 and says nothing on stderr, nothing is drained, and
/// the record carries the cause for the plugin, which fails the job with
/// it. The cause.
fn jobs_fault_on(node: &TestNode) -> String {
    let (exit, steps) = prolog_on(node, None);
    let Some(Outcome::Failed {
        cause,
        node_fault: false,
    }) = steps.last_outcome()
    else {
        panic!("not the job's fault: {exit:?} {:?}", steps.records());
    };
    assert_eq!(exit, Exit::ok());
    assert_eq!(steps.drains(), []);
    assert_eq!(steps.teardowns(), 0);
    let (records, last) = (steps.records(), steps.last_outcome());
    assert!(
        records.iter().all(|r| Some(&r.outcome) == last.as_ref()),
        "{records:?}"
    );
    // Written for the plugin, then again with the prolog's time.
    assert_eq!(records.len(), 2);
    assert!(records[1].prolog_ms.is_some());
    assert_eq!(recorded(node), last);
    cause
}

/// [`jobs_fault_on`], for a row whose job fails before any daemon starts.
fn jobs_fault_before_any_daemon(node: &TestNode) -> String {
    let cause = jobs_fault_on(node);
    assert!(!node.daemon_started(), "a daemon was started: {cause}");
    cause
}

#[test]
fn row_this_nodes_daemon_or_channel_fails_the_prolog() {
    // The daemon exits while the prolog waits for it (seen at once: the
    // wait is long, so a loaded machine cannot turn it into a timeout).
    let mut node = TestNode::new();
    node.cfg.engine.ready_timeout = slurm_imex_core::config::HumanDuration(Duration::from_secs(30));
    node.daemon_exits();
    let line = node_fault_on(&node);
    assert!(
        line.starts_with("nvidia-imex on n1 exited with status 1 while starting")
            && line.contains("daemon log: bind 0.0.0.0:24242: Address already in use"),
        "{line}"
    );
    // It cannot be started at all.
    let mut node = TestNode::new();
    node.cfg.engine.daemon.binary = node.path("no-such-nvidia-imex");
    let line = node_fault_on(&node);
    assert!(
        line.starts_with("nvidia-imex could not start on n1: "),
        "{line}"
    );
    assert!(line.contains("no-such-nvidia-imex"), "{line}");
    // It runs but never becomes READY (its peer is).
    let node = TestNode::new();
    node.ctl_says("DOWN", "INITIALIZING", "READY", "NEVER_CONNECTED");
    let line = node_fault_on(&node);
    assert!(
        line.starts_with("nvidia-imex on n1 not READY after 300ms (state: INITIALIZING)"),
        "{line}"
    );
    // The driver has no IMEX channel device.
    let node = TestNode::new();
    node.file("proc-devices", "Character devices:\n195 nvidia\n");
    let line = node_fault_on(&node);
    assert!(
        line.starts_with("IMEX channel device missing on n1: "),
        "{line}"
    );
    assert!(!node.daemon_started());
}

/// imex.toml the hooks cannot load (here a misspelt `[gpu]` key, which the
/// plugin never reads): the prolog and the epilog exit 1 with the one line
/// naming file:line: key, and the standing keeps our config reason, for
/// the next health check to show (`check --undrain` lifts it once the file
/// loads: `crate::drain`'s test).
#[test]
fn row_imex_toml_the_hooks_cannot_load_fails_the_hook_and_keeps_the_reason() {
    let d = tempfile::tempdir().unwrap();
    let state = d.path().join("state");
    let path = d.path().join("imex.toml");
    let text = format!(
        "[node]\nstate_dir = \"{}\"\n[gpu]\nnvml_libary = \"x\"\n",
        state.display()
    );
    std::fs::write(&path, text).unwrap();
    let e = Config::load_trusted(Some(&path)).unwrap_err();
    let at = format!("{}:4: [gpu] nvml_libary", path.display());
    assert!(e.to_string().contains(&at), "{e}");
    for hook in [Hook::Prolog, Hook::Epilog] {
        let exit = crate::config_fault::fail_hook(hook, NODE, Some(&path), &e);
        assert_eq!(exit.code, 1);
        assert_eq!(exit.errors, [format!("{} on n1: {e}", hook.program())]);
        let standing = NodeState::load(&StateDir::new(&state));
        let reason = crate::config_fault::reason(&e);
        assert_eq!(standing.drained_for, Some(reason));
        assert!(standing.drained_since.is_some() && !standing.reason_shown);
    }
}

#[test]
fn row_bad_local_config_fails_the_prolog() {
    for scope in [DomainScope::Job, DomainScope::Rack] {
        // The admin's daemon config: readiness cannot be asked.
        let node = TestNode::in_scope(scope);
        node.base_config("IMEX_CMD_ENABLED=0");
        let line = node_fault_on(&node);
        assert!(
            line.contains("base.cfg: IMEX_CMD_ENABLED=0")
                && line.contains("set IMEX_CMD_ENABLED=1"),
            "{line}"
        );
        // The admin's daemon config is not text: nothing is rendered from it.
        for (junk, says) in [
            ("IMEX_CMD_ENABLED=1\0", "holds a NUL byte"),
            (
                "\u{1b}]0;owned\u{7}IMEX_CMD_ENABLED=1",
                "holds the control byte 0x1b",
            ),
        ] {
            let node = TestNode::in_scope(scope);
            node.base_config(junk);
            let line = node_fault_on(&node);
            assert!(
                line.contains("base.cfg ([imex.daemon] base_config) is not text: line 4")
                    && line.contains(says)
                    && line.contains("install NVIDIA's config.cfg there"),
                "{line}"
            );
            assert!(!node.path("job.cfg").exists() && !node.daemon_started());
        }
        // The daemon's nodes config has no directory to be written in.
        let mut node = TestNode::in_scope(scope);
        node.cfg.engine.daemon.nodes_config = node.path("no-such-dir/nodes_config.cfg");
        let line = node_fault_on(&node);
        assert!(
            line.starts_with("[imex.daemon] nodes_config = ")
                && line.contains("its directory does not exist"),
            "{line}"
        );
        assert!(!node.daemon_started());
    }
}

#[test]
fn row_bad_state_directory_fails_the_prolog() {
    // The domain's lock cannot be taken (its place is a directory).
    for scope in [DomainScope::Job, DomainScope::Rack] {
        let node = TestNode::in_scope(scope);
        let lock = node.path("state/domain.lock");
        std::fs::create_dir_all(&lock).unwrap();
        let line = node_fault_on(&node);
        assert!(
            line.starts_with(&format!("cannot open {}", lock.display())),
            "{line}"
        );
        assert!(!node.daemon_started());
    }
    // A per-job domain's owner is not a job id.
    let node = TestNode::new();
    let owner = node.file("state/domain.owner", "garbage\n");
    let line = node_fault_on(&node);
    assert!(
        line.starts_with(&format!(
            "{} holds \"garbage\", not a job id",
            owner.display()
        )),
        "{line}"
    );
    assert!(!node.daemon_started());
}

#[test]
fn row_this_node_cannot_write_the_job_record() {
    let node = TestNode::new();
    // The record's place in the state directory is taken.
    let place = StateDir::of(&node.cfg).record_path(JOB);
    std::fs::create_dir_all(&place).unwrap();
    let (exit, steps) = prolog_on(&node, None);
    assert_eq!(exit.code, 1);
    let [line] = exit.errors.as_slice() else {
        panic!("{exit:?}")
    };
    let line = line.strip_prefix("slurm-imex-prolog: ").unwrap();
    assert!(
        line.starts_with("cannot record the IMEX job state: ")
            && line.contains(&place.display().to_string()),
        "{line}"
    );
    assert_eq!(
        steps.drains(),
        [drained(&format!("imex-health: imex {NODE}: {line}"))]
    );
    assert_eq!(steps.records(), []);
}

const XID: &str = "imex-health: xid gpu0 1320123456789: XID 79 (GPU has fallen off the bus)";

#[test]
fn row_gpu_drain_finding_fails_the_prolog() {
    let steps = Prolog::new(Gate::Drain(XID), up());
    let exit = prolog_with(&job(false), &steps);
    assert_eq!(exit.code, 1);
    assert_eq!(
        exit.errors,
        [format!("slurm-imex-prolog: {XID} (job {JOB})")]
    );
    assert_eq!(steps.drains(), [drained(XID)]);
    // Not an --imex job: no domain, no record, nothing to tear down.
    assert_eq!(steps.records(), []);
    assert_eq!(steps.teardowns(), 0);
}

#[test]
fn row_gpu_drain_finding_tears_down_the_imex_domain() {
    let steps = Prolog::new(Gate::Drain(XID), up());
    let exit = prolog_with(&job(true), &steps);
    assert_eq!(exit.code, 1);
    assert_eq!(
        exit.errors,
        [format!("slurm-imex-prolog: {XID} (job {JOB})")]
    );
    assert_eq!(steps.drains(), [drained(XID)]);
    assert_eq!(steps.teardowns(), 1, "the node is left idle");
    // The domain's own record, never a prolog time: the job does not run.
    assert!(steps.records().iter().all(|r| r.prolog_ms.is_none()));
}

#[test]
fn gpu_drain_finding_whose_teardown_fails_says_both() {
    let mut steps = Prolog::new(Gate::Drain(XID), up());
    steps.teardown = Err(Error::new(
        "nvidia-imex (pid 77) still running after SIGKILL",
    ));
    let exit = prolog_with(&job(true), &steps);
    assert_eq!(exit.code, 1);
    assert_eq!(
        exit.errors,
        [
            format!("slurm-imex-prolog: {XID} (job {JOB})"),
            "slurm-imex-prolog: cannot return IMEX to idle: nvidia-imex (pid 77) still running \
             after SIGKILL"
                .to_string(),
        ]
    );
}

#[test]
fn gate_that_panics_is_a_drain_finding() {
    // Beside an IMEX domain the gate runs on a thread: its panic (a bug)
    // cannot say the GPUs are fit, so it fails the prolog like a finding.
    let steps = Prolog::new(Gate::Panic, up());
    let exit = prolog_with(&job(true), &steps);
    let reason = "imex-health: gate: the GPU health gate crashed (a bug)";
    assert_eq!(exit.code, 1);
    assert_eq!(
        exit.errors,
        [format!("slurm-imex-prolog: {reason} (job {JOB})")]
    );
    assert_eq!(steps.drains(), [drained(reason)]);
    assert_eq!(steps.teardowns(), 1);
    // Without a domain there is no thread: the panic reaches run_from_env,
    // which turns it into one line and status 1.
    let steps = Prolog::new(Gate::Panic, up());
    let unwound = std::panic::catch_unwind(|| prolog_with(&job(false), &steps));
    assert!(unwound.is_err());
}

#[test]
fn row_peer_never_ready_is_the_jobs() {
    // n1 is READY; n2 never answers it.
    let node = TestNode::new();
    node.ctl_says("DEGRADED", "READY", "UNAVAILABLE", "NEVER_CONNECTED");
    let cause = jobs_fault_on(&node);
    assert!(
        cause.contains(
            "not ready after 300ms: peer(s) never became ready or connected: n2 (127.0.0.2)"
        ) && cause.contains("(this node n1 is READY)"),
        "{cause}"
    );
}

#[test]
fn row_node_serving_another_jobs_domain_is_the_jobs() {
    // Job 4100, still running, holds n1's daemon.
    let node = TestNode::new();
    node.owned_by(4100, "RUNNING");
    let cause = jobs_fault_before_any_daemon(&node);
    assert!(
        cause.starts_with(
            "node n1 already serves the IMEX domain of job 4100; IMEX jobs need whole nodes"
        ),
        "{cause}"
    );
}

#[test]
fn row_job_spanning_racks_is_the_jobs() {
    let mut node = TestNode::new();
    node.cfg.engine.span = Span::Refuse;
    // By the rack map, then by the topology file's blocks.
    node.rack_map(&[("r7", CLIQUE_7, "n1"), ("r8", CLIQUE_8, "n2")]);
    let cause = jobs_fault_before_any_daemon(&node);
    assert!(
        cause.starts_with("the job's nodes span more than one NVLink rack")
            && cause.contains("imex-racks.toml (sha256 ")
            && cause.contains("this node n1 is in r7"),
        "{cause}"
    );
    // The same by the indexed map, read in pieces.
    let mut node = TestNode::new();
    node.cfg.engine.span = Span::Refuse;
    let dir = node.rack_map_indexed(&[("r7", CLIQUE_7, "n1"), ("r8", CLIQUE_8, "n2")]);
    let cause = jobs_fault_before_any_daemon(&node);
    assert!(
        cause.starts_with("the job's nodes span more than one NVLink rack")
            && cause.contains(&format!("the rack map {} (sha256 ", dir.display()))
            && cause.contains("this node n1 is in r7"),
        "{cause}"
    );
    let mut node = TestNode::new();
    node.cfg.engine.span = Span::Refuse;
    node.topology("BlockName=b1 Nodes=n1\nBlockName=b2 Nodes=n2\n");
    let cause = jobs_fault_before_any_daemon(&node);
    assert!(cause.contains("b1 (n1), b2 (n2)"), "{cause}");
}

#[test]
fn row_node_in_no_rack_is_the_jobs() {
    // No topology file, no rack map.
    let mut node = TestNode::new();
    node.rack_scope();
    let cause = jobs_fault_before_any_daemon(&node);
    assert!(
        cause.starts_with("[imex] domain = \"rack\", but nothing places n1 in a rack"),
        "{cause}"
    );
}

#[test]
fn row_rack_channels_that_could_collide_are_the_jobs() {
    let node = TestNode::in_scope(DomainScope::Rack);
    // Slurm's default job ids, 1..67043328, over 2047 channels.
    node.file("slurm.conf", "ClusterName=c\n");
    let cause = jobs_fault_before_any_daemon(&node);
    assert!(
        cause.contains("job ids 1..67043328") && cause.contains("set MaxJobId=2047 in slurm.conf"),
        "{cause}"
    );
    // Ids that fit, but not the job's (one root requested).
    node.file("slurm.conf", "MaxJobId=2047\n");
    let cause = jobs_fault_before_any_daemon(&node);
    assert!(
        cause.starts_with("job id 4242 lies outside FirstJobId..MaxJobId = 1..2047"),
        "{cause}"
    );
}

#[test]
fn row_node_map_mismatch_is_the_jobs() {
    let mut node = TestNode::new();
    node.rack_map(&[("r7", CLIQUE_7, "n[1-2]")]);
    // n2 read other rack files: its daemon holds another node map.
    node.ctl_says("DEGRADED", "READY", "READY", "NODE_MAP_MISMATCH");
    let cause = jobs_fault_on(&node);
    assert!(
        cause.contains("n2 (127.0.0.2) hold(s) another node map (NODE_MAP_MISMATCH)")
            && cause.contains("this node n1 put n[1-2] in it from")
            && cause.contains("imex-racks.toml (sha256 "),
        "{cause}"
    );
    assert!(!cause.contains("never became ready"), "{cause}");
}

#[test]
fn row_rack_map_contradicting_own_gpus_is_the_jobs() {
    let mut node = TestNode::new();
    node.rack_map(&[("r7", CLIQUE_7, "n[1-2]")]);
    // The domain forms; n1's GPUs report the other clique.
    let (exit, steps) = prolog_on(&node, Some(CLIQUE_8));
    assert_eq!(exit, Exit::ok());
    assert_eq!(steps.drains(), []);
    let records = steps.records();
    // UP, then refused, then the prolog's time on the refusal.
    assert!(matches!(records[0].outcome, Outcome::Ready { .. }));
    let Outcome::Failed {
        cause,
        node_fault: false,
    } = &records[1].outcome
    else {
        panic!("{records:?}")
    };
    assert!(
        cause.starts_with(&format!("n1's GPUs report NVLink clique {CLIQUE_8}"))
            && cause.contains("puts n1 in rack r7"),
        "{cause}"
    );
    assert_eq!(
        records.last().map(|r| &r.outcome),
        Some(&records[1].outcome)
    );
    assert_eq!(recorded(&node).as_ref(), Some(&records[1].outcome));
    // The domain stays for the epilog: stopped now, the peers would blame n1.
    assert_eq!(steps.teardowns(), 0);
    assert!(node.daemon_started());
}

#[test]
fn own_clique_refusal_that_cannot_be_recorded_is_this_nodes() {
    let mut steps = Prolog::new(Gate::Pass { clique: Some("3") }, up());
    steps.map_disagrees = Some("the rack map puts n1 in clique 7");
    steps.writes_ok = 1;
    let exit = prolog_with(&job(true), &steps);
    assert_eq!(exit.code, 1);
    assert_eq!(
        exit.errors,
        [
            "slurm-imex-prolog: cannot record the IMEX job state: /run/slurm-imex/jobs: No space \
          left on device"
        ]
    );
    assert_eq!(steps.drains().len(), 1);
}

#[test]
fn own_clique_is_not_checked_against_a_gate_without_one() {
    let mut steps = Prolog::new(Gate::Pass { clique: None }, up());
    steps.map_disagrees = Some("the rack map puts n1 in clique 7");
    let exit = prolog_with(&job(true), &steps);
    assert_eq!(exit, Exit::ok());
    assert_eq!(
        steps.last_outcome(),
        Some(Outcome::Ready { waited_ms: 1200 })
    );
}

#[test]
fn row_rack_daemon_down_is_this_nodes() {
    let mut node = TestNode::in_scope(DomainScope::Rack);
    // The rack's daemon is down and cannot be started.
    node.cfg.engine.daemon.binary = node.path("no-such-nvidia-imex");
    let line = node_fault_on(&node);
    assert!(
        line.starts_with("nvidia-imex could not start on n1: "),
        "{line}"
    );
    // It starts, but never becomes READY.
    node.cfg.engine.daemon.binary = node.path("nvidia-imex");
    node.ctl_says("DEGRADED", "INITIALIZING", "READY", "NEVER_CONNECTED");
    let line = node_fault_on(&node);
    assert!(
        line.starts_with("nvidia-imex on n1 not READY after 300ms (state: INITIALIZING)"),
        "{line}"
    );
}

#[test]
fn row_unreadable_rack_files_are_the_jobs() {
    let mut node = TestNode::new();
    // A group-writable rack map is refused; one that does not parse, and a
    // topology file that does not, cannot be read.
    let map = node.rack_map(&[("r7", CLIQUE_7, "n[1-2]")]);
    std::fs::set_permissions(&map, std::fs::Permissions::from_mode(0o664)).unwrap();
    let cause = jobs_fault_before_any_daemon(&node);
    assert!(
        cause.starts_with(&format!("refusing [imex] rack_map {}: ", map.display())),
        "{cause}"
    );
    node.file("imex-racks.toml", "[[rack]]\nname = \"r7\"\nclique = 7\n");
    let cause = jobs_fault_before_any_daemon(&node);
    assert!(
        cause.starts_with(&format!("bad rack map {}", map.display())),
        "{cause}"
    );
    // An indexed map with a piece cut short, then with one group-writable.
    let mut node = TestNode::new();
    let dir = node.rack_map_indexed(&[("r7", CLIQUE_7, "n[1-2]")]);
    let piece = dir.join("racks/r7.toml");
    let text = std::fs::read_to_string(&piece).unwrap();
    std::fs::write(&piece, &text[..text.len() / 2]).unwrap();
    let cause = jobs_fault_before_any_daemon(&node);
    assert!(
        cause.starts_with(&format!("bad rack map {} (sha256 ", dir.display()))
            && cause.contains("racks/r7.toml: it is truncated or corrupt"),
        "{cause}"
    );
    std::fs::write(&piece, &text).unwrap();
    std::fs::set_permissions(&piece, std::fs::Permissions::from_mode(0o664)).unwrap();
    let cause = jobs_fault_before_any_daemon(&node);
    assert!(
        cause.starts_with(&format!("refusing [imex] rack_map {}: ", piece.display())),
        "{cause}"
    );
    let mut node = TestNode::new();
    node.topology("BlockName=b1 Nodes=n[1-\n");
    let cause = jobs_fault_before_any_daemon(&node);
    assert!(
        cause.starts_with("cannot read Slurm's block topology ([slurm] topology)")
            && cause.contains("topology.conf"),
        "{cause}"
    );
}

#[test]
fn row_unreadable_address_map_is_the_jobs() {
    let node = TestNode::new();
    // Group-writable: refused. Then one that does not parse.
    let map = node.path("addresses.toml");
    std::fs::set_permissions(&map, std::fs::Permissions::from_mode(0o664)).unwrap();
    let cause = jobs_fault_before_any_daemon(&node);
    assert!(
        cause.starts_with(&format!(
            "refusing [imex.addresses] map_file {}: ",
            map.display()
        )),
        "{cause}"
    );
    node.file("addresses.toml", "n1 = \"127.0.0.1\"\nn2 = 127.0.0.2\n");
    let cause = jobs_fault_before_any_daemon(&node);
    assert!(
        cause.starts_with(&format!("bad address map {}:2: ", map.display())),
        "{cause}"
    );
    // One that parses but lists no address for a peer.
    node.file("addresses.toml", "n1 = \"127.0.0.1\"\n");
    let cause = jobs_fault_before_any_daemon(&node);
    assert!(
        cause.starts_with("no IMEX address for node(s) n2: not listed in")
            && cause.contains("addresses.toml"),
        "{cause}"
    );
}

#[test]
fn row_rack_files_disagreeing_are_the_jobs() {
    // One block holding n1 and n2, which the rack map puts in two cliques.
    let mut node = TestNode::new();
    let topology = node.topology("BlockName=b1 Nodes=n[1-2]\n");
    node.rack_map(&[("r7", CLIQUE_7, "n1"), ("r8", CLIQUE_8, "n2")]);
    let cause = jobs_fault_before_any_daemon(&node);
    assert!(
        cause.contains(&format!(
            "block b1 holds 2 NVLink cliques: n1 (clique {CLIQUE_7}), n2 (clique {CLIQUE_8})"
        )) && cause.contains(&topology.display().to_string())
            && cause.contains("imex-racks.toml (sha256 "),
        "{cause}"
    );
}

#[test]
fn row_stale_domain_reclaimed_lets_the_job_run() {
    // The claim reclaims the ended job's domain inside the setup: the job
    // sees a domain UP, the node stays up.
    let node = TestNode::new();
    node.owned_by(4100, "COMPLETED");
    let (exit, steps) = prolog_on(&node, Some(CLIQUE_7));
    assert_eq!(exit, Exit::ok());
    assert_eq!(steps.drains(), []);
    let records = steps.records();
    assert_eq!(records.len(), 2);
    assert!(matches!(records[1].outcome, Outcome::Ready { .. }));
    assert!(records[1].prolog_ms.is_some());
    let state = StateDir::of(&node.cfg);
    assert_eq!(state.read_owner().unwrap(), Some(JOB));
}

#[test]
fn stale_domain_that_will_not_go_is_this_nodes() {
    // The ended job's daemon cannot be proven gone: something still
    // accepts connections on the command port.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let node = TestNode::new();
    node.base_config(&format!("IMEX_CMD_ENABLED=1\nIMEX_CMD_PORT={port}"));
    node.owned_by(4100, "COMPLETED");
    let line = node_fault_on(&node);
    assert!(
        line.starts_with("nvidia-imex is not gone: something still accepts connections on the IMEX command port 127.0.0.1:")
            && line.contains(&port.to_string()),
        "{line}"
    );
    assert!(!node.daemon_started());
}

#[test]
fn job_without_imex_and_a_passing_gate_runs() {
    let steps = Prolog::new(Gate::Pass { clique: Some("7") }, node_fault("unused"));
    assert_eq!(prolog_with(&job(false), &steps), Exit::ok());
    assert_eq!(steps.records(), []);
    assert_eq!(steps.drains(), []);
}

/// An epilog's steps, as a row has them turn out, and what the lifecycle
/// did with them.
struct Epilog {
    cfg: Config,
    record: Option<JobRecord>,
    teardown: Result<TeardownOutcome>,
    gpus: GpuEpilog,
    teardowns: Mutex<usize>,
    /// The watcher's drain line, when it left the daemon down.
    left_down: Option<&'static str>,
    watch_stops: Mutex<usize>,
    published: Mutex<Option<NodeState>>,
    summary: Mutex<Option<(Option<String>, Option<u64>)>>,
}

impl Epilog {
    fn new(drain_reason: Option<&str>) -> Epilog {
        Epilog {
            cfg: Config::default(),
            record: None,
            teardown: Ok(TeardownOutcome::TornDown),
            gpus: GpuEpilog {
                outcome: GpuOutcome::Done {
                    restore_imex: Vec::new(),
                    verdict: if drain_reason.is_some() {
                        Verdict::Drain
                    } else {
                        Verdict::Pass
                    },
                    drain_reason: drain_reason.map(String::from),
                    warnings: Vec::new(),
                    clique: None,
                },
                row: None,
                unrecorded: None,
            },
            teardowns: Mutex::default(),
            left_down: None,
            watch_stops: Mutex::default(),
            published: Mutex::default(),
            summary: Mutex::default(),
        }
    }

    fn published(&self) -> NodeState {
        let published = self.published.lock().unwrap().clone();
        published.expect("the node's standing is always published")
    }
}

impl EpilogSteps for Epilog {
    fn stop_watch(&self) -> Result<()> {
        assert_eq!(
            *self.teardowns.lock().unwrap(),
            0,
            "the watch stops before teardown"
        );
        *self.watch_stops.lock().unwrap() += 1;
        Ok(())
    }
    fn watch_left_down(&self) -> Option<String> {
        self.left_down.map(String::from)
    }
    fn load_node(&self) -> NodeState {
        NodeState::default()
    }
    fn read_record(&self) -> Option<JobRecord> {
        self.record.clone()
    }
    fn teardown(&self) -> Result<TeardownOutcome> {
        *self.teardowns.lock().unwrap() += 1;
        self.teardown.clone()
    }
    fn judge_gpus(&self, _record: Option<&JobRecord>) -> GpuEpilog {
        self.gpus.clone()
    }
    fn act_on_gpus(&self, drain_reason: Option<String>) -> DrainAction {
        drain::act(&self.cfg, NODE, JOB, drain_reason, Hook::Epilog)
    }
    fn imex_node_fault(&self, line: &str) -> DrainAction {
        drain::imex_node_fault(&self.cfg, NODE, JOB, line)
    }
    fn summarize(&self, _: Option<&JobRow>, domain: Option<&str>, prolog_ms: Option<u64>, _: u64) {
        *self.summary.lock().unwrap() = Some((domain.map(String::from), prolog_ms));
    }
    fn publish(&self, node: &mut NodeState, _exit: &Exit) {
        *self.published.lock().unwrap() = Some(node.clone());
    }
}

const AFTER: &str =
    "imex-health: ecc gpu0 1320123456789: 3 uncorrectable ECC errors during the job";

#[test]
fn row_drain_finding_after_the_job_fails_the_epilog_with_drain_from_epilog() {
    let mut steps = Epilog::new(Some(AFTER));
    steps.cfg.health.drain_from_epilog = true;
    let exit = epilog_with(&job(false), &steps);
    assert_eq!(exit.code, 1);
    assert_eq!(
        exit.errors,
        [format!("slurm-imex-epilog: {AFTER} (job {JOB})")]
    );
    let standing = steps.published();
    assert!(standing.drained_since.is_some());
    assert_eq!(
        standing.drained_for.as_deref(),
        Some(format!("{AFTER} (job {JOB})").as_str())
    );
}

#[test]
fn row_drain_finding_after_the_job_is_recorded_without_drain_from_epilog() {
    let mut steps = Epilog::new(Some(AFTER));
    steps.cfg.health.drain_from_epilog = false;
    let exit = epilog_with(&job(false), &steps);
    assert_eq!(exit, Exit::ok());
    assert_eq!(steps.published().drained_since, None);
}

#[test]
fn row_epilog_that_cannot_return_imex_to_idle_fails() {
    let mut steps = Epilog::new(None);
    steps.teardown = Err(Error::new(
        "nvidia-imex (pid 77) still running after SIGKILL",
    ));
    let exit = epilog_with(&job(true), &steps);
    assert_eq!(exit.code, 1);
    assert_eq!(
        exit.errors,
        [
            "slurm-imex-epilog on n1: cannot return IMEX to idle: nvidia-imex (pid 77) still \
          running after SIGKILL"
        ]
    );
    assert_eq!(*steps.teardowns.lock().unwrap(), 1);
    // Slurm drains it for the failed epilog ("Epilog error"); the standing
    // keeps our reason, an IMEX fault, for the next check to show.
    let standing = steps.published();
    assert!(standing.drained_since.is_some());
    assert_eq!(
        standing.drained_for.as_deref(),
        Some(
            "imex-health: imex n1: cannot return IMEX to idle: nvidia-imex (pid 77) still \
             running after SIGKILL (job 4242)"
        )
    );
    assert!(drain::awaits_admin(&standing).is_some());
}

#[test]
fn epilog_tears_down_only_imex_jobs_and_reports_their_domain() {
    let mut steps = Epilog::new(None);
    steps.record = Some(JobRecord {
        job_id: JOB,
        channel: None,
        server_port: 50000,
        nodes: vec!["n1".into()],
        domain: Some("rack7".into()),
        rack_source: None,
        outcome: Outcome::Ready { waited_ms: 5 },
        prolog_ms: Some(840),
    });
    assert_eq!(epilog_with(&job(true), &steps), Exit::ok());
    assert_eq!(*steps.teardowns.lock().unwrap(), 1);
    assert_eq!(
        *steps.summary.lock().unwrap(),
        Some((Some("rack7".into()), Some(840)))
    );
    assert_eq!(steps.published().last_prolog_ms, None, "no GPU row");
    let steps = Epilog::new(None);
    assert_eq!(epilog_with(&job(false), &steps), Exit::ok());
    assert_eq!(*steps.teardowns.lock().unwrap(), 0);
}

#[test]
fn row_job_database_refusing_the_row_fails_nothing() {
    let mut steps = Epilog::new(None);
    steps.gpus.unrecorded = Some(Error::new("database or disk is full"));
    let exit = epilog_with(&job(false), &steps);
    assert_eq!(exit.code, 0);
    assert_eq!(
        exit.errors,
        [format!(
            "slurm-imex-epilog: job {JOB} not recorded (the job is not affected): database or \
             disk is full"
        )]
    );
    assert_eq!(steps.published().drained_since, None);
}

const LEFT_DOWN: &str = "nvidia-imex died 4 times while the job ran (restart bound 3): left down";

#[test]
fn row_daemon_left_down_by_the_watcher_drains_this_node_after_the_job() {
    let mut steps = Epilog::new(None);
    steps.left_down = Some(LEFT_DOWN);
    let exit = epilog_with(&job(true), &steps);
    assert_eq!(exit.code, 1);
    assert_eq!(
        exit.errors,
        [format!("slurm-imex-epilog on n1: {LEFT_DOWN}")]
    );
    assert_eq!(*steps.watch_stops.lock().unwrap(), 1);
    assert_eq!(
        *steps.teardowns.lock().unwrap(),
        1,
        "torn down all the same"
    );
    let standing = steps.published();
    assert_eq!(
        standing.drained_for.as_deref(),
        Some(format!("imex-health: imex n1: {LEFT_DOWN} (job {JOB})").as_str())
    );
}

#[test]
fn row_a_peer_whose_daemon_was_restarted_within_the_bound_passes() {
    // Its watcher left nothing down: the epilog passes, nothing drained.
    let steps = Epilog::new(None);
    assert_eq!(epilog_with(&job(true), &steps), Exit::ok());
    assert_eq!(*steps.watch_stops.lock().unwrap(), 1);
    assert_eq!(steps.published().drained_since, None);
    // A job without --imex has no watcher to stop.
    let plain = Epilog::new(None);
    assert_eq!(epilog_with(&job(false), &plain), Exit::ok());
    assert_eq!(*plain.watch_stops.lock().unwrap(), 0);
}

#[test]
fn row_a_watcher_that_cannot_start_leaves_the_job_running_and_says_so() {
    let mut steps = Prolog::new(Gate::Pass { clique: None }, up());
    steps.watch = Err(Error::new(
        "cannot start slurm-imex-watch: No such file or directory",
    ));
    let exit = prolog_with(&job(true), &steps);
    assert_eq!(exit.code, 0);
    assert_eq!(
        exit.errors,
        [
            "slurm-imex-prolog: the IMEX domain is not watched: cannot start slurm-imex-watch: No \
          such file or directory"
        ]
    );
    assert_eq!(steps.drains(), []);
    assert_eq!(*steps.watches.lock().unwrap(), 1);
}

#[test]
fn a_domain_that_is_not_up_is_not_watched() {
    let steps = Prolog::new(
        Gate::Pass { clique: None },
        node_fault("nvidia-imex exited 1"),
    );
    prolog_with(&job(true), &steps);
    let job_fault = Prolog::new(
        Gate::Pass { clique: None },
        Err(Fault::Job("no address".into())),
    );
    prolog_with(&job(true), &job_fault);
    assert_eq!(
        *steps.watches.lock().unwrap() + *job_fault.watches.lock().unwrap(),
        0
    );
}

#[test]
fn row_recovery_action_5_cleared_once_the_fresh_domain_is_up_lets_the_job_run() {
    let steps = Prolog::new(Gate::AsksToRestoreImex, up());
    let exit = prolog_with(&job(true), &steps);
    assert_eq!(exit, Exit::ok());
    assert_eq!(steps.drains(), []);
    assert_eq!(steps.teardowns(), 0);
    // Read again once the domain was UP, for GPU 1 alone, and noted.
    assert_eq!(*steps.reread_gpus.lock().unwrap(), [vec![1]]);
    assert_eq!(
        *steps.gate_notes.lock().unwrap(),
        [
            "imex-health: recovery_action gpu1: RECOVER_IMEX_DOMAIN (5) cleared once the job's \
          fresh IMEX domain was UP"
        ]
    );
    // Cleared: nothing restarted; the job runs, watched.
    assert_eq!(*steps.restores.lock().unwrap(), 0);
    assert_eq!(*steps.watches.lock().unwrap(), 1);
    assert!(matches!(steps.last_outcome(), Some(Outcome::Ready { .. })));
}

#[test]
fn row_recovery_action_5_that_persists_after_the_fresh_domain_drains_this_node() {
    let steps = Prolog::new(Gate::AsksToRestoreImex, up());
    steps.rereads.lock().unwrap().push(Err(STILL_ASKS.into()));
    let exit = prolog_with(&job(true), &steps);
    // The node's fault, named by the GPU and the action: a GPU drain (not
    // the IMEX class that only an admin lifts).
    assert_eq!(exit.code, 1);
    assert_eq!(
        exit.errors,
        [format!(
            "slurm-imex-prolog: {}",
            drain::for_job(STILL_ASKS, JOB)
        )]
    );
    assert_eq!(steps.drains(), [drained(STILL_ASKS)]);
    let mut standing = slurm_imex_core::state::NodeState::default();
    steps.drains()[0].record(&mut standing, 1);
    assert_eq!(drain::awaits_admin(&standing), None);
    // The domain formed for the job is torn down, and it is not watched.
    assert_eq!(steps.teardowns(), 1);
    assert_eq!(*steps.watches.lock().unwrap(), 0);
}

#[test]
fn rack_domain_restarted_for_recovery_action_5_lets_the_job_run_once_it_clears() {
    let mut steps = Prolog::new(Gate::AsksToRestoreImex, up());
    steps.restore = Some(Ok(Duration::from_millis(800)));
    steps.rereads.lock().unwrap().push(Err(STILL_ASKS.into()));
    let exit = prolog_with(&job(true), &steps);
    assert_eq!(exit, Exit::ok());
    assert_eq!(*steps.reread_gpus.lock().unwrap(), [vec![1], vec![1]]);
    assert!(steps.gate_notes.lock().unwrap()[0]
        .ends_with("cleared once this node's rack daemon was restarted and the domain UP again"));
    assert_eq!(steps.drains(), []);
}

#[test]
fn rack_domain_restart_that_fails_is_blamed_as_any_domain_failure() {
    let mut steps = Prolog::new(Gate::AsksToRestoreImex, up());
    steps.restore = Some(node_fault("nvidia-imex could not start on n1"));
    steps.rereads.lock().unwrap().push(Err(STILL_ASKS.into()));
    let exit = prolog_with(&job(true), &steps);
    assert_eq!(exit.code, 1);
    assert_eq!(
        steps.drains(),
        [drained(
            "imex-health: imex n1: nvidia-imex could not start on n1"
        )]
    );
    // Still asking after the restart: the GPU's drain.
    let mut steps = Prolog::new(Gate::AsksToRestoreImex, up());
    steps.restore = Some(up());
    steps
        .rereads
        .lock()
        .unwrap()
        .extend([Err(STILL_ASKS.into()), Err(STILL_ASKS.into())]);
    let exit = prolog_with(&job(true), &steps);
    assert_eq!(exit.code, 1);
    assert_eq!(steps.drains(), [drained(STILL_ASKS)]);
}

#[test]
fn a_job_without_imex_is_never_held_for_recovery_action_5() {
    let steps = Prolog::new(Gate::AsksToRestoreImex, up());
    let exit = prolog_with(&job(false), &steps);
    assert_eq!(exit, Exit::ok());
    assert!(steps.reread_gpus.lock().unwrap().is_empty());
}

/// The cells of a Markdown table's rows (`prefix` before each), header and
/// rule rows left out.
fn table_rows<'a>(text: &'a str, prefix: &str, header: &str) -> Vec<Vec<&'a str>> {
    text.lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .filter(|l| l.starts_with("| ") && !l.starts_with(header) && !l.starts_with("|---"))
        .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
        .collect()
}

/// How many words two cells start with in common.
fn common_words(a: &str, b: &str) -> usize {
    a.split_whitespace()
        .zip(b.split_whitespace())
        .take_while(|(x, y)| x == y)
        .count()
}

#[test]
fn every_row_of_blame_md_is_in_this_table_and_every_test_it_names_exists() {
    let blame = include_str!("../../../docs/blame.md");
    let this = include_str!("tests.rs");
    let drain = include_str!("../drain.rs");
    let documented = table_rows(blame, "", "| what happened");
    let here = table_rows(this, "//! ", "| docs/blame.md row");
    assert!(documented.len() >= 20 && here.len() >= 20);
    // Each row of docs/blame.md is the row here that starts with the most of
    // its words (at least 3), and no other row here starts with as many.
    for row in &documented {
        let mut best: Vec<(usize, &str)> = here
            .iter()
            .map(|h| (common_words(row[0], h[0]), h[0]))
            .collect();
        best.sort_by_key(|b| std::cmp::Reverse(b.0));
        assert!(
            best[0].0 >= 3 && best[0].0 > best[1].0,
            "docs/blame.md's row \"{}\" has no row in the table of hooks/src/lifecycle/tests.rs \
             (closest: \"{}\")",
            row[0],
            best[0].1
        );
    }
    // Every test the table names is a test of this file or of crate::drain.
    for row in &here {
        for name in row[1].split('`').skip(1).step_by(2) {
            if name.contains("::") {
                continue;
            }
            let f = format!("fn {name}()");
            assert!(
                this.contains(&f) || drain.contains(&f),
                "the table names {name}, which is no test"
            );
        }
    }
}
