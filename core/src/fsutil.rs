//! Crash-safe file writes: everything the prolog and epilog write as root goes
//! through `write_atomic`, so a reader never sees a half-written file; and
//! bounded, non-blocking reads of config files others maintain.

use crate::error::{Error, Result};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// An unpredictable suffix for temporary names (getrandom), so nobody can
/// plant a file or symlink at the name we are about to create.
fn random_suffix() -> String {
    let mut bytes = [0u8; 8];
    // SAFETY: getrandom writes at most `len` bytes into the buffer.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if n != bytes.len() as isize {
        // No entropy yet (very early boot): time and pid still differ per run.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        bytes = (t ^ (std::process::id() as u64).rotate_left(32)).to_le_bytes();
    }
    crate::hex::encode(&bytes)
}

/// Write `contents` to `path` atomically: its directory (which must exist)
/// is held to the trust boundary ([`crate::trust`]), then the file is
/// written as [`write_atomic_in`] does: an unpredictable temporary name
/// created `O_CREAT|O_EXCL|O_NOFOLLOW`, fsync, rename over the target (a
/// symlink there is replaced, never followed), fsync the directory.
/// `mode` is applied to the new file.
pub fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Error::io(format!("{}: not a file path", path.display())))?;
    if !dir.is_absolute() {
        return write_atomic_in(dir, name, contents, mode).map(|_| ());
    }
    crate::trust::check(dir, crate::trust::Expect::Dir, "directory")?;
    // A trusted symlinked directory is fine: write where it leads.
    let real = fs::canonicalize(dir)
        .map_err(|e| Error::io(format!("cannot resolve {}: {e}", dir.display())))?;
    write_atomic_in(&real, name, contents, mode).map(|_| ())
}

/// Write `name` in `dir` atomically through a directory file descriptor:
/// the directory is opened `O_DIRECTORY|O_NOFOLLOW` and must be owned by
/// root (or the caller) and writable by nobody else; the temporary file is
/// created and renamed relative to that descriptor, so swapping a parent
/// after the open cannot redirect the write. Used directly for a directory
/// whose *parents* another account owns (Debian's /var/lib/prometheus is the
/// prometheus user's); [`write_atomic`] adds the full path check.
pub fn write_atomic_in(dir: &Path, name: &str, contents: &[u8], mode: u32) -> Result<PathBuf> {
    use nix::fcntl::{openat, renameat, OFlag};
    use nix::sys::stat::Mode;
    use std::os::fd::{AsRawFd, FromRawFd};
    let target = dir.join(name);
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        Error::io(format!("cannot {what} {}: {e}", target.display()))
    };
    let dir_file = open_trusted_dir(dir)?;
    let fd = dir_file.as_raw_fd();
    let tmp = format!(
        ".{name}{TMP_MARK}{}.{}",
        std::process::id(),
        random_suffix()
    );
    let tmp_fd = openat(
        Some(fd),
        tmp.as_str(),
        OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_WRONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(mode),
    )
    .map_err(|e| fail("create a temporary file for", &e))?;
    // SAFETY: openat returned a new descriptor we now own.
    let mut file = unsafe { File::from_raw_fd(tmp_fd) };
    let cleanup = |e: &dyn std::fmt::Display, what: &str| {
        let _ = nix::unistd::unlinkat(
            Some(fd),
            tmp.as_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
        fail(what, e)
    };
    file.write_all(contents).map_err(|e| cleanup(&e, "write"))?;
    file.set_permissions(fs::Permissions::from_mode(mode))
        .map_err(|e| cleanup(&e, "set the mode of"))?;
    file.sync_all().map_err(|e| cleanup(&e, "fsync"))?;
    drop(file);
    renameat(Some(fd), tmp.as_str(), Some(fd), name)
        .map_err(|e| cleanup(&e, "rename into place"))?;
    let _ = dir_file.sync_all();
    Ok(target)
}

