//! Who the IMEX daemon process is, independent of its name: a pid plus the
//! process start time from `/proc/<pid>/stat` (recorded at spawn, so a
//! recycled pid is never signalled), an environment tag every process we
//! spawn inherits (so a daemon behind a wrapper script or interpreter, or
//! one spawned by a prolog killed before it wrote its pid file, is still
//! found), and whether anything still accepts connections on the command
//! port (a teardown is only reported done when nothing does).

use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

/// The environment variable carrying the tag; its value names the node and
/// state directory, so daemons of other (namespaced) nodes never match.
pub const TAG_ENV: &str = "SLURM_IMEX_DAEMON";

/// A process as recorded in the pid file: pid and start time (clock ticks
/// since boot, field 22 of `/proc/<pid>/stat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcId {
    pub pid: i32,
    pub start: u64,
}

impl ProcId {
    /// The pid file's text: `<pid> <start>`.
    pub fn render(self) -> String {
        format!("{} {}\n", self.pid, self.start)
    }

    /// Parse a pid file; a bare pid (written by an older version) has no
    /// start time and is never trusted.
    pub fn parse(text: &str) -> Option<ProcId> {
        let mut it = text.split_whitespace();
        let pid: i32 = it.next()?.parse().ok().filter(|p| *p > 1)?;
        let start: u64 = it.next()?.parse().ok()?;
        it.next().is_none().then_some(ProcId { pid, start })
    }

    /// This pid's identity now, if it is a live process. A zombie counts
    /// as live while other threads of it still run (a main thread that
    /// returned early leaves the process, and its sockets, behind).
    pub fn of(pid: i32) -> Option<ProcId> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (state, start) = parse_stat(&stat)?;
        let live = match state {
            "Z" | "X" => other_threads_running(pid),
            _ => true,
        };
        live.then_some(ProcId { pid, start })
    }

    /// Is this exact process (same pid, same start time) still alive?
    pub fn alive(self) -> bool {
        ProcId::of(self.pid) == Some(self)
    }
}

fn other_threads_running(pid: i32) -> bool {
    let me = pid.to_string();
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .any(|t| t.file_name().to_str() != Some(me.as_str()))
        })
        .unwrap_or(false)
}

/// State (field 3) and start time (field 22) of a `/proc/<pid>/stat`
/// line. Hand-split because the command name (field 2) may hold spaces and
/// parentheses: everything after the *last* ')' is space-separated.
pub fn parse_stat(stat: &str) -> Option<(&str, u64)> {
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3; field 22 is index 19.
    let state = *fields.first()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((state, start))
}

/// The tag value for this node's daemon.
pub fn tag_value(state_dir: &Path) -> String {
    let host = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{host}:{}", state_dir.display())
}

/// Every live process carrying `TAG_ENV=<tag>` in its environment. Bounded:
/// at most 64 KiB of each environment is read.
pub fn tagged_processes(tag: &str) -> Vec<ProcId> {
    use std::io::Read;
    let needle = format!("{TAG_ENV}={tag}");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id() as i32;
    let mut found = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(f) = std::fs::File::open(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let mut env = Vec::new();
        if f.take(64 * 1024).read_to_end(&mut env).is_err() {
            continue;
        }
        if env.split(|b| *b == 0).any(|v| v == needle.as_bytes()) {
            if let Some(id) = ProcId::of(pid) {
                found.push(id);
            }
        }
    }
    found
}

/// The short command name of a pid, for messages.
pub fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().chars().take(32).collect())
        .unwrap_or_else(|_| "?".into())
}

/// Does anything accept TCP connections on `ip:port`? Refused, unreachable
/// or timed out all mean no.
pub fn port_accepts(ip: IpAddr, port: u16) -> bool {
    TcpStream::connect_timeout(&SocketAddr::new(ip, port), Duration::from_millis(300)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_imex_core::poll::{Backoff, Wait};

    #[test]
    fn pid_file_round_trip_and_legacy_files() {
        let id = ProcId {
            pid: 4242,
            start: 987654,
        };
        assert_eq!(ProcId::parse(&id.render()), Some(id));
        assert_eq!(ProcId::parse("4242\n"), None);
        assert_eq!(ProcId::parse("1 5"), None);
        assert_eq!(ProcId::parse("-3 5"), None);
        assert_eq!(ProcId::parse("12 5 6"), None);
        assert_eq!(ProcId::parse("99999999999999 5"), None);
    }

    #[test]
    fn stat_with_spaces_and_parens_in_the_name() {
        let line = "77 (a) (b c) S 1 77 77 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 123456 1000 10";
        assert_eq!(parse_stat(line), Some(("S", 123456)));
        assert_eq!(parse_stat("77 (x) S 1"), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_is_alive_and_a_wrong_start_time_is_not() {
        let me = ProcId::of(std::process::id() as i32).unwrap();
        assert!(me.alive());
        assert!(!ProcId {
            start: me.start + 1,
            ..me
        }
        .alive());
    }

    #[test]
    fn tagged_children_are_found() {
        let tag = format!("test:{}", std::process::id());
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env(TAG_ENV, &tag)
            .spawn()
            .unwrap();
        // Right after spawn the new image's environment may not be readable yet.
        let mut found = Vec::new();
        let wait = Wait::new(
            "the tagged child",
            Duration::from_secs(2),
            Backoff::every(Duration::from_millis(10)),
        );
        let _ = wait.until(|| {
            found = tagged_processes(&tag);
            (!found.is_empty()).then_some(())
        });
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].pid, child.id() as i32);
        assert!(tagged_processes("no-such-tag").is_empty());
    }
}
