//! The job's domain watcher, `slurm-imex-watch`: started by the prolog of
//! an `--imex` job once its per-job domain is UP ([`spawn`]), stopped by
//! the epilog before teardown ([`stop`]). In between it looks at this
//! node's daemon every `[imex.watch] interval` (a `/proc` read) and asks it
//! for the domain (`nvidia-imex-ctl -N -j`); what a look means is decided
//! by `slurm_imex_domain::imex::domain_watch` (what it saw for the job is
//! `domain::imex::watch_state`), and each event is recorded by `recorder`. A daemon that died is started again on the job's config,
//! under the domain lock and only while the job still owns the domain.

mod recorder;

use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::fsutil::remove_if_exists;
use slurm_imex_core::state::job_record::Outcome;
use slurm_imex_core::state::StateDir;
use slurm_imex_domain::config::DaemonManager;
use slurm_imex_domain::imex::ctl::Ctl;
use slurm_imex_domain::imex::daemon::{Daemon, Liveness};
use slurm_imex_domain::imex::daemon_proc::ProcId;
use slurm_imex_domain::imex::domain_watch::{Act, DomainWatch, Look};
use slurm_imex_domain::imex::watch_state::WatchState;
use slurm_imex_domain::imex::watcher_pid::Watcher;
use slurm_imex_settings::Config;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The watcher binary, installed beside the prolog.
pub const PROGRAM: &str = "slurm-imex-watch";

/// How long the epilog waits for the watcher to leave after SIGTERM (it
/// may be in its last look: two asks of the ctl) before SIGKILL.
fn stop_grace(cfg: &Config) -> Duration {
    cfg.engine.daemon.ctl_timeout.0 * 2 + Duration::from_secs(2)
}

/// Start the watcher of `job_id`'s domain, detached from the prolog (its
/// own session, no stdio: slurmd waits for neither). Its identity goes to
/// `watch.pid` for the epilog.
pub fn spawn(job_id: u32, node: &str, cfg: &Config) -> Result<()> {
    let program = watcher_program()?;
    let state = StateDir::of(cfg);
    // One watcher a node: one left by a job whose epilog never ran goes.
    if let Some(earlier) = Watcher::running(&state) {
        terminate(earlier.process, stop_grace(cfg));
    }
    let mut cmd = Command::new(&program);
    cmd.arg("--job")
        .arg(job_id.to_string())
        .arg("--node")
        .arg(node)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(source) = &cfg.source {
        cmd.env(slurm_imex_core::config::CONFIG_ENV, source);
    }
    // SAFETY: setsid is async-signal-safe; it leaves slurmd's process group
    // so the prolog's end (and a kill of its group) does not end the watch.
    unsafe {
        cmd.pre_exec(|| nix::unistd::setsid().map(|_| ()).map_err(Into::into));
    }
    let child = cmd
        .spawn()
        .map_err(|e| Error::new(format!("cannot start {}: {e}", program.display())))?;
    let pid = child.id() as i32;
    let process = ProcId::of(pid).unwrap_or(ProcId { pid, start: 0 });
    Watcher { process, job_id }.save(&state)
}

/// `slurm-imex-watch` beside this program (`/proc/self/exe`, links
/// resolved), trusted as every program root runs.
fn watcher_program() -> Result<PathBuf> {
    let me = std::env::current_exe()
        .map_err(|e| Error::new(format!("cannot find this program's path: {e}")))?;
    let beside = me.with_file_name(PROGRAM);
    slurm_imex_core::trust::trusted_program(&beside, PROGRAM)
}

/// Stop `job_id`'s watcher, if it runs: SIGTERM, then SIGKILL after the
/// grace. Only that exact process (pid and start time) of that job is
/// signalled: the epilog of a job refused on a busy node leaves the owning
/// job's watcher alone. Idempotent.
pub fn stop(cfg: &Config, job_id: u32) -> Result<()> {
    let state = StateDir::of(cfg);
    match Watcher::running(&state) {
        Some(w) if w.job_id != job_id => return Ok(()),
        Some(w) => terminate(w.process, stop_grace(cfg)),
        None => {}
    }
    remove_if_exists(&state.watcher_pid_file())
}

/// SIGTERM `process`, SIGKILL it when still there after `grace`.
fn terminate(process: ProcId, grace: Duration) {
    let pid = nix::unistd::Pid::from_raw(process.pid);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    if !gone_within(process, grace) {
        tracing::warn!(
            pid = process.pid,
            "the IMEX watcher ignored SIGTERM; sending SIGKILL"
        );
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        gone_within(process, Duration::from_secs(2));
    }
}

