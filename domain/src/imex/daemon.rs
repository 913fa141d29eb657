//! This node's `nvidia-imex` daemon ([`Daemon`]): starting and stopping it, through systemd
//! (`systemctl restart/stop <unit>`) or as a process the prolog spawns and
//! tracks by pid and start time (SIGTERM to its process group, then SIGKILL
//! after the grace period). `verify_gone` is the teardown's proof: no
//! daemon process of ours and nothing on the command port.

use crate::config::{DaemonConfig, DaemonManager};
use crate::imex::daemon_proc::{self, ProcId};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::fsutil::{remove_if_exists, tail_lines, write_atomic};
use slurm_imex_core::poll::{Backoff, Wait};
use slurm_imex_core::process::{run_bounded, run_checked};
use slurm_imex_core::state::StateDir;
use std::fs::OpenOptions;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Is the daemon we started still alive?
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    Running,
    Exited(String),
}

pub struct Daemon<'a> {
    cfg: &'a DaemonConfig,
    state: &'a StateDir,
    /// The child spawned by this process (process manager, prolog only).
    child: Option<Child>,
}

impl<'a> Daemon<'a> {
    pub fn new(cfg: &'a DaemonConfig, state: &'a StateDir) -> Daemon<'a> {
        Daemon {
            cfg,
            state,
            child: None,
        }
    }

    /// Start the daemon on the rendered job config (restarting any instance).
    pub fn start(&mut self) -> Result<()> {
        match self.cfg.manager {
            DaemonManager::Systemd => {
                run_checked(
                    &self.cfg.systemctl,
                    &["restart", &self.cfg.unit],
                    self.cfg.start_timeout.0,
                    &format!("systemctl restart {}", self.cfg.unit),
                )
                .map_err(|e| {
                    Error::new(format!("{e} (journalctl -u {} says why)", self.cfg.unit))
                })?;
                Ok(())
            }
            DaemonManager::Process => {
                self.stop()?;
                let output_path = self.state.daemon_output();
                let output = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&output_path)
                    .map_err(|e| {
                        Error::new(format!("cannot open {}: {e}", output_path.display()))
                    })?;
                let output2 = output
                    .try_clone()
                    .map_err(|e| Error::new(format!("cannot dup daemon output: {e}")))?;
                let binary = slurm_imex_core::trust::trusted_program(
                    &self.cfg.binary,
                    "[imex.daemon] binary",
                )?;
                let mut cmd = Command::new(&binary);
                cmd.env(daemon_proc::TAG_ENV, self.tag())
                    .arg("-c")
                    .arg(&self.cfg.job_config)
                    .stdin(Stdio::null())
                    .stdout(output)
                    .stderr(output2);
                // SAFETY: setsid is async-signal-safe; it detaches the daemon
                // from slurmd's process group so the prolog's end (and any
                // kill of its group) does not take the daemon with it.
                unsafe {
                    cmd.pre_exec(|| nix::unistd::setsid().map(|_| ()).map_err(Into::into));
                }
                let child = cmd.spawn().map_err(|e| {
                    Error::new(format!(
                        "cannot start {} ([imex.daemon] binary): {e}",
                        self.cfg.binary.display()
                    ))
                })?;
                let pid = child.id() as i32;
                // Start time 0 when it already exited: never matches a live process.
                let id = ProcId::of(pid).unwrap_or(ProcId { pid, start: 0 });
                write_atomic(&self.state.pid_file(), id.render().as_bytes(), 0o644)?;
                self.child = Some(child);
                Ok(())
            }
        }
    }

    /// Is the daemon alive? Cheap enough to call on every readiness poll.
    pub fn liveness(&mut self) -> Liveness {
        match self.cfg.manager {
            DaemonManager::Process => {
                if let Some(child) = self.child.as_mut() {
                    return match child.try_wait() {
                        Ok(None) => Liveness::Running,
                        Ok(Some(status)) => Liveness::Exited(describe_exit(status)),
                        Err(e) => Liveness::Exited(format!("cannot wait for it: {e}")),
                    };
                }
                match (self.tracked(), self.recorded()) {
                    (Some(_), _) => Liveness::Running,
                    (None, Some(id)) => Liveness::Exited(format!("pid {} is gone", id.pid)),
                    (None, None) => Liveness::Exited("no running nvidia-imex process".into()),
                }
            }
            DaemonManager::Systemd => {
                match run_bounded(
                    &self.cfg.systemctl,
                    &["is-active", &self.cfg.unit],
                    Duration::from_secs(5),
                ) {
                    Ok(o) if o.success() => Liveness::Running,
                    Ok(o) => Liveness::Exited(format!(
                        "unit {} is {}{}",
                        self.cfg.unit,
                        o.stdout.trim(),
                        self.unit_exit_cause()
                    )),
                    Err(e) => Liveness::Exited(e.to_string()),
                }
            }
        }
    }

    /// The daemon's process now: the pid file's (process manager), or
    /// the unit's MainPID (systemd). A watcher reads `/proc` for it between
    /// looks instead of asking systemd each time.
    pub fn main_pid(&self) -> Option<ProcId> {
        match self.cfg.manager {
            DaemonManager::Process => self.tracked(),
            DaemonManager::Systemd => {
                let args = ["show", "-p", "MainPID", "--value", &self.cfg.unit];
                let out = run_bounded(&self.cfg.systemctl, &args, Duration::from_secs(5)).ok()?;
                let pid: i32 = out.stdout.trim().parse().ok().filter(|p| *p > 1)?;
                ProcId::of(pid)
            }
        }
    }

    /// How the unit's main process ended, from systemd (`Result`,
    /// `ExecMainStatus`): ": killed by signal 9", or nothing when unsaid.
    fn unit_exit_cause(&self) -> String {
        let args = [
            "show",
            "-p",
            "Result",
            "-p",
            "ExecMainStatus",
            &self.cfg.unit,
        ];
        let Ok(out) = run_bounded(&self.cfg.systemctl, &args, Duration::from_secs(5)) else {
            return String::new();
        };
        let value = |key: &str| {
            out.stdout
                .lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
                .map(str::trim)
                .unwrap_or("")
                .to_string()
        };
        match (value("Result").as_str(), value("ExecMainStatus")) {
            ("signal" | "core-dump", status) => format!(": killed by signal {status}"),
            ("exit-code", status) => format!(": exited with status {status}"),
            ("success" | "", _) => String::new(),
            (other, _) => format!(": {other}"),
        }
    }

    /// Stop the daemon. Idempotent: stopping a stopped daemon succeeds.
    pub fn stop(&mut self) -> Result<()> {
        match self.cfg.manager {
            DaemonManager::Systemd => {
                run_checked(
                    &self.cfg.systemctl,
                    &["stop", &self.cfg.unit],
                    self.cfg.stop_timeout.0 + Duration::from_secs(5),
                    &format!("systemctl stop {}", self.cfg.unit),
                )?;
                Ok(())
            }
            DaemonManager::Process => {
                let mut ours = self.tagged();
                if let Some(id) = self.tracked() {
                    if !ours.contains(&id) {
                        ours.push(id);
                    }
                }
                if !ours.is_empty() {
                    self.terminate(&ours)?;
                }
                if let Some(mut child) = self.child.take() {
                    let _ = child.wait();
                }
                remove_if_exists(&self.state.pid_file())
            }
        }
    }

    /// The teardown's proof that the daemon is gone: no process of ours
    /// (by pid file or tag), the unit inactive (systemd), and nothing
    /// accepting connections on the command port. Otherwise, what is left.
    pub fn verify_gone(&self, cmd_addr: Option<SocketAddr>) -> Result<()> {
        // Sockets close as the last thread exits: allow the stop grace period.
        let mut left = Vec::new();
        let wait = Wait::new(
            "nvidia-imex to be gone",
            self.cfg.stop_timeout.0,
            Backoff::every(Duration::from_millis(20)),
        );
        let gone = wait.until(|| {
            left = self.what_is_left(cmd_addr);
            left.is_empty().then_some(())
        });
        gone.map_err(|_| {
            Error::new(format!(
                "nvidia-imex is not gone: {} (stop it, then run the epilog again or `slurm-imex status`)",
                left.join("; ")
            ))
        })
    }

    fn what_is_left(&self, cmd_addr: Option<SocketAddr>) -> Vec<String> {
        let mut left: Vec<String> = Vec::new();
        match self.cfg.manager {
            DaemonManager::Process => {
                let mut procs = self.tagged();
                if let Some(id) = self.tracked() {
                    if !procs.contains(&id) {
                        procs.push(id);
                    }
                }
                left.extend(
                    procs
                        .iter()
                        .map(|p| format!("pid {} ({})", p.pid, daemon_proc::comm(p.pid))),
                );
            }
            DaemonManager::Systemd => {
                if let Ok(o) = run_bounded(
                    &self.cfg.systemctl,
                    &["is-active", &self.cfg.unit],
                    self.cfg.stop_timeout.0,
                ) {
                    if o.success() {
                        left.push(format!("unit {} is still active", self.cfg.unit));
                    }
                }
            }
        }
        if let Some(addr) = cmd_addr {
            if daemon_proc::port_accepts(addr.ip(), addr.port()) {
                left.push(format!(
                    "something still accepts connections on the IMEX command port {addr}"
                ));
            }
        }
        left
    }

    fn tag(&self) -> String {
        daemon_proc::tag_value(self.state.root())
    }

    fn tagged(&self) -> Vec<ProcId> {
        daemon_proc::tagged_processes(&self.tag())
    }

    /// The process in the pid file, if that exact process (pid and start
    /// time) is still alive: a recycled pid running something else is
    /// never signalled, whatever its name.
    fn tracked(&self) -> Option<ProcId> {
        let pid_file = self.state.pid_file();
        let text = self
            .state
            .read_text(&pid_file, "IMEX daemon pid file", 4096)
            .ok()??;
        match ProcId::parse(&text) {
            Some(id) => Some(id).filter(|id| id.alive()),
            None => self.legacy_tracked(&text),
        }
    }

    /// The process the pid file names, alive or not.
    fn recorded(&self) -> Option<ProcId> {
        let text = self
            .state
            .read_text(&self.state.pid_file(), "IMEX daemon pid file", 4096)
            .ok()??;
        ProcId::parse(&text)
    }

    /// A bare-pid file written by slurm-imex 0.1 before the upgrade (no
    /// start time, no tag): trusted only while that pid still runs our
    /// configured binary, so a daemon started before the upgrade is still
    /// stopped by the first epilog after it.
    fn legacy_tracked(&self, text: &str) -> Option<ProcId> {
        let pid: i32 = text.trim().parse().ok().filter(|p| *p > 1)?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let argv0 = Path::new(std::str::from_utf8(cmdline.split(|b| *b == 0).next()?).ok()?);
        let ours = argv0 == self.cfg.binary || argv0.file_name() == self.cfg.binary.file_name();
        ours.then(|| ProcId::of(pid)).flatten()
    }

    /// SIGTERM each process and its process group (the daemon is a session
    /// leader, so a wrapper's children go too), SIGKILL what is left after
    /// the grace period.
    fn terminate(&mut self, procs: &[ProcId]) -> Result<()> {
        signal_all(procs, Signal::SIGTERM);
        if self.wait_gone(procs, self.cfg.stop_timeout.0) {
            return Ok(());
        }
        tracing::warn!(?procs, "nvidia-imex ignored SIGTERM; sending SIGKILL");
        signal_all(procs, Signal::SIGKILL);
        if self.wait_gone(procs, Duration::from_secs(5)) {
            return Ok(());
        }
        let pids: Vec<String> = procs.iter().map(|p| p.pid.to_string()).collect();
        Err(Error::new(format!(
            "nvidia-imex (pid {}) survived SIGKILL: the node needs attention",
            pids.join(",")
        )))
    }

    fn wait_gone(&mut self, procs: &[ProcId], limit: Duration) -> bool {
        let backoff = Backoff::doubling(Duration::from_millis(2), Duration::from_millis(50));
        let wait = Wait::new("nvidia-imex to exit", limit, backoff);
        let gone = wait.until(|| {
            if let Some(child) = self.child.as_mut() {
                let _ = child.try_wait();
            }
            procs.iter().all(|p| !p.alive()).then_some(())
        });
        gone.is_ok()
    }

    /// The last lines the daemon logged, for failure messages: its
    /// LOG_FILE_NAME when set, else what the process manager captured.
    pub fn log_tail(&self, log_file: Option<&str>, lines: usize) -> Vec<String> {
        let from_log = log_file.and_then(|f| tail_lines(Path::new(f), lines));
        match from_log {
            Some(l) if !l.is_empty() => l,
            _ => tail_lines(&self.state.daemon_output(), lines).unwrap_or_default(),
        }
    }
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(s)) => format!("was killed by signal {s}"),
        _ => "exited".into(),
    }
}

/// Signal each process, and its process group when it leads one.
fn signal_all(procs: &[ProcId], sig: Signal) {
    for p in procs {
        if !p.alive() {
            continue;
        }
        let pid = Pid::from_raw(p.pid);
        if nix::unistd::getpgid(Some(pid)).ok() == Some(pid) {
            let _ = nix::sys::signal::killpg(pid, sig);
        }
        let _ = kill(pid, sig);
    }
}
