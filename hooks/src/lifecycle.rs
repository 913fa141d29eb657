//! What the prolog and epilog binaries do, start to end: the GPU health gate
//! and stats for every GPU job, and the IMEX domain for `--imex` jobs, with
//! the exit status Slurm acts on (non-zero only for a fault of this node).
//! What a GPU verdict does to the node is decided by `crate::drain`.

use crate::drain::{self, DrainAction};
pub use crate::exit::Exit;
use crate::gpu_job::{self, GpuEpilog, GpuOutcome};
use slurm_imex_core::blame::{Blamed, Fault};
use slurm_imex_core::error::Result;
use slurm_imex_core::hook::Hook;
use slurm_imex_core::slurm::env::JobEnv;
use slurm_imex_core::state::job_record::{JobRecord, Outcome};
use slurm_imex_core::state::{sweep, NodeState, StateDir};
use slurm_imex_core::timespec::now_s;
use slurm_imex_domain::config::DomainScope;
use slurm_imex_domain::context::HookContext;
use slurm_imex_domain::imex::domain::{self, TeardownOutcome};
use slurm_imex_domain::imex::status::expectation;
use slurm_imex_gpu::health::checks::RECOVERY_ACTION;
use slurm_imex_gpu::health::{GpuRef, Verdict, DRAIN_PREFIX};
use slurm_imex_jobdb::write::JobRow;
use slurm_imex_jobdb::{journal, metrics};
use slurm_imex_settings::Config;
use std::time::Duration;

/// The steps a prolog runs, each a call into another crate; the lifecycle
/// decides on their outcomes (docs/blame.md). [`Live`] runs the real ones;
/// the unit tests inject fakes (no Slurm, NVML or IMEX daemon).
pub trait PrologSteps: Sync {
    /// The GPU health gate and start snapshot (`gpu_job::prolog`).
    fn gate(&self) -> GpuOutcome;
    /// Form or join the job's IMEX domain (`domain::form`): the job's
    /// record, which says the outcome, and the outcome.
    fn form_domain(&self) -> (JobRecord, Blamed<Duration>);
    /// Write the job's record, for the SPANK plugin.
    fn write_record(&self, record: &JobRecord) -> Result<()>;
    /// Why the rack map contradicts the clique this node's GPUs report.
    fn own_clique_disagreement(&self, live: &str) -> Option<String>;
    /// What a gate's drain reason does to the node (`drain::act`).
    fn act_on_gate(&self, drain_reason: Option<String>) -> DrainAction;
    /// What a fault of this node's IMEX side does (`drain::imex_node_fault`).
    fn imex_node_fault(&self, line: &str) -> DrainAction;
    /// Keep this prolog's drain in the node's standing, in place of any
    /// drain it held before: Slurm gave the node a job, so that one was
    /// lifted, by hand if not by us (best effort).
    fn note_drained(&self, action: &DrainAction);
    /// Return IMEX on this node to idle (`domain::teardown`).
    fn teardown(&self) -> Result<TeardownOutcome>;
    /// Start the watcher of the job's per-job domain, now UP (`watch_program::spawn`).
    fn watch_domain(&self) -> Result<()>;
    /// Read again the recovery action of `gpus`, which asked at the gate
    /// for their IMEX domain to be restored (`gpu_job::reread_recovery`):
    /// `Err` is the drain reason of one that has not cleared.
    fn reread_recovery(&self, gpus: &[GpuRef]) -> std::result::Result<(), String>;
    /// Restore this node's IMEX domain for them (`domain::restore`): None
    /// when the job's domain was started for it already (per-job).
    fn restore_domain(&self) -> Option<Blamed<Duration>>;
    /// Add a line to what the gate concluded, for the job's row
    /// (`gpu_job::note_prolog_reason`).
    fn note_gate(&self, line: String);
}

/// The steps an epilog runs (see [`PrologSteps`]).
pub trait EpilogSteps {
    /// Stop the job's domain watcher, before anything reads what it wrote
    /// (`watch_program::stop`).
    fn stop_watch(&self) -> Result<()>;
    /// The drain line when the watcher left the daemon down (it died past
    /// `[imex.watch] max_restarts`), read once (`watch_program::left_down`).
    fn watch_left_down(&self) -> Option<String>;
    /// The node's standing, after sweeping temporary files left by killed writers.
    fn load_node(&self) -> NodeState;
    /// What the prolog recorded of the job's IMEX domain here.
    fn read_record(&self) -> Option<JobRecord>;
    /// Return IMEX on this node to idle and forget the job's record.
    fn teardown(&self) -> Result<TeardownOutcome>;
    /// What a fault of this node's IMEX side does (`drain::imex_node_fault`).
    fn imex_node_fault(&self, line: &str) -> DrainAction;
    /// Judge the GPUs after the job and record its row (`gpu_job`).
    fn judge_gpus(&self, record: Option<&JobRecord>) -> GpuEpilog;
    /// What a post-job drain reason does to the node (`drain::act`).
    fn act_on_gpus(&self, drain_reason: Option<String>) -> DrainAction;
    /// The job's journal event.
    fn summarize(
        &self,
        row: Option<&JobRow>,
        domain: Option<&str>,
        prolog_ms: Option<u64>,
        epilog_ms: u64,
    );
    /// Save the node's standing and refresh the metrics (best effort).
    fn publish(&self, node: &mut NodeState, exit: &Exit);
}

