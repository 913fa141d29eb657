//! What the prolog and epilog binaries do, start to end: the GPU health gate
//! and stats for every GPU job, and the IMEX domain for `--imex` jobs, with
//! the exit status Slurm acts on (non-zero only for a fault of this node).

use crate::config::Config;
use crate::gpu_job::{self, GpuPhaseOutcome};
use crate::imex::domain::{self, SetupOutcome, TeardownOutcome};
use crate::imex::job_record::StateDir;
use crate::metrics;
use crate::slurm_env::JobEnv;
use std::path::{Path, PathBuf};

/// What a prolog/epilog run ends with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    pub code: u8,
    /// One line each, for stderr (and the log).
    pub errors: Vec<String>,
}

impl Exit {
    fn ok() -> Exit {
        Exit {
            code: 0,
            errors: Vec::new(),
        }
    }
    fn fail(&mut self, line: String) {
        self.code = 1;
        self.errors.push(line);
    }
}

/// The GPU health gate and the IMEX domain run side by side (the gate
/// reads GPUs and the kernel log; the domain waits on the network), so an
/// `--imex` GPU job's prolog takes about the longer of the two, not their
/// sum. A drain-class gate finding fails the prolog and tears down the
/// domain it may have built, so the node is left idle.
pub fn prolog(job: &JobEnv, cfg: &Config) -> Exit {
    let started = std::time::Instant::now();
    let mut exit = Exit::ok();
    let (gate, domain) = std::thread::scope(|scope| {
        let gate = scope.spawn(|| gpu_job::prolog(job, cfg));
        let domain = job.imex_requested.then(|| domain::setup(job, cfg));
        let gate = gate.join().unwrap_or_else(|_| GpuPhaseOutcome::Done {
            verdict: crate::health::Verdict::Drain,
            drain_reason: Some("imex-health: gate: the GPU health gate crashed (a bug)".into()),
            warnings: Vec::new(),
        });
        (gate, domain)
    });
    if let Some(reason) = act_on_prolog_gate(gate) {
        // A drain-class finding: the node must not take the job.
        exit.fail(format!("slurm-imex-prolog: {reason}"));
        if domain.is_some() {
            if let Err(e) = domain::teardown(job.job_id, cfg) {
                exit.fail(format!(
                    "slurm-imex-prolog: cannot return IMEX to idle: {e}"
                ));
            }
        }
        return exit;
    }
    match domain {
        None => {}
        Some(SetupOutcome::Ready { waited }) => {
            tracing::info!(waited_ms = waited.as_millis() as u64, "IMEX domain UP")
        }
        Some(SetupOutcome::JobFailure(cause)) => {
            // Not this node's fault: the plugin fails the job with this cause.
            tracing::warn!("job {} cannot use IMEX: {cause}", job.job_id)
        }
        Some(SetupOutcome::NodeFault(cause)) => exit.fail(format!("slurm-imex-prolog: {cause}")),
    }
    // The prolog writes nothing for the metrics (every job pays for the
    // prolog): the epilog derives them from the job's record and row.
    if job.imex_requested {
        domain::note_prolog_time(job.job_id, cfg, started.elapsed());
    }
    exit
}

/// The drain reason of a gate that found the node unfit; otherwise its
/// warnings are logged and None.
fn act_on_prolog_gate(gate: GpuPhaseOutcome) -> Option<String> {
    if let GpuPhaseOutcome::Done {
        drain_reason: Some(reason),
        ..
    } = gate
    {
        return Some(reason);
    }
    log_gate(&gate, "GPU health gate passed", "GPU health gate skipped");
    None
}

/// Log a gate that does not drain: its warnings and verdict, or why it
/// was skipped.
fn log_gate(gate: &GpuPhaseOutcome, done: &str, skipped: &str) {
    match gate {
        GpuPhaseOutcome::Done {
            verdict, warnings, ..
        } => {
            for w in warnings {
                tracing::warn!("{w}");
            }
            tracing::info!(verdict = verdict.as_str(), "{done}");
        }
        GpuPhaseOutcome::Skipped(why) => tracing::debug!("{skipped}: {why}"),
    }
}

/// Tear down the job's IMEX domain, then record its GPU stats and judge the
/// GPUs, then publish the node's state (journal, metrics).
pub fn epilog(job: &JobEnv, cfg: &Config) -> Exit {
    let started = std::time::Instant::now();
    let mut exit = Exit::ok();
    sweep_orphan_temps(cfg);
    let mut node = metrics::NodeState::load(cfg);
    node.node = job.node_name.clone();
    // The job's whole prolog time, before teardown removes its record.
    let prolog_ms = StateDir::new(&cfg.imex.state_dir)
        .read_record(job.job_id)
        .ok()
        .flatten()
        .and_then(|r| r.prolog_ms);
    if job.imex_requested {
        teardown_domain(job, cfg, &mut exit);
    }
    let (outcome, row) = gpu_job::epilog_with_record(job, cfg);
    act_on_epilog_gate(outcome, job, cfg, &mut node, &mut exit);
    let epilog_ms = started.elapsed().as_millis() as u64;
    // A job without --imex keeps no record: its prolog was the gate.
    let gate_ms = row.as_ref().and_then(|r| r.prolog.as_ref()).map(|p| p.ms);
    let prolog_ms = prolog_ms.or(gate_ms);
    if row.is_some() {
        node.last_gate_ms = gate_ms;
        node.last_prolog_ms = prolog_ms;
    }
    node.last_epilog_ms = Some(epilog_ms);
    crate::journal::job_summary(job, row.as_ref(), prolog_ms, epilog_ms);
    publish_node_state(cfg, &mut node, &exit);
    exit
}