fn gone_within(id: ProcId, limit: Duration) -> bool {
    let start = Instant::now();
    while id.alive() {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// What the epilog reads of the watch: the drain line when the daemon was
/// left down in `job_id`, then the watch state is forgotten.
pub fn left_down(cfg: &Config, job_id: u32) -> Option<String> {
    let state = StateDir::of(cfg);
    let ours = WatchState::current(&state).is_some_and(|w| w.job_id == job_id);
    let line = WatchState::load(&state, job_id).left_down;
    if ours {
        if let Err(e) = WatchState::clear(&state) {
            tracing::warn!("cannot remove the IMEX watch state: {e}");
        }
    }
    line
}

/// `slurm-imex-watch`'s arguments: which job's domain, on which node (the
/// prolog passes Slurm's SLURM_JOB_ID and SLURMD_NODENAME).
#[derive(clap::Parser)]
#[command(name = PROGRAM, about = "Watch one --imex job's IMEX domain on this node (started by slurm-imex-prolog)")]
struct Args {
    #[arg(long)]
    job: u32,
    #[arg(long)]
    node: String,
}

/// The binary: arguments, logging, config, then [`run`]; every failure is
/// one line in the journal (there is no terminal), and status 1.
pub fn run_from_args() -> u8 {
    use clap::Parser;
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) if !e.use_stderr() => {
            let _ = e.print(); // --help, --version
            return 0;
        }
        Err(e) => {
            // One line (clap's first), as every bad input gets.
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or_default();
            let first = slurm_imex_core::text::cap(first.trim_start_matches("error: "), 1024);
            slurm_imex_core::logging::stderr_line(&format!("{PROGRAM}: {first}"));
            return 2;
        }
    };
    slurm_imex_core::logging::init(PROGRAM);
    let span = slurm_imex_core::logging::job_span(args.job, &args.node);
    let _guard = span.enter();
    let outcome = Config::load_trusted(None).and_then(|(cfg, _)| run(args.job, &args.node, &cfg));
    match outcome {
        Ok(()) => 0,
        Err(e) => {
            slurm_imex_core::logging::report_error(&format!("{PROGRAM} on {}: {e}", args.node));
            1
        }
    }
}

/// The watcher's whole run: watch `job_id`'s domain until the epilog stops
/// it or the job no longer owns the domain. The exit status is 0 unless it
/// could not start watching.
pub fn run(job_id: u32, node: &str, cfg: &Config) -> Result<()> {
    let signals = stop_signals()?;
    let state = StateDir::of(cfg);
    let Some(record) = state.read_record(job_id)? else {
        return Err(Error::new(format!(
            "job {job_id} has no IMEX record on {node}"
        )));
    };
    if !matches!(record.outcome, Outcome::Ready { .. }) {
        return Ok(());
    }
    let started = Instant::now();
    let watch_state = WatchState::load(&state, job_id);
    let max = cfg.engine.watch.max_restarts;
    let mut watch = DomainWatch::new(node, record.nodes, max, watch_state).map_err(Error::new)?;
    let mut daemon = Daemon::new(&cfg.engine.daemon, &state);
    let mut pid = daemon.main_pid();
    let mut recorder = recorder::Recorder::new(cfg);
    tracing::info!(job_id, "watching the IMEX domain");
    while !signals.wait(cfg.engine.watch.interval.0) {
        match state.read_owner() {
            Ok(Some(owner)) if owner == job_id => {}
            Ok(_) => break,
            Err(e) => {
                tracing::warn!("cannot read the domain's owner (watching on): {e}");
                continue;
            }
        }
        let (events, act) = watch.look(&look(cfg, &mut daemon, pid));
        if act != Act::Nothing {
            // Before anything slow: `slurm-imex check` reads it.
            save_if_owner(&state, job_id, &watch.state);
        }
        recorder.record(&events);
        match act {
            Act::Restart if signals.pending() => break, // the job is over
            Act::Restart => match restart(cfg, &state, job_id, &mut daemon) {
                true => {
                    pid = daemon.main_pid();
                    recorder.record(&[watch.restarted(now_ms())]);
                }
                false => watch.restart_failed(),
            },
            Act::LeaveDown(line) => tracing::error!("{line}"),
            Act::Nothing => {}
        }
        save_if_owner(&state, job_id, &watch.state);
    }
    if state.read_owner().ok().flatten() == Some(job_id) {
        recorder.record(&watch.last_look(&look(cfg, &mut daemon, pid)));
    }
    save_if_owner(&state, job_id, &watch.state);
    report_cost(job_id, started.elapsed());
    Ok(())
}