/// The real steps, on this node, sharing one [`HookContext`]: whatever of
/// slurm.conf and the rack files the steps need is read once per hook run.
pub struct Live<'a> {
    pub job: &'a JobEnv,
    pub cfg: &'a Config,
    pub ctx: &'a HookContext<'a>,
}

impl<'a> Live<'a> {
    fn new(job: &'a JobEnv, cfg: &'a Config, ctx: &'a HookContext<'a>) -> Live<'a> {
        Live { job, cfg, ctx }
    }

    /// What a GPU verdict of `hook` does to this node (`crate::drain`).
    fn act_on_gpu_verdict(&self, drain_reason: Option<String>, hook: Hook) -> DrainAction {
        let job = self.job;
        drain::act(self.cfg, &job.node_name, job.job_id, drain_reason, hook)
    }
}

impl PrologSteps for Live<'_> {
    fn gate(&self) -> GpuOutcome {
        gpu_job::prolog(self.job, self.cfg)
    }
    fn form_domain(&self) -> (JobRecord, Blamed<Duration>) {
        domain::form(self.job, self.ctx)
    }
    fn write_record(&self, record: &JobRecord) -> Result<()> {
        StateDir::of(self.cfg).write_record(record)
    }
    fn own_clique_disagreement(&self, live: &str) -> Option<String> {
        domain::own_clique_disagreement(self.job, self.ctx, live)
    }
    fn act_on_gate(&self, drain_reason: Option<String>) -> DrainAction {
        self.act_on_gpu_verdict(drain_reason, Hook::Prolog)
    }
    fn imex_node_fault(&self, line: &str) -> DrainAction {
        drain::imex_node_fault(self.cfg, &self.job.node_name, self.job.job_id, line)
    }
    fn note_drained(&self, action: &DrainAction) {
        let state = StateDir::of(self.cfg);
        let mut node = NodeState::load(&state);
        node.set_drained(None);
        action.record(&mut node, now_s());
        if let Err(e) = node.save(&state) {
            tracing::warn!("cannot note the drain in the node's standing: {e}");
        }
    }
    fn teardown(&self) -> Result<TeardownOutcome> {
        domain::teardown(self.job.job_id, self.cfg)
    }
    fn watch_domain(&self) -> Result<()> {
        let watch = &self.cfg.engine.watch;
        if !watch.enabled || self.cfg.engine.domain != DomainScope::Job {
            return Ok(());
        }
        crate::watch_program::spawn(self.job.job_id, &self.job.node_name, self.cfg)
    }
    fn reread_recovery(&self, gpus: &[GpuRef]) -> std::result::Result<(), String> {
        gpu_job::reread_recovery(self.cfg, gpus)
    }
    fn restore_domain(&self) -> Option<Blamed<Duration>> {
        domain::restore(self.job, self.ctx)
    }
    fn note_gate(&self, line: String) {
        gpu_job::note_prolog_reason(self.job, self.cfg, line)
    }
}

