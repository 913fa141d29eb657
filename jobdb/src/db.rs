//! The local job database (SQLite, one per node): opening it safely
//! (root-owned files, no group/world write, no symlinks), WAL with a busy
//! timeout so concurrent prologs and epilogs never fail on a lock, and the
//! versioned schema with its migrations. Writes are in `crate::write`, reads
//! in `crate::query`.

/// Why the epilog cannot write the database at `path` right now, if it
/// cannot: its filesystem is read-only or (nearly) full. For the CLI, which
/// can still read what is there.
pub fn storage_problem(path: &Path) -> Option<String> {
    if let Some(line) = read_only_problem(path) {
        return Some(line);
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty())?;
    let st = nix::sys::statvfs::statvfs(dir).ok()?;
    let free = (st.blocks_available() as u64).saturating_mul(st.fragment_size() as u64);
    (free < 256 * 1024).then(|| {
        format!(
            "the filesystem of {} has only {} KiB free: the epilog cannot record jobs (free space)",
            dir.display(),
            free / 1024
        )
    })
}

/// The line saying the database's filesystem is read-only, when it is.
fn read_only_problem(path: &Path) -> Option<String> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty())?;
    let st = nix::sys::statvfs::statvfs(dir).ok()?;
    st.flags()
        .contains(nix::sys::statvfs::FsFlags::ST_RDONLY)
        .then(|| {
            format!(
                "{} is on a read-only filesystem: the epilog cannot record jobs (remount it \
                 read-write)",
                dir.display()
            )
        })
}