/// One look: is the daemon alive (its pid, read from `/proc`; the
/// manager's word only once that pid is gone), and if so, the domain.
fn look(cfg: &Config, daemon: &mut Daemon, pid: Option<ProcId>) -> Look {
    let alive = match (cfg.engine.daemon.manager, pid) {
        (DaemonManager::Process, _) => daemon.liveness(),
        (DaemonManager::Systemd, Some(p)) if p.alive() => Liveness::Running,
        (DaemonManager::Systemd, _) => daemon.liveness(),
    };
    let domain = (alive == Liveness::Running).then(|| {
        let ctl = Ctl {
            program: &cfg.engine.daemon.ctl,
            config: &cfg.engine.daemon.job_config,
            timeout: cfg.engine.daemon.ctl_timeout.0,
        };
        ctl.domain_status().map_err(|e| e.to_string())
    });
    Look {
        daemon: alive,
        domain,
        now_ms: now_ms(),
    }
}

/// Start the daemon again on the job's config, under the domain lock and
/// only while `job_id` still owns it (the epilog may be tearing it down),
/// and only if it is still dead. false: not started (the next look that
/// finds it dead counts another death).
fn restart(cfg: &Config, state: &StateDir, job_id: u32, daemon: &mut Daemon) -> bool {
    let started = state.lock().and_then(|lock| {
        let owned = state.owner(&lock)? == Some(job_id);
        if !owned || !Path::new(&cfg.engine.daemon.job_config).exists() {
            return Ok(false);
        }
        if daemon.liveness() == Liveness::Running {
            return Ok(false);
        }
        daemon.start().map(|()| true)
    });
    started.unwrap_or_else(|e| {
        tracing::warn!("cannot restart nvidia-imex for job {job_id}: {e}");
        false
    })
}

/// Save the watch state while `job_id` owns the domain: a watcher that
/// outlived its job never overwrites the next job's.
fn save_if_owner(state: &StateDir, job_id: u32, watch: &WatchState) {
    if state.read_owner().ok().flatten() != Some(job_id) {
        return;
    }
    if let Err(e) = watch.save(state) {
        tracing::warn!("cannot save the IMEX watch state: {e}");
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The watch's cost, for the journal: its own CPU and its children's
/// (`nvidia-imex-ctl`), per hour watched.
fn report_cost(job_id: u32, watched: Duration) {
    let cpu = |who| {
        nix::sys::resource::getrusage(who)
            .map(|u| {
                let t = |tv: nix::sys::time::TimeVal| {
                    tv.tv_sec() as f64 * 1000.0 + tv.tv_usec() as f64 / 1000.0
                };
                t(u.user_time()) + t(u.system_time())
            })
            .unwrap_or(0.0)
    };
    let own_ms = cpu(nix::sys::resource::UsageWho::RUSAGE_SELF);
    let ctl_ms = cpu(nix::sys::resource::UsageWho::RUSAGE_CHILDREN);
    let hours = watched.as_secs_f64().max(1.0) / 3600.0;
    tracing::info!(
        job_id,
        watched_s = watched.as_secs(),
        cpu_ms = format!("{:.0}", own_ms + ctl_ms).as_str(),
        cpu_s_per_hour = format!("{:.2}", (own_ms + ctl_ms) / 1000.0 / hours).as_str(),
        "IMEX watch of job {job_id} ended after {} s: {:.0} ms CPU ({:.0} ms of it nvidia-imex-ctl)",
        watched.as_secs(),
        own_ms + ctl_ms,
        ctl_ms
    );
}

/// SIGTERM, SIGINT and SIGHUP, blocked and waited for between looks: the
/// epilog's stop ends the watch at once, never in the middle of a restart.
struct StopSignals {
    set: nix::sys::signal::SigSet,
}

fn stop_signals() -> Result<StopSignals> {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        set.add(s);
    }
    set.thread_block()
        .map_err(|e| Error::new(format!("cannot block signals: {e}")))?;
    Ok(StopSignals { set })
}

impl StopSignals {
    /// A stop signal is waiting.
    fn pending(&self) -> bool {
        // SAFETY: sigpending fills the zeroed sigset_t it is given;
        // sigismember reads it and the blocked set, both live here.
        unsafe {
            let mut pending: libc::sigset_t = std::mem::zeroed();
            if libc::sigpending(&mut pending) != 0 {
                return false;
            }
            [libc::SIGTERM, libc::SIGINT, libc::SIGHUP]
                .iter()
                .any(|s| libc::sigismember(&pending, *s) == 1)
        }
    }

    /// Sleep `interval`; true when a stop signal came instead.
    fn wait(&self, interval: Duration) -> bool {
        let ts = libc::timespec {
            tv_sec: interval.as_secs() as libc::time_t,
            tv_nsec: interval.subsec_nanos() as libc::c_long,
        };
        let set = self.set.as_ref() as *const libc::sigset_t;
        // SAFETY: `set` points to a live sigset_t and `ts` to a timespec for
        // the call's duration; a null siginfo pointer is allowed.
        let got = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &ts) };
        got > 0
    }
}
