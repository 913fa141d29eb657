//! What the commands print, and how: the CLI's one writer to stdout and
//! stderr. A failed write is a one-line error, never a panic.
//!
//! # Outside text is printable and bounded here
//!
//! Most of what the commands print came from outside the program: Slurm's
//! answers, a Prometheus answer's labels, a stored summary in AdminComment,
//! rows of a hand-editable job database, NVML strings, the IMEX daemon's
//! ctl answers, state files. An ESC in any of it would rewrite the admin's
//! screen, an OSC set its title, a newline forge a table line, a megabyte
//! flood it. The rule "outside text is printable and bounded before it
//! reaches a terminal" is applied here, where bytes are written, to
//! everything, whatever it is and wherever it came from:
//!
//! - `out!` and `err!`: one line each, made [`text::shown`] (every
//!   control character, line separator and bidi override escaped as
//!   `\x1b`; cut at [`text::SHOWN_LINE_MAX`]). One call is one line,
//!   whatever its arguments hold.
//! - tables ([`print_table`], [`table`]): [`Table::row`] makes each cell
//!   shown and cuts it at [`text::PIECE_MAX`], so a cell is never two
//!   lines and its newlines are the table's own.
//! - [`lines`]: a text of the program's own lines (topology's file text),
//!   each line as `out!` writes it.
//! - [`print_json`]: `--json`, whose strings serde_json escapes: it
//!   carries the raw text, escaped, as docs/json.md says.
//!
//! Nothing else in this crate writes to stdout or stderr: `cli/clippy.toml`
//! disallows `print!`, `println!`, `eprint!`, `eprintln!`, `dbg!`,
//! `std::io::stdout` and `std::io::stderr`, allowed only in this file, so
//! `cargo clippy -- -D warnings` refuses a raw print.
//!
//! Why at the writer and not a type for outside text (a `Shown` newtype on
//! each field of the reports): the fields are many (a job summary's node,
//! cause, serial, verdicts, XID classes, domain, throttle reasons and NVLink
//! counter names; the database's rows; doctor's findings; ctl answers) and
//! spread over six crates whose JSON, database and Prometheus forms need the
//! raw text; a newtype guards only the fields someone remembered to give it,
//! and a new `String` field would print raw. At the writer, a new field,
//! a new note or a new command cannot reach the terminal any other way.
//! The bad-input tests check it for each command with every string field
//! hostile (tests/bad-input/tests/job_view.rs, cli_and_database.rs).

/// One line on stdout, made printable and bounded ([`write_line`]); a
/// failed write is the command's one-line error.
macro_rules! out {
    ($($arg:tt)*) => {
        crate::output::write_line(format_args!($($arg)*))?
    };
}

/// One line on stderr, made printable and bounded as `out!`'s; a failed
/// write to stderr is not reported (there is nowhere to).
macro_rules! err {
    ($($arg:tt)*) => {
        crate::output::write_err(format_args!($($arg)*))
    };
}

use crate::args::Cli;
use crate::table::Table;
use serde::Serialize;
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::text;

/// `line` as it is written: printable, at most [`text::SHOWN_LINE_MAX`]
/// bytes, never two lines.
pub fn as_line(line: &str) -> String {
    text::shown(line, text::SHOWN_LINE_MAX)
}

/// Write one line to stdout ([`as_line`]).
pub fn write_line(args: std::fmt::Arguments) -> Result<()> {
    let line = as_line(&args.to_string());
    write_stdout(&line)?;
    write_stdout("\n")
}

/// Write one line to stderr ([`as_line`]), ignoring a failure.
pub fn write_err(args: std::fmt::Arguments) {
    use std::io::Write;
    let line = as_line(&args.to_string());
    #[allow(clippy::disallowed_methods)] // the one writer to stderr
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "{line}");
}

/// Each line of `text`, the program's own (a file's text it built), as
/// `out!` writes one.
pub fn lines(text: &str) -> Result<()> {
    for line in text.lines() {
        write_line(format_args!("{line}"))?;
    }
    Ok(())
}

/// Write text whose every line is already shown (a rendered table, JSON).
fn write_stdout(s: &str) -> Result<()> {
    use std::io::Write;
    #[allow(clippy::disallowed_methods)] // the one writer to stdout
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(s.as_bytes())
        .map_err(|e| Error::new(format!("cannot write output: {e}")))
}

/// Flush stdout before the exit status is returned; a failure is one line.
pub fn flush() -> Result<()> {
    use std::io::Write;
    #[allow(clippy::disallowed_methods)] // the one writer to stdout
    let mut stdout = std::io::stdout();
    stdout
        .flush()
        .map_err(|e| Error::new(format!("cannot write output: {e}")))
}

/// Print `value` as pretty JSON (the shapes are docs/json.md's): strings
/// as they are, escaped by serde_json.
pub fn print_json<T: Serialize + ?Sized>(value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Error::new(format!("cannot encode JSON: {e}")))?;
    write_stdout(&text)?;
    write_stdout("\n")
}

/// Print a table, its cells already shown ([`Table::row`]).
pub fn table(t: &Table) -> Result<()> {
    write_stdout(&t.render())
}

/// Apply --format to a table and print it.
pub fn print_table(cli: &Cli, mut t: Table) -> Result<()> {
    t.select(cli.format.as_deref())?;
    table(&t)
}

/// A listing: the rows as JSON with --json, else as the table `table`
/// makes of them.
pub fn print_rows<T: Serialize>(cli: &Cli, rows: &[T], table: fn(&[T]) -> Table) -> Result<()> {
    if cli.json {
        print_json(&rows)
    } else {
        print_table(cli, table(rows))
    }
}
