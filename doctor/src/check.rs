//! One line of the doctor's report ([`Check`]): a check's [`Status`], what it found and
//! the exact remedy.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    Pass,
    Warn,
    Fail,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        }
    }
}

/// One check's result. `remedy` is empty on a PASS.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub check: &'static str,
    pub verdict: Status,
    pub found: String,
    pub remedy: String,
}

/// Longest `found` kept: outside text (a file's line, a tool's answer)
/// never makes a line of the report unbounded.
const MAX_FOUND_CHARS: usize = 400;

impl Check {
    pub fn pass(check: &'static str, found: impl Into<String>) -> Check {
        Check::new(check, Status::Pass, found.into(), String::new())
    }

    pub fn warn(check: &'static str, found: impl Into<String>, remedy: impl Into<String>) -> Check {
        Check::new(check, Status::Warn, found.into(), remedy.into())
    }

    pub fn fail(check: &'static str, found: impl Into<String>, remedy: impl Into<String>) -> Check {
        Check::new(check, Status::Fail, found.into(), remedy.into())
    }

    fn new(check: &'static str, verdict: Status, found: String, remedy: String) -> Check {
        let found =
            slurm_imex_core::text::cap(&found.replace(char::is_control, " "), MAX_FOUND_CHARS);
        Check {
            check,
            verdict,
            found,
            remedy,
        }
    }

    /// The report line: `FAIL  prolog-flags  <found>: <remedy>`.
    pub fn line(&self) -> String {
        let mut line = format!(
            "{}  {:<15} {}",
            self.verdict.as_str(),
            self.check,
            self.found
        );
        if !self.remedy.is_empty() {
            line.push_str(" -> ");
            line.push_str(&self.remedy);
        }
        line
    }
}
