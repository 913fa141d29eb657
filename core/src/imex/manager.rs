//! Starting and stopping this node's `nvidia-imex`: through systemd
//! (`systemctl restart/stop <unit>`) or as a process the prolog spawns and
//! tracks by pid file (SIGTERM, then SIGKILL after the grace period).

use crate::config::{DaemonConfig, DaemonManager};
use crate::error::{Error, Result};
use crate::fsutil::{remove_if_exists, tail_lines, write_atomic};
use crate::imex::job_record::StateDir;
use crate::process::run_bounded;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Is the daemon we started still alive?
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    Running,
    Exited(String),
}

pub struct Manager<'a> {
    cfg: &'a DaemonConfig,
    state: &'a StateDir,
    /// The child spawned by this process (process manager, prolog only).
    child: Option<Child>,
}

impl<'a> Manager<'a> {
    pub fn new(cfg: &'a DaemonConfig, state: &'a StateDir) -> Manager<'a> {
        Manager {
            cfg,
            state,
            child: None,
        }
    }

    /// Start the daemon on the rendered job config (restarting any instance).
    pub fn start(&mut self) -> Result<()> {
        match self.cfg.manager {
            DaemonManager::Systemd => {
                let out = run_bounded(
                    &self.cfg.systemctl,
                    &["restart", &self.cfg.unit],
                    self.cfg.start_timeout.0,
                )?;
                if !out.success() {
                    return Err(Error::new(format!(
                        "systemctl restart {} failed: {}",
                        self.cfg.unit,
                        out.one_line()
                    )));
                }
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
                let mut cmd = Command::new(&self.cfg.binary);
                cmd.arg("-c")
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
                write_atomic(
                    &self.state.pid_file(),
                    format!("{}\n", child.id()).as_bytes(),
                    0o644,
                )?;
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
                match self.tracked_pid() {
                    Some(_) => Liveness::Running,
                    None => Liveness::Exited("no running nvidia-imex process".into()),
                }
            }
            DaemonManager::Systemd => {
                match run_bounded(
                    &self.cfg.systemctl,
                    &["is-active", &self.cfg.unit],
                    Duration::from_secs(5),
                ) {
                    Ok(o) if o.success() => Liveness::Running,
                    Ok(o) => {
                        Liveness::Exited(format!("unit {} is {}", self.cfg.unit, o.stdout.trim()))
                    }
                    Err(e) => Liveness::Exited(e.to_string()),
                }
            }
        }
    }

    /// Stop the daemon. Idempotent: stopping a stopped daemon succeeds.
    pub fn stop(&mut self) -> Result<()> {
        match self.cfg.manager {
            DaemonManager::Systemd => {
                let out = run_bounded(
                    &self.cfg.systemctl,
                    &["stop", &self.cfg.unit],
                    self.cfg.stop_timeout.0 + Duration::from_secs(5),
                )?;
                if !out.success() {
                    return Err(Error::new(format!(
                        "systemctl stop {} failed: {}",
                        self.cfg.unit,
                        out.one_line()
                    )));
                }
                Ok(())
            }
            DaemonManager::Process => {
                if let Some(pid) = self.tracked_pid() {
                    self.terminate(pid)?;
                }
                if let Some(mut child) = self.child.take() {
                    let _ = child.wait();
                }
                remove_if_exists(&self.state.pid_file())
            }
        }
    }

    /// The pid in the pid file, if that process is alive and still our daemon
    /// (a recycled pid running something else is never signalled).
    fn tracked_pid(&self) -> Option<Pid> {
        let text = std::fs::read_to_string(self.state.pid_file()).ok()?;
        let pid: i32 = text.trim().parse().ok().filter(|p| *p > 1)?;
        let proc_dir = PathBuf::from(format!("/proc/{pid}"));
        let stat = std::fs::read_to_string(proc_dir.join("stat")).ok()?;
        // Field 3 of /proc/pid/stat, after the ")" that closes the command.
        let state = stat.rsplit_once(')')?.1.split_whitespace().next()?;
        if state == "Z" || state == "X" {
            return None;
        }
        let cmdline = std::fs::read(proc_dir.join("cmdline")).ok()?;
        let argv0 = cmdline.split(|b| *b == 0).next()?;
        let argv0 = Path::new(std::str::from_utf8(argv0).ok()?);
        let ours = argv0 == self.cfg.binary || argv0.file_name() == self.cfg.binary.file_name();
        ours.then_some(Pid::from_raw(pid))
    }

    fn terminate(&mut self, pid: Pid) -> Result<()> {
        let _ = kill(pid, Signal::SIGTERM);
        if self.wait_gone(pid, self.cfg.stop_timeout.0) {
            return Ok(());
        }
        tracing::warn!(
            pid = pid.as_raw(),
            "nvidia-imex ignored SIGTERM; sending SIGKILL"
        );
        let _ = kill(pid, Signal::SIGKILL);
        if self.wait_gone(pid, Duration::from_secs(5)) {
            return Ok(());
        }
        Err(Error::new(format!(
            "nvidia-imex (pid {pid}) survived SIGKILL: the node needs attention"
        )))
    }

    fn wait_gone(&mut self, pid: Pid, limit: Duration) -> bool {
        let start = Instant::now();
        let mut pause = Duration::from_millis(2);
        loop {
            if let Some(child) = self.child.as_mut() {
                if child.id() as i32 == pid.as_raw() {
                    if let Ok(Some(_)) = child.try_wait() {
                        return true;
                    }
                }
            }
            if self.tracked_pid() != Some(pid) {
                return true;
            }
            if start.elapsed() >= limit {
                return false;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(50));
        }
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
