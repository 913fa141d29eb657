//! The decisions of a job's domain watcher ([`DomainWatch`]): from what one
//! look at this node's daemon and domain found ([`Look`]), which events
//! happened (`slurm_imex_jobsummary::imex_event`) and what to do about the daemon
//! ([`Act`]): restart it, within `[imex.watch] max_restarts` deaths of the
//! job, else leave it down (the epilog then drains this node, and only this
//! node, after the job). A peer that leaves the domain is recorded, never
//! acted on: its own watcher restarts its daemon, or its node's health
//! check drains it. No I/O here; `slurm_imex_hooks::watch_program` runs the loop, and
//! what it saw for the job is kept in `watch_state`.

use crate::imex::ctl::{assess_members, DomainStatus, Readiness};
use crate::imex::daemon::Liveness;
use crate::imex::watch_state::WatchState;
use slurm_imex_jobsummary::imex_event::{ImexEvent, ImexEventKind};
use std::collections::BTreeMap;

/// Consecutive looks that must agree before a loss is an event (the
/// domain not UP, a member not READY, the daemon not answering): one slow
/// `nvidia-imex-ctl` under load, or the skew between a job's epilogs (the
/// first node's epilog stops its daemon while its peers' watchers still
/// look), is not an interruption.
const CONFIRM_LOOKS: u32 = 2;

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
    /// Members not READY and connected, by index, with what they were
    /// and for how many looks in a row; an event once confirmed.
    lost: BTreeMap<usize, (String, u32)>,
    /// Looks in a row that found the domain not UP (or no answer).
    down_looks: u32,
}

impl DomainWatch {
    /// A watch that starts where the prolog left the domain: UP, every
    /// member READY. `state` carries the deaths of this job so far. `node`
    /// must be one of `members` (the job's record says who they are).
    pub fn new(
        node: &str,
        members: Vec<String>,
        max_restarts: u32,
        state: WatchState,
    ) -> Result<DomainWatch, String> {
        let local = members.iter().position(|n| n == node).ok_or_else(|| {
            format!(
                "{node} is not among the domain's nodes in job {}'s record",
                state.job_id
            )
        })?;
        Ok(DomainWatch {
            job_id: state.job_id,
            node: node.to_string(),
            members,
            local,
            max_restarts,
            daemon_dead: state.left_down.is_some(),
            state,
            domain_up: true,
            lost: BTreeMap::new(),
            down_looks: 0,
        })
    }

    /// The job is over (the epilog stopped the watch): one more look, of
    /// which only recoveries count, so a domain that came back since the
    /// last look ends its record UP again, and a peer whose epilog stopped
    /// its daemon first is not a loss.
    pub fn last_look(&mut self, look: &Look) -> Vec<ImexEvent> {
        if look.daemon != Liveness::Running {
            return Vec::new();
        }
        let (events, _) = self.look(look);
        events
            .into_iter()
            .filter(|e| !e.kind.interrupts())
            .collect()
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
            Some(Ok(status)) => self.judge_domain(status, look.now_ms, &mut events),
            Some(Err(why)) => self.judge_down(why, look.now_ms, &mut events),
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
    /// regaining UP (every member READY and connected to this node). A
    /// loss counts once [`CONFIRM_LOOKS`] looks in a row saw it; while this
    /// node's own daemon is being restarted its new instance has yet to
    /// reconnect, so its peers are not called lost.
    fn judge_domain(&mut self, status: &DomainStatus, now_ms: i64, events: &mut Vec<ImexEvent>) {
        let now_lost = self.not_ready(status);
        let restarting = self.state.restarting_since_ms.is_some();
        let mut lost = BTreeMap::new();
        for (i, what) in now_lost {
            let looks = self.lost.get(&i).map_or(1, |(_, n)| n.saturating_add(1));
            if looks == CONFIRM_LOOKS && i != self.local && !restarting {
                let detail = format!("{} {what}", self.name_of(i));
                events.push(self.event(now_ms, ImexEventKind::MemberLost, &detail));
            }
            lost.insert(i, (what, looks));
        }
        for (i, (_, looks)) in &self.lost {
            if *i != self.local && !lost.contains_key(i) && *looks >= CONFIRM_LOOKS && !restarting {
                events.push(self.event(now_ms, ImexEventKind::MemberBack, &self.name_of(*i)));
            }
        }
        self.lost = lost;
        if status.domain == "UP" && self.lost.is_empty() {
            self.domain_back(now_ms, events);
        } else {
            let who: Vec<String> = self
                .lost
                .iter()
                .map(|(i, (w, _))| format!("{} {w}", self.name_of(*i)))
                .collect();
            let detail = format!("{}: {}", status.domain, who.join(", "));
            self.judge_down(&detail, now_ms, events);
        }
    }

    /// Configured members not READY or not connected to this node.
    fn not_ready(&self, status: &DomainStatus) -> BTreeMap<usize, String> {
        let everyone: Vec<usize> = (0..self.members.len()).collect();
        let mut lost = BTreeMap::new();
        if let Readiness::NotReady(n) = assess_members(status, &everyone, self.local, true) {
            for i in n.not_connected {
                lost.insert(i, "not connected".to_string());
            }
            for i in n.not_ready {
                let word = status.nodes.get(&i).and_then(|s| s.status.clone());
                lost.insert(i, word.unwrap_or_else(|| "absent".into()));
            }
        }
        lost
    }

    /// One more look without the domain UP: an event once confirmed.
    fn judge_down(&mut self, detail: &str, now_ms: i64, events: &mut Vec<ImexEvent>) {
        self.down_looks = self.down_looks.saturating_add(1);
        if self.domain_up && self.down_looks >= CONFIRM_LOOKS {
            self.domain_up = false;
            events.push(self.event(now_ms, ImexEventKind::DomainDegraded, detail));
        }
    }

    /// The domain is UP with every member READY and connected.
    fn domain_back(&mut self, now_ms: i64, events: &mut Vec<ImexEvent>) {
        self.down_looks = 0;
        if !self.domain_up {
            self.state.restarting_since_ms = None;
            let n = self.members.len();
            events.push(self.event(
                now_ms,
                ImexEventKind::DomainUp,
                &format!("{n} of {n} READY"),
            ));
        }
        self.domain_up = true;
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