/// What a prolog or epilog killed mid-write (Slurm's timeout, an admin's
/// kill -9) left behind: our temporary files whose writer is gone, in every
/// directory we write to. Once per epilog, whatever job or hook was killed.
fn sweep_orphan_temps(cfg: &Config) {
    let daemon = &cfg.imex.daemon;
    let mut dirs: Vec<PathBuf> = StateDir::new(&cfg.imex.state_dir).dirs().into();
    dirs.push(gpu_job::start_dir(cfg));
    dirs.extend(
        [&daemon.nodes_config, &daemon.job_config]
            .into_iter()
            .filter_map(|file| file.parent().map(Path::to_path_buf)),
    );
    dirs.extend(metrics::textfile_dir(cfg));
    dirs.sort();
    dirs.dedup();
    for dir in &dirs {
        crate::fsutil::remove_orphan_temps(dir);
    }
}

fn teardown_domain(job: &JobEnv, cfg: &Config, exit: &mut Exit) {
    match domain::teardown(job.job_id, cfg) {
        Ok(TeardownOutcome::LeftToOwner(owner)) => {
            tracing::info!("IMEX domain belongs to job {owner}; left untouched")
        }
        Ok(outcome) => tracing::info!(?outcome, "IMEX domain torn down"),
        Err(e) => exit.fail(format!(
            "slurm-imex-epilog on {}: cannot return IMEX to idle: {e}",
            job.node_name
        )),
    }
}

/// A drain finding after the job drains the node (when the site lets the
/// epilog drain); anything else is logged.
fn act_on_epilog_gate(
    outcome: GpuPhaseOutcome,
    job: &JobEnv,
    cfg: &Config,
    node: &mut metrics::NodeState,
    exit: &mut Exit,
) {
    if let GpuPhaseOutcome::Done {
        drain_reason: Some(reason),
        ..
    } = &outcome
    {
        if cfg.health.drain_from_epilog {
            if cfg.health.set_drain_reason {
                if let Err(e) = crate::drain::set_drain(&cfg.health, &job.node_name, reason) {
                    tracing::warn!("{e}");
                }
            }
            node.set_drained(Some(crate::timespec::now_s()));
            exit.fail(format!("slurm-imex-epilog: {reason}"));
            return;
        }
    }
    log_gate(&outcome, "job GPU stats recorded", "GPU stats skipped");
}

/// Save the node's state and refresh the Prometheus export. Best effort:
/// the job is over and its row is recorded either way.
fn publish_node_state(cfg: &Config, node: &mut metrics::NodeState, exit: &Exit) {
    node.read_domain(cfg);
    let saved = node.save(cfg);
    let refreshed = metrics::refresh(cfg, node);
    if let Some(e) = saved.err().or(refreshed.err()) {
        // A failing epilog already says what is wrong, in one line.
        if exit.code == 0 {
            tracing::warn!("Prometheus export not refreshed: {e}");
        } else {
            tracing::debug!("Prometheus export not refreshed: {e}");
        }
    }
}

/// Which Slurm hook a binary is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    Prolog,
    Epilog,
}

impl Hook {
    fn program(self) -> &'static str {
        match self {
            Hook::Prolog => "slurm-imex-prolog",
            Hook::Epilog => "slurm-imex-epilog",
        }
    }
}

/// The whole binary: logging, Slurm's environment, config, the hook, and
/// the exit status. Every error is one line on stderr and in the log; a
/// panic (a bug) is caught and reported as one line too, with status 1.
pub fn run_from_env(hook: Hook) -> u8 {
    std::panic::set_hook(Box::new(|_| {}));
    match std::panic::catch_unwind(|| run_hook(hook)) {
        Ok(code) => code,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            let line = crate::text::cap(
                &format!(
                    "{}: internal error (a bug, please report it): {what}",
                    hook.program()
                ),
                1024,
            );
            crate::logging::report_error(&line);
            1
        }
    }
}

fn run_hook(hook: Hook) -> u8 {
    let program = hook.program();
    crate::logging::init(program);
    let report = crate::logging::report_error;
    let job = match JobEnv::from_process_env() {
        Ok(j) => j,
        Err(e) => {
            report(&format!("{program}: {e}"));
            return 1;
        }
    };
    let span = crate::logging::job_span(job.job_id, &job.node_name);
    let _guard = span.enter();
    let config = match Config::load(None).and_then(|(c, _)| c.check_trust().map(|_| c)) {
        Ok(c) => c,
        Err(e) => {
            report(&format!("{program} on {}: {e}", job.node_name));
            return 1;
        }
    };
    let exit = match hook {
        Hook::Prolog => prolog(&job, &config),
        Hook::Epilog => epilog(&job, &config),
    };
    for line in &exit.errors {
        report(line);
    }
    exit.code
}
