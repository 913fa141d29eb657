//! The admin CLI used carelessly: closed pipes, a full disk on stdout,
//! absurd flags, and databases that are corrupt, hand-edited or not
//! databases at all. It never panics: one line, or the conventional
//! SIGPIPE end. And hostile text from outside (every column of the
//! database, the state directory and the daemon's ctl answers, what doctor
//! and topology read) is shown printable, bounded, forging no line.

mod common;
use common::hostile::{assert_same_shape, fill_strings, Fill};
use common::*;
use std::process::Stdio;

struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new() -> Site {
        let dir = scratch();
        write_mode(&dir.path().join("imex.toml"), b"", 0o644);
        Site { dir }
    }
    fn cli(&self, args: &[&str]) -> Ran {
        self.cli_to(args, Stdio::piped())
    }
    fn cli_to(&self, args: &[&str], stdout: Stdio) -> Ran {
        let cfg = self.dir.path().join("imex.toml");
        let mut all = vec!["--config", cfg.to_str().unwrap()];
        all.extend_from_slice(args);
        run_with(&bin("slurm-imex"), &all, &[], stdout)
    }
    fn db(&self) -> String {
        self.dir
            .path()
            .join("jobs.db")
            .to_str()
            .unwrap()
            .to_string()
    }
    /// A database with `rows` jobs, written the way the epilog writes it,
    /// then hand-edited with `sql`.
    fn database(&self, rows: u32, sql: &str) {
        let cfg = slurm_imex_settings::Config::default();
        let mut db = slurm_imex_jobdb::JobDb::open(
            std::path::Path::new(&self.db()),
            cfg.database.busy_timeout.0,
        )
        .unwrap();
        for i in 0..rows {
            db.record_job(&slurm_imex_jobdb::write::JobRow {
                job_id: 1000 + i,
                node: "n1".into(),
                user: Some("alice".into()),
                uid: Some(1000),
                start_ts: 1_790_000_000 + i as i64,
                end_ts: Some(1_790_000_100 + i as i64),
                imex: false,
                imex_domain: None,
                imex_rack_source: None,
                imex_outcome: None,
                prolog: None,
                epilog: None,
                gpus: Vec::new(),
                imex_events: Vec::new(),
            })
            .unwrap();
        }
        drop(db);
        let c = rusqlite::Connection::open(self.db()).unwrap();
        c.execute_batch(sql).unwrap();
    }
}

#[test]
fn a_closed_pipe_ends_quietly_like_coreutils() {
    let site = Site::new();
    site.database(5000, "");
    // `slurm-imex history | head -1`: the reader goes away early.
    let db = site.db();
    let mut child = std::process::Command::new(bin("slurm-imex"))
        .args([
            "--config",
            site.dir.path().join("imex.toml").to_str().unwrap(),
        ])
        .args(["--db", &db, "history", "--limit", "5000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    use std::os::unix::process::ExitStatusExt;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?} {stderr}",
        out.status
    );
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn a_full_disk_on_stdout_is_one_line() {
    let site = Site::new();
    site.database(50, "");
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let r = site.cli_to(&["--db", &site.db(), "history"], Stdio::from(full));
    r.one_line_error(
        2,
        &["cannot write output", "No space left on device"],
        "/dev/full",
    );
}

#[test]
fn absurd_flags_are_refused_naming_the_flag() {
    let site = Site::new();
    site.database(3, "");
    let db = site.db();
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["history", "--since", "100000000000y"],
            &["--since", "before 1970"],
        ),
        (
            &["history", "--since", "last tuesday"],
            &["--since \"last tuesday\""],
        ),
        (&["history", "--until", "2026-13-45"], &["--until"]),
        (
            &["history", "--since", "2026-11-05", "--until", "2026-11-01"],
            &["--until", "before --since"],
        ),
        (&["history", "--limit", "0"], &["--limit"]),
        (&["history", "--limit", "99999999999"], &["--limit"]),
        (&["history", "--limit", "-1"], &["--limit"]),
        (&["history", "--verdict", "maybe"], &["--verdict \"maybe\""]),
        (&["history", "--job", "-1"], &["--job"]),
        (&["history", "--job", "99999999999"], &["--job"]),
        (&["gpus", "--since", "999999999999999999999d"], &["--since"]),
        (&["gpus", "--limit", "0"], &["--limit"]),
        (&["show", "abc"], &["abc"]),
        (&["history", "--node", "n[1-"], &["--node", "never closed"]),
        (
            &["history", "--format", "JobID,Bogus"],
            &["--format", "Bogus", "JOBID,NODE"],
        ),
        (&["--json-version", "2", "history"], &["--json-version"]),
        // --format where it would do nothing: refused, never ignored.
        (
            &["--format", "JobID", "show", "5"],
            &["--format", "history and gpus"],
        ),
        (
            &["--format", "JobID", "--json", "history"],
            &["--format", "--json"],
        ),
    ];
    for (args, needles) in cases {
        let mut all = vec!["--db", db.as_str()];
        all.extend_from_slice(args);
        let r = site.cli(&all);
        r.ended_without_panic(&format!("{args:?}"));
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.stderr);
        for n in needles.iter() {
            assert!(r.stderr.contains(n), "{args:?}: {n:?} not in {}", r.stderr);
        }
    }
    eprintln!("bad-input: {} CLI flag cases", cases.len());
}