use rusqlite::{Connection, OpenFlags};
use slurm_imex_core::error::{Error, Result};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Schema migrations; index + 1 is the `PRAGMA user_version` they lead to.
pub(crate) const MIGRATIONS: &[&str] = &[
    // v1
    r#"
    CREATE TABLE jobs (
        id INTEGER PRIMARY KEY,
        job_id INTEGER NOT NULL,
        node TEXT NOT NULL,
        user TEXT,
        uid INTEGER,
        start_ts INTEGER NOT NULL,
        end_ts INTEGER,
        imex INTEGER NOT NULL DEFAULT 0,
        verdict TEXT NOT NULL,
        prolog_verdict TEXT,
        prolog_reasons TEXT,
        prolog_ms INTEGER,
        epilog_verdict TEXT,
        epilog_reasons TEXT,
        epilog_ms INTEGER,
        UNIQUE (job_id, node, start_ts)
    );
    CREATE INDEX jobs_start ON jobs (start_ts);
    CREATE INDEX jobs_job ON jobs (job_id);
    CREATE TABLE job_gpus (
        id INTEGER PRIMARY KEY,
        job_row INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
        gpu_index INTEGER NOT NULL,
        uuid TEXT NOT NULL,
        serial TEXT NOT NULL,
        pci TEXT NOT NULL,
        name TEXT,
        energy_mj INTEGER,
        energy_reset INTEGER NOT NULL DEFAULT 0,
        ecc_sbe INTEGER,
        ecc_dbe INTEGER,
        retired_pages INTEGER,
        remapped_correctable INTEGER,
        remapped_uncorrectable INTEGER,
        remap_pending_end INTEGER,
        remap_failure_end INTEGER,
        pcie_replays INTEGER,
        throttle_ns TEXT,
        nvlink_errors TEXT,
        max_memory_bytes INTEGER,
        xid_count INTEGER NOT NULL DEFAULT 0,
        xids_drain_class INTEGER NOT NULL DEFAULT 0,
        xids_restart_app INTEGER NOT NULL DEFAULT 0,
        verdict TEXT NOT NULL,
        reasons TEXT
    );
    CREATE INDEX job_gpus_job ON job_gpus (job_row);
    CREATE INDEX job_gpus_serial ON job_gpus (serial);
    CREATE INDEX job_gpus_uuid ON job_gpus (uuid);
    CREATE TABLE xid_events (
        id INTEGER PRIMARY KEY,
        job_row INTEGER REFERENCES jobs (id) ON DELETE CASCADE,
        node TEXT NOT NULL,
        ts INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        pci TEXT NOT NULL,
        serial TEXT,
        xid INTEGER NOT NULL,
        bucket TEXT NOT NULL,
        drain_class INTEGER NOT NULL,
        pid INTEGER,
        process TEXT,
        message TEXT
    );
    CREATE INDEX xid_events_job ON xid_events (job_row);
    CREATE TABLE processes (
        id INTEGER PRIMARY KEY,
        job_row INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
        serial TEXT,
        pid INTEGER NOT NULL,
        gpu_util INTEGER,
        mem_util INTEGER,
        max_memory_bytes INTEGER,
        time_ms INTEGER
    );
    CREATE INDEX processes_job ON processes (job_row);
    -- Lifetime totals per board (kept when old job rows are pruned).
    CREATE TABLE gpu_totals (
        serial TEXT PRIMARY KEY,
        uuid TEXT NOT NULL,
        last_node TEXT NOT NULL,
        last_seen INTEGER NOT NULL,
        jobs INTEGER NOT NULL DEFAULT 0,
        drains INTEGER NOT NULL DEFAULT 0,
        warns INTEGER NOT NULL DEFAULT 0,
        energy_mj INTEGER NOT NULL DEFAULT 0,
        xids INTEGER NOT NULL DEFAULT 0,
        xids_drain_class INTEGER NOT NULL DEFAULT 0,
        xids_restart_app INTEGER NOT NULL DEFAULT 0,
        xids_other INTEGER NOT NULL DEFAULT 0
    );
    -- Per-board daily sums (UTC day of job start), so `gpus --since` reads
    -- whole days from here and only the partial first day from job_gpus.
    CREATE TABLE gpu_daily (
        serial TEXT NOT NULL,
        day INTEGER NOT NULL,
        uuid TEXT NOT NULL,
        last_node TEXT NOT NULL,
        last_seen INTEGER NOT NULL,
        jobs INTEGER NOT NULL DEFAULT 0,
        drains INTEGER NOT NULL DEFAULT 0,
        warns INTEGER NOT NULL DEFAULT 0,
        energy_mj INTEGER NOT NULL DEFAULT 0,
        xids INTEGER NOT NULL DEFAULT 0,
        xids_drain_class INTEGER NOT NULL DEFAULT 0,
        xids_restart_app INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (serial, day)
    );
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    "#,
    // v2: lifetime counters the Prometheus export needs (metrics.rs), kept
    // like gpu_totals when job rows are pruned; backfilled from what v1 kept.
    r#"
    ALTER TABLE gpu_totals ADD COLUMN pci TEXT NOT NULL DEFAULT '';
    ALTER TABLE gpu_totals ADD COLUMN remapped_rows INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE gpu_totals ADD COLUMN ecc_dbe INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE gpu_totals ADD COLUMN retired_pages INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE gpu_totals ADD COLUMN energy_resets INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE gpu_totals ADD COLUMN last_verdict TEXT NOT NULL DEFAULT 'PASS';
    ALTER TABLE gpu_totals ADD COLUMN remap_pending INTEGER NOT NULL DEFAULT 0;
    -- Per board, per XID catalog class ('xid') and per throttle reason ('throttle_ns').
    CREATE TABLE gpu_counters (
        serial TEXT NOT NULL,
        kind TEXT NOT NULL,
        key TEXT NOT NULL,
        value INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (serial, kind, key)
    );
    UPDATE gpu_totals SET
        pci = COALESCE((SELECT g.pci FROM job_gpus g WHERE CASE WHEN g.serial = '' THEN g.uuid ELSE g.serial END = gpu_totals.serial ORDER BY g.id DESC LIMIT 1), ''),
        remapped_rows = COALESCE((SELECT SUM(COALESCE(g.remapped_correctable, 0) + COALESCE(g.remapped_uncorrectable, 0)) FROM job_gpus g WHERE CASE WHEN g.serial = '' THEN g.uuid ELSE g.serial END = gpu_totals.serial), 0),
        ecc_dbe = COALESCE((SELECT SUM(g.ecc_dbe) FROM job_gpus g WHERE CASE WHEN g.serial = '' THEN g.uuid ELSE g.serial END = gpu_totals.serial), 0),
        retired_pages = COALESCE((SELECT SUM(g.retired_pages) FROM job_gpus g WHERE CASE WHEN g.serial = '' THEN g.uuid ELSE g.serial END = gpu_totals.serial), 0),
        energy_resets = COALESCE((SELECT SUM(g.energy_reset) FROM job_gpus g WHERE CASE WHEN g.serial = '' THEN g.uuid ELSE g.serial END = gpu_totals.serial), 0);
    INSERT INTO gpu_counters (serial, kind, key, value)
        SELECT COALESCE(serial, pci), 'xid', LOWER(bucket), COUNT(*) FROM xid_events GROUP BY 1, 3;
    "#,
    // v3: the NVLink block of the job's IMEX domain on this node ([imex]
    // span = "split"); NULL when the domain was the whole job, or no --imex.
    r#"
    ALTER TABLE jobs ADD COLUMN imex_domain TEXT;
    "#,
    // v4: the file that domain's members came from (the topology file, or
    // the rack map with its sha256), to compare between nodes afterwards.
    r#"
    ALTER TABLE jobs ADD COLUMN imex_rack_source TEXT;
    "#,
    // v5: how the job used each GPU, from NVML accounting (the prolog turns
    // accounting mode on): its processes, their time-weighted mean GPU and
    // memory utilization, busy time and time on the GPU. NULL usage_processes:
    // not known (accounting off, or rows from before v5); 0: held, never used.
    // A process's start (µs since the epoch) and whether it still ran.
    r#"
    ALTER TABLE job_gpus ADD COLUMN usage_processes INTEGER;
    ALTER TABLE job_gpus ADD COLUMN gpu_util_pct REAL;
    ALTER TABLE job_gpus ADD COLUMN mem_util_pct REAL;
    ALTER TABLE job_gpus ADD COLUMN gpu_busy_ms INTEGER;
    ALTER TABLE job_gpus ADD COLUMN gpu_process_ms INTEGER;
    ALTER TABLE processes ADD COLUMN start_us INTEGER;
    ALTER TABLE processes ADD COLUMN running INTEGER;
    "#,
    // v6: what the prolog concluded of the job's IMEX domain here, for
    // `slurm-imex job`: its channel, how long the domain took to be ready,
    // or why the job could not use IMEX and whether the node was blamed.
    // All NULL without --imex. And an index for the latest jobs by end.
    r#"
    ALTER TABLE jobs ADD COLUMN imex_channel INTEGER;
    ALTER TABLE jobs ADD COLUMN imex_ready_ms INTEGER;
    ALTER TABLE jobs ADD COLUMN imex_failure TEXT;
    ALTER TABLE jobs ADD COLUMN imex_node_fault INTEGER;
    -- The per-job export reads the node's latest jobs by end at every epilog.
    CREATE INDEX jobs_end ON jobs (end_ts);
    "#,
    // v7: what the IMEX domain watcher (`slurm-imex-watch`) saw happen to
    // a running job's domain on this node (slurm_imex_jobsummary::imex_event),
    // written while the job runs, before its row exists: keyed by job and
    // node, not by a job row (crate::imex_events). Pruned by time.
    r#"
    CREATE TABLE imex_events (
        id INTEGER PRIMARY KEY,
        job_id INTEGER NOT NULL,
        node TEXT NOT NULL,
        ts_ms INTEGER NOT NULL,
        kind TEXT NOT NULL,
        detail TEXT NOT NULL
    );
    CREATE INDEX imex_events_job ON imex_events (job_id, node);
    "#,
    // v8: the GPU recovery action the driver asked for at the job's end
    // (NVML field 230; NULL when not read, and for rows from before v8),
    // and the board's after its last job for the metrics (0, NONE, when
    // not read: as remap_pending).
    r#"
    ALTER TABLE job_gpus ADD COLUMN recovery_action_end INTEGER;
    ALTER TABLE gpu_totals ADD COLUMN recovery_action INTEGER NOT NULL DEFAULT 0;
    "#,
];

pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

pub struct JobDb {
    pub(crate) conn: Connection,
    path: PathBuf,
}

pub(crate) fn err(path: &Path, what: &str, e: impl std::fmt::Display) -> Error {
    Error::new(format!("job database {}: {what}: {e}", path.display()))
}

/// `path` as the path of an SQLite URI: the characters a URI gives a
/// meaning to (`%`, `?`, `#`) escaped.
fn uri_path(path: &Path) -> String {
    path.to_string_lossy()
        .replace('%', "%25")
        .replace('?', "%3f")
        .replace('#', "%23")
}

/// Refuse files an unprivileged user could have planted or can modify.
fn check_ownership(path: &Path, what: &str) -> Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(err(path, "cannot stat", e)),
    };
    let euid = nix::unistd::geteuid().as_raw();
    if meta.file_type().is_symlink() {
        return Err(Error::new(format!(
            "job database {} {what} is a symlink: refusing to follow it",
            path.display()
        )));
    }
    if meta.uid() != euid {
        return Err(Error::new(format!(
            "job database {} {what} is owned by uid {}, not {euid}: refusing it (chown it or remove it)",
            path.display(),
            meta.uid()
        )));
    }
    if meta.permissions().mode() & 0o022 != 0 {
        return Err(Error::new(format!(
            "job database {} {what} has mode {:o}, writable by others: refusing it (chmod go-w)",
            path.display(),
            meta.permissions().mode() & 0o7777
        )));
    }
    Ok(())
}

