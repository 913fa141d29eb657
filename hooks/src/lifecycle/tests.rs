//! The decision table of docs/blame.md, row by row: what the prolog and
//! epilog do (exit status, stderr lines, the job record written, the
//! node's standing) with each outcome of their steps. The steps are fakes
//! (no Slurm, NVML or IMEX daemon); the drain decision (`drain::act`,
//! `drain::imex_node_fault`) and the record's outcome
//! (`domain::outcome_of`) are the real ones, under a default config
//! (`set_drain_reason = false`: no scontrol call).
//!
//! Which code decides whose fault a row is (`decided in` in docs/blame.md)
//! has its own tests beside it; here each row's fault, as that code
//! returns it, meets the lifecycle. Rows of docs/blame.md → tests:
//!
//! | docs/blame.md row | test |
//! |---|---|
//! | this node's daemon cannot start, or is not READY; no channel device; bad local config | `row_this_nodes_daemon_or_channel_fails_the_prolog` (and `row_this_node_cannot_write_the_job_record`) |
//! | a drain-class GPU health finding | `row_gpu_drain_finding_fails_the_prolog`, `row_gpu_drain_finding_tears_down_the_imex_domain` (and `gate_that_panics_is_a_drain_finding`) |
//! | a peer never becomes READY or connected | `row_peer_never_ready_is_the_jobs` |
//! | the node already serves another running job's domain | `row_node_serving_another_jobs_domain_is_the_jobs` |
//! | the job's nodes span racks, with `span = "refuse"` | `row_job_spanning_racks_is_the_jobs` |
//! | `domain = "rack"` and nothing places the node in a rack | `row_node_in_no_rack_is_the_jobs` |
//! | `domain = "rack"` with channels that could collide | `row_rack_channels_that_could_collide_are_the_jobs` |
//! | the nodes of one domain read different rack files (NODE_MAP_MISMATCH) | `row_node_map_mismatch_is_the_jobs` |
//! | the rack map puts this node in a clique its own GPUs do not report | `row_rack_map_contradicting_own_gpus_is_the_jobs` |
//! | `domain = "rack"`: this node's rack daemon is down or never READY | `row_rack_daemon_down_is_this_nodes` |
//! | the rack map or the topology file cannot be read, is refused, or does not parse | `row_unreadable_rack_files_are_the_jobs` |
//! | the address map cannot be read or parsed | `row_unreadable_address_map_is_the_jobs` |
//! | the topology file and the rack map disagree about the job's nodes | `row_rack_files_disagreeing_are_the_jobs` |
//! | a domain left by a job that has ended | `row_stale_domain_reclaimed_lets_the_job_run` |
//! | a drain-class finding after the job | `row_drain_finding_after_the_job_fails_the_epilog_with_drain_from_epilog`, `row_drain_finding_after_the_job_is_recorded_without_drain_from_epilog` |
//! | a finding between jobs (`slurm-imex check`) | not a prolog or epilog: `crate::drain`'s tests `check_drains_once_when_asked_and_never_for_a_warning`, `only_our_drains_are_resumed_and_a_known_standing_asks_nothing` |
//! | the epilog cannot return IMEX to idle | `row_epilog_that_cannot_return_imex_to_idle_fails` |
//! | the job database is full, read-only or corrupt | `row_job_database_refusing_the_row_fails_nothing` |

