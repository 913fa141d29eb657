//! Running a helper program (nvidia-imex-ctl, systemctl, scontrol) with an
//! argument vector, never a shell, and a hard time bound.

use crate::error::{Error, Result};
use crate::poll::{Backoff, Wait};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Most output kept from one helper run (the rest is read and dropped).
const CAPTURE_MAX: usize = 4 << 20;

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

    /// stdout and stderr joined into one trimmed line, for messages; the
    /// exit status when the program printed nothing.
    pub fn one_line(&self) -> String {
        let all = format!("{} {}", self.stdout, self.stderr);
        let line = all.split_whitespace().collect::<Vec<_>>().join(" ");
        let line = crate::text::cap(&line, crate::text::PIECE_MAX);
        match (line.is_empty(), self.code) {
            (false, _) => line,
            (true, Some(c)) => format!("exit status {c}"),
            (true, None) => "killed by a signal".into(),
        }
    }
}

/// Start `program args...` (past the trust boundary, [`crate::trust`]) with
/// its stdout and stderr piped, and stdin closed, or fed `input` by a thread
/// (then closed); a child without its pipes is killed and named.
fn spawn_piped(
    program: &Path,
    args: &[&str],
    input: Option<Vec<u8>>,
) -> Result<(
    std::process::Child,
    std::process::ChildStdout,
    std::process::ChildStderr,
)> {
    let resolved = crate::trust::trusted_program(program, "program")?;
    let mut child = Command::new(&resolved)
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::command(format!("cannot run {}: {e}", program.display())))?;
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        // A program that exits (or is killed) before reading it all ends
        // the write with EPIPE, which is not ours to report: its status is.
        std::thread::spawn(move || {
            use std::io::Write;
            let _ = stdin.write_all(&input);
        });
    }
    match (child.stdout.take(), child.stderr.take()) {
        (Some(out), Some(err)) => Ok((child, out, err)),
        _ => {
            let _ = child.kill();
            let _ = child.wait();
            Err(Error::command(format!(
                "cannot read the output of {}: no pipe",
                program.display()
            )))
        }
    }
}

/// Run `program args...` with stdin closed, capturing output; kill it (and
/// report a timeout) if it runs longer than `limit`.
/// The program must pass the trust boundary ([`crate::trust`]) first.
pub fn run_bounded(program: &Path, args: &[&str], limit: Duration) -> Result<Output> {
    let (mut child, out, err) = spawn_piped(program, args, None)?;
    let stdout = CapturedPipe::drain(Box::new(out));
    let stderr = CapturedPipe::drain(Box::new(err));
    let status = wait_bounded(&mut child, program, args, limit)?;
    let grace = Duration::from_millis(500);
    Ok(Output {
        code: status.code(),
        stdout: stdout.text_after(grace),
        stderr: stderr.text_after(grace),
    })
}

/// Longest line a streamed run accepts (an `scontrol show node -o` line is
/// under 4 KiB); a longer one fails the run, saying so.
pub const STREAM_LINE_MAX: usize = 1 << 20;

/// What a streamed run produced: each stdout line `parse` kept, in order.
#[derive(Debug)]
pub struct Streamed<T> {
    pub items: Vec<T>,
    pub output: Output,
    /// Set when the program ran past its limit and was killed: the line
    /// saying so. `items` then holds what it printed before.
    pub timed_out: Option<String>,
}

/// Like [`run_checked`], but stdout is read line by line as it comes and
/// handed to `parse`, so no cap on the output's size can cut it: an answer
/// of any size (`scontrol show node -o` on 100,000 nodes) is read whole, in
/// memory proportional to what `parse` keeps. What stays bounded says so
/// and fails: the run's time (`limit`) and one line's length
/// ([`STREAM_LINE_MAX`]).
pub fn run_streamed<T: Send + 'static>(
    program: &Path,
    args: &[&str],
    limit: Duration,
    what: &str,
    parse: fn(&str) -> Option<T>,
) -> Result<Streamed<T>> {
    let streamed = run_streamed_any(program, args, limit, what, parse)?;
    if !streamed.output.success() {
        return Err(Error::command(format!(
            "{what} failed: {}",
            streamed.output.one_line()
        )));
    }
    Ok(streamed)
}

/// [`run_streamed`] whatever the exit status: what `parse` kept of stdout
/// and the status both come back, for a program that reports part of its
/// answer as a failure (`scontrol show node` on a hostlist holding a node
/// Slurm does not know prints the others' lines, and exits 1).
pub fn run_streamed_any<T: Send + 'static>(
    program: &Path,
    args: &[&str],
    limit: Duration,
    what: &str,
    parse: fn(&str) -> Option<T>,
) -> Result<Streamed<T>> {
    let streamed = run_streamed_fed(program, args, None, limit, what, parse)?;
    match streamed.timed_out {
        Some(line) => Err(Error::timeout(line)),
        None => Ok(streamed),
    }
}

