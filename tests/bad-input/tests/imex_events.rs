//! The IMEX domain events of the job database (what the domain watcher
//! recorded while a job ran) when the rows are hostile: hand-edited, from a
//! newer writer, or planted. `show` and `history` skip a row they cannot
//! read (an unknown kind, a timestamp that is not an integer), print every
//! other one on one bounded, printable line, and never panic; a table that
//! is not ours is one line naming the database.

mod common;
use common::*;
use slurm_imex_jobdb::write::JobRow;
use slurm_imex_jobdb::JobDb;
use slurm_imex_jobsummary::imex_event::{ImexEvent, ImexEventKind};

/// The `--imex` job every case records, on node n1.
const JOB: u32 = 4242;

struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new() -> Site {
        let dir = scratch();
        write_mode(&dir.path().join("imex.toml"), b"", 0o644);
        Site { dir }
    }

    fn db_path(&self) -> std::path::PathBuf {
        self.dir.path().join("jobs.db")
    }

    /// `slurm-imex --db jobs.db ARGS`.
    fn cli(&self, args: &[&str]) -> Ran {
        let cfg = self.dir.path().join("imex.toml");
        let db = self.db_path();
        let mut all = vec![
            "--config",
            cfg.to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
        ];
        all.extend_from_slice(args);
        run(&bin("slurm-imex"), &all, &[])
    }

    /// The job's row as the epilog writes it, one good event as the
    /// watcher writes it, then `sql` by hand.
    fn database(&self, sql: &str) {
        let cfg = slurm_imex_settings::Config::default();
        let mut db = JobDb::open(&self.db_path(), cfg.database.busy_timeout.0).unwrap();
        db.record_imex_event(&ImexEvent::new(
            JOB,
            "n1",
            1_790_000_010_000,
            ImexEventKind::DaemonRestarted,
            "",
        ))
        .unwrap();
        db.record_job(&JobRow {
            job_id: JOB,
            node: "n1".into(),
            user: Some("alice".into()),
            uid: Some(1000),
            start_ts: 1_790_000_000,
            end_ts: Some(1_790_000_100),
            imex: true,
            imex_domain: None,
            imex_rack_source: None,
            imex_outcome: None,
            prolog: None,
            epilog: None,
            gpus: Vec::new(),
            imex_events: Vec::new(),
        })
        .unwrap();
        drop(db);
        let c = rusqlite::Connection::open(self.db_path()).unwrap();
        c.execute_batch(sql).unwrap();
    }
}

/// Every line printable (no control character forges a line or rewrites a
/// terminal) and bounded.
fn assert_clean(case: &str, text: &str) {
    for l in text.lines() {
        assert!(
            !l.chars().any(char::is_control),
            "{case}: a control character in {l:?}"
        );
        assert!(
            l.len() <= 1024,
            "{case}: a line of {} bytes: {}…",
            l.len(),
            l.chars().take(200).collect::<String>()
        );
    }
}