use super::*;
use slurm_imex_core::error::Error;
use slurm_imex_core::state::job_record::Outcome;
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
    Pass { clique: Option<&'static str> },
    Drain(&'static str),
    Panic,
}

/// A prolog's steps, as a row has them turn out, and what the lifecycle
/// did with them.
struct Prolog {
    cfg: Config,
    gate: Gate,
    domain: Blamed<Duration>,
    /// What the rack map says against this node's own clique.
    map_disagrees: Option<&'static str>,
    /// How many record writes succeed before the state directory fails.
    writes_ok: usize,
    teardown: Result<TeardownOutcome>,
    records: Mutex<Vec<JobRecord>>,
    drains: Mutex<Vec<DrainAction>>,
    teardowns: Mutex<usize>,
}

impl Prolog {
    fn new(gate: Gate, domain: Blamed<Duration>) -> Prolog {
        Prolog {
            cfg: Config::default(),
            gate,
            domain,
            map_disagrees: None,
            writes_ok: usize::MAX,
            teardown: Ok(TeardownOutcome::TornDown),
            records: Mutex::default(),
            drains: Mutex::default(),
            teardowns: Mutex::default(),
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

impl PrologSteps for Prolog {
    fn gate(&self) -> GpuOutcome {
        match self.gate {
            Gate::Pass { clique } => GpuOutcome::Done {
                verdict: Verdict::Pass,
                drain_reason: None,
                warnings: Vec::new(),
                clique: clique.map(String::from),
            },
            Gate::Drain(reason) => GpuOutcome::Done {
                verdict: Verdict::Drain,
                drain_reason: Some(reason.into()),
                warnings: Vec::new(),
                clique: None,
            },
            Gate::Panic => panic!("index out of bounds in the gate"),
        }
    }
    fn form_domain(&self) -> (JobRecord, Blamed<Duration>) {
        let record = JobRecord {
            job_id: JOB,
            channel: Some(4242),
            server_port: 50000,
            nodes: vec!["n1".into(), "n2".into()],
            domain: Some("rack7".into()),
            rack_source: None,
            outcome: domain::outcome_of(&self.domain),
            prolog_ms: None,
        };
        (record, self.domain.clone())
    }
    fn write_record(&self, record: &JobRecord) -> Result<()> {
        let mut records = self.records.lock().unwrap();
        if records.len() >= self.writes_ok {
            return Err(Error::new("/run/slurm-imex/jobs: No space left on device"));
        }
        records.push(record.clone());
        Ok(())
    }
    fn own_clique_disagreement(&self, _live: &str) -> Option<String> {
        self.map_disagrees.map(String::from)
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
}

fn node_fault(line: &str) -> Blamed<Duration> {
    Err(Fault::Node(Error::new(line)))
}

fn up() -> Blamed<Duration> {
    Ok(Duration::from_millis(1200))
}

/// Our drain, as the node's standing keeps it.
fn drained(reason: &str) -> DrainAction {
    DrainAction::Drain {
        reason: format!("{reason} (job {JOB})"),
        shown: false,
    }
}

/// A row whose fault is this node's, from the domain step: the prolog
/// exits 1 with the one line, the standing says why, the record says it
/// was the node's.
fn assert_node_fault(line: &str) {
    let steps = Prolog::new(Gate::Pass { clique: None }, node_fault(line));
    let exit = prolog_with(&job(true), &steps);
    assert_eq!(exit.code, 1);
    assert_eq!(exit.errors, [format!("slurm-imex-prolog: {line}")]);
    assert_eq!(
        steps.drains(),
        [drained(&format!("imex-health: imex {NODE}: {line}"))]
    );
    assert_eq!(
        steps.last_outcome(),
        Some(Outcome::Failed {
            cause: line.into(),
            node_fault: true,
        })
    );
    assert_eq!(
        steps.teardowns(),
        0,
        "a failed setup cleans up after itself"
    );
}

/// A row whose fault is not this node's: the prolog exits 0 and says
/// nothing on stderr, nothing is drained, and the record carries the cause
/// for the plugin, which fails the job with it.
fn assert_jobs_fault(cause: &str) {
    let steps = Prolog::new(Gate::Pass { clique: None }, Err(Fault::job(cause)));
    let exit = prolog_with(&job(true), &steps);
    assert_eq!(exit, Exit::ok());
    assert_eq!(steps.drains(), []);
    assert_eq!(steps.teardowns(), 0);
    let records = steps.records();
    let expected = Outcome::Failed {
        cause: cause.into(),
        node_fault: false,
    };
    assert!(records.iter().all(|r| r.outcome == expected), "{records:?}");
    // Written for the plugin, then again with the prolog's time.
    assert_eq!(records.len(), 2);
    assert!(records[1].prolog_ms.is_some());
}

#[test]
fn row_this_nodes_daemon_or_channel_fails_the_prolog() {
    assert_node_fault("nvidia-imex on n1 exited at start: bind 0.0.0.0:50000: Address in use");
    assert_node_fault("nvidia-imex on n1 is not READY after 30s (state INITIALIZING)");
    assert_node_fault(
        "IMEX channel device missing on n1: no nvidia-caps-imex-channels in /proc/devices",
    );
}

#[test]
fn row_this_node_cannot_write_the_job_record() {
    let mut steps = Prolog::new(Gate::Pass { clique: None }, up());
    steps.writes_ok = 0;
    let exit = prolog_with(&job(true), &steps);
    let line = "cannot record the IMEX job state: /run/slurm-imex/jobs: No space left on device";
    assert_eq!(exit.code, 1);
    assert_eq!(exit.errors, [format!("slurm-imex-prolog: {line}")]);
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
    assert_jobs_fault(
        "IMEX peer n2 (10.0.0.2) never became READY within 30s; this node n1 is READY",
    );
}

#[test]
fn row_node_serving_another_jobs_domain_is_the_jobs() {
    assert_jobs_fault("n1 already serves the IMEX domain of running job 4100");
}

#[test]
fn row_job_spanning_racks_is_the_jobs() {
    assert_jobs_fault(
        "the job's nodes span more than one NVLink rack (the rack map /etc/slurm/imex-racks.toml; \
         this node n1 is in rack7); one IMEX domain must stay in one rack",
    );
}

#[test]
fn row_node_in_no_rack_is_the_jobs() {
    assert_jobs_fault(
        "[imex] domain = \"rack\": nothing places n1 in a rack: describe it in topology.yaml or \
         imex-racks.toml",
    );
}

#[test]
fn row_rack_channels_that_could_collide_are_the_jobs() {
    assert_jobs_fault(
        "[imex] domain = \"rack\": MaxJobId - FirstJobId + 1 = 67043328 exceeds the 2047 \
         channels: set MaxJobId=2047 or SwitchType=switch/nvidia_imex",
    );
}

#[test]
fn row_node_map_mismatch_is_the_jobs() {
    assert_jobs_fault(
        "the IMEX node map of n2 differs from this node's (n1 n2 from /etc/slurm/topology.yaml, \
         sha256 0f3a…): the rack files are not the same on every node",
    );
}

#[test]
fn row_rack_map_contradicting_own_gpus_is_the_jobs() {
    let cause = "the rack map puts n1 in clique 7 but its GPUs report clique 3 (NVML)";
    let mut steps = Prolog::new(Gate::Pass { clique: Some("3") }, up());
    steps.map_disagrees = Some(cause);
    let exit = prolog_with(&job(true), &steps);
    assert_eq!(exit, Exit::ok());
    assert_eq!(steps.drains(), []);
    let records = steps.records();
    // UP, then refused, then the prolog's time on the refusal.
    assert_eq!(records[0].outcome, Outcome::Ready { waited_ms: 1200 });
    let refused = Outcome::Failed {
        cause: cause.into(),
        node_fault: false,
    };
    assert_eq!(records[1].outcome, refused);
    assert_eq!(records.last().map(|r| &r.outcome), Some(&refused));
    // The domain stays for the epilog: stopped now, the peers would blame n1.
    assert_eq!(steps.teardowns(), 0);
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
    assert_node_fault("the rack's nvidia-imex on n1 is down and did not start: exit status 1");
}

#[test]
fn row_unreadable_rack_files_are_the_jobs() {
    assert_jobs_fault(
        "/etc/slurm/imex-racks.toml is group- or world-writable (mode 0666): refused; make it \
         root's and 0644",
    );
}

#[test]
fn row_unreadable_address_map_is_the_jobs() {
    assert_jobs_fault("/etc/slurm/imex-addresses.toml:3: expected `=`");
}

#[test]
fn row_rack_files_disagreeing_are_the_jobs() {
    assert_jobs_fault(
        "block b1 of /etc/slurm/topology.yaml holds n1 and n2, which imex-racks.toml puts in \
         cliques 7 and 8",
    );
}

#[test]
fn row_stale_domain_reclaimed_lets_the_job_run() {
    // The claim reclaimed the ended job's domain inside the setup: the job
    // sees a domain UP, the node stays up.
    let steps = Prolog::new(Gate::Pass { clique: Some("7") }, up());
    let exit = prolog_with(&job(true), &steps);
    assert_eq!(exit, Exit::ok());
    assert_eq!(steps.drains(), []);
    let records = steps.records();
    assert_eq!(records.len(), 2);
    assert_eq!(records[1].outcome, Outcome::Ready { waited_ms: 1200 });
    assert!(records[1].prolog_ms.is_some());
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