impl JobDb {
    /// Open (creating if needed) with safe permissions, WAL, busy timeout,
    /// foreign keys, and the schema migrated to the current version.
    /// On a read-only filesystem it fails at once saying so: SQLite's own
    /// words there ("cannot enable WAL", "unable to open database file")
    /// would send the admin after a corrupt file.
    pub fn open(path: &Path, busy_timeout: Duration) -> Result<JobDb> {
        if let Some(line) = read_only_problem(path) {
            return Err(Error::io(format!(
                "job database {}: {line}",
                path.display()
            )));
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.exists() {
                slurm_imex_core::fsutil::ensure_dir(dir, 0o700)?;
            }
            check_ownership(dir, "directory")?;
        }
        check_ownership(path, "file")?;
        let existed = path.exists();
        let conn = Connection::open(path).map_err(|e| err(path, "cannot open", e))?;
        if !existed {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| err(path, "cannot chmod", e))?;
        }
        conn.busy_timeout(busy_timeout)
            .map_err(|e| err(path, "cannot set busy timeout", e))?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(|e| err(path, "cannot enable WAL (corrupt or not a database?)", e))?;
        // FULL: every commit is fsynced, so a record the epilog wrote survives a crash.
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(|e| err(path, "pragma synchronous", e))?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(|e| err(path, "pragma foreign_keys", e))?;
        let mut db = JobDb {
            conn,
            path: path.to_path_buf(),
        };
        db.migrate()?;
        Ok(db)
    }

    /// Open an existing database to read it (the CLI, the Prometheus
    /// export): as [`JobDb::open`], except on a read-only filesystem, where
    /// it is read as it is: nothing is written, created or migrated (a
    /// schema older than this slurm-imex's is refused in one line, since
    /// it cannot be migrated there).
    pub fn open_to_read(path: &Path, busy_timeout: Duration) -> Result<JobDb> {
        match read_only_problem(path) {
            Some(line) => JobDb::open_read_only(path, busy_timeout, &line),
            None => JobDb::open(path, busy_timeout),
        }
    }

    /// Read-only, on a read-only filesystem (`line` says so): SQLite reads
    /// a WAL database there when its -shm and -wal files are left;
    /// otherwise (the last writer closed cleanly and removed them) it is
    /// opened immutable, which is exact, since nothing can write it.
    fn open_read_only(path: &Path, busy_timeout: Duration, line: &str) -> Result<JobDb> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            check_ownership(dir, "directory")?;
        }
        check_ownership(path, "file")?;
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI;
        let readable = |conn: Connection| -> rusqlite::Result<(Connection, i64)> {
            conn.busy_timeout(busy_timeout)?;
            let version = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
            Ok((conn, version))
        };
        let immutable = format!("file:{}?immutable=1", uri_path(path));
        let (conn, version) = Connection::open_with_flags(path, flags)
            .and_then(readable)
            .or_else(|_| Connection::open_with_flags(&immutable, flags).and_then(readable))
            .map_err(|e| err(path, &format!("cannot read it ({line})"), e))?;
        if version != SCHEMA_VERSION {
            return Err(Error::new(format!(
                "job database {} has schema v{version} and this slurm-imex reads \
                 v{SCHEMA_VERSION}, which it cannot migrate there: {line}; then any slurm-imex \
                 command run as root migrates it",
                path.display()
            )));
        }
        Ok(JobDb {
            conn,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn migrate(&mut self) -> Result<()> {
        let path = self.path.clone();
        let version: i64 = self
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(|e| err(&path, "cannot read the schema version (corrupt?)", e))?;
        if version > SCHEMA_VERSION {
            return Err(Error::new(format!(
                "job database {} has schema v{version}, newer than this slurm-imex (v{SCHEMA_VERSION}): upgrade slurm-imex",
                path.display()
            )));
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            let tx = self
                .conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(|e| err(&path, "cannot start a migration", e))?;
            // Another process may have migrated while we waited for the lock.
            let now: i64 = tx
                .pragma_query_value(None, "user_version", |r| r.get(0))
                .map_err(|e| err(&path, "schema version", e))?;
            if now > i as i64 {
                continue;
            }
            tx.execute_batch(sql)
                .map_err(|e| err(&path, &format!("migration to v{} failed", i + 1), e))?;
            tx.pragma_update(None, "user_version", (i + 1) as i64)
                .map_err(|e| err(&path, "cannot set the schema version", e))?;
            tx.commit()
                .map_err(|e| err(&path, "cannot commit a migration", e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_private_files_and_migrates_once() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("state/jobs.db");
        let db = JobDb::open(&p, Duration::from_secs(1)).unwrap();
        let v: i64 = db
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(v, SCHEMA_VERSION);
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(
            std::fs::metadata(p.parent().unwrap())
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o700
        );
        let jm: String = db
            .conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .unwrap();
        assert_eq!(jm, "wal");
        drop(db);
        JobDb::open(&p, Duration::from_secs(1)).unwrap();
    }

    #[test]
    fn refuses_unsafe_permissions_and_symlinks() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("jobs.db");
        JobDb::open(&p, Duration::from_secs(1)).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = JobDb::open(&p, Duration::from_secs(1))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("writable by others") && e.contains("chmod go-w"),
            "{e}"
        );
        let link = d.path().join("link.db");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        let e = JobDb::open(&link, Duration::from_secs(1))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("symlink"), "{e}");
    }

    #[test]
    fn a_path_is_escaped_for_an_sqlite_uri() {
        assert_eq!(uri_path(Path::new("/var/lib/jobs.db")), "/var/lib/jobs.db");
        assert_eq!(uri_path(Path::new("/a?b#c%d")), "/a%3fb%23c%25d");
    }

    #[test]
    fn on_a_writable_filesystem_reading_opens_as_writing_does() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("jobs.db");
        drop(JobDb::open(&p, Duration::from_secs(1)).unwrap());
        let db = JobDb::open_to_read(&p, Duration::from_secs(1)).unwrap();
        let v: i64 = db
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(v, SCHEMA_VERSION);
        assert_eq!(read_only_problem(&p), None);
    }

    #[test]
    fn corrupt_or_newer_databases_are_clear_errors() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("jobs.db");
        std::fs::write(&p, vec![0x42u8; 8192]).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = JobDb::open(&p, Duration::from_secs(1))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("jobs.db"), "{e}");
        let p2 = d.path().join("new.db");
        let db = JobDb::open(&p2, Duration::from_secs(1)).unwrap();
        db.conn.pragma_update(None, "user_version", 99).unwrap();
        drop(db);
        let e = JobDb::open(&p2, Duration::from_secs(1))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("newer than this slurm-imex"), "{e}");
    }
}
