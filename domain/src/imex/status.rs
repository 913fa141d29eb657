//! This node's IMEX state as an admin asks for it (`slurm-imex status`):
//! which job owns the daemon (or that it serves the rack, with `[imex]
//! domain = "rack"`), what the prolog recorded, whether the daemon lives and
//! answers, and the domain it reports. Also the one place that decides
//! whether IMEX is *expected* here now ([`imex_expected`]): the signal that
//! tells DCGM's IMEX failure on a node that needs IMEX from the same reading
//! on a node idle by design (docs/guide.md, "Beside DCGM and NVSentinel"),
//! printed by `status` and exported as `slurm_imex_imex_expected`. The
//! health check built on it is `slurm_imex_hooks::imex_check`.

use crate::config::Config;
use crate::config::DomainScope;
use crate::imex::ctl::Ctl;
use crate::imex::daemon::{Daemon, Liveness};
use serde::Serialize;
use slurm_imex_core::error::Result;
use slurm_imex_core::state::job_record::JobRecord;
use slurm_imex_core::state::StateDir;
use slurm_imex_core::text::{summarize_list, PIECE_MAX};

#[derive(Debug, Clone, Serialize)]
pub struct NodeImexStatus {
    /// The job whose domain the daemon serves; None when idle.
    pub owner: Option<u32>,
    /// Whom the daemon serves: "job N", "the rack" (a running rack-wide
    /// daemon), or None when the node is idle.
    pub serves: Option<String>,
    pub record: Option<JobRecord>,
    /// "running", or why not.
    pub daemon: String,
    /// `nvidia-imex-ctl -q`, or the error.
    pub local_state: String,
    /// UP / DEGRADED / DOWN, when the daemon answered -N -j.
    pub domain: Option<String>,
    pub nodes_ready: Option<(usize, usize)>,
    /// IMEX is expected on this node now ([`imex_expected`]).
    pub imex_expected: bool,
    /// Why, in one line.
    pub imex_expected_because: String,
    pub problems: Vec<String>,
}

/// Whether IMEX is expected on this node now, and why in one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expectation {
    pub expected: bool,
    pub because: String,
}

/// Who owns the per-job domain, as the state directory says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    Nobody,
    Job(u32),
    /// `domain.owner` cannot be read (its error is a problem of `status`).
    Unreadable,
}

impl Owner {
    fn of<E>(read: &std::result::Result<Option<u32>, E>) -> Owner {
        match read {
            Ok(Some(job)) => Owner::Job(*job),
            Ok(None) => Owner::Nobody,
            Err(_) => Owner::Unreadable,
        }
    }
}

/// What the decision reads of the node.
#[derive(Debug, Clone, Copy)]
pub struct Seen<'a> {
    pub scope: DomainScope,
    pub owner: Owner,
    /// This node's daemon runs (read only for a rack-wide domain).
    pub daemon_running: bool,
    /// The `--imex` jobs with a record here (read only for a rack-wide domain).
    pub records: &'a [u32],
}

/// IMEX is expected here now when a job owns this node's per-job domain,
/// or, with `[imex] domain = "rack"`, when this node serves the rack's
/// domain: its rack daemon runs, or an `--imex` job is on the node. A
/// per-job node between jobs runs no daemon by design, so whatever DCGM
/// reads there (`IMEX daemon status is -3`) is not a fault. An owner that
/// cannot be read counts as expected: an alert then names a node whose
/// state needs a look, rather than staying silent.
pub fn imex_expected(seen: &Seen) -> Expectation {
    let (expected, because) = match (seen.scope, seen.owner) {
        (DomainScope::Job, Owner::Job(job)) => (
            true,
            format!("job {job} owns this node's per-job IMEX domain"),
        ),
        (DomainScope::Job, Owner::Unreadable) => (
            true,
            "which job owns this node's per-job IMEX domain cannot be read: counted as expected"
                .to_string(),
        ),
        (DomainScope::Job, Owner::Nobody) => (
            false,
            "no job owns this node's per-job IMEX domain: between jobs no nvidia-imex runs here, \
             by design"
                .to_string(),
        ),
        (DomainScope::Rack, _) if !seen.records.is_empty() => {
            let jobs: Vec<String> = seen.records.iter().map(u32::to_string).collect();
            let jobs = summarize_list(&jobs, PIECE_MAX);
            (
                true,
                format!("--imex job(s) {jobs} on this node use the rack-wide IMEX domain"),
            )
        }
        (DomainScope::Rack, _) if seen.daemon_running => (
            true,
            "this node's rack-wide IMEX daemon runs: it serves the rack between jobs too"
                .to_string(),
        ),
        (DomainScope::Rack, _) => (
            false,
            "no rack-wide IMEX daemon runs here and no --imex job is on this node: the next \
             --imex prolog starts it"
                .to_string(),
        ),
    };
    Expectation { expected, because }
}

/// [`imex_expected`] for this node now, reading only what the decision
/// needs: the owner file, and for a rack-wide domain the job records and
/// whether the daemon runs. What the hooks export as
/// `slurm_imex_imex_expected`.
pub fn expectation(cfg: &Config) -> Expectation {
    let state = StateDir::of(cfg);
    let owner = Owner::of(&state.read_owner());
    let running = cfg.engine.domain == DomainScope::Rack
        && Daemon::new(&cfg.engine.daemon, &state).liveness() == Liveness::Running;
    let records = rack_records(cfg, &state).unwrap_or_default();
    imex_expected(&Seen {
        scope: cfg.engine.domain,
        owner,
        daemon_running: running,
        records: &records,
    })
}