/// [`run_streamed_any`] with `input` written to the program's stdin (then
/// closed), for a program that reads its commands there (`sacctmgr -i`
/// given no command): many commands, one process. A program that runs past
/// `limit` is killed, and what it printed before still comes back, with
/// [`Streamed::timed_out`] saying so: each command it answered is known.
pub fn run_streamed_fed<T: Send + 'static>(
    program: &Path,
    args: &[&str],
    input: Option<Vec<u8>>,
    limit: Duration,
    what: &str,
    parse: fn(&str) -> Option<T>,
) -> Result<Streamed<T>> {
    let (mut child, stdout, err) = spawn_piped(program, args, input)?;
    let stderr = CapturedPipe::drain(Box::new(err));
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || read_lines(stdout, parse, tx));
    let (status, timed_out) = match wait_bounded(&mut child, program, args, limit) {
        Ok(status) => (status.code(), None),
        Err(e) if e.kind() == crate::error::Kind::Timeout => (None, Some(e.to_string())),
        Err(e) => return Err(e),
    };
    let grace = Duration::from_millis(500);
    let output = Output {
        code: status,
        stdout: String::new(),
        stderr: stderr.text_after(grace),
    };
    let items = collect_lines(
        &lines,
        timed_out.is_some(),
        grace.max(Duration::from_secs(5)),
    )
    .map_err(|why| Error::command(format!("{what}: {why}")))?;
    Ok(Streamed {
        items,
        output,
        timed_out,
    })
}

/// What the thread reading a streamed run's stdout sends: each item as
/// it is parsed, then how the read ended.
enum Line<T> {
    Item(T),
    End(std::result::Result<(), String>),
}

/// The items sent by [`read_lines`] until it ends, or `wait` passes. A
/// program killed past its limit may leave its stdout held open (by a
/// child of its own): then what came before is its answer. Err is a reason
/// the caller words as its program's failure.
fn collect_lines<T>(
    lines: &std::sync::mpsc::Receiver<Line<T>>,
    killed: bool,
    wait: Duration,
) -> std::result::Result<Vec<T>, String> {
    let deadline = std::time::Instant::now() + wait;
    let mut items = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match lines.recv_timeout(left) {
            Ok(Line::Item(item)) => items.push(item),
            Ok(Line::End(ended)) => return ended.map(|()| items),
            Err(_) if killed => return Ok(items),
            Err(_) => return Err("its output did not end after it exited".into()),
        }
    }
}

/// Every line of `pipe` through `parse`, each item sent as it comes; a
/// line over [`STREAM_LINE_MAX`] is an error, after the pipe is drained (so
/// the program can still exit). The end is sent last.
fn read_lines<T>(
    pipe: impl Read,
    parse: fn(&str) -> Option<T>,
    tx: std::sync::mpsc::Sender<Line<T>>,
) {
    let ended = send_lines(pipe, parse, &tx);
    let _ = tx.send(Line::End(ended));
}

fn send_lines<T>(
    pipe: impl Read,
    parse: fn(&str) -> Option<T>,
    tx: &std::sync::mpsc::Sender<Line<T>>,
) -> std::result::Result<(), String> {
    use std::io::BufRead;
    let mut reader = std::io::BufReader::with_capacity(1 << 16, pipe);
    let mut line = Vec::new();
    let mut failure = None;
    loop {
        line.clear();
        let limit = (STREAM_LINE_MAX + 1) as u64;
        match (&mut reader).take(limit).read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) if line.len() > STREAM_LINE_MAX && !line.ends_with(b"\n") => {
                failure.get_or_insert(format!(
                    "a line of its output is longer than {STREAM_LINE_MAX} bytes; nothing was \
                     read past it"
                ));
            }
            Ok(_) if failure.is_none() => {
                if let Some(item) = parse(&String::from_utf8_lossy(&line)) {
                    let _ = tx.send(Line::Item(item));
                }
            }
            Ok(_) => {}
            Err(e) => return Err(format!("reading its output failed: {e}")),
        }
    }
    failure.map_or(Ok(()), Err)
}

/// One of a child's pipes, read to EOF on a thread so a chatty program
/// cannot block on a full pipe. What was read so far is kept in a shared
/// buffer and EOF is signalled over a channel: a grandchild that keeps the
/// pipe open (a daemon started by the program) must not make us wait for
/// an EOF that never comes.
struct CapturedPipe {
    eof: std::sync::mpsc::Receiver<()>,
    kept: Arc<Mutex<Vec<u8>>>,
}

impl CapturedPipe {
    fn drain(mut pipe: Box<dyn Read + Send>) -> CapturedPipe {
        let (tx, eof) = std::sync::mpsc::channel::<()>();
        let kept = Arc::new(Mutex::new(Vec::new()));
        let sink = kept.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                let mut kept = sink.lock().unwrap_or_else(|e| e.into_inner());
                // Keep draining, but hold at most CAPTURE_MAX bytes.
                let room = CAPTURE_MAX.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..n.min(room)]);
            }
            let _ = tx.send(());
        });
        CapturedPipe { eof, kept }
    }

    /// The text read once EOF came, or after `grace` if it does not.
    fn text_after(&self, grace: Duration) -> String {
        let _ = self.eof.recv_timeout(grace);
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&kept).into_owned()
    }
}

