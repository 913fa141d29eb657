//! The admin CLI used carelessly: closed pipes, a full disk on stdout,
//! absurd flags, and databases that are corrupt, hand-edited or not
//! databases at all. It never panics: one line, or the conventional
//! SIGPIPE end.

mod common;
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
