//! The IMEX domain events of running jobs (table `imex_events`, schema v7):
//! what the domain watcher (`slurm-imex-watch`) saw happen to a job's IMEX
//! domain on this node (slurm_imex_jobsummary::imex_event), written one at a time
//! while the job runs, and read back for `show`, `history` (whether the
//! domain was interrupted, in SQL: [`interrupting_kinds_sql`]) and the
//! per-job export. Keyed by job id and node, not by a job row: the watcher writes
//! before the epilog has written the job's row. Retention removes them by
//! time with the job rows (`crate::write`, `prune`).
//!
//! A row is outside text when read back (a hand edit, a newer writer): an
//! unknown kind or a timestamp that is not an integer is skipped, and the
//! detail is made printable and bounded again, so nothing read here can
//! panic a command or forge a line.

use crate::db::{err, JobDb};
use rusqlite::types::ValueRef;
use rusqlite::{params, TransactionBehavior};
use slurm_imex_core::error::Result;
use slurm_imex_core::text::{cap, printable};
use slurm_imex_jobsummary::imex_event::{ImexEvent, ImexEventKind, DETAIL_MAX};

/// Most events read back for one job on one node (the first ones, by
/// time): a watcher in a flapping domain must not make `show` unbounded.
pub const IMEX_EVENTS_MAX: usize = 1000;

/// Longest detail kept when written or read: the watcher's own cap
/// ([`DETAIL_MAX`]) plus room for the "… (N more bytes)" it adds, so a
/// detail it capped is kept as it is.
const STORED_DETAIL_MAX: usize = DETAIL_MAX + 64;

/// The kinds that interrupt a job's domain, as an SQL list of string
/// literals (`'daemon-died', …`): for `history`'s EXISTS, built from the
/// closed set of kinds, so it follows [`ImexEventKind::interrupts`].
pub fn interrupting_kinds_sql() -> String {
    kinds_sql(|k| k.interrupts())
}