/// The `--imex` jobs on this node with a rack-wide domain (none asked for
/// a per-job one, where the owner decides).
fn rack_records(cfg: &Config, state: &StateDir) -> Result<Vec<u32>> {
    match cfg.engine.domain {
        DomainScope::Rack => state.record_ids(),
        DomainScope::Job => Ok(Vec::new()),
    }
}

/// This node's IMEX state now; what cannot be read is one of its `problems`.
pub fn node_status(cfg: &Config) -> NodeImexStatus {
    let state = StateDir::of(cfg);
    let mut problems = Vec::new();
    let owner_read = state.read_owner();
    if let Err(e) = &owner_read {
        problems.push(e.to_string());
    }
    let owner = owner_read.as_ref().ok().copied().flatten();
    let record = owner.and_then(|o| {
        state.read_record(o).unwrap_or_else(|e| {
            problems.push(e.to_string());
            None
        })
    });
    let records = rack_records(cfg, &state).unwrap_or_else(|e| {
        problems.push(e.to_string());
        Vec::new()
    });
    let liveness = Daemon::new(&cfg.engine.daemon, &state).liveness();
    let running = liveness == Liveness::Running;
    let expected = imex_expected(&Seen {
        scope: cfg.engine.domain,
        owner: Owner::of(&owner_read),
        daemon_running: running,
        records: &records,
    });
    let rack_daemon = cfg.engine.domain == DomainScope::Rack && running;
    let serves = match owner {
        Some(job) => Some(format!("job {job}")),
        None => rack_daemon.then(|| "the rack".to_string()),
    };
    let daemon = match liveness {
        Liveness::Running => "running".to_string(),
        Liveness::Exited(how) => how,
    };
    let (local_state, domain, nodes_ready) = match serves {
        Some(_) => ask_daemon(cfg, &mut problems),
        None => ("idle (no IMEX job on this node)".to_string(), None, None),
    };
    NodeImexStatus {
        owner,
        serves,
        record,
        daemon,
        local_state,
        domain,
        nodes_ready,
        imex_expected: expected.expected,
        imex_expected_because: expected.because,
        problems,
    }
}

/// What the daemon answers: `-q`, and the domain with its READY nodes.
fn ask_daemon(
    cfg: &Config,
    problems: &mut Vec<String>,
) -> (String, Option<String>, Option<(usize, usize)>) {
    let ctl = Ctl {
        program: &cfg.engine.daemon.ctl,
        config: &cfg.engine.daemon.job_config,
        timeout: cfg.engine.daemon.ctl_timeout.0,
    };
    let local = ctl.local_state().unwrap_or_else(|e| e.to_string());
    match ctl.domain_status() {
        Ok(s) => {
            let ready = s
                .nodes
                .values()
                .filter(|n| n.status.as_deref() == Some("READY"))
                .count();
            (local, Some(s.domain), Some((ready, s.nodes.len())))
        }
        Err(e) => {
            problems.push(e.to_string());
            (local, None, None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(scope: DomainScope, owner: Owner, running: bool, records: &[u32]) -> Expectation {
        imex_expected(&Seen {
            scope,
            owner,
            daemon_running: running,
            records,
        })
    }

    #[test]
    fn a_per_job_node_expects_imex_only_while_a_job_owns_it() {
        let owned = seen(DomainScope::Job, Owner::Job(42), false, &[]);
        assert_eq!(
            owned,
            Expectation {
                expected: true,
                because: "job 42 owns this node's per-job IMEX domain".into()
            }
        );
        // Idle: not expected, whatever else runs (a daemon started by hand
        // is not a job's domain) or is recorded (a refused job's record).
        for (running, records) in [(false, &[][..]), (true, &[7][..])] {
            let idle = seen(DomainScope::Job, Owner::Nobody, running, records);
            assert!(!idle.expected);
            assert_eq!(
                idle.because,
                "no job owns this node's per-job IMEX domain: between jobs no nvidia-imex runs \
                 here, by design"
            );
        }
        let unknown = seen(DomainScope::Job, Owner::Unreadable, false, &[]);
        assert!(unknown.expected, "{unknown:?}");
        assert!(unknown.because.contains("cannot be read"), "{unknown:?}");
    }

    #[test]
    fn a_rack_node_expects_imex_while_its_daemon_runs_or_a_job_is_on_it() {
        let jobs = seen(DomainScope::Rack, Owner::Nobody, false, &[700, 701]);
        assert_eq!(
            jobs,
            Expectation {
                expected: true,
                because: "--imex job(s) 700,701 on this node use the rack-wide IMEX domain".into()
            }
        );
        let serving = seen(DomainScope::Rack, Owner::Nobody, true, &[]);
        assert!(serving.expected);
        assert_eq!(
            serving.because,
            "this node's rack-wide IMEX daemon runs: it serves the rack between jobs too"
        );
        let down = seen(DomainScope::Rack, Owner::Nobody, false, &[]);
        assert!(!down.expected);
        assert!(down.because.contains("the next --imex prolog starts it"));
    }

    #[test]
    fn a_fresh_node_expects_nothing_and_status_says_why() {
        let d = tempfile::tempdir().unwrap();
        let mut cfg = Config::default();
        cfg.node.state_dir = d.path().join("state");
        cfg.engine.daemon.manager = crate::config::DaemonManager::Process;
        assert_eq!(
            expectation(&cfg),
            seen(DomainScope::Job, Owner::Nobody, false, &[])
        );
        let s = node_status(&cfg);
        assert!(!s.imex_expected);
        assert!(s.imex_expected_because.starts_with("no job owns"), "{s:?}");
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["imex_expected"], false);
        assert!(json["imex_expected_because"].is_string());
    }
}