impl EpilogSteps for Live<'_> {
    fn stop_watch(&self) -> Result<()> {
        crate::watch_program::stop(self.cfg, self.job.job_id)
    }
    fn watch_left_down(&self) -> Option<String> {
        crate::watch_program::left_down(self.cfg, self.job.job_id)
    }
    fn load_node(&self) -> NodeState {
        let mut others = self.cfg.engine.daemon.written_dirs();
        others.extend(self.cfg.metrics.textfile_dir());
        sweep::sweep_orphan_temps(self.cfg, others);
        NodeState::load(&StateDir::of(self.cfg))
    }
    fn read_record(&self) -> Option<JobRecord> {
        StateDir::of(self.cfg)
            .read_record(self.job.job_id)
            .ok()
            .flatten()
    }
    fn teardown(&self) -> Result<TeardownOutcome> {
        domain::teardown(self.job.job_id, self.cfg)
    }
    fn imex_node_fault(&self, line: &str) -> DrainAction {
        drain::imex_node_fault(self.cfg, &self.job.node_name, self.job.job_id, line)
    }
    fn judge_gpus(&self, record: Option<&JobRecord>) -> GpuEpilog {
        gpu_job::judge_and_record(self.job, self.cfg, record)
    }
    fn act_on_gpus(&self, drain_reason: Option<String>) -> DrainAction {
        self.act_on_gpu_verdict(drain_reason, Hook::Epilog)
    }
    fn summarize(
        &self,
        row: Option<&JobRow>,
        domain: Option<&str>,
        prolog_ms: Option<u64>,
        epilog_ms: u64,
    ) {
        journal::job_summary(self.job, row, domain, prolog_ms, epilog_ms);
    }
    fn publish(&self, node: &mut NodeState, exit: &Exit) {
        publish_node_state(&StateDir::of(self.cfg), self.cfg, node, exit);
    }
}

/// The prolog on this node: [`prolog_with`] the [`Live`] steps, over
/// one context for the whole run.
pub fn prolog(job: &JobEnv, cfg: &Config) -> Exit {
    let ctx = HookContext::new(cfg);
    prolog_with(job, &Live::new(job, cfg, &ctx))
}

/// The GPU health gate and the IMEX domain run side by side (the gate
/// reads GPUs and the kernel log; the domain waits on the network), so an
/// `--imex` GPU job's prolog takes about the longer of the two, not their
/// sum. A drain-class gate finding fails the prolog and tears down the
/// domain it may have built, so the node is left idle.
pub fn prolog_with(job: &JobEnv, steps: &impl PrologSteps) -> Exit {
    let started = std::time::Instant::now();
    let mut exit = Exit::ok();
    let (gate, domain) = if job.imex_requested {
        std::thread::scope(|scope| {
            let gate = scope.spawn(|| steps.gate());
            let domain = setup_domain(steps);
            let gate = gate.join().unwrap_or_else(|_| gate_crashed());
            (gate, Some(domain))
        })
    } else {
        // Nothing to overlap with: no thread (a panic is caught by run_from_env).
        (steps.gate(), None)
    };
    let action = steps.act_on_gate(drain_reason_of(&gate));
    if action.hook_failure().is_some() {
        // A drain-class finding: the node must not take the job.
        refuse_node(&mut exit, steps, &action, domain.is_some());
        return exit;
    }
    log_gate(&gate, Hook::Prolog);
    let Some((mut record, domain)) = domain else {
        return exit;
    };
    let domain = check_own_clique(domain, record.as_mut(), &gate, steps);
    let (domain, still_asks) = match domain {
        Ok(waited) => recover_imex_domain(&gate, steps, waited),
        not_up => (not_up, None),
    };
    if let Some(reason) = still_asks {
        // This node's GPU still asks for the IMEX domain it has just got:
        // the node's fault, drained as a GPU finding is (a GPU drain,
        // which `check --undrain` lifts once every GPU reads NONE).
        refuse_node(&mut exit, steps, &steps.act_on_gate(Some(reason)), true);
        return exit;
    }
    match domain {
        Ok(waited) => {
            tracing::info!(waited_ms = waited.as_millis() as u64, "IMEX domain UP");
            if let Err(e) = steps.watch_domain() {
                // The domain is UP: the job runs, unwatched, and says so.
                exit.note(format!(
                    "slurm-imex-prolog: the IMEX domain is not watched: {e}"
                ));
            }
        }
        Err(Fault::Job(cause)) => {
            // Not this node's fault: the plugin fails the job with this cause.
            tracing::warn!("job {} cannot use IMEX: {cause}", job.job_id)
        }
        Err(Fault::Node(e)) => {
            // This node's fault: Slurm drains it; the standing keeps why.
            steps.note_drained(&steps.imex_node_fault(&e.to_string()));
            exit.fail(format!("slurm-imex-prolog: {e}"))
        }
    }
    // The prolog writes nothing for the metrics (every job pays for the
    // prolog): the epilog derives them from the job's record and row.
    if let Some(record) = record.as_mut() {
        record.prolog_ms = Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
        if let Err(e) = steps.write_record(record) {
            tracing::warn!("cannot note the prolog time: {e}");
        }
    }
    exit
}

