//! One line of the doctor's report ([`Check`]): a check's [`Status`], what it found and
//! the exact remedy; and every check's name ([`CheckName`]), the one list of
//! them.

use serde::{Serialize, Serializer};

/// Every check doctor can report, its name written once: a [`Check`] takes
/// its name from here only (its `check` is a `CheckName`, never a string),
/// so a new check cannot be reported without being in [`CheckName::ALL`],
/// which the docs listing the checks are tested against (docs/json.md, the
/// doctor section of docs/install.md).
macro_rules! check_names {
    ($($(#[$doc:meta])* $variant:ident = $name:literal,)*) => {
        /// The name of a doctor check, as the report and `--json` print it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum CheckName {
            $($(#[$doc])* $variant,)*
        }

        impl CheckName {
            /// Every check's name, in the order `examine` reports them.
            pub const ALL: &'static [CheckName] = &[$(CheckName::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(CheckName::$variant => $name,)*
                }
            }
        }
    };
}

check_names! {
    Slurm = "slurm",
    Plugstack = "plugstack",
    Plugin = "plugin",
    PrologFlags = "prolog-flags",
    Prolog = "prolog",
    Epilog = "epilog",
    Healthcheck = "healthcheck",
    Switch = "switch",
    Adopt = "adopt",
    PrivateData = "private-data",
    RackChannels = "rack-channels",
    /// `--cluster` only.
    SharedNodes = "shared-nodes",
    Topology = "topology",
    Config = "config",
    ImexDaemon = "imex-daemon",
    ImexCtl = "imex-ctl",
    ImexConfig = "imex-config",
    ImexCommand = "imex-command",
    ImexTls = "imex-tls",
    ChannelDevice = "channel-device",
    ChannelDir = "channel-dir",
    Ports = "ports",
    Systemd = "systemd",
    Nvml = "nvml",
    Accounting = "accounting",
    Database = "database",
    TextfileDir = "textfile-dir",
    /// The one line when the checks did not finish within the time limit.
    Doctor = "doctor",
}

impl CheckName {
    /// The check of this name, if there is one.
    pub fn parse(text: &str) -> Option<CheckName> {
        Self::ALL.iter().copied().find(|c| c.as_str() == text)
    }
}

impl std::fmt::Display for CheckName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl Serialize for CheckName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

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
    pub check: CheckName,
    pub verdict: Status,
    pub found: String,
    pub remedy: String,
}

/// Longest `found` kept: outside text (a file's line, a tool's answer)
/// never makes a line of the report unbounded.
const MAX_FOUND_CHARS: usize = 400;

impl Check {
    pub fn pass(check: CheckName, found: impl Into<String>) -> Check {
        Check::new(check, Status::Pass, found.into(), String::new())
    }

    pub fn warn(check: CheckName, found: impl Into<String>, remedy: impl Into<String>) -> Check {
        Check::new(check, Status::Warn, found.into(), remedy.into())
    }

    pub fn fail(check: CheckName, found: impl Into<String>, remedy: impl Into<String>) -> Check {
        Check::new(check, Status::Fail, found.into(), remedy.into())
    }

