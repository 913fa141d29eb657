//! Running a helper program (nvidia-imex-ctl, systemctl, scontrol) with an
//! argument vector, never a shell, and a hard time bound.

use crate::error::{Error, Result};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a bounded run produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// None when the program was killed by a signal.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// stdout and stderr joined into one trimmed line, for messages.
    pub fn one_line(&self) -> String {
        let all = format!("{} {}", self.stdout, self.stderr);
        all.split_whitespace().collect::<Vec<_>>().join(" ")
    }
}

/// Run `program args...` with stdin closed, capturing output; kill it (and
/// report a timeout) if it runs longer than `limit`.
pub fn run_bounded(program: &Path, args: &[&str], limit: Duration) -> Result<Output> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::new(format!("cannot run {}: {e}", program.display())))?;
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    // Drain both pipes on threads so a chatty program cannot block on a full pipe.
    let out_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() >= limit => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Error::new(format!(
                    "{} {} did not finish within {:?} and was killed",
                    program.display(),
                    args.join(" "),
                    limit
                )));
            }
            Ok(None) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(e) => {
                return Err(Error::new(format!(
                    "waiting for {} failed: {e}",
                    program.display()
                )))
            }
        }
    };
    let stdout = String::from_utf8_lossy(&out_reader.join().unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&err_reader.join().unwrap_or_default()).into_owned();
    Ok(Output {
        code: status.code(),
        stdout,
        stderr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_output_and_exit_code() {
        let o = run_bounded(
            Path::new("/bin/sh"),
            &["-c", "echo hi; echo err >&2; exit 3"],
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(o.code, Some(3));
        assert_eq!(o.stdout, "hi\n");
        assert_eq!(o.one_line(), "hi err");
    }

    #[test]
    fn arguments_are_not_interpreted_by_a_shell() {
        let o = run_bounded(
            Path::new("/bin/echo"),
            &["$(id)", ";", "x"],
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(o.stdout, "$(id) ; x\n");
    }

    #[test]
    fn slow_programs_are_killed() {
        let t = Instant::now();
        let e =
            run_bounded(Path::new("/bin/sleep"), &["5"], Duration::from_millis(100)).unwrap_err();
        assert!(e.to_string().contains("killed"));
        assert!(t.elapsed() < Duration::from_secs(3));
        assert!(run_bounded(Path::new("/nonexistent"), &[], Duration::from_secs(1)).is_err());
    }
}