/// The prolog fails for a fault of this node's GPUs (`action`, a drain):
/// the standing keeps why, and a domain formed for the job is torn down,
/// so the node is left idle.
fn refuse_node(exit: &mut Exit, steps: &impl PrologSteps, action: &DrainAction, formed: bool) {
    if let Some(reason) = action.hook_failure() {
        exit.fail(format!("slurm-imex-prolog: {reason}"));
    }
    steps.note_drained(action);
    if formed {
        if let Err(e) = steps.teardown() {
            exit.fail(format!(
                "slurm-imex-prolog: cannot return IMEX to idle: {e}"
            ));
        }
    }
}

/// GPUs whose driver asked at the gate for their IMEX domain to be restored
/// (recovery action RECOVER_IMEX_DOMAIN) are read again once the job's
/// domain is UP: a per-job domain has just been started for the job, which
/// is what restores it; a rack-wide one is restarted on this node first
/// when the action has not cleared (`steps.restore_domain`). Cleared, the
/// job runs and its record says so; still asking, the second value is the
/// drain reason (this node's fault). The first value is the domain's
/// outcome, which a failed restart replaces.
fn recover_imex_domain(
    gate: &GpuOutcome,
    steps: &impl PrologSteps,
    waited: Duration,
) -> (Blamed<Duration>, Option<String>) {
    let gpus = match gate {
        GpuOutcome::Done { restore_imex, .. } if !restore_imex.is_empty() => restore_imex,
        _ => return (Ok(waited), None),
    };
    let names = gpu_names(gpus);
    let cleared = |how: &str| {
        steps.note_gate(format!(
            "{DRAIN_PREFIX} {RECOVERY_ACTION} {names}: RECOVER_IMEX_DOMAIN (5) cleared {how}"
        ))
    };
    let still = match steps.reread_recovery(gpus) {
        Ok(()) => {
            cleared("once the job's fresh IMEX domain was UP");
            return (Ok(waited), None);
        }
        Err(still) => still,
    };
    match steps.restore_domain() {
        None => (Ok(waited), Some(still)),
        Some(Err(fault)) => (Err(fault), None),
        Some(Ok(again)) => {
            let waited = waited.saturating_add(again);
            match steps.reread_recovery(gpus) {
                Ok(()) => {
                    cleared("once this node's rack daemon was restarted and the domain UP again");
                    (Ok(waited), None)
                }
                Err(still) => (Ok(waited), Some(still)),
            }
        }
    }
}

/// `gpu0,gpu3`.
fn gpu_names(gpus: &[GpuRef]) -> String {
    let names: Vec<String> = gpus.iter().map(|g| format!("gpu{}", g.index)).collect();
    names.join(",")
}

/// What a gate that panicked (a bug) stands for: a drain verdict, as the
/// gate could not say the GPUs are fit.
fn gate_crashed() -> GpuOutcome {
    GpuOutcome::Done {
        verdict: Verdict::Drain,
        drain_reason: Some(slurm_imex_gpu::health::gate::crashed().reason()),
        warnings: Vec::new(),
        clique: None,
        restore_imex: Vec::new(),
    }
}

/// The job's domain, and its record once written for the plugin (None when
/// it could not be: this node's fault, as the plugin cannot let the job run
/// without one).
fn setup_domain(steps: &impl PrologSteps) -> (Option<JobRecord>, Blamed<Duration>) {
    let (record, outcome) = steps.form_domain();
    match steps.write_record(&record) {
        Ok(()) => (Some(record), outcome),
        Err(e) => (None, Err(domain::record_fault(e))),
    }
}

/// A domain that formed is still refused when the rack map contradicts
/// the clique this node's GPUs report (the gate read it, beside the
/// domain's start): the job fails naming both, the node stays up. The
/// record says so (failing to write it is this node's fault).
fn check_own_clique(
    domain: Blamed<Duration>,
    record: Option<&mut JobRecord>,
    gate: &GpuOutcome,
    steps: &impl PrologSteps,
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
    let Some(cause) = steps.own_clique_disagreement(live) else {
        return domain;
    };
    if let Some(record) = record {
        let mut refused = record.clone();
        refused.outcome = Outcome::Failed {
            cause: cause.clone(),
            node_fault: false,
        };
        steps.write_record(&refused).map_err(domain::record_fault)?;
        *record = refused;
    }
    Err(Fault::Job(cause))
}

