//! What happened to a job's IMEX domain on one node while the job ran, as
//! the domain's watcher (`slurm-imex-watch`) saw it: the daemon died, was
//! restarted or left down, the domain left UP or came back, a member left
//! READY or came back. The watcher records each one in the job database and
//! the journal; `show`, `job` and the per-job series print them
//! ([`ImexEvent::line`]). The kinds are a closed set, so the node's
//! Prometheus counter per kind has bounded cardinality.

use serde::{Deserialize, Serialize};
use slurm_imex_core::{text, timespec};

/// Longest detail kept with an event (a member list is capped before it).
pub const DETAIL_MAX: usize = 400;

/// The kinds, each written once, from which the enum, [`ImexEventKind::ALL`]
/// and [`ImexEventKind::as_str`] are made: a kind cannot be added without
/// being in `ALL` (which the database reads back and the metrics export),
/// and the docs that list the kinds are tested against `ALL`.
macro_rules! imex_event_kinds {
    ($($(#[$doc:meta])* $variant:ident = $name:literal,)*) => {
        /// The kind of an event; `as_str` is its database and metric label value.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
        pub enum ImexEventKind {
            $($(#[$doc])* #[serde(rename = $name)] $variant,)*
        }

        impl ImexEventKind {
            /// Every kind, in the order the metrics export them.
            pub const ALL: [ImexEventKind; [$(ImexEventKind::$variant),*].len()] =
                [$(ImexEventKind::$variant),*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(ImexEventKind::$variant => $name,)*
                }
            }
        }
    };
}

imex_event_kinds! {
    /// This node's daemon is gone (detail: how, when known).
    DaemonDied = "daemon-died",
    /// The watcher started it again on the job's config.
    DaemonRestarted = "daemon-restarted",
    /// It died more often than `[imex.watch] max_restarts`: left down, and
    /// the node is drained after the job.
    DaemonLeftDown = "daemon-left-down",
    /// The domain left UP (detail: the state and who is not READY).
    DomainDegraded = "domain-degraded",
    /// The domain is UP with every member READY again.
    DomainUp = "domain-up",
    /// A member left READY or lost its connection (detail: the node).
    MemberLost = "member-lost",
    /// That member is READY and connected again.
    MemberBack = "member-back",
}

impl ImexEventKind {
    pub fn parse(text: &str) -> Option<ImexEventKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == text)
    }

    /// Whether the job's domain was interrupted by it (the job's verdict
    /// says so): every kind but the recoveries.
    pub fn interrupts(self) -> bool {
        !matches!(
            self,
            ImexEventKind::DaemonRestarted | ImexEventKind::DomainUp | ImexEventKind::MemberBack
        )
    }

    /// The words an admin reads after the node's name (docs/guide.md's
    /// table of the watcher's events names each).
    pub fn words(self) -> &'static str {
        match self {
            ImexEventKind::DaemonDied => "IMEX daemon died",
            ImexEventKind::DaemonRestarted => "IMEX daemon restarted",
            ImexEventKind::DaemonLeftDown => "IMEX daemon left down",
            ImexEventKind::DomainDegraded => "IMEX domain left UP",
            ImexEventKind::DomainUp => "IMEX domain UP again",
            ImexEventKind::MemberLost => "IMEX peer lost",
            ImexEventKind::MemberBack => "IMEX peer back",
        }
    }
}

/// One event on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImexEvent {
    pub job_id: u32,
    /// The node that saw it (whose watcher recorded it).
    pub node: String,
    /// Unix milliseconds.
    pub ts_ms: i64,
    pub kind: ImexEventKind,
    /// The cause or who, in a few words ("killed by signal 9", "n3
    /// UNAVAILABLE"); empty when there is nothing to add.
    pub detail: String,
}

impl ImexEvent {
    pub fn new(job_id: u32, node: &str, ts_ms: i64, kind: ImexEventKind, detail: &str) -> Self {
        ImexEvent {
            job_id,
            node: node.to_string(),
            ts_ms,
            kind,
            detail: text::cap(&text::printable(detail), DETAIL_MAX),
        }
    }

    /// "IMEX daemon died at 12:03:04 (killed by signal 9)", in local time.
    pub fn line(&self) -> String {
        let at = timespec::clock_time(self.ts_ms / 1000);
        match self.detail.is_empty() {
            true => format!("{} at {at}", self.kind.words()),
            false => format!("{} at {at} ({})", self.kind.words(), self.detail),
        }
    }
}