#[test]
fn out_of_range_database_values_print_as_they_are() {
    let site = Site::new();
    site.database(
        2,
        "UPDATE jobs SET start_ts = 9223372036854775807, end_ts = -5 WHERE job_id = 1000;",
    );
    let r = site.cli(&["--db", &site.db(), "history"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stdout.contains("@9223372036854775807") && r.stdout.contains("@-5"),
        "{}",
        r.stdout
    );
    let r = site.cli(&["--db", &site.db(), "show", "1000"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let r = site.cli(&["--db", &site.db(), "--json", "history"]);
    assert!(r.stdout.contains("9223372036854775807"), "{}", r.stdout);
}

#[test]
fn databases_that_are_not_databases_are_one_line() {
    let site = Site::new();
    let db = site.db();
    let mut n = 0;
    write_mode(std::path::Path::new(&db), b"this is not sqlite\n", 0o600);
    site.cli(&["--db", &db, "history"])
        .one_line_error(2, &["jobs.db"], "garbage file");
    n += 1;
    write_mode(std::path::Path::new(&db), &[0u8; 0], 0o600);
    site.cli(&["--db", &db, "history"])
        .ended_without_panic("empty file");
    n += 1;
    std::fs::remove_file(&db).unwrap();
    std::fs::create_dir(&db).unwrap();
    site.cli(&["--db", &db, "history"])
        .one_line_error(2, &["jobs.db"], "directory");
    n += 1;
    std::fs::remove_dir(&db).unwrap();
    // A real SQLite file with someone else's schema.
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("CREATE TABLE jobs (x TEXT); INSERT INTO jobs VALUES ('y');")
        .unwrap();
    site.cli(&["--db", &db, "history"])
        .one_line_error(2, &["jobs.db"], "foreign schema");
    n += 1;
    std::fs::remove_file(&db).unwrap();
    // A truncated copy of a real database.
    site.database(200, "");
    let bytes = std::fs::read(&db).unwrap();
    std::fs::write(&db, &bytes[..bytes.len() / 3]).unwrap();
    site.cli(&["--db", &db, "history"])
        .ended_without_panic("truncated database");
    n += 1;
    eprintln!("bad-input: {n} database file cases");
}

#[test]
fn a_node_with_no_jobs_answers_empty_with_a_note() {
    let site = Site::new();
    let db = site.db();
    for (args, json) in [
        (vec!["history"], false),
        (vec!["gpus"], false),
        (vec!["show", "5"], false),
        (vec!["--json", "history"], true),
        (vec!["--json", "gpus"], true),
        (vec!["--json", "show", "5"], true),
    ] {
        let mut all = vec!["--db", db.as_str()];
        all.extend_from_slice(&args);
        let r = site.cli(&all);
        assert_eq!(r.code, Some(0), "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("note: no job database"),
            "{args:?}: {}",
            r.stderr
        );
        if json {
            assert_eq!(r.stdout.trim(), "[]", "{args:?}");
        } else if args[0] == "show" {
            assert_eq!(r.stdout, "", "{args:?}: nothing to show");
        } else {
            // The header alone: an empty table.
            assert_eq!(r.stdout.lines().count(), 1, "{args:?}: {}", r.stdout);
            assert!(
                r.stdout.starts_with(if args[0] == "history" {
                    "JOBID"
                } else {
                    "SERIAL"
                }),
                "{}",
                r.stdout
            );
        }
    }
    // A database without that job: empty too, like sacct -j.
    site.database(2, "");
    let r = site.cli(&["--db", &db, "--json", "show", "424242"]);
    assert_eq!((r.code, r.stdout.trim()), (Some(0), "[]"), "{}", r.stderr);
    assert!(r.stderr.contains("no record of job 424242"), "{}", r.stderr);
}

#[test]
fn node_takes_hostlists_and_format_picks_columns() {
    let site = Site::new();
    site.database(4, "UPDATE jobs SET node = 'gb-r1-0' || (job_id - 999);");
    let db = site.db();
    let r = site.cli(&[
        "--db",
        &db,
        "--format",
        "JobID,Node",
        "history",
        "--node",
        "gb-r1-0[2-3]",
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["JOBID", "NODE"]
    );
    let mut nodes: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l.split_whitespace().nth(1).unwrap())
        .collect();
    nodes.sort();
    assert_eq!(nodes, ["gb-r1-02", "gb-r1-03"], "{}", r.stdout);
    let r = site.cli(&["--db", &db, "history", "--node", "gb-r1-01,gb-r1-04"]);
    assert_eq!(r.stdout.lines().count(), 3, "{}", r.stdout);
}

/// The job database on a filesystem remounted read-only (a disk error, a
/// node booted from a read-only image), in a private mount namespace: the
/// CLI still reads it (history, show, gpus), with one warning naming the
/// cause, and the epilog's open names the same cause, never "cannot enable
/// WAL (corrupt or not a database?)", which points at the wrong fix.
#[test]
fn a_read_only_database_filesystem_is_still_read_and_named_as_such() {
    if !is_root() {
        eprintln!("skipped: mounting a read-only filesystem needs root (CI runs as root)");
        return;
    }
    let site = Site::new();
    site.database(3, "");
    let ro = site.dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    let cli = format!(
        "{} --config {} --db {}/jobs.db",
        bin("slurm-imex").display(),
        site.dir.path().join("imex.toml").display(),
        ro.display()
    );
    let script = format!(
        "set -e; mount -t tmpfs -o size=4m,mode=700 ro {ro}; cp {db} {ro}/jobs.db; \
         chmod 600 {ro}/jobs.db; mount -o remount,ro {ro}; \
         {cli} history; echo ==; {cli} show 1001; echo ==; {cli} --json gpus; echo ==; \
         BAD_INPUT_OPEN_DB={ro}/jobs.db {me} --exact open_db_and_say_why_not --nocapture",
        ro = ro.display(),
        db = site.db(),
        me = std::env::current_exe().unwrap().display(),
    );
    let r = run(
        std::path::Path::new("/usr/bin/unshare"),
        &["-m", "--propagation", "private", "sh", "-c", &script],
        &[],
    );
    r.ended_without_panic("read-only database");
    assert_eq!(
        r.code,
        Some(0),
        "stdout: {}\nstderr: {}",
        r.stdout,
        r.stderr
    );
    let parts: Vec<&str> = r.stdout.split("==\n").collect();
    assert!(
        parts[0].contains("1000") && parts[0].contains("1002"),
        "history: {}",
        parts[0]
    );
    assert!(parts[1].contains("1001"), "show: {}", parts[1]);
    assert!(
        parts[2].trim_start().starts_with('['),
        "gpus --json: {}",
        parts[2]
    );
    for line in r.stderr.lines().filter(|l| l.starts_with("slurm-imex")) {
        assert!(line.contains("read-only filesystem"), "{line}");
        assert!(!line.contains("WAL") && !line.contains("corrupt"), "{line}");
    }
    let why = parts[3]
        .lines()
        .find_map(|l| l.strip_prefix("open: "))
        .unwrap_or_else(|| panic!("the epilog's open said nothing: {}", parts[3]));
    assert!(
        why.contains("read-only filesystem") && why.contains("remount"),
        "{why}"
    );
    assert!(!why.contains("WAL") && !why.contains("corrupt"), "{why}");
}

/// Run by the case above inside its mount namespace: opens the database
/// as the epilog does and prints why it cannot ("open: <line>").
#[test]
fn open_db_and_say_why_not() {
    let Some(path) = std::env::var_os("BAD_INPUT_OPEN_DB") else {
        return;
    };
    let cfg = slurm_imex_settings::Config::default();
    match slurm_imex_jobdb::JobDb::open(std::path::Path::new(&path), cfg.database.busy_timeout.0) {
        Ok(_) => println!("open: ok"),
        Err(e) => println!("open: {e}"),
    }
}

/// An old database (an older schema) on a filesystem remounted read-only:
/// it cannot be migrated there, and the CLI says so, and why, once: one
/// line, not the warning and then the refusal repeating it.
#[test]
fn an_old_database_on_a_read_only_disk_is_refused_in_one_line() {
    if !is_root() {
        eprintln!("skipped: mounting a read-only filesystem needs root (CI runs as root)");
        return;
    }
    let site = Site::new();
    site.database(2, "PRAGMA user_version = 3;");
    let ro = site.dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    let script = format!(
        "set -e; mount -t tmpfs -o size=4m,mode=700 ro {ro}; cp {db} {ro}/jobs.db; \
         chmod 600 {ro}/jobs.db; mount -o remount,ro {ro}; \
         {cli} --config {cfg} --db {ro}/jobs.db history; echo rc=$?",
        ro = ro.display(),
        db = site.db(),
        cli = bin("slurm-imex").display(),
        cfg = site.dir.path().join("imex.toml").display(),
    );
    let r = run(
        std::path::Path::new("/usr/bin/unshare"),
        &["-m", "--propagation", "private", "sh", "-c", &script],
        &[],
    );
    r.ended_without_panic("old read-only database");
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", r.stderr);
    let line = lines[0];
    assert!(
        line.contains("schema v3") && line.contains("read-only filesystem"),
        "{line}"
    );
    assert_eq!(line.matches("read-only filesystem").count(), 1, "{line}");
    assert!(line.contains("remount it read-write"), "{line}");
}

/// A user (not root) running the reading commands on a compute node: the
/// job database is root's, which they are told, with the view that is
/// theirs, not advice to chown root's directory.
#[test]
fn a_user_reading_roots_database_is_told_whose_it_is_and_what_is_theirs() {
    if !is_root() {
        eprintln!("skipped: running as another user needs root (CI runs as root)");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let site = Site::new();
    site.database(2, "");
    std::fs::set_permissions(site.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let cfg = site.dir.path().join("imex.toml");
    let db = site.db();
    let program = bin("slurm-imex");
    for command in [&["history"][..], &["show", "1000"], &["gpus"]] {
        let mut args = vec![
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--",
            program.to_str().unwrap(),
        ];
        let (cfg, db) = (cfg.to_str().unwrap(), db.as_str());
        args.extend(["--config", cfg, "--db", db]);
        args.extend_from_slice(command);
        let r = run(std::path::Path::new("/usr/bin/setpriv"), &args, &[]);
        r.ended_without_panic("a user's history");
        assert_ne!(r.code, Some(0), "{command:?}: {r:?}");
        let lines: Vec<&str> = r.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{command:?}: {}", r.stderr);
        assert!(lines[0].contains("is root's"), "{}", lines[0]);
        assert!(lines[0].contains("slurm-imex job JOBID"), "{}", lines[0]);
        assert!(!lines[0].contains("chown"), "{}", lines[0]);
    }
}

// Outside text in every command's output: the job database (hand-edited,
// copied from another node, planted), the IMEX daemon's ctl answers and
// the state directory (`status`), what `doctor` reads. Each run with its
// text hostile prints the lines the same run prints with it benign
// (common/hostile.rs): no control byte, no forged line, every line bounded.

/// The job the database holds: its phases with reasons, its IMEX domain,
/// one GPU with stats, an XID and a process, as the epilog records them.
fn full_job_row() -> slurm_imex_jobdb::write::JobRow {
    use slurm_imex_gpu::health::Verdict;
    use slurm_imex_gpu::nvml::snapshot::ProcessAccounting;
    use slurm_imex_gpu::stats::{Delta, GpuJobStats, GpuUsage};
    use slurm_imex_gpu::xid::{Bucket, XidEvent};
    use slurm_imex_jobdb::write::{GpuRecord, HookVerdict, ImexOutcome, JobRow};
    let delta = |v| Delta {
        value: Some(v),
        reset: false,
    };
    let phase = |verdict, why: &str| {
        Some(HookVerdict {
            verdict,
            reasons: vec![why.to_string(), "and a second reason".to_string()],
            ms: 900,
        })
    };
    JobRow {
        job_id: 4242,
        node: "n1".into(),
        user: Some("alice".into()),
        uid: Some(1000),
        start_ts: 1_790_000_000,
        end_ts: Some(1_790_000_600),
        imex: true,
        imex_domain: Some("block7".into()),
        imex_rack_source: Some("/etc/slurm/topology.conf".into()),
        imex_outcome: Some(ImexOutcome {
            channel: Some(5),
            ready_ms: Some(1_200),
            failure: Some("peer n2 never READY".into()),
            node_fault: false,
        }),
        prolog: phase(Verdict::Warn, "gpu0: ECC SBE rising"),
        epilog: phase(Verdict::Drain, "gpu0: XID 79 fell off the bus"),
        gpus: vec![GpuRecord {
            stats: GpuJobStats {
                index: 0,
                uuid: "GPU-00000001-aaaa".into(),
                serial: "1650924060001".into(),
                pci: "0000:1a:00".into(),
                name: "NVIDIA GB200".into(),
                energy_mj: delta(5_000_000),
                ecc_sbe: delta(1),
                ecc_dbe: delta(1),
                retired_pages: delta(1),
                remapped_correctable: delta(1),
                remapped_uncorrectable: delta(1),
                remap_pending_end: Some(true),
                remap_failure_end: Some(false),
                recovery_action_end: Some(5),
                pcie_replays: delta(3),
                throttle_ns: [("hw_slowdown".to_string(), 2_000_000_000)].into(),
                nvlink_errors: [("replay".to_string(), 4)].into(),
                processes: vec![ProcessAccounting {
                    pid: 4711,
                    gpu_util: Some(50),
                    mem_util: Some(20),
                    max_memory_bytes: Some(1 << 30),
                    time_ms: 60_000,
                    start_us: 1,
                    running: false,
                }],
                max_memory_bytes: Some(1 << 30),
                usage: Some(GpuUsage {
                    processes: 1,
                    gpu_util_pct: Some(50.0),
                    mem_util_pct: Some(20.0),
                    busy_ms: 30_000,
                    process_ms: 60_000,
                }),
                xids: vec![XidEvent {
                    seq: 7,
                    pci: "0000:1a:00".into(),
                    xid: 79,
                    pid: Some(4711),
                    process: Some("python".into()),
                    message: "GPU has fallen off the bus.".into(),
                    bucket: Bucket::Reboot,
                }],
                // (every field named: a new one must be set here too)
            },
            verdict: Verdict::Drain,
            reasons: vec!["XID 79: reboot the node".into(), "ECC DBE".into()],
        }],
        imex_events: Vec::new(),
    }
}

/// How a TEXT column is written.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Holds {
    /// One piece of text.
    Text,
    /// JSON (a map of throttle reasons, a list).
    Json,
    /// Lines, one item each (a phase's reasons, as the writer joins them).
    Lines,
}

/// Every (table, column) of `db` declared TEXT, and what it holds; every
/// table must hold a row (so each column is shown something to read).
fn text_columns(db: &rusqlite::Connection) -> Vec<(String, String, Holds)> {
    let tables: Vec<String> = db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut columns = Vec::new();
    for t in tables {
        let rows: i64 = db
            .query_row(&format!("SELECT count(*) FROM \"{t}\""), [], |r| r.get(0))
            .unwrap();
        assert!(
            rows > 0,
            "table {t} holds no row: record one in full_job_row"
        );
        let mut info = db.prepare(&format!("PRAGMA table_info(\"{t}\")")).unwrap();
        let cols: Vec<(String, String)> = info
            .query_map([], |r| Ok((r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        for (c, ty) in cols {
            if !ty.to_ascii_uppercase().contains("TEXT") {
                continue;
            }
            let count = |filter: &str| -> bool {
                db.query_row(
                    &format!(
                        "SELECT count(*) FROM \"{t}\" WHERE {}",
                        filter.replace("COL", &format!("\"{c}\""))
                    ),
                    [],
                    |r| r.get::<_, i64>(0),
                )
                .unwrap()
                    > 0
            };
            let holds = if count("json_valid(COL) AND substr(COL, 1, 1) IN ('{', '[')") {
                Holds::Json
            } else if count("instr(COL, char(10)) > 0") {
                Holds::Lines
            } else {
                Holds::Text
            };
            columns.push((t.clone(), c, holds));
        }
    }
    columns
}

/// Column `c` of every row of table `t` `fill`ed: a text of its own for
/// each row (the first a megabyte long); for JSON, each string of it (and
/// with `keys`, each object key too); for lines, each line (its newlines
/// are the column's own: a line is an item).
fn fill_column(db: &rusqlite::Connection, t: &str, c: &str, holds: Holds, keys: bool, fill: Fill) {
    let rows: Vec<(i64, Option<String>)> = db
        .prepare(&format!(
            "SELECT rowid, \"{c}\" FROM \"{t}\" ORDER BY rowid"
        ))
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1).ok().flatten())))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (i, (rowid, old)) in rows.into_iter().enumerate() {
        let new = match (holds, old) {
            (Holds::Json, Some(text)) => {
                let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                let maps: Vec<String> = std::iter::once(String::new())
                    .chain(all_keys(&v).into_iter().filter(|_| keys))
                    .collect();
                let mut holder = serde_json::json!({ "": v });
                let maps = if keys { &maps[..] } else { &[] };
                let first = Fill {
                    megabytes: usize::from(i == 0),
                    ..fill
                };
                fill_strings(&mut holder, &[], maps, first);
                holder[""].take().to_string()
            }
            (Holds::Lines, Some(text)) => text
                .lines()
                .enumerate()
                .map(|(j, _)| fill.text(100 * i + j, i == 0 && j == 0).replace('\n', ""))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => fill.text(i, i == 0),
        };
        db.execute(
            &format!("UPDATE \"{t}\" SET \"{c}\" = ?1 WHERE rowid = ?2"),
            rusqlite::params![new, rowid],
        )
        .unwrap();
    }
}

fn all_keys(v: &serde_json::Value) -> Vec<String> {
    let mut keys = Vec::new();
    fn collect(v: &serde_json::Value, keys: &mut Vec<String>) {
        match v {
            serde_json::Value::Array(items) => items.iter().for_each(|i| collect(i, keys)),
            serde_json::Value::Object(map) => {
                for (k, item) in map {
                    keys.push(k.clone());
                    collect(item, keys);
                }
            }
            _ => {}
        }
    }
    collect(v, &mut keys);
    keys
}

#[test]
fn outside_text_in_every_database_column_shows_no_control_byte_and_forges_no_line() {
    let site = Site::new();
    let pristine = site.dir.path().join("pristine.db");
    {
        let cfg = slurm_imex_settings::Config::default();
        let mut db = slurm_imex_jobdb::JobDb::open(&pristine, cfg.database.busy_timeout.0).unwrap();
        db.record_job(&full_job_row()).unwrap();
        db.record_imex_event(&slurm_imex_jobsummary::imex_event::ImexEvent::new(
            4242,
            "n1",
            1_790_000_100_000,
            slurm_imex_jobsummary::imex_event::ImexEventKind::DaemonDied,
            "killed by signal 9",
        ))
        .unwrap();
    }
    let conn = rusqlite::Connection::open(&pristine).unwrap();
    // What the writer keeps there only after pruning.
    conn.execute(
        "INSERT OR IGNORE INTO meta (key, value) VALUES ('last_prune', '1790000000')",
        [],
    )
    .unwrap();
    let columns = text_columns(&conn);
    drop(conn);
    assert!(columns.len() > 20, "{columns:?}");
    let (mut cases, mut shown) = (0, 0);
    for (t, c, holds) in &columns {
        for keys in [false, true]
            .into_iter()
            .filter(|k| !k || *holds == Holds::Json)
        {
            let mut runs = Vec::new();
            for fill in [Fill::hostile(1), Fill::benign(1)] {
                let db = site.dir.path().join(if fill.hostile {
                    "hostile.db"
                } else {
                    "benign.db"
                });
                std::fs::copy(&pristine, &db).unwrap();
                fill_column(
                    &rusqlite::Connection::open(&db).unwrap(),
                    t,
                    c,
                    *holds,
                    keys,
                    fill,
                );
                let db = db.to_str().unwrap().to_string();
                runs.push(
                    [&["history"][..], &["show", "4242"], &["gpus"]]
                        .map(|args| site.cli(&[&["--db", db.as_str()][..], args].concat())),
                );
            }
            shown += runs[0]
                .iter()
                .filter(|r| r.stdout.contains("\\x1b[2J\\x1b]0;pwned\\x07"))
                .count();
            for (i, cmd) in ["history", "show", "gpus"].iter().enumerate() {
                assert_same_shape(
                    &format!("{cmd} with {t}.{c} hostile (keys {keys})"),
                    &runs[0][i],
                    &runs[1][i],
                );
                cases += 1;
            }
        }
    }
    eprintln!(
        "bad-input: {cases} hostile database cases, {} columns, the hostile text shown (escaped) in {shown}",
        columns.len()
    );
    // Most columns are shown by one command or another (a verdict is read
    // as one of three words, a UUID is not shown): 18 when written.
    assert!(
        shown >= 15,
        "the hostile text is shown in only {shown} cases"
    );
}

/// `slurm-imex status` on a node whose state directory and IMEX daemon
/// answer hostile text: the job's record (every string of it), the
/// daemon's `-q`, `-N -j` and `-N` answers.
#[test]
fn outside_text_from_the_state_directory_and_the_ctl_answers_is_shown_printable_by_status() {
    use common::hostile::unreplaceable;
    use slurm_imex_core::state::job_record::{JobRecord, Outcome};
    let record = JobRecord {
        job_id: 7,
        channel: Some(5),
        server_port: 50_000,
        nodes: vec!["n1".into(), "n2".into()],
        domain: Some("block1".into()),
        rack_source: Some("/etc/slurm/topology.conf (sha256 0123456789ab)".into()),
        outcome: Outcome::Failed {
            cause: "peer n2 never READY".into(),
            node_fault: true,
        },
        prolog_ms: Some(900),
    };
    let record = serde_json::to_value(&record).unwrap();
    common::hostile::assert_every_field_set::<JobRecord>(&record);
    let keep = unreplaceable::<JobRecord>(&record);
    let domain: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../data/samples/imex-ctl-N-j-1.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let mut runs = Vec::new();
    for fill in [Fill::hostile(1), Fill::benign(1)] {
        let dir = scratch();
        let p = |n: &str| dir.path().join(n);
        std::fs::create_dir_all(p("state/jobs")).unwrap();
        write_mode(&p("state/domain.owner"), b"7\n", 0o644);
        let mut r = record.clone();
        fill_strings(&mut r, &keep, &[], fill);
        write_mode(&p("state/jobs/7.json"), r.to_string().as_bytes(), 0o644);
        let mut d = domain.clone();
        fill_strings(&mut d, &[], &[], fill);
        write_mode(&p("ctl-N-j.json"), d.to_string().as_bytes(), 0o644);
        write_mode(&p("ctl-q.txt"), fill.text(0, true).as_bytes(), 0o644);
        write_mode(&p("ctl-N.txt"), fill.text(1, false).as_bytes(), 0o644);
        let ctl = format!(
            "#!/bin/sh\ncase \"$*\" in\n*-q*) cat '{0}/ctl-q.txt' ;;\n*-j*) cat '{0}/ctl-N-j.json' ;;\n*) cat '{0}/ctl-N.txt' ;;\nesac\n",
            dir.path().display()
        );
        write_mode(&p("nvidia-imex-ctl"), ctl.as_bytes(), 0o755);
        let cfg = format!(
            "[node]\nstate_dir = \"{}\"\n[imex.daemon]\nmanager = \"process\"\nctl = \"{}\"\njob_config = \"{}\"\n",
            p("state").display(),
            p("nvidia-imex-ctl").display(),
            p("job.cfg").display()
        );
        write_mode(&p("imex.toml"), cfg.as_bytes(), 0o644);
        let ran = run(
            &bin("slurm-imex"),
            &["--config", p("imex.toml").to_str().unwrap(), "status"],
            &[],
        );
        runs.push((ran, dir));
    }
    let (hostile, benign) = (&runs[0].0, &runs[1].0);
    assert_same_shape("status", hostile, benign);
    assert_eq!(hostile.code, Some(0), "{}", hostile.stderr);
    for shown in ["nodes:", "members from:", "local state:", "domain:"] {
        let line = hostile
            .stdout
            .lines()
            .find(|l| l.starts_with(shown))
            .unwrap_or_else(|| panic!("no {shown:?} line: {}", hostile.stdout));
        assert!(line.contains("\\x1b[2J"), "{line}");
    }
}

/// A TOML basic string holding `s` (its control characters escaped, as
/// TOML wants them).
fn toml_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out + "\""
}

/// `slurm-imex doctor` on a node whose files and GPUs hold hostile text:
/// the NVML strings (driver version, serial, name, UUID), slurm.conf's
/// values, the rack map's rack, the IMEX daemon's config. Each doctor line
/// is one printable line, as many as the same node with the text benign
/// gets, and as many as the checks its `--json` lists.
#[test]
fn outside_text_in_what_doctor_reads_is_shown_printable_one_line_a_check() {
    let mut runs = Vec::new();
    for fill in [Fill::hostile(1), Fill::benign(1)] {
        let dir = scratch();
        let p = |n: &str| dir.path().join(n).display().to_string();
        // Line-based files cannot hold a newline inside a value.
        let line = |n: usize| fill.text(n, false).replace('\n', "");
        let scenario = format!(
            "driver_version = {}\n[[gpu]]\nuuid = {}\nserial = {}\nname = {}\npci_bus_id = \"00000000:1A:00.0\"\n\
             accounting = true\nfabric = {{ state = \"completed\", clique_id = 7, cluster_uuid = {} }}\n",
            toml_str(&fill.text(0, true)),
            toml_str(&fill.text(1, false)),
            toml_str(&fill.text(2, false)),
            toml_str(&fill.text(3, false)),
            toml_str(&fill.text(4, false)),
        );
        write_mode(&dir.path().join("nvml.toml"), scenario.as_bytes(), 0o644);
        let map = format!(
            "[[rack]]\nname = {}\nclique = {}\nnodes = \"n[1-2]\"\n",
            toml_str(&fill.text(5, false)),
            toml_str(&fill.text(6, false))
        );
        write_mode(&dir.path().join("imex-racks.toml"), map.as_bytes(), 0o644);
        let slurm_conf = format!(
            "ClusterName={}\nPrologFlags={}\nSelectType={}\nSwitchType={}\n",
            line(7),
            line(8),
            line(9),
            line(10)
        );
        write_mode(&dir.path().join("slurm.conf"), slurm_conf.as_bytes(), 0o644);
        let daemon = format!(
            "SERVER_PORT=50000\nIMEX_CMD_BIND_INTERFACE_IP={}\nIMEX_NODE_CONFIG_FILE={}\n",
            line(11),
            line(12)
        );
        write_mode(&dir.path().join("imex.cfg"), daemon.as_bytes(), 0o644);
        let config = format!(
            "[node]\nstate_dir = \"{}\"\n[imex]\nrack_map = \"{}\"\n[imex.daemon]\nbase_config = \"{}\"\n\
             [gpu]\nnvml_library = \"{}\"\n[health]\nexpected_gpus = 1\ngate_timeout = \"3s\"\n\
             [database]\npath = \"{}\"\n[slurm]\nconfig = \"{}\"\ntopology = \"none\"\nscontrol = \"/bin/false\"\n",
            p("state"),
            p("imex-racks.toml"),
            p("imex.cfg"),
            fake_nvml().display(),
            p("db/jobs.db"),
            p("slurm.conf"),
        );
        write_mode(&dir.path().join("imex.toml"), config.as_bytes(), 0o644);
        let env = [
            ("SLURM_IMEX_CONFIG", os(&p("imex.toml"))),
            ("FAKE_NVML_SCENARIO", os(&p("nvml.toml"))),
            ("SLURMD_NODENAME", os("n1")),
        ];
        let text = run(&bin("slurm-imex"), &["doctor"], &env);
        let json = run(&bin("slurm-imex"), &["--json", "doctor"], &env);
        runs.push((text, json, dir));
    }
    let (hostile, benign) = (&runs[0].0, &runs[1].0);
    // A check's verdict may differ (a daemon config holding an ESC is not
    // text): its line is the same check's, one line.
    let check = |l: &str| -> String {
        match l.split_whitespace().next() {
            Some("doctor:") => "doctor:".into(),
            _ => l.split_whitespace().nth(1).unwrap_or("").into(),
        }
    };
    common::hostile::assert_same_shape_by("doctor", hostile, benign, check);
    let report: serde_json::Value = serde_json::from_str(&runs[0].1.stdout).unwrap();
    let checks = report["checks"].as_array().unwrap().len();
    assert_eq!(
        hostile.stdout.lines().count(),
        checks + 1,
        "one line a check, and the summary: {}",
        hostile.stdout
    );
    assert!(
        hostile.stdout.contains("ClusterName=v00007"),
        "slurm.conf's value is quoted: {}",
        hostile.stdout
    );
}

/// `slurm-imex topology` (a topology.conf, `--check`) on a cluster whose
/// `scontrol show node -o` answers hostile node names and cliques (one
/// node a line: a newline cannot be in one).
#[test]
fn outside_text_in_scontrols_answer_is_shown_printable_by_topology() {
    let uuid = "dc6e40c4-d722-4357-9ba6-5291dd461278";
    let mut runs = Vec::new();
    for fill in [Fill::hostile(1), Fill::benign(1)] {
        let dir = scratch();
        let p = |n: &str| dir.path().join(n).display().to_string();
        let line = |n: usize| fill.text(n, n == 0).replace('\n', "");
        let mut answer = String::new();
        for i in 0..4 {
            answer.push_str(&format!(
                "NodeName=gb{i:02} State=IDLE Extra={{\"nvlink_clique\":\"{uuid}.1\"}}\n"
            ));
        }
        answer.push_str(&format!(
            "NodeName={} State=IDLE Extra={{\"nvlink_clique\":\"{}\"}}\n",
            line(0),
            line(1)
        ));
        answer.push_str(&format!(
            "NodeName=gb99 State=IDLE Extra={{\"nvlink_clique\":\"{uuid}.{}\"}} Comment={}\n",
            line(2),
            line(3)
        ));
        write_mode(&dir.path().join("answer.txt"), answer.as_bytes(), 0o644);
        let scontrol = format!(
            "#!/bin/sh\n[ \"$1\" = show ] || exit 1\ncat '{}'\n",
            p("answer.txt")
        );
        write_mode(&dir.path().join("scontrol"), scontrol.as_bytes(), 0o755);
        // The topology file is checked before it is used (a bad block name
        // is refused naming it): here a valid one the answer disagrees with.
        let topology = "BlockName=b1 Nodes=gb[00-02]\nBlockName=b2 Nodes=gb[03-04],gb99\n";
        write_mode(
            &dir.path().join("topology.conf"),
            topology.as_bytes(),
            0o644,
        );
        let config = format!(
            "[node]\nstate_dir = \"{}\"\n[imex]\nrack_map = \"{}\"\n[slurm]\nscontrol = \"{}\"\n\
             config = \"none\"\ntopology = \"{}\"\n[health]\nenabled = false\n",
            p("state"),
            p("imex-racks.toml"),
            p("scontrol"),
            p("topology.conf"),
        );
        write_mode(&dir.path().join("imex.toml"), config.as_bytes(), 0o644);
        let cfg = p("imex.toml");
        let ran: Vec<Ran> = [
            &["topology"][..],
            &["topology", "--check"],
            &["topology", "--yaml"],
        ]
        .into_iter()
        .map(|args| {
            run(
                &bin("slurm-imex"),
                &[&["--config", cfg.as_str()][..], args].concat(),
                &[],
            )
        })
        .collect();
        runs.push((ran, dir));
    }
    for (i, case) in ["topology", "topology --check", "topology --yaml"]
        .iter()
        .enumerate()
    {
        assert_same_shape(case, &runs[0].0[i], &runs[1].0[i]);
    }
    assert!(
        runs[0].0[0]
            .stdout
            .contains("(run slurm-imex check there): v00000\\x1b[2J\\x1b]0;pwned\\x07"),
        "{}",
        runs[0].0[0].stdout
    );
}