fn kinds_sql(keep: impl Fn(ImexEventKind) -> bool) -> String {
    ImexEventKind::ALL
        .into_iter()
        .filter(|k| keep(*k))
        .map(|k| format!("'{}'", k.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A stored detail as it may be printed: printable, bounded.
fn clean_detail(detail: &str) -> String {
    cap(&printable(detail), STORED_DETAIL_MAX)
}

impl JobDb {
    /// Record one event, in one short IMMEDIATE transaction (the watcher
    /// calls it while the job runs, beside prologs, epilogs and other
    /// watchers: the busy timeout set by [`JobDb::open`] waits out their
    /// locks).
    pub fn record_imex_event(&mut self, e: &ImexEvent) -> Result<()> {
        let path = self.path().to_path_buf();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|x| err(&path, "cannot start writing an IMEX event", x))?;
        tx.execute(
            "INSERT INTO imex_events (job_id, node, ts_ms, kind, detail) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![e.job_id, e.node, e.ts_ms, e.kind.as_str(), clean_detail(&e.detail)],
        )
        .map_err(|x| err(&path, "cannot write an IMEX event", x))?;
        tx.commit()
            .map_err(|x| err(&path, "cannot commit an IMEX event", x))
    }

    /// The events of `job_id` on `node`, by time (then as written), at
    /// most [`IMEX_EVENTS_MAX`]. Rows of a kind this version does not know
    /// or with a timestamp that is not an integer are skipped.
    pub fn imex_events(&self, job_id: u32, node: &str) -> Result<Vec<ImexEvent>> {
        let sql = format!(
            "SELECT ts_ms, kind, detail FROM imex_events
             WHERE job_id = ?1 AND node = ?2 AND kind IN ({}) AND typeof(ts_ms) = 'integer'
             ORDER BY ts_ms, id LIMIT {IMEX_EVENTS_MAX}",
            kinds_sql(|_| true)
        );
        let q = |x: rusqlite::Error| err(self.path(), "IMEX events query failed", x);
        let mut stmt = self.conn.prepare_cached(&sql).map_err(q)?;
        let rows = stmt
            .query_map(params![job_id, node], |r| event_from_row(job_id, node, r))
            .map_err(q)?;
        let mut out = Vec::new();
        for row in rows {
            out.extend(row.map_err(q)?);
        }
        Ok(out)
    }
}

/// Delete the events older than `cutoff_ts` (Unix seconds), in the
/// retention prune's transaction (`crate::write`).
pub(crate) fn prune(tx: &rusqlite::Transaction, cutoff_ts: i64) -> rusqlite::Result<usize> {
    tx.execute(
        "DELETE FROM imex_events WHERE ts_ms < ?1",
        [cutoff_ts.saturating_mul(1000)],
    )
}

/// One row, its columns read by name; None (skipped) for an unknown kind
/// or a timestamp that is not an integer.
fn event_from_row(
    job_id: u32,
    node: &str,
    r: &rusqlite::Row,
) -> rusqlite::Result<Option<ImexEvent>> {
    let ValueRef::Integer(ts_ms) = r.get_ref("ts_ms")? else {
        return Ok(None);
    };
    let text = |v: ValueRef| match v {
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(String::from_utf8_lossy(t).into_owned()),
        _ => None,
    };
    let Some(kind) = text(r.get_ref("kind")?).and_then(|k| ImexEventKind::parse(&k)) else {
        return Ok(None);
    };
    let detail = text(r.get_ref("detail")?).unwrap_or_default();
    Ok(Some(ImexEvent {
        job_id,
        node: node.to_string(),
        ts_ms,
        kind,
        detail: clean_detail(&detail),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn db() -> (tempfile::TempDir, JobDb) {
        let d = tempfile::tempdir().unwrap();
        let db = JobDb::open(&d.path().join("jobs.db"), Duration::from_secs(5)).unwrap();
        (d, db)
    }

    #[test]
    fn events_round_trip_in_time_order_per_job_and_node() {
        let (_d, mut db) = db();
        let later = ImexEvent::new(7, "n3", 2_000, ImexEventKind::DaemonRestarted, "");
        let first = ImexEvent::new(
            7,
            "n3",
            1_000,
            ImexEventKind::DaemonDied,
            "killed by signal 9",
        );
        let same_ts = ImexEvent::new(7, "n3", 2_000, ImexEventKind::DomainUp, "");
        for e in [&later, &first, &same_ts] {
            db.record_imex_event(e).unwrap();
        }
        db.record_imex_event(&ImexEvent::new(
            7,
            "n4",
            500,
            ImexEventKind::MemberLost,
            "n3",
        ))
        .unwrap();
        db.record_imex_event(&ImexEvent::new(
            8,
            "n3",
            500,
            ImexEventKind::MemberLost,
            "n1",
        ))
        .unwrap();
        assert_eq!(
            db.imex_events(7, "n3").unwrap(),
            vec![first, later, same_ts]
        );
        assert_eq!(db.imex_events(7, "n4").unwrap().len(), 1);
        assert!(db.imex_events(9, "n3").unwrap().is_empty());
    }

    #[test]
    fn a_capped_detail_is_kept_as_the_watcher_capped_it() {
        let (_d, mut db) = db();
        let e = ImexEvent::new(7, "n3", 0, ImexEventKind::DomainDegraded, &"x".repeat(5000));
        db.record_imex_event(&e).unwrap();
        assert_eq!(db.imex_events(7, "n3").unwrap(), vec![e]);
    }

    #[test]
    fn hostile_rows_are_skipped_or_made_printable() {
        let (_d, db) = db();
        db.conn
            .execute_batch(&format!(
                "INSERT INTO imex_events (job_id, node, ts_ms, kind, detail) VALUES
                    (7, 'n3', 1, 'daemon-exploded', 'x'),
                    (7, 'n3', 'soon', 'daemon-died', 'x'),
                    (7, 'n3', 1e300, 'daemon-died', 'x'),
                    (7, 'n3', 9223372036854775807, 'daemon-died', 'a' || char(0) || char(27) || '[2J' || char(10) || 'forged'),
                    (7, 'n3', -5, 'member-lost', '{}'),
                    (7, 'n3', 2, X'6d656d6265722d6261636b', 'a blob is no kind'),
                    (7, 'n3', 3, 'member-back', X'ff00');",
                "y".repeat(1 << 20)
            ))
            .unwrap();
        let events = db.imex_events(7, "n3").unwrap();
        let kinds: Vec<_> = events.iter().map(|e| (e.ts_ms, e.kind)).collect();
        assert_eq!(
            kinds,
            [
                (-5, ImexEventKind::MemberLost),
                (3, ImexEventKind::MemberBack),
                (i64::MAX, ImexEventKind::DaemonDied)
            ]
        );
        for e in &events {
            let line = e.line();
            assert!(!line.chars().any(char::is_control), "{line:?}");
            assert!(line.len() < DETAIL_MAX + 200, "{}", line.len());
        }
        assert!(events[2].detail.contains("\\x00") && events[2].detail.contains("\\x1b"));
    }

    #[test]
    fn reading_is_bounded() {
        let (_d, db) = db();
        db.conn
            .execute_batch(&format!(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {})
                 INSERT INTO imex_events (job_id, node, ts_ms, kind, detail)
                 SELECT 7, 'n3', i, 'member-lost', 'n1' FROM n;",
                IMEX_EVENTS_MAX + 500
            ))
            .unwrap();
        let events = db.imex_events(7, "n3").unwrap();
        assert_eq!(events.len(), IMEX_EVENTS_MAX);
        assert_eq!(events[0].ts_ms, 1, "the first ones, by time");
    }

    #[test]
    fn the_interrupting_kinds_are_the_four_that_interrupt() {
        assert_eq!(
            interrupting_kinds_sql(),
            "'daemon-died', 'daemon-left-down', 'domain-degraded', 'member-lost'"
        );
    }
}
