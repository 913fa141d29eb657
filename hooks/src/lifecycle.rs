//! What the prolog and epilog binaries do, start to end: the GPU health gate
//! and stats for every GPU job, and the IMEX domain for `--imex` jobs, with
//! the exit status Slurm acts on (non-zero only for a fault of this node).
//! What a GPU verdict does to the node is decided by `crate::drain`.

use crate::drain::{self, DrainAction};
use crate::gpu_job::{self, GpuOutcome};
use slurm_imex_core::blame::{Blamed, Fault};
use slurm_imex_core::config::Config;
use slurm_imex_core::hook::Hook;
use slurm_imex_core::slurm::env::JobEnv;
use slurm_imex_core::state::{sweep, NodeState, StateDir};
use slurm_imex_core::timespec::now_s;
use slurm_imex_domain::imex::domain::{self, TeardownOutcome};
use slurm_imex_gpu::health::Verdict;
use slurm_imex_jobdb::{journal, metrics};
use std::time::Duration;

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
    let (gate, domain) = if job.imex_requested {
        std::thread::scope(|scope| {
            let gate = scope.spawn(|| gpu_job::prolog(job, cfg));
            let domain = domain::setup(job, cfg);
            let gate = gate.join().unwrap_or_else(|_| GpuOutcome::Done {
                verdict: Verdict::Drain,
                drain_reason: Some("imex-health: gate: the GPU health gate crashed (a bug)".into()),
                warnings: Vec::new(),
                clique: None,
            });
            (gate, Some(domain))
        })
    } else {
        // Nothing to overlap with: no thread (a panic is caught by run_from_env).
        (gpu_job::prolog(job, cfg), None)
    };
    let action = act_on_gate(&gate, job, cfg, Hook::Prolog);
    if let Some(reason) = action.hook_failure() {
        // A drain-class finding: the node must not take the job.
        exit.fail(format!("slurm-imex-prolog: {reason}"));
        note_drained(cfg, &action);
        if domain.is_some() {
            if let Err(e) = domain::teardown(job.job_id, cfg) {
                exit.fail(format!(
                    "slurm-imex-prolog: cannot return IMEX to idle: {e}"
                ));
            }
        }
        return exit;
    }
    match domain.map(|d| check_own_clique(d, &gate, job, cfg)) {
        None => {}
        Some(Ok(waited)) => {
            tracing::info!(waited_ms = waited.as_millis() as u64, "IMEX domain UP")
        }
        Some(Err(Fault::Job(cause))) => {
            // Not this node's fault: the plugin fails the job with this cause.
            tracing::warn!("job {} cannot use IMEX: {cause}", job.job_id)
        }
        Some(Err(Fault::Node(e))) => {
            // This node's fault: Slurm drains it; the standing keeps why.
            let action = drain::imex_node_fault(cfg, &job.node_name, job.job_id, &e.to_string());
            note_drained(cfg, &action);
            exit.fail(format!("slurm-imex-prolog: {e}"))
        }
    }
    // The prolog writes nothing for the metrics (every job pays for the
    // prolog): the epilog derives them from the job's record and row.
    if job.imex_requested {
        domain::note_prolog_time(job.job_id, cfg, started.elapsed());
    }
    exit
}

/// A domain that formed is still refused when the rack map contradicts
/// the clique this node's GPUs report (the gate read it, beside the
/// domain's start): the job fails naming both, the node stays up.
fn check_own_clique(
    domain: Blamed<Duration>,
    gate: &GpuOutcome,
    job: &JobEnv,
    cfg: &Config,
) -> Blamed<Duration> {
    let (
        Ok(_),
        GpuOutcome::Done {
            clique: Some(live), ..
        },
    ) = (&domain, gate)
    else {
        return domain;
    };
    domain::refuse_for_own_clique(job, cfg, live).and(domain)
}

/// A prolog's drain finding is in the node's standing, so the next `check
/// --undrain` knows to ask Slurm whether it may lift it. Best effort.
fn note_drained(cfg: &Config, action: &DrainAction) {
    let state = StateDir::of(cfg);
    let mut node = NodeState::load(&state);
    action.record(&mut node, now_s());
    if let Err(e) = node.save(&state) {
        tracing::warn!("cannot note the drain in the node's standing: {e}");
    }
}

/// Have the drain decision act on the GPU side's verdict. A verdict that
/// does not fail the hook is logged: its warnings, and the verdict or why
/// the GPU side was skipped.
fn act_on_gate(gate: &GpuOutcome, job: &JobEnv, cfg: &Config, hook: Hook) -> DrainAction {
    let reason = match gate {
        GpuOutcome::Done { drain_reason, .. } => drain_reason.clone(),
        GpuOutcome::Skipped(_) => None,
    };
    let action = drain::act(cfg, &job.node_name, job.job_id, reason, hook);
    if action.hook_failure().is_none() {
        log_gate(gate, hook);
    }
    action
}