/// Open `dir` `O_DIRECTORY|O_NOFOLLOW` and hold it to the rule for a
/// directory we write or delete in: owned by root (or the caller) and
/// writable by nobody else. Work done relative to the descriptor cannot be
/// redirected by swapping a parent afterwards.
fn open_trusted_dir(dir: &Path) -> Result<File> {
    use nix::fcntl::OFlag;
    use nix::sys::stat::Mode;
    use std::os::fd::{FromRawFd, OwnedFd};
    let dir_fd = nix::fcntl::open(
        dir,
        OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| {
        Error::io(format!(
            "cannot open directory {}: {e} (it must be a directory, not a symlink)",
            dir.display()
        ))
    })?;
    // SAFETY: open returned a new descriptor we now own.
    let dir_file = File::from(unsafe { OwnedFd::from_raw_fd(dir_fd) });
    let meta = dir_file
        .metadata()
        .map_err(|e| Error::io(format!("cannot stat directory {}: {e}", dir.display())))?;
    if let Some(problem) = crate::trust::judge(dir, &meta, false) {
        return Err(Error::invalid(format!("refusing directory {problem}")));
    }
    Ok(dir_file)
}

/// Infix of our temporary names: `.<name>.tmp.<pid>.<random>`.
const TMP_MARK: &str = ".tmp.";

/// Remove temporary files that a writer killed before its rename left in
/// `dir` (ours only: `.<name>.tmp.<pid>.<16 hex>`, whose writer pid is gone;
/// a live writer's file is never touched). Listed and unlinked through a
/// trusted directory descriptor, as [`write_atomic_in`] writes: a directory
/// that is missing or that someone else could write is left alone. Returns
/// how many went.
pub fn remove_orphan_temps(dir: &Path) -> usize {
    use nix::unistd::{unlinkat, UnlinkatFlags};
    use std::os::fd::AsRawFd;
    let Ok(dir_file) = open_trusted_dir(dir) else {
        return 0;
    };
    let fd = dir_file.as_raw_fd();
    let Ok(mut listing) = nix::dir::Dir::openat(
        Some(fd),
        ".",
        nix::fcntl::OFlag::O_RDONLY,
        nix::sys::stat::Mode::empty(),
    ) else {
        return 0;
    };
    let orphans: Vec<String> = listing
        .iter()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str().ok().map(str::to_string))
        .filter(|name| {
            orphan_writer_pid(name).is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
        })
        .collect();
    let mut removed = 0;
    for name in orphans {
        if unlinkat(Some(fd), name.as_str(), UnlinkatFlags::NoRemoveDir).is_ok() {
            tracing::info!(
                "removed {} left by a killed writer",
                dir.join(&name).display()
            );
            removed += 1;
        }
    }
    removed
}

/// The writer pid of one of our temporary names, if it is one.
fn orphan_writer_pid(name: &str) -> Option<u32> {
    if !name.starts_with('.') {
        return None;
    }
    let (_, tail) = name.rsplit_once(TMP_MARK)?;
    let (pid, random) = tail.split_once('.')?;
    let hex = random.len() == 16 && random.bytes().all(|b| b.is_ascii_hexdigit());
    hex.then(|| pid.parse().ok()).flatten()
}

/// Create a directory root keeps state in (and its parents) if missing,
/// with `mode` on the last one; then hold it to the trust boundary
/// ([`crate::trust`]): a directory someone else can write is refused.
pub fn ensure_dir(path: &Path, mode: u32) -> Result<()> {
    if !path.is_dir() {
        fs::create_dir_all(path)
            .map_err(|e| Error::io(format!("cannot create directory {}: {e}", path.display())))?;
        fs::set_permissions(path, fs::Permissions::from_mode(mode))
            .map_err(|e| Error::io(format!("cannot chmod {}: {e}", path.display())))?;
    }
    crate::trust::check(path, crate::trust::Expect::Dir, "directory")
}

/// Remove a file; a missing file is not an error (idempotent teardown).
pub fn remove_if_exists(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(format!("cannot remove {}: {e}", path.display()))),
    }
}

