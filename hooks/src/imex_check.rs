//! The node's IMEX daemon, as a health check between jobs (`slurm-imex
//! check`): an idle node is healthy; a node serving a job's domain, or a
//! running rack-wide daemon (`[imex] domain = "rack"`), needs its daemon
//! READY (DCGM-style, context-aware). A rack daemon that is not running is
//! not a finding: the next prolog on the node starts it. A job's daemon
//! whose watcher runs is a warning, never a drain: the watcher restarts it
//! within `[imex.watch] max_restarts`, and past that the job's epilog
//! drains the node after the job with the watcher's reason.
//!
//! Here, beside the check hook that runs it, because the IMEX daemon's state
//! is the domain crate's (`slurm_imex_domain::imex::status`) and the GPU
//! crate, which owns the findings, does not depend on it.

use slurm_imex_core::state::StateDir;
use slurm_imex_domain::imex::status::node_status;
use slurm_imex_domain::imex::watch_state::WatchState;
use slurm_imex_domain::imex::watcher_pid::Watcher;
use slurm_imex_gpu::health::reasons::IMEX;
use slurm_imex_gpu::health::{Finding, Severity};
use slurm_imex_settings::Config;

/// DCGM-style IMEX check, context-aware: only a daemon that serves a job's
/// domain or the rack must be READY.
pub fn check_imex(cfg: &Config) -> Option<Finding> {
    let status = node_status(cfg);
    let serves = status.serves?;
    if status.local_state == "READY" {
        return None;
    }
    let detail = format!(
        "nvidia-imex serving {serves} is not READY ({}; daemon {})",
        status.local_state, status.daemon
    );
    let state = StateDir::of(cfg);
    let watched = status
        .owner
        .filter(|job| Watcher::of_job(&state, *job).is_some());
    let (severity, detail) = match watched {
        Some(job) => (
            Severity::Warn,
            watched_detail(detail, &WatchState::load(&state, job)),
        ),
        None => (Severity::Drain, detail),
    };
    Some(Finding {
        check: IMEX.into(),
        severity,
        gpu: None,
        detail,
    })
}

/// What the job's watcher is doing about it.
fn watched_detail(detail: String, watch: &WatchState) -> String {
    match &watch.left_down {
        Some(line) => format!("{detail}: {line}; the job's epilog drains the node after the job"),
        None => format!(
            "{detail}: its watcher is restarting it ({} deaths in this job so far)",
            watch.deaths
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_warning_says_what_the_watcher_does() {
        let mut w = WatchState {
            job_id: 7,
            deaths: 1,
            ..WatchState::default()
        };
        let d = watched_detail("nvidia-imex serving job 7 is not READY".into(), &w);
        assert!(
            d.ends_with("its watcher is restarting it (1 deaths in this job so far)"),
            "{d}"
        );
        w.left_down =
            Some("nvidia-imex died 4 times while the job ran (restart bound 3): left down".into());
        let d = watched_detail("x".into(), &w);
        assert!(
            d.contains("left down; the job's epilog drains the node after the job"),
            "{d}"
        );
    }
}