/// Log a GPU side that does not fail the hook.
fn log_gate(gate: &GpuOutcome, hook: Hook) {
    let (done, skipped) = match hook {
        Hook::Prolog => ("GPU health gate passed", "GPU health gate skipped"),
        Hook::Epilog | Hook::Check => ("job GPU stats recorded", "GPU stats skipped"),
    };
    match gate {
        GpuOutcome::Done {
            verdict, warnings, ..
        } => {
            for w in warnings {
                tracing::warn!("{w}");
            }
            tracing::info!(verdict = verdict.as_str(), "{done}");
        }
        GpuOutcome::Skipped(why) => tracing::debug!("{skipped}: {why}"),
    }
}

/// Tear down the job's IMEX domain, then record its GPU stats and judge the
/// GPUs, then publish the node's state (journal, metrics).
pub fn epilog(job: &JobEnv, cfg: &Config) -> Exit {
    let started = std::time::Instant::now();
    let mut exit = Exit::ok();
    sweep::sweep_orphan_temps(cfg);
    let state = StateDir::of(cfg);
    let mut node = NodeState::load(&state);
    node.node = job.node_name.clone();
    // The job's whole prolog time and its IMEX domain here, before teardown
    // removes its record.
    let record = state.read_record(job.job_id).ok().flatten();
    let prolog_ms = record.as_ref().and_then(|r| r.prolog_ms);
    let imex_domain = record.as_ref().and_then(|r| r.domain.clone());
    if job.imex_requested {
        teardown_domain(job, cfg, &mut exit);
    }
    let (outcome, row) = gpu_job::epilog(job, cfg, record.as_ref());
    let action = act_on_gate(&outcome, job, cfg, Hook::Epilog);
    if let Some(reason) = action.hook_failure() {
        exit.fail(format!("slurm-imex-epilog: {reason}"));
    }
    action.record(&mut node, now_s());
    let epilog_ms = started.elapsed().as_millis() as u64;
    // A job without --imex keeps no record: its prolog was the gate.
    let gate_ms = row.as_ref().and_then(|r| r.prolog.as_ref()).map(|p| p.ms);
    let prolog_ms = prolog_ms.or(gate_ms);
    if row.is_some() {
        node.last_gate_ms = gate_ms;
        node.last_prolog_ms = prolog_ms;
    }
    node.last_epilog_ms = Some(epilog_ms);
    journal::job_summary(
        job,
        row.as_ref(),
        imex_domain.as_deref(),
        prolog_ms,
        epilog_ms,
    );
    publish_node_state(&state, cfg, &mut node, &exit);
    exit
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

/// Save the node's state and refresh the Prometheus export. Best effort:
/// the job is over and its row is recorded either way.
fn publish_node_state(state: &StateDir, cfg: &Config, node: &mut NodeState, exit: &Exit) {
    node.read_domain(state);
    let saved = node.save(state);
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

/// `slurm-imex-prolog`: the whole binary.
pub fn run_prolog_from_env() -> u8 {
    run_from_env(Hook::Prolog, prolog)
}

/// `slurm-imex-epilog`: the whole binary.
pub fn run_epilog_from_env() -> u8 {
    run_from_env(Hook::Epilog, epilog)
}

/// Logging, Slurm's environment, config, the hook's `body`, and the exit
/// status. Every error is one line on stderr and in the log; a panic (a bug)
/// is caught and reported as one line too, with status 1.
fn run_from_env(hook: Hook, body: fn(&JobEnv, &Config) -> Exit) -> u8 {
    std::panic::set_hook(Box::new(|_| {}));
    match std::panic::catch_unwind(|| run_hook(hook, body)) {
        Ok(code) => code,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            let line = slurm_imex_core::text::cap(
                &format!(
                    "{}: internal error (a bug, please report it): {what}",
                    hook.program()
                ),
                1024,
            );
            slurm_imex_core::logging::report_error(&line);
            1
        }
    }
}

fn run_hook(hook: Hook, body: fn(&JobEnv, &Config) -> Exit) -> u8 {
    let program = hook.program();
    slurm_imex_core::logging::init(program);
    let report = slurm_imex_core::logging::report_error;
    let job = match JobEnv::from_process_env() {
        Ok(j) => j,
        Err(e) => {
            report(&format!("{program}: {e}"));
            return 1;
        }
    };
    let span = slurm_imex_core::logging::job_span(job.job_id, &job.node_name);
    let _guard = span.enter();
    let config = match Config::load(None).and_then(|(c, _)| c.check_trust().map(|_| c)) {
        Ok(c) => c,
        Err(e) => {
            report(&format!("{program} on {}: {e}", job.node_name));
            return 1;
        }
    };
    let exit = body(&job, &config);
    for line in &exit.errors {
        report(line);
    }
    exit.code
}