/// A node's events as one line: "IMEX daemon died at 12:03:04 (killed by
/// signal 9); IMEX daemon restarted at 12:03:04; IMEX domain UP again at
/// 12:03:21": the events that fit in `max` bytes, then "; … (N more)";
/// None without any.
pub fn summary_line(events: &[ImexEvent], max: usize) -> Option<String> {
    let lines: Vec<String> = events.iter().map(ImexEvent::line).collect();
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        let sep = if i == 0 { "" } else { "; " };
        if out.len() + sep.len() + line.len() > max {
            let more = lines.len() - i;
            if i == 0 {
                let first = text::cap(line, max);
                return Some(match more - 1 {
                    0 => first,
                    rest => format!("{first}; … ({rest} more)"),
                });
            }
            return Some(format!("{out}; … ({more} more)"));
        }
        out.push_str(sep);
        out.push_str(line);
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_and_recoveries_do_not_interrupt() {
        for k in ImexEventKind::ALL {
            assert_eq!(ImexEventKind::parse(k.as_str()), Some(k));
            let json = format!("\"{}\"", k.as_str());
            assert_eq!(serde_json::to_string(&k).unwrap(), json);
            assert_eq!(serde_json::from_str::<ImexEventKind>(&json).unwrap(), k);
        }
        assert_eq!(ImexEventKind::parse("nope"), None);
        assert!(ImexEventKind::DaemonDied.interrupts());
        assert!(ImexEventKind::MemberLost.interrupts());
        assert!(!ImexEventKind::DomainUp.interrupts());
    }

    fn doc(path: &str) -> String {
        let at = format!("{}/../{path}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&at).unwrap_or_else(|e| panic!("{at}: {e}"))
    }

    /// The text of `text` between `from` and the next `to` after it.
    fn between<'a>(text: &'a str, from: &str, to: &str, what: &str) -> &'a str {
        let start = text
            .find(from)
            .unwrap_or_else(|| panic!("{what}: no {from:?}"))
            + from.len();
        let len = text[start..]
            .find(to)
            .unwrap_or_else(|| panic!("{what}: no {to:?} after {from:?}"));
        &text[start..start + len]
    }

    /// Every `x` in `text`, without the quotes of a `"x"`.
    fn backticked(text: &str) -> Vec<&str> {
        text.split('`')
            .skip(1)
            .step_by(2)
            .map(|t| t.trim_matches('"'))
            .collect()
    }

    fn names(kinds: impl IntoIterator<Item = ImexEventKind>) -> Vec<&'static str> {
        kinds.into_iter().map(ImexEventKind::as_str).collect()
    }

    /// docs/json.md: `show`'s `imex_events` name every kind, in `ALL`'s
    /// order; `history`'s `imex_interrupted` names the kinds that interrupt.
    #[test]
    fn json_md_names_exactly_the_event_kinds() {
        let text = doc("docs/json.md");
        let show = between(&text, "`imex_events` [{", "}]", "docs/json.md's show row");
        let kinds = backticked(between(show, "`kind` (", ")", "`kind` in imex_events"));
        assert_eq!(
            kinds,
            names(ImexEventKind::ALL),
            "docs/json.md, show's imex_events"
        );
        let history = between(
            &text,
            "`imex_interrupted` bool (",
            ")",
            "docs/json.md's history row",
        );
        let interrupting = backticked(between(
            history,
            "recorded a ",
            " event",
            "the kinds that interrupt",
        ));
        let code = names(ImexEventKind::ALL.into_iter().filter(|k| k.interrupts()));
        assert_eq!(
            interrupting, code,
            "docs/json.md, history's imex_interrupted"
        );
    }

    /// docs/guide.md's table of the watcher's events has a row for every
    /// kind (by the words `show` and `job` print), and no other; and says
    /// how many kinds the counter has.
    #[test]
    fn guide_md_watcher_table_names_exactly_the_event_kinds() {
        let text = doc("docs/guide.md");
        let section = between(
            &text,
            "## While the job runs: the domain watcher",
            "\n## ",
            "docs/guide.md",
        );
        let rows = between(
            section,
            "| event | means | do |\n|---|---|---|\n",
            "\n\n",
            "the events table",
        );
        let mut listed: Vec<&str> = rows
            .lines()
            .flat_map(|row| backticked(row.split(" | ").next().unwrap_or_default()))
            .collect();
        let mut code: Vec<&str> = ImexEventKind::ALL
            .into_iter()
            .map(ImexEventKind::words)
            .collect();
        listed.sort_unstable();
        code.sort_unstable();
        assert_eq!(
            listed, code,
            "docs/guide.md's table of the watcher's events"
        );
        const COUNT: [&str; 13] = [
            "no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
            "eleven", "twelve",
        ];
        let said = between(&text, "`slurm_imex_imex_events_total{kind}` (the domain watcher's events, one\n    series for each of its ", " kinds", "docs/guide.md's metrics list");
        assert_eq!(
            COUNT.iter().position(|w| *w == said),
            Some(ImexEventKind::ALL.len()),
            "docs/guide.md says {said} kinds"
        );
    }

    #[test]
    fn a_line_names_the_event_its_time_and_cause() {
        let e = ImexEvent::new(7, "n3", 0, ImexEventKind::DaemonDied, "killed by signal 9");
        let line = e.line();
        assert!(line.starts_with("IMEX daemon died at "), "{line}");
        assert!(line.ends_with(" (killed by signal 9)"), "{line}");
        let up = ImexEvent::new(7, "n3", 0, ImexEventKind::DomainUp, "");
        assert!(!up.line().contains('('), "{}", up.line());
    }

    #[test]
    fn a_summary_keeps_each_details_commas_and_says_how_many_did_not_fit() {
        let e = |d: &str| ImexEvent::new(7, "n1", 0, ImexEventKind::DomainDegraded, d);
        let events = [
            e("DEGRADED: n2 UNAVAILABLE, n3 UNAVAILABLE"),
            e("x"),
            e("y"),
        ];
        let all = summary_line(&events, 1000).unwrap();
        assert!(
            all.contains("(DEGRADED: n2 UNAVAILABLE, n3 UNAVAILABLE); IMEX"),
            "{all}"
        );
        assert_eq!(all.matches("; IMEX").count(), 2, "{all}");
        let cut = summary_line(&events, 80).unwrap();
        assert!(cut.ends_with("; … (2 more)"), "{cut}");
        assert_eq!(summary_line(&[], 80), None);
    }

    #[test]
    fn a_long_detail_is_capped() {
        let e = ImexEvent::new(7, "n3", 0, ImexEventKind::DomainDegraded, &"x".repeat(5000));
        assert!(e.detail.len() <= DETAIL_MAX + 30, "{}", e.detail.len());
        let forged = ImexEvent::new(7, "n3", 0, ImexEventKind::DaemonDied, "a\nb");
        assert!(!forged.line().contains('\n'));
    }
}
