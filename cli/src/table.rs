//! Plain-text tables for the terminal: left-aligned columns sized to their
//! widest cell, two spaces apart, like sacct/sinfo output.
//!
//! Hand-written: admins' scripts read these tables as they read sacct's
//! (`awk '{print $2}'`), so they must be borderless, never wrapped to the
//! terminal's width, with sacct-style `--format` column selection.
//! comfy-table and tabled draw borders and wrap by default; setting either
//! up for that takes as many lines as this file, plus a dependency.

use slurm_imex_core::error::Error;
use slurm_imex_core::text;

pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// A row. Each cell is made printable and cut at [`text::PIECE_MAX`]
    /// ([`text::shown`]) here, the one way into a table: a cell holding
    /// outside text (a node name, a cause, a serial) is one cell on one
    /// line, whatever it holds (cli/src/output.rs).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(
            cells
                .iter()
                .map(|c| text::shown(c, text::PIECE_MAX))
                .collect(),
        );
    }

    /// Keep only the columns named in `format` (`JobID,Node,Verdict`,
    /// case-insensitive, in that order), like sacct --format.
    pub fn select(&mut self, format: Option<&str>) -> Result<(), Error> {
        let Some(format) = format else {
            return Ok(());
        };
        let mut picks = Vec::new();
        for want in format.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match self
                .header
                .iter()
                .position(|h| h.eq_ignore_ascii_case(want))
            {
                Some(i) => picks.push(i),
                None => {
                    return Err(Error::invalid(format!(
                        "--format: no column \"{}\" here; choose from {}",
                        want.chars().take(64).collect::<String>(),
                        self.header.join(",")
                    )))
                }
            }
        }
        if picks.is_empty() {
            return Err(Error::invalid(format!(
                "--format is empty; choose from {}",
                self.header.join(",")
            )));
        }
        let pick = |cells: &[String]| {
            picks
                .iter()
                .map(|i| cells.get(*i).cloned().unwrap_or_default())
                .collect()
        };
        self.header = pick(&self.header);
        self.rows = self.rows.iter().map(|r| pick(r)).collect();
        Ok(())
    }

    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                if i < widths.len() {
                    widths[i] = widths[i].max(c.chars().count());
                }
            }
        }
        let line = |cells: &[String]| {
            let last = cells.len().saturating_sub(1);
            cells
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    if i == last {
                        c.clone()
                    } else {
                        format!("{c:<w$}", w = widths[i])
                    }
                })
                .collect::<Vec<_>>()
                .join("  ")
        };
        let mut out = line(&self.header);
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn columns_align() {
        let mut t = super::Table::new(&["A", "BB", "C"]);
        t.row(vec!["long".into(), "x".into(), "end".into()]);
        assert_eq!(t.render(), "A     BB  C\nlong  x   end\n");
    }

    #[test]
    fn a_cell_is_one_printable_bounded_cell_whatever_it_holds() {
        let mut t = super::Table::new(&["NODE", "CAUSE"]);
        t.row(vec![
            "n1\x1b[2J\x1b]0;title\x07".into(),
            format!("bad\r\nn2  FORGED  {}", "x".repeat(1 << 20)),
        ]);
        let text = t.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines.iter().all(|l| !l.chars().any(char::is_control)),
            "{text}"
        );
        assert!(
            lines[1].starts_with("n1\\x1b[2J\\x1b]0;title\\x07  bad\\x0d\\x0an2  FORGED  xx"),
            "{}",
            &lines[1][..100]
        );
        assert!(
            lines[1].len() < 2 * slurm_imex_core::text::PIECE_MAX,
            "{}",
            lines[1].len()
        );
    }

    #[test]
    fn format_picks_and_orders_columns() {
        let mut t = super::Table::new(&["JOBID", "NODE", "VERDICT"]);
        t.row(vec!["1".into(), "n1".into(), "PASS".into()]);
        t.select(Some("verdict,JobID")).unwrap();
        assert_eq!(t.render(), "VERDICT  JOBID\nPASS     1\n");
        let e = t.select(Some("bogus")).unwrap_err().to_string();
        assert!(e.contains("VERDICT,JOBID"), "{e}");
    }
}