/// `run_bounded`, where a non-zero exit is an error too: `<what> failed:
/// <its output on one line>`. The one way a helper's failure is worded.
pub fn run_checked(program: &Path, args: &[&str], limit: Duration, what: &str) -> Result<Output> {
    let out = run_bounded(program, args, limit)?;
    if !out.success() {
        return Err(Error::command(format!("{what} failed: {}", out.one_line())));
    }
    Ok(out)
}

/// Wait for the child, polling with backoff up to 20 ms; past `limit` it is
/// killed and reaped, and that is an error naming the command.
fn wait_bounded(
    child: &mut std::process::Child,
    program: &Path,
    args: &[&str],
    limit: Duration,
) -> Result<std::process::ExitStatus> {
    let command = format!("{} {}", program.display(), args.join(" "));
    let backoff = Backoff::doubling(Duration::from_millis(1), Duration::from_millis(20));
    let exited = Wait::new(&command, limit, backoff).until(|| child.try_wait().transpose());
    match exited {
        Ok(Ok(status)) => Ok(status),
        Ok(Err(e)) => Err(Error::command(format!(
            "waiting for {} failed: {e}",
            program.display()
        ))),
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(Error::timeout(format!(
                "{command} did not finish within {limit:?} and was killed"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

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
    fn a_failing_helper_is_one_line_naming_it() {
        let e = run_checked(
            Path::new("/bin/sh"),
            &["-c", "echo no such unit >&2; exit 5"],
            Duration::from_secs(5),
            "systemctl stop nvidia-imex",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "systemctl stop nvidia-imex failed: no such unit"
        );
        let ok = run_checked(Path::new("/bin/true"), &[], Duration::from_secs(5), "true").unwrap();
        assert!(ok.success());
    }

    fn count(line: &str) -> Option<usize> {
        Some(line.len())
    }

    #[test]
    fn a_fed_program_reads_its_input_and_a_short_reader_does_not_hang() {
        let input = b"one\ntwo\nthree\n".to_vec();
        let s = run_streamed_fed(
            Path::new("/bin/cat"),
            &[],
            Some(input),
            Duration::from_secs(10),
            "cat",
            count,
        )
        .unwrap();
        assert_eq!(s.items, vec![4, 4, 6]);
        // 8 MiB fed to a program that reads one line and exits.
        let s = run_streamed_fed(
            Path::new("/bin/sh"),
            &["-c", "read -r l; echo \"$l\""],
            Some(b"line\n".repeat(2 << 20)),
            Duration::from_secs(10),
            "sh",
            count,
        )
        .unwrap();
        assert!(s.output.success());
    }

    #[test]
    fn a_fed_program_killed_past_its_limit_still_gives_what_it_printed() {
        let s = run_streamed_fed(
            Path::new("/bin/sh"),
            &["-c", "echo one; echo two; sleep 20"],
            None,
            Duration::from_millis(300),
            "sh",
            count,
        )
        .unwrap();
        assert_eq!(s.items, vec![4, 4]);
        assert_eq!(s.output.code, None);
        let line = s.timed_out.unwrap();
        assert!(line.contains("did not finish within"), "{line}");
    }

    #[test]
    fn a_streamed_answer_is_read_whole_far_past_the_capture_cap() {
        // 300,000 lines of 40 bytes: 12 MB, three times CAPTURE_MAX.
        let line = "NodeName=n1 Extra=nvlink_clique=abcdef.1";
        let script = format!("yes '{line}' | head -n 300000");
        let s = run_streamed(
            Path::new("/bin/sh"),
            &["-c", &script],
            Duration::from_secs(60),
            "scontrol show node",
            count,
        )
        .unwrap();
        assert_eq!(s.items.len(), 300_000);
        assert!(s.items.iter().all(|n| *n == line.len() + 1));
    }

    #[test]
    fn what_a_streamed_run_bounds_it_says_and_fails() {
        let e = run_streamed(
            Path::new("/bin/sh"),
            &[
                "-c",
                "head -c 2000000 /dev/zero | tr '\\0' x; echo; echo after",
            ],
            Duration::from_secs(60),
            "scontrol show node",
            count,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("scontrol show node: a line of its output is longer than 1048576 bytes"),
            "{e}"
        );
        let e = run_streamed(
            Path::new("/bin/sh"),
            &["-c", "echo a; sleep 20"],
            Duration::from_millis(300),
            "scontrol show node",
            count,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("did not finish within"), "{e}");
        let e = run_streamed(
            Path::new("/bin/sh"),
            &["-c", "echo a; echo down >&2; exit 1"],
            Duration::from_secs(5),
            "scontrol show node",
            count,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "scontrol show node failed: down");
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
    fn a_grandchild_holding_the_pipes_does_not_hang_us() {
        let t = Instant::now();
        let o = run_bounded(
            Path::new("/bin/sh"),
            &["-c", "echo started; sleep 30 & exit 0"],
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(o.code, Some(0));
        assert_eq!(o.stdout, "started\n");
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
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
