//! What the commands print, and how: every line goes through `out!` /
//! `out_raw!` (a failed write is a one-line error, never a panic), JSON
//! through `print_json`, tables through `print_table` (which applies
//! `--format`).

/// `println!` that returns a one-line error instead of panicking when
/// stdout fails (a full disk, a closed file).
macro_rules! out {
    ($($arg:tt)*) => {
        crate::output::write_out(format_args!("{}\n", format_args!($($arg)*)))?
    };
}

/// `print!` with the same error handling as `out!`.
macro_rules! out_raw {
    ($($arg:tt)*) => {
        crate::output::write_out(format_args!($($arg)*))?
    };
}

use crate::args::Cli;
use crate::table::Table;
use serde::Serialize;
use slurm_imex_core::error::{Error, Result};

/// Write to stdout; a failure is one line, not a panic.
pub fn write_out(args: std::fmt::Arguments) -> Result<()> {
    use std::io::Write;
    std::io::stdout()
        .lock()
        .write_fmt(args)
        .map_err(|e| Error::new(format!("cannot write output: {e}")))
}

/// Print `value` as pretty JSON (the shapes are docs/json.md's).
pub fn print_json<T: Serialize>(value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Error::new(format!("cannot encode JSON: {e}")))?;
    out!("{text}");
    Ok(())
}

/// Apply --format to a table and print it.
pub fn print_table(cli: &Cli, mut t: Table) -> Result<()> {
    t.select(cli.format.as_deref())?;
    out_raw!("{}", t.render());
    Ok(())
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