#[test]
fn hostile_event_rows_are_skipped_or_printed_as_one_clean_line() {
    let site = Site::new();
    let mib = "y".repeat(1 << 20);
    site.database(&format!(
        "INSERT INTO imex_events (job_id, node, ts_ms, kind, detail) VALUES
            ({JOB}, 'n1', 1790000001000, 'daemon-exploded', 'a kind from a newer writer'),
            ({JOB}, 'n1', 1790000002000, X'6461656d6f6e2d64696564', 'a blob is no kind'),
            ({JOB}, 'n1', 'soon', 'daemon-died', 'a timestamp that is text'),
            ({JOB}, 'n1', 1e300, 'daemon-died', 'a timestamp out of range'),
            ({JOB}, 'n1', 9223372036854775807, 'daemon-died', 'the last millisecond'),
            ({JOB}, 'n1', -9223372036854775808, 'member-lost', 'before 1970'),
            ({JOB}, 'n1', 1790000003000, 'domain-degraded', '{mib}'),
            ({JOB}, 'n1', 1790000004000, 'member-lost',
                'n2' || char(0) || char(27) || '[2J' || char(13) || char(10) || 'forged line' || char(8238)),
            ({JOB}, 'n1', 1790000005000, 'member-back', X'ff00fe');"
    ));
    let show = site.cli(&["show", &JOB.to_string()]);
    show.ended_without_panic("show");
    assert_eq!(show.code, Some(0), "show: {}", show.stderr);
    assert_clean("show", &show.stdout);
    let events: Vec<&str> = show
        .stdout
        .lines()
        .filter(|l| l.starts_with("  imex event: "))
        .collect();
    // Kept, by time: the two extreme timestamps, the capped detail, the
    // escaped one, the blob detail, and the good row; skipped: the unknown
    // kind, the blob kind, the text and the real timestamps.
    assert_eq!(events.len(), 6, "{}", show.stdout);
    assert!(
        events[0].starts_with("  imex event: IMEX peer lost at @-9223372036854775"),
        "{}",
        events[0]
    );
    assert!(events[1].contains("IMEX domain left UP") && events[1].contains("more bytes)"));
    assert!(
        events[2].contains("(n2\\x00\\x1b[2J\\x0d\\x0aforged line\\u{202e})"),
        "{}",
        events[2]
    );
    assert!(events[3].starts_with("  imex event: IMEX peer back at "));
    assert!(events[4].starts_with("  imex event: IMEX daemon restarted at "));
    assert!(
        events[5].starts_with("  imex event: IMEX daemon died at @9223372036854775"),
        "{}",
        events[5]
    );
    for skipped in ["newer writer", "no kind", "is text", "out of range"] {
        assert!(!show.stdout.contains(skipped), "{skipped}: {}", show.stdout);
    }
    assert!(!show.stdout.lines().any(|l| l.starts_with("forged line")));

    let json = site.cli(&["--json", "show", &JOB.to_string()]);
    assert_eq!(json.code, Some(0), "{}", json.stderr);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(v[0]["imex_events"].as_array().unwrap().len(), 6);

    let history = site.cli(&["history"]);
    history.ended_without_panic("history");
    assert_eq!(history.code, Some(0), "history: {}", history.stderr);
    assert_clean("history", &history.stdout);
    let lines: Vec<Vec<&str>> = history
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let at = lines[0].iter().position(|h| *h == "IMEX").unwrap();
    assert_eq!(lines[1][at], "interrupted", "{}", history.stdout);
    let json = site.cli(&["--json", "history"]);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(v[0]["imex_interrupted"], true);
}

#[test]
fn only_recoveries_or_unknown_kinds_do_not_make_a_job_interrupted() {
    let site = Site::new();
    // Recoveries (the good row is a restart) and kinds this version does
    // not know: nothing this version counts as an interruption.
    site.database(&format!(
        "INSERT INTO imex_events (job_id, node, ts_ms, kind, detail) VALUES
            ({JOB}, 'n1', 1790000001000, 'domain-up', ''),
            ({JOB}, 'n1', 1790000002000, 'daemon-exploded', ''),
            ({JOB}, 'n2', 1790000003000, 'daemon-died', 'another node''s');"
    ));
    let r = site.cli(&["--json", "history"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v[0]["imex_interrupted"], false, "{}", r.stdout);
    let r = site.cli(&["history"]);
    assert!(
        r.stdout
            .lines()
            .nth(1)
            .unwrap()
            .split_whitespace()
            .any(|c| c == "yes"),
        "{}",
        r.stdout
    );
}

#[test]
fn a_flood_of_events_is_shown_bounded() {
    let site = Site::new();
    site.database(&format!(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
         INSERT INTO imex_events (job_id, node, ts_ms, kind, detail)
         SELECT {JOB}, 'n1', 1790000000000 + i, 'member-lost', 'n2' FROM n;"
    ));
    let r = site.cli(&["show", &JOB.to_string()]);
    r.ended_without_panic("20000 events");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let events = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("  imex event: "))
        .count();
    assert_eq!(events, 1000);
    assert!(
        r.stdout
            .contains("  imex events: only the first 1000 are shown"),
        "{}",
        r.stdout
    );
}

#[test]
fn an_events_table_that_is_not_ours_is_one_line() {
    let site = Site::new();
    site.database("DROP TABLE imex_events; CREATE TABLE imex_events (x TEXT);");
    for args in [vec!["show", "4242"], vec!["history"]] {
        site.cli(&args)
            .one_line_error(2, &["jobs.db", "no such column"], &format!("{args:?}"));
    }
}
