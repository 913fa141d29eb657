//! The decisions of a job's domain watcher ([`DomainWatch`]): from what one
//! look at this node's daemon and domain found ([`Look`]), which events
//! happened (`slurm_imex_core::imex_event`) and what to do about the daemon
//! ([`Act`]): restart it, within `[imex.watch] max_restarts` deaths of the
//! job, else leave it down (the epilog then drains this node, and only this
//! node, after the job). A peer that leaves the domain is recorded, never
//! acted on: its own watcher restarts its daemon, or its node's health
//! check drains it. No I/O here; `slurm_imex_hooks::watch` runs the loop.

use crate::imex::ctl::{assess_members, DomainStatus, Readiness};
use crate::imex::daemon::Liveness;
use slurm_imex_core::imex_event::{ImexEvent, ImexEventKind};
use slurm_imex_core::state::WatchState;
use std::collections::BTreeMap;

/// Consecutive unanswered asks before the domain counts as not UP: one
/// slow `nvidia-imex-ctl` under load is not an interruption.
const UNANSWERED_MAX: u32 = 2;

/// What one look found.
pub struct Look {
    pub daemon: Liveness,
    /// The domain as the daemon reports it (`nvidia-imex-ctl -N -j`), or
    /// why it could not say; None when the daemon was not asked (dead).
    pub domain: Option<Result<DomainStatus, String>>,
    pub now_ms: i64,
}

/// What the watcher must do about the daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Act {
    Nothing,
    /// Start it again on the job's config.
    Restart,
    /// Leave it down; the line is the node's drain reason after the job.
    LeaveDown(String),
}

/// One job's domain on this node, as its watcher last saw it.
pub struct DomainWatch {
    job_id: u32,
    node: String,
    /// The domain's nodes in nodes_config order (index = IMEX node id).
    members: Vec<String>,
    local: usize,
    max_restarts: u32,
    pub state: WatchState,
    domain_up: bool,
    daemon_dead: bool,
    /// Members not READY and connected, by index, with what they were.
    lost: BTreeMap<usize, String>,
    unanswered: u32,
}

impl DomainWatch {
    /// A watch that starts where the prolog left the domain: UP, every
    /// member READY. `state` carries the deaths of this job so far.
    pub fn new(
        node: &str,
        members: Vec<String>,
        max_restarts: u32,
        state: WatchState,
    ) -> DomainWatch {
        let local = members.iter().position(|n| n == node).unwrap_or(0);
        DomainWatch {
            job_id: state.job_id,
            node: node.to_string(),
            members,
            local,
            max_restarts,
            daemon_dead: state.left_down.is_some(),
            state,
            domain_up: true,
            lost: BTreeMap::new(),
            unanswered: 0,
        }
    }

    /// The events of one look, and what to do about the daemon.
    pub fn look(&mut self, look: &Look) -> (Vec<ImexEvent>, Act) {
        let mut events = Vec::new();
        if self.state.left_down.is_some() {
            return (events, Act::Nothing);
        }
        match &look.daemon {
            Liveness::Exited(how) => {
                if self.daemon_dead {
                    return (events, Act::Nothing);
                }
                return self.died(how, look.now_ms);
            }
            Liveness::Running => self.daemon_dead = false,
        }
        match &look.domain {
            Some(Ok(status)) => {
                self.unanswered = 0;
                self.judge_domain(status, look.now_ms, &mut events);
            }
            Some(Err(why)) => {
                self.unanswered += 1;
                if self.unanswered >= UNANSWERED_MAX && self.domain_up {
                    self.domain_up = false;
                    events.push(self.event(look.now_ms, ImexEventKind::DomainDegraded, why));
                }
            }
            None => {}
        }
        (events, Act::Nothing)
    }

    /// The daemon is gone: restart it, or leave it down past the bound.
    fn died(&mut self, how: &str, now_ms: i64) -> (Vec<ImexEvent>, Act) {
        self.daemon_dead = true;
        self.domain_up = false;
        self.state.deaths += 1;
        let mut events = vec![self.event(now_ms, ImexEventKind::DaemonDied, how)];
        if self.state.deaths > self.max_restarts {
            let line = format!(
                "nvidia-imex died {} times while the job ran (restart bound {}): left down",
                self.state.deaths, self.max_restarts
            );
            self.state.left_down = Some(line.clone());
            self.state.restarting_since_ms = None;
            events.push(self.event(
                now_ms,
                ImexEventKind::DaemonLeftDown,
                &format!(
                    "died {} times, bound {}",
                    self.state.deaths, self.max_restarts
                ),
            ));
            return (events, Act::LeaveDown(line));
        }
        self.state.restarting_since_ms.get_or_insert(now_ms);
        (events, Act::Restart)
    }

    /// The watcher started the daemon again.
    pub fn restarted(&mut self, now_ms: i64) -> ImexEvent {
        self.daemon_dead = false;
        self.state.restarts += 1;
        let detail = format!("restart {} of {}", self.state.restarts, self.max_restarts);
        self.event(now_ms, ImexEventKind::DaemonRestarted, &detail)
    }

    /// Starting it again failed: the next look sees it dead, a death more.
    pub fn restart_failed(&mut self) {
        self.daemon_dead = false;
    }

    /// Members that left or came back, and the domain leaving or
    /// regaining UP (every member READY and connected to this node).
    fn judge_domain(&mut self, status: &DomainStatus, now_ms: i64, events: &mut Vec<ImexEvent>) {
        let everyone: Vec<usize> = (0..self.members.len()).collect();
        let now_lost: BTreeMap<usize, String> =
            match assess_members(status, &everyone, self.local, true) {
                Readiness::Ready => BTreeMap::new(),
                Readiness::NotReady(n) => {
                    let mut lost = BTreeMap::new();
                    for i in n.not_connected {
                        lost.insert(i, "not connected".to_string());
                    }
                    for i in n.not_ready {
                        let word = status.nodes.get(&i).and_then(|s| s.status.clone());
                        lost.insert(i, word.unwrap_or_else(|| "absent".into()));
                    }
                    lost
                }
            };
        for (i, what) in &now_lost {
            if *i != self.local && !self.lost.contains_key(i) {
                let detail = format!("{} {what}", self.name_of(*i));
                events.push(self.event(now_ms, ImexEventKind::MemberLost, &detail));
            }
        }
        for i in self.lost.keys() {
            if *i != self.local && !now_lost.contains_key(i) {
                events.push(self.event(now_ms, ImexEventKind::MemberBack, &self.name_of(*i)));
            }
        }
        let up = status.domain == "UP" && now_lost.is_empty();
        if self.domain_up && !up {
            let who: Vec<String> = now_lost
                .iter()
                .map(|(i, w)| format!("{} {w}", self.name_of(*i)))
                .collect();
            let detail = format!("{}: {}", status.domain, who.join(", "));
            events.push(self.event(now_ms, ImexEventKind::DomainDegraded, &detail));
        } else if !self.domain_up && up {
            self.state.restarting_since_ms = None;
            let detail = format!("{} of {} READY", self.members.len(), self.members.len());
            events.push(self.event(now_ms, ImexEventKind::DomainUp, &detail));
        }
        self.domain_up = up;
        self.lost = now_lost;
    }

    fn name_of(&self, index: usize) -> String {
        self.members
            .get(index)
            .cloned()
            .unwrap_or_else(|| format!("node #{index}"))
    }

    fn event(&self, now_ms: i64, kind: ImexEventKind, detail: &str) -> ImexEvent {
        ImexEvent::new(self.job_id, &self.node, now_ms, kind, detail)
    }
}

#[cfg(test)]
mod tests;