/// The drain reason a GPU side's verdict carries, if any.
fn drain_reason_of(gate: &GpuOutcome) -> Option<String> {
    match gate {
        GpuOutcome::Done { drain_reason, .. } => drain_reason.clone(),
        GpuOutcome::Skipped(_) => None,
    }
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

/// The epilog on this node: [`epilog_with`] the [`Live`] steps, over
/// one context for the whole run.
pub fn epilog(job: &JobEnv, cfg: &Config) -> Exit {
    let ctx = HookContext::new(cfg);
    epilog_with(job, &Live::new(job, cfg, &ctx))
}

/// Tear down the job's IMEX domain, then record its GPU stats and judge the
/// GPUs, then publish the node's state (journal, metrics).
pub fn epilog_with(job: &JobEnv, steps: &impl EpilogSteps) -> Exit {
    let started = std::time::Instant::now();
    let mut exit = Exit::ok();
    if job.imex_requested {
        if let Err(e) = steps.stop_watch() {
            tracing::warn!("cannot stop the IMEX watcher: {e}");
        }
    }
    let mut node = steps.load_node();
    node.node = job.node_name.clone();
    // The job's whole prolog time and its IMEX domain here, before teardown
    // removes its record.
    let record = steps.read_record();
    let prolog_ms = record.as_ref().and_then(|r| r.prolog_ms);
    let imex_domain = record.as_ref().and_then(|r| r.domain.clone());
    if job.imex_requested {
        teardown_domain(job, steps, &mut node, &mut exit);
        drain_if_left_down(job, steps, &mut node, &mut exit);
    }
    let gpus = steps.judge_gpus(record.as_ref());
    if let Some(e) = &gpus.unrecorded {
        // The job database is nobody's job: one line, never a failure.
        exit.note(gpu_job::unrecorded_line(job.job_id, e));
    }
    let action = steps.act_on_gpus(drain_reason_of(&gpus.outcome));
    match action.hook_failure() {
        Some(reason) => exit.fail(format!("slurm-imex-epilog: {reason}")),
        None => log_gate(&gpus.outcome, Hook::Epilog),
    }
    action.record(&mut node, now_s());
    let epilog_ms = started.elapsed().as_millis() as u64;
    let row = gpus.row.as_ref();
    // A job without --imex keeps no record: its prolog was the gate.
    let gate_ms = row.and_then(|r| r.prolog.as_ref()).map(|p| p.ms);
    let prolog_ms = prolog_ms.or(gate_ms);
    if row.is_some() {
        node.last_gate_ms = gate_ms;
        node.last_prolog_ms = prolog_ms;
    }
    node.last_epilog_ms = Some(epilog_ms);
    steps.summarize(row, imex_domain.as_deref(), prolog_ms, epilog_ms);
    steps.publish(&mut node, &exit);
    exit
}

/// A domain this node cannot return to idle is this node's fault: the
/// epilog fails (Slurm drains the node, "Epilog error") and the standing
/// keeps our reason, for the next health check to show.
fn teardown_domain(job: &JobEnv, steps: &impl EpilogSteps, node: &mut NodeState, exit: &mut Exit) {
    match steps.teardown() {
        Ok(TeardownOutcome::LeftToOwner(owner)) => {
            tracing::info!("IMEX domain belongs to job {owner}; left untouched")
        }
        Ok(outcome) => tracing::info!(?outcome, "IMEX domain torn down"),
        Err(e) => {
            let line = format!("cannot return IMEX to idle: {e}");
            steps.imex_node_fault(&line).record(node, now_s());
            exit.fail(format!("slurm-imex-epilog on {}: {line}", job.node_name))
        }
    }
}

/// A daemon the watcher left down (it died more often than the bound
/// allows) is this node's fault, and only this node's: the epilog fails
/// with the reason, so Slurm drains the node after the job. Its peers'
/// epilogs find no such line and pass.
fn drain_if_left_down(
    job: &JobEnv,
    steps: &impl EpilogSteps,
    node: &mut NodeState,
    exit: &mut Exit,
) {
    if let Some(line) = steps.watch_left_down() {
        steps.imex_node_fault(&line).record(node, now_s());
        exit.fail(format!("slurm-imex-epilog on {}: {line}", job.node_name))
    }
}

/// Save the node's state and refresh the Prometheus export. Best effort:
/// the job is over and its row is recorded either way.
fn publish_node_state(state: &StateDir, cfg: &Config, node: &mut NodeState, exit: &Exit) {
    node.read_domain(state);
    node.imex_expected = expectation(cfg).expected;
    let saved = node.save(state);
    let refreshed = metrics::refresh(&cfg.database, &cfg.metrics, node);
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
    // A file it cannot load is this node's fault (docs/blame.md, "A bad
    // key in imex.toml"): the hook fails, and the standing says why.
    let exit = match Config::load_trusted(None) {
        Ok((config, _)) => body(&job, &config),
        Err(e) => crate::config_fault::fail_hook(hook, &job.node_name, None, &e),
    };
    for line in &exit.errors {
        report(line);
    }
    exit.code
}

#[cfg(test)]
mod tests;