    fn new(check: CheckName, verdict: Status, found: String, remedy: String) -> Check {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn doc(path: &str) -> String {
        let at = format!("{}/../{path}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&at).unwrap_or_else(|e| panic!("{at}: {e}"))
    }

    fn code_names() -> BTreeSet<&'static str> {
        CheckName::ALL.iter().map(|c| c.as_str()).collect()
    }

    /// The text between `(` at `open` and its matching `)`.
    fn parenthesized(text: &str, open: usize) -> &str {
        let mut depth = 0;
        for (i, c) in text[open..].char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 1 => return &text[open + 1..open + i],
                ')' => depth -= 1,
                _ => {}
            }
        }
        panic!("no ) closes the ( at {open}")
    }

    /// Every `word` (a name's shape: lowercase words joined by `-`) in `text`.
    fn backticked_names(text: &str) -> Vec<&str> {
        text.split('`')
            .skip(1)
            .step_by(2)
            .filter(|t| {
                !t.is_empty()
                    && t.split('-')
                        .all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase()))
            })
            .collect()
    }

    fn difference(doc: &BTreeSet<&str>) -> String {
        let code = code_names();
        format!(
            "missing from the doc: {:?}; in the doc but no check of doctor's: {:?}",
            code.difference(doc).collect::<Vec<_>>(),
            doc.difference(&code).collect::<Vec<_>>()
        )
    }

    #[test]
    fn every_check_name_is_listed_once_and_reads_back() {
        assert_eq!(code_names().len(), CheckName::ALL.len(), "a name twice");
        for &c in CheckName::ALL {
            assert_eq!(CheckName::parse(c.as_str()), Some(c));
            assert_eq!(
                serde_json::to_string(&c).unwrap_or_default(),
                format!("\"{c}\"")
            );
        }
        assert_eq!(format!("[{:<8}]", CheckName::Nvml), "[nvml    ]");
    }

    /// docs/json.md's `doctor` row names exactly the checks doctor can
    /// report, each once.
    #[test]
    fn json_md_lists_exactly_the_checks_doctor_reports() {
        let text = doc("docs/json.md");
        let row = text
            .lines()
            .find(|l| l.starts_with("| `doctor` |"))
            .expect("docs/json.md has a `doctor` row");
        let open = row
            .find("(its name:")
            .expect("the doctor row says `check` (its name: …)");
        let listed = backticked_names(parenthesized(row, open));
        let set: BTreeSet<&str> = listed.iter().copied().collect();
        assert_eq!(set.len(), listed.len(), "a name twice: {listed:?}");
        assert_eq!(set, code_names(), "docs/json.md: {}", difference(&set));
    }

    /// Words in backticks in docs/install.md's description of the checks
    /// that are no check: each else would be taken for a check's name.
    const INSTALL_MD_NOT_CHECKS: [&str; 5] =
        ["include", "jobs", "required", "scontrol", "systemctl"];

    /// docs/install.md's description of the checks ("The checks: `slurm` …"
    /// to the `doctor` line) names every check, and no other name.
    #[test]
    fn install_md_describes_exactly_the_checks_doctor_reports() {
        let text = doc("docs/install.md");
        let start = text
            .find("The checks: `slurm`")
            .expect("docs/install.md: \"The checks: `slurm` …\"");
        let end = start
            + text[start..]
                .find("FAIL `doctor` line")
                .expect("docs/install.md: the `doctor` line when the checks do not finish")
            + "FAIL `doctor` line".len();
        let named: BTreeSet<&str> = backticked_names(&text[start..end])
            .into_iter()
            .filter(|n| !INSTALL_MD_NOT_CHECKS.contains(n))
            .collect();
        assert_eq!(
            named,
            code_names(),
            "docs/install.md (a backticked word there that is no check goes in INSTALL_MD_NOT_CHECKS): {}",
            difference(&named)
        );
    }

    /// Every report line the docs show (`PASS  name  …`) names a check doctor
    /// has.
    #[test]
    fn every_report_line_in_the_docs_names_a_check() {
        let dir = format!("{}/../docs", env!("CARGO_MANIFEST_DIR"));
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".md"))
            .map(|n| format!("docs/{n}"))
            .collect();
        files.push("README.md".into());
        let mut lines = 0;
        for file in &files {
            for line in doc(file).lines() {
                let Some(rest) = ["PASS  ", "WARN  ", "FAIL  "]
                    .iter()
                    .find_map(|v| line.strip_prefix(v))
                else {
                    continue;
                };
                let name = rest.split_whitespace().next().unwrap_or_default();
                assert!(
                    CheckName::parse(name).is_some(),
                    "{file}: `{line}`: doctor has no check {name:?}"
                );
                lines += 1;
            }
        }
        assert!(
            lines > 20,
            "only {lines} report lines found: the search is broken"
        );
    }
}
