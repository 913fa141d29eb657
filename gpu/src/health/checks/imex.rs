//! The node's IMEX daemon, as a health check between jobs (`slurm-imex
//! check`): an idle node is healthy; a node serving a job's domain, or a
//! running rack-wide daemon (`[imex] domain = "rack"`), needs its daemon
//! READY (DCGM-style, context-aware). A rack daemon that is not running is
//! not a finding: the next prolog on the node starts it. A job's daemon
//! that its watcher is restarting, within `[imex.watch] max_restarts`, is
//! a warning for as long as a domain may take to form again
//! (`[imex] ready_timeout`), never a drain: the watcher, or the epilog
//! past the bound, owns that decision.

use crate::health::{Finding, Severity};
use slurm_imex_core::config::Config;
use slurm_imex_core::state::{StateDir, WatchState};
use slurm_imex_domain::imex::status::node_status;

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
    let watch = WatchState::current(&StateDir::of(cfg));
    let window_ms = cfg.imex.ready_timeout.0.as_millis() as i64;
    let severity = match restarting(watch.as_ref(), status.owner, now_ms(), window_ms) {
        true => Severity::Warn,
        false => Severity::Drain,
    };
    let detail = match severity {
        Severity::Warn => format!("{detail}: its watcher is restarting it"),
        Severity::Drain => detail,
    };
    Some(Finding {
        check: "imex".into(),
        severity,
        gpu: None,
        detail,
    })
}

/// The owner's watcher is restarting its daemon, within the bound, and
/// began less than `window_ms` ago.
fn restarting(watch: Option<&WatchState>, owner: Option<u32>, now_ms: i64, window_ms: i64) -> bool {
    match (watch, owner) {
        (Some(w), Some(owner)) if w.restarting(owner) => w
            .restarting_since_ms
            .is_some_and(|since| now_ms.saturating_sub(since) < window_ms),
        _ => false,
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(since: Option<i64>, left_down: bool) -> WatchState {
        WatchState {
            job_id: 7,
            deaths: 1,
            restarts: 0,
            restarting_since_ms: since,
            left_down: left_down.then(|| "died 4 times".into()),
        }
    }

    #[test]
    fn a_restart_within_the_bound_and_the_window_is_not_a_drain() {
        let w = watch(Some(1_000), false);
        assert!(restarting(Some(&w), Some(7), 30_000, 60_000));
        // Past the window: the daemon is judged as any other.
        assert!(!restarting(Some(&w), Some(7), 62_000, 60_000));
        // Another job's watch, no owner, no watch, left down: judged.
        assert!(!restarting(Some(&w), Some(8), 2_000, 60_000));
        assert!(!restarting(Some(&w), None, 2_000, 60_000));
        assert!(!restarting(None, Some(7), 2_000, 60_000));
        let down = watch(Some(1_000), true);
        assert!(!restarting(Some(&down), Some(7), 2_000, 60_000));
        // Not restarting (the domain came back): judged.
        assert!(!restarting(
            Some(&watch(None, false)),
            Some(7),
            2_000,
            60_000
        ));
    }
}
