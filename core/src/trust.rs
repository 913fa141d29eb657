//! The trust boundary for everything root reads or runs: the config file,
//! the directories slurm-imex keeps state in, the files it writes under
//! `/etc/nvidia-imex`, and the programs the config names. The rule is
//! sshd's StrictModes: the object and every directory above it must be
//! owned by root (or by the invoking user, when not root) and writable by
//! nobody else, and a symlink is judged by where it leads. One exception,
//! as in sshd for `/tmp`-like parents: a group/world-writable directory
//! with the sticky bit is accepted as an *ancestor*, since nobody else can
//! replace an entry in it that they do not own.

use crate::error::{Error, Result};
use std::fs::{self, Metadata};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// What the object at the end of the path must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// A regular file we read (config, map file, library).
    File,
    /// A directory we create files in (state, database, `/etc/nvidia-imex`).
    Dir,
    /// A program we run as root: a regular file with an execute bit.
    Program,
}

impl Expect {
    fn noun(self) -> &'static str {
        match self {
            Expect::File => "a regular file",
            Expect::Dir => "a directory",
            Expect::Program => "an executable regular file",
        }
    }
}

/// The uids whose files root may trust: root, and the caller when not root.
fn trusted_uids() -> [u32; 2] {
    [0, nix::unistd::geteuid().as_raw()]
}

fn owner_ok(meta: &Metadata) -> bool {
    trusted_uids().contains(&meta.uid())
}

fn describe_type(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symlink"
    } else {
        "a regular file"
    }
}

/// The rule for one file or directory by its metadata: owned by root (or
/// the caller) and writable by nobody else; only an ancestor may be a
/// sticky world-writable directory like /tmp. None when it passes, else
/// the line saying what is wrong and the fix.
pub(crate) fn judge(path: &Path, meta: &Metadata, is_ancestor: bool) -> Option<String> {
    let mode = meta.permissions().mode();
    if !owner_ok(meta) {
        let who = if nix::unistd::geteuid().is_root() {
            "root".to_string()
        } else {
            "root or you".to_string()
        };
        return Some(format!(
            "{} is owned by uid {}, not {who}: chown root {}",
            path.display(),
            meta.uid(),
            path.display()
        ));
    }
    let writable_by_others = mode & 0o022 != 0;
    let sticky_dir = meta.is_dir() && mode & 0o1000 != 0;
    if writable_by_others && !(is_ancestor && sticky_dir) {
        return Some(format!(
            "{} is writable by group or others (mode {:04o}): chmod go-w {}",
            path.display(),
            mode & 0o7777,
            path.display()
        ));
    }
    None
}

/// Check `path` for `what` (e.g. "config", "[imex.daemon] ctl"). The path
/// must exist; a missing one is reported as such.
pub fn check(path: &Path, expect: Expect, what: &str) -> Result<()> {
    let refuse = |why: String| {
        Error::invalid(format!(
            "refusing {what} {}: {why} (root only uses files and programs that only root can change)",
            path.display()
        ))
    };
    if !path.is_absolute() {
        return Err(refuse("not an absolute path".into()));
    }
    check_ancestors(path).map_err(refuse)?;
    let link = fs::symlink_metadata(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::io(format!("{what} {} does not exist", path.display()))
        } else {
            refuse(e.to_string())
        }
    })?;
    let target = if link.file_type().is_symlink() {
        // Judge the symlink by where it leads: every directory on the way
        // there and the object itself.
        let real = fs::canonicalize(path)
            .map_err(|e| refuse(format!("symlink that does not resolve: {e}")))?;
        check_ancestors(&real)
            .map_err(|why| refuse(format!("symlink to {}, but {why}", real.display())))?;
        real
    } else {
        path.to_path_buf()
    };
    let meta = fs::metadata(&target).map_err(|e| refuse(e.to_string()))?;
    let type_ok = match expect {
        Expect::File => meta.is_file(),
        Expect::Dir => meta.is_dir(),
        Expect::Program => meta.is_file() && meta.permissions().mode() & 0o111 != 0,
    };
    if !type_ok {
        return Err(refuse(format!(
            "{} is {}, not {}",
            target.display(),
            describe_type(&meta),
            expect.noun()
        )));
    }
    if let Some(why) = judge(&target, &meta, false) {
        let why = if target != path {
            format!("symlink to {}, but {why}", target.display())
        } else {
            why
        };
        return Err(refuse(why));
    }
    Ok(())
}

/// Check a secret (a password, a token) at `path` for `what`: a file as
/// [`check`] holds it, and readable by its owner alone, so no other
/// account on the host can read what it grants.
pub fn check_secret(path: &Path, what: &str) -> Result<()> {
    check(path, Expect::File, what)?;
    let mode = fs::metadata(path)
        .map_err(|e| Error::io(format!("cannot read {what} {}: {e}", path.display())))?
        .permissions()
        .mode();
    if mode & 0o044 != 0 {
        return Err(Error::invalid(format!(
            "refusing {what} {}: readable by group or others (mode {:04o}): chmod go-r {} \
             (a secret is readable by its owner alone)",
            path.display(),
            mode & 0o7777,
            path.display()
        )));
    }
    Ok(())
}

