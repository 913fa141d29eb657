//! Where each event of a job's domain goes as the watcher sees it: the
//! journal (one structured event: JOB_ID, NODE, IMEX_EVENT, DETAIL), the
//! job database (`imex_events`, for `show`, `history` and the job's
//! series), and the node's counters by kind in its standing, re-exported
//! for Prometheus at once. Each is best effort: a database that cannot be
//! written is said once in the journal, and the watch goes on.

use slurm_imex_core::config::Config;
use slurm_imex_core::imex_event::ImexEvent;
use slurm_imex_core::state::{NodeState, StateDir};
use slurm_imex_jobdb::{metrics, JobDb};

pub struct Recorder<'a> {
    cfg: &'a Config,
    db: Option<JobDb>,
    /// The database failed once: said, not repeated at every event.
    db_failed: bool,
    /// The last `record` had nothing to record.
    idle: bool,
}

impl<'a> Recorder<'a> {
    pub fn new(cfg: &'a Config) -> Recorder<'a> {
        Recorder {
            cfg,
            db: None,
            db_failed: false,
            idle: true,
        }
    }

    /// Nothing was recorded by the last call.
    pub fn is_idle(&self) -> bool {
        self.idle
    }

    pub fn record(&mut self, events: &[ImexEvent]) {
        self.idle = events.is_empty();
        if events.is_empty() {
            return;
        }
        for e in events {
            to_journal(e);
            self.store(e);
        }
        self.count(events);
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

    /// The node's counters by kind, and the Prometheus export with them.
    fn count(&self, events: &[ImexEvent]) {
        let state = StateDir::of(self.cfg);
        let mut node = NodeState::load(&state);
        for e in events {
            *node
                .imex_events
                .entry(e.kind.as_str().to_string())
                .or_default() += 1;
            if node.node.is_empty() {
                node.node = e.node.clone();
            }
        }
        node.read_domain(&state);
        let saved = node.save(&state);
        let refreshed = metrics::refresh(self.cfg, &node).map(|_| ());
        if let Some(e) = saved.err().or(refreshed.err()) {
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