/// The last `n` lines of a text file, for failure messages. Reads at most
/// the final 64 KiB so a huge log cannot slow the prolog down.
pub fn tail_lines(path: &Path, n: usize) -> Option<Vec<String>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let start = len.saturating_sub(64 * 1024);
    f.seek(SeekFrom::Start(start)).ok()?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<String> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    Some(lines[lines.len().saturating_sub(n)..].to_vec())
}

/// Read a small text file (a Slurm config file, a state file) like
/// [`read_bounded`]. Invalid UTF-8 is replaced, not fatal: these are files
/// we only search, and Slurm accepts them.
pub fn read_bounded_text(path: &Path, max_bytes: u64) -> Result<String> {
    read_bounded(path, max_bytes).map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
}

/// Read a small file: opened without blocking, so a FIFO put in its place
/// cannot hang a prolog or slurmstepd, refused unless it is a regular file,
/// and refused past `max_bytes`.
pub fn read_bounded(path: &Path, max_bytes: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    let fail =
        |e: &dyn std::fmt::Display| Error::io(format!("cannot read {}: {e}", path.display()));
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| fail(&e))?;
    let meta = file.metadata().map_err(|e| fail(&e))?;
    if !meta.is_file() {
        return Err(fail(&"not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| fail(&e))?;
    if bytes.len() as u64 > max_bytes {
        return Err(fail(&format!("larger than {max_bytes} bytes")));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_content_and_sets_mode() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.cfg");
        write_atomic(&p, b"one\n", 0o600).unwrap();
        write_atomic(&p, b"two\n", 0o644).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "two\n");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o644
        );
        // No temporary file is left behind.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn atomic_write_into_missing_dir_fails_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("nope/f.cfg");
        let e = write_atomic(&p, b"x", 0o644).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
    }

    #[test]
    fn writes_through_a_directory_descriptor_and_refuses_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("textfile");
        fs::create_dir(&d).unwrap();
        fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).unwrap();
        let p = write_atomic_in(&d, "x.prom", b"a 1\n", 0o644).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "a 1\n");
        assert_eq!(fs::read_dir(&d).unwrap().count(), 1);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&d, &link).unwrap();
        let e = write_atomic_in(&link, "x.prom", b"", 0o644).unwrap_err();
        assert!(e.to_string().contains("not a symlink"), "{e}");
        fs::set_permissions(&d, fs::Permissions::from_mode(0o777)).unwrap();
        let e = write_atomic_in(&d, "x.prom", b"", 0o644).unwrap_err();
        assert!(e.to_string().contains("0777"), "{e}");
    }

    #[test]
    fn orphan_temps_of_dead_writers_go_and_others_stay() {
        let dir = tempfile::tempdir().unwrap();
        let p = |n: &str| dir.path().join(n);
        fs::write(p(".a.json.tmp.999999999.0123456789abcdef"), "x").unwrap();
        let mine = format!(".b.json.tmp.{}.0123456789abcdef", std::process::id());
        fs::write(p(&mine), "x").unwrap();
        fs::write(p(".c.tmp.1.notours"), "x").unwrap();
        fs::write(p("d.json"), "x").unwrap();
        assert_eq!(remove_orphan_temps(dir.path()), 1);
        assert!(p(&mine).exists() && p(".c.tmp.1.notours").exists() && p("d.json").exists());
        assert_eq!(remove_orphan_temps(&p("missing")), 0);
        // A directory others could write is not ours to clean.
        let open = p("open");
        fs::create_dir(&open).unwrap();
        fs::write(open.join(".e.json.tmp.999999999.0123456789abcdef"), "x").unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(remove_orphan_temps(&open), 0);
        assert!(open.join(".e.json.tmp.999999999.0123456789abcdef").exists());
    }

    #[test]
    fn tail_returns_last_non_empty_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        fs::write(&p, "a\nb\n\nc\nd\n").unwrap();
        assert_eq!(tail_lines(&p, 2).unwrap(), vec!["c", "d"]);
        assert!(tail_lines(&dir.path().join("none"), 2).is_none());
    }
}
