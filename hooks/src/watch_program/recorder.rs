//! Where each event of a job's domain goes as the watcher sees it: the
//! journal (one structured event: JOB_ID, NODE, IMEX_EVENT, DETAIL), the
//! job database (`imex_events`, for `show`, `history` and the job's
//! series), and the node's counters by kind in its standing, re-exported
//! for Prometheus at once. Each is best effort: a database that cannot be
//! written is said once in the journal, and the watch goes on.

use slurm_imex_core::state::{count_events, NodeState, StateDir};
use slurm_imex_domain::imex::status::expectation;
use slurm_imex_jobdb::{metrics, JobDb};
use slurm_imex_jobsummary::imex_event::ImexEvent;
use slurm_imex_settings::Config;

/// Records one watch's events, keeping its database connection between them.
pub struct Recorder<'a> {
    cfg: &'a Config,
    db: Option<JobDb>,
    /// The database failed once: said, not repeated at every event.
    db_failed: bool,
    /// Peer and domain events recorded so far in this watch.
    domain_events: usize,
}

/// Peer and domain events one watch records at most: a flapping peer must
/// not fill the database or hide the rest. The daemon's own events are
/// always recorded.
const DOMAIN_EVENTS_MAX: usize = 200;

impl<'a> Recorder<'a> {
    pub fn new(cfg: &'a Config) -> Recorder<'a> {
        Recorder {
            cfg,
            db: None,
            db_failed: false,
            domain_events: 0,
        }
    }

    pub fn record(&mut self, events: &[ImexEvent]) {
        let events = self.within_cap(events);
        if events.is_empty() {
            return;
        }
        for e in &events {
            to_journal(e);
            self.store(e);
        }
        self.count(&events);
    }

    /// `events` less the peer and domain events past [`DOMAIN_EVENTS_MAX`].
    fn within_cap(&mut self, events: &[ImexEvent]) -> Vec<ImexEvent> {
        let mut kept = Vec::new();
        for e in events {
            let daemons = e.kind.as_str().starts_with("daemon-");
            if !daemons && self.domain_events >= DOMAIN_EVENTS_MAX {
                continue;
            }
            if !daemons {
                self.domain_events += 1;
                if self.domain_events == DOMAIN_EVENTS_MAX {
                    tracing::warn!("{DOMAIN_EVENTS_MAX} peer and domain events in this job: later ones are not recorded");
                }
            }
            kept.push(e.clone());
        }
        kept
    }

    fn store(&mut self, e: &ImexEvent) {
        if self.db.is_none() && !self.db_failed {
            let db = &self.cfg.database;
            match JobDb::open(&db.path, db.busy_timeout.0) {
                Ok(opened) => self.db = Some(opened),
                Err(err) => self.database_failed(&err.to_string()),
            }
        }
        if let Some(db) = self.db.as_mut() {
            if let Err(err) = db.record_imex_event(e) {
                let line = err.to_string();
                self.database_failed(&line);
            }
        }
    }

    fn database_failed(&mut self, why: &str) {
        if !self.db_failed {
            tracing::warn!("IMEX events of this job are not recorded in the job database: {why}");
        }
        self.db_failed = true;
        self.db = None;
    }

    /// The node's counters by kind (the watchers' own file: the node's
    /// standing is never written here), and the Prometheus export with them.
    fn count(&self, events: &[ImexEvent]) {
        let state = StateDir::of(self.cfg);
        let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
        let counted = count_events(&state, &kinds);
        let mut node = NodeState::load(&state);
        if node.node.is_empty() {
            node.node = events.first().map(|e| e.node.clone()).unwrap_or_default();
        }
        node.read_domain(&state);
        node.imex_expected = expectation(self.cfg).expected;
        let refreshed = metrics::refresh(&self.cfg.database, &self.cfg.metrics, &node).map(|_| ());
        if let Some(e) = counted.err().or(refreshed.err()) {
            tracing::warn!("IMEX event counters not exported: {e}");
        }
    }
}

fn to_journal(e: &ImexEvent) {
    let line = format!("{}: {}", e.node, e.line());
    if e.kind.interrupts() {
        tracing::warn!(target: "slurm_imex::imex_event", imex_event = e.kind.as_str(), detail = e.detail.as_str(), "{line}");
    } else {
        tracing::info!(target: "slurm_imex::imex_event", imex_event = e.kind.as_str(), detail = e.detail.as_str(), "{line}");
    }
}