/// Every directory above `path`, from `/` down, must be trusted. Symlinked
/// directories are followed (stat), so their targets are what is judged.
/// Err is a reason (`judge`'s words) the caller builds its refusal around.
fn check_ancestors(path: &Path) -> std::result::Result<(), String> {
    let mut dirs: Vec<&Path> = path.ancestors().skip(1).collect();
    dirs.reverse();
    for dir in dirs {
        if dir.as_os_str().is_empty() {
            continue;
        }
        let meta = fs::metadata(dir).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!("{} does not exist", dir.display()),
            _ => format!("{}: {e}", dir.display()),
        })?;
        if !meta.is_dir() {
            return Err(format!("{} is not a directory", dir.display()));
        }
        if let Some(why) = judge(dir, &meta, true) {
            return Err(why);
        }
    }
    Ok(())
}

/// Where a program named in the config will be run from: an absolute path
/// as is, a bare name looked up in `$PATH` (Slurm's default when unset) the
/// way execvp would. None when it is not found (running it then fails with
/// its own clear error).
pub fn resolve_program(program: &Path) -> Option<PathBuf> {
    if program.is_absolute() {
        return Some(program.to_path_buf());
    }
    if program.components().count() != 1 {
        // A relative path with a slash: its meaning depends on the cwd.
        return None;
    }
    let search = std::env::var_os("PATH")
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&search)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(program))
        .find(|p| {
            fs::metadata(p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// Resolve and check a program root is about to run; the path to execute.
pub fn trusted_program(program: &Path, what: &str) -> Result<PathBuf> {
    let resolved = resolve_program(program).ok_or_else(|| {
        Error::new(format!(
            "cannot run {what} {}: not found (give an absolute path in the config)",
            program.display()
        ))
    })?;
    check(&resolved, Expect::Program, what)?;
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn private_dir() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).unwrap();
        d
    }

    #[test]
    fn a_private_file_is_trusted() {
        let d = private_dir();
        let f = d.path().join("imex.toml");
        fs::write(&f, "").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o644)).unwrap();
        check(&f, Expect::File, "config").unwrap();
        check(d.path(), Expect::Dir, "state_dir").unwrap();
    }

    #[test]
    fn world_writable_file_or_directory_is_refused() {
        let d = private_dir();
        let f = d.path().join("imex.toml");
        fs::write(&f, "").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o666)).unwrap();
        let e = check(&f, Expect::File, "config").unwrap_err().to_string();
        assert!(
            e.contains("writable by group or others") && e.contains("0666"),
            "{e}"
        );
        fs::set_permissions(&f, fs::Permissions::from_mode(0o644)).unwrap();
        fs::set_permissions(d.path(), fs::Permissions::from_mode(0o777)).unwrap();
        let e = check(&f, Expect::File, "config").unwrap_err().to_string();
        assert!(
            e.contains("chmod go-w") && e.contains(&d.path().display().to_string()),
            "{e}"
        );
        // Sticky (like /tmp) as an ancestor is fine, as the object is not.
        fs::set_permissions(d.path(), fs::Permissions::from_mode(0o1777)).unwrap();
        check(&f, Expect::File, "config").unwrap();
        let e = check(d.path(), Expect::Dir, "state_dir").unwrap_err();
        assert!(e.to_string().contains("1777"), "{e}");
    }

    #[test]
    fn fifo_and_symlink_to_untrusted_are_refused() {
        let d = private_dir();
        let fifo = d.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = check(&fifo, Expect::File, "config")
            .unwrap_err()
            .to_string();
        assert!(e.contains("a FIFO, not a regular file"), "{e}");
        let open = private_dir();
        fs::set_permissions(open.path(), fs::Permissions::from_mode(0o777)).unwrap();
        let foreign = open.path().join("evil.toml");
        fs::write(&foreign, "").unwrap();
        let link = d.path().join("imex.toml");
        symlink(&foreign, &link).unwrap();
        let e = check(&link, Expect::File, "config")
            .unwrap_err()
            .to_string();
        assert!(e.contains("symlink to") && e.contains("writable"), "{e}");
    }

    #[test]
    fn a_secret_must_be_readable_by_its_owner_alone() {
        let d = private_dir();
        let f = d.path().join("prom.pass");
        fs::write(&f, "pw\n").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o640)).unwrap();
        let e = check_secret(&f, "[job] prometheus_password_file")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("readable by group or others (mode 0640): chmod go-r"),
            "{e}"
        );
        fs::set_permissions(&f, fs::Permissions::from_mode(0o600)).unwrap();
        check_secret(&f, "[job] prometheus_password_file").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o620)).unwrap();
        let e = check_secret(&f, "x").unwrap_err().to_string();
        assert!(e.contains("writable by group or others"), "{e}");
    }

    #[test]
    fn programs_need_an_execute_bit_and_resolve_on_path() {
        let d = private_dir();
        let p = d.path().join("tool");
        fs::write(&p, "#!/bin/sh\n").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(check(&p, Expect::Program, "ctl").is_err());
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        check(&p, Expect::Program, "ctl").unwrap();
        assert!(resolve_program(Path::new("sh")).is_some());
        assert!(resolve_program(Path::new("./sh")).is_none());
        assert!(trusted_program(Path::new("no-such-tool-xyz"), "scontrol").is_err());
    }

    #[test]
    fn relative_and_missing_paths_are_refused() {
        assert!(check(Path::new("etc/imex.toml"), Expect::File, "config").is_err());
        let e = check(Path::new("/nonexistent/x"), Expect::File, "config").unwrap_err();
        assert!(e.to_string().contains("/nonexistent"), "{e}");
    }
}
