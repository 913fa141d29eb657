//! A node as Slurm's controller sees it: its state, reason and Extra
//! (`scontrol show node -o`), and the changes slurm-imex makes to it: DRAIN
//! with a reason, RESUME, and its Extra. Whether to drain or resume is
//! decided in one place only, the drain decision (`slurm_imex_hooks::drain`);
//! what goes in Extra, in `slurm_imex_domain::rack::clique`. Every name
//! is checked before Slurm is asked about it ([`node_names`]), and every
//! answer is read line by line, one node per line: a node is only ever
//! judged by its own line.

use super::Scontrol;
use crate::error::{Error, Result};

/// A node's state, reason and Extra as `scontrol show node -o` prints them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStatus {
    pub name: String,
    pub state: String,
    pub reason: Option<String>,
    /// The node's `Extra` field (Slurm 21.08+), free text set by admins and
    /// tools; slurm-imex keeps its `nvlink_clique` key there (`slurm_imex_domain::rack::clique`).
    pub extra: Option<String>,
}

impl NodeStatus {
    /// DRAIN, DRAINING or DRAINED, alone or as a flag (`IDLE+DRAIN`).
    pub fn is_drained(&self) -> bool {
        self.state.contains("DRAIN")
    }
}

/// Parse one `scontrol show node -o` line. `Reason=` is free text (it may
/// hold spaces) followed by ` [user@time]`; it is the last field that can.
/// Hand-parsed: scontrol has no machine format on every version we ship for
/// (`--json` needs Slurm's data_parser plugins, which a site may not build).
pub fn parse_node_line(line: &str) -> Option<NodeStatus> {
    let word = |key: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .map(str::to_string)
    };
    let state = word("State=")?;
    // Reason is looked for outside Extra's JSON, which may mention it.
    let outside_extra = match extra_json_span(line) {
        Some(span) => format!("{} {}", &line[..span.start], &line[span.end..]),
        None => line.to_string(),
    };
    let reason = outside_extra.find(" Reason=").map(|at| {
        let text = &outside_extra[at + " Reason=".len()..];
        let end = text.rfind(" [").unwrap_or(text.len());
        text[..end].trim().to_string()
    });
    let present = |v: &String| !v.is_empty() && v != "(null)";
    Some(NodeStatus {
        name: word("NodeName=").unwrap_or_default(),
        state,
        reason: reason.filter(present),
        extra: extra_field(line).filter(present),
    })
}

/// `Extra=`: when it holds a JSON object (what slurm-imex writes there), the
/// whole object, however much text that looks like another field (` Reason=`,
/// quotes, spaces) an admin put inside it; else its free text.
fn extra_field(line: &str) -> Option<String> {
    match extra_json_span(line) {
        Some(span) => Some(line[span].to_string()),
        None => free_text_field(line, "Extra"),
    }
}

/// Where `Extra`'s JSON object lies in `line`: the first ` Extra={` that
/// starts a whole JSON object (so a Reason or Comment mentioning `Extra=`
/// before it cannot hide it).
fn extra_json_span(line: &str) -> Option<std::ops::Range<usize>> {
    line.match_indices(" Extra={").find_map(|(at, _)| {
        let start = at + " Extra=".len();
        let mut values =
            serde_json::Deserializer::from_str(&line[start..]).into_iter::<serde_json::Value>();
        match values.next() {
            Some(Ok(serde_json::Value::Object(_))) => Some(start..start + values.byte_offset()),
            _ => None,
        }
    })
}

/// A field whose value may hold spaces (`Extra=`, `Comment=`): from after
/// `Key=` to the next ` Word=` that starts another field. scontrol does not
/// quote; a value that itself holds ` Word=` is cut there, and whoever reads
/// it must treat what it gets as untrusted text.
fn free_text_field(line: &str, key: &str) -> Option<String> {
    let start = line.find(&format!(" {key}="))? + key.len() + 2;
    let rest = &line[start..];
    let end = rest
        .match_indices(' ')
        .map(|(i, _)| i)
        .find(|&i| {
            let next = &rest[i + 1..];
            let name_len = next
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .count();
            name_len > 0
                && next.as_bytes().get(name_len) == Some(&b'=')
                && next.starts_with(|c: char| c.is_ascii_uppercase())
        })
        .unwrap_or(rest.len());
    Some(rest[..end].trim().to_string())
}

/// The nodes of `hostlist` (`n1`, `n[1-4],m2`), each a name Slurm could
/// hold, at most `max` of them: an empty, whitespace or otherwise malformed
/// hostlist is one line saying what is wrong, before Slurm is asked.
pub fn node_names(hostlist: &str, max: usize) -> Result<Vec<String>> {
    let names =
        super::hostlist::expand(hostlist, max).map_err(|e| Error::invalid(e.to_string()))?;
    // An option to scontrol, or a path, is no node name.
    match names
        .iter()
        .find(|n| !n.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_'))
    {
        Some(bad) => Err(Error::invalid(format!(
            "\"{}\" is not a node name: a node name starts with a letter, digit or '_'",
            crate::text::cap(&bad.escape_debug().to_string(), crate::text::PIECE_MAX)
        ))),
        None => Ok(names),
    }
}

/// `name` as one node's name: [`node_names`]' rules, and no hostlist.
pub fn node_name(name: &str) -> Result<&str> {
    if name.contains(['[', ',']) {
        return Err(Error::invalid(format!(
            "\"{}\" is a hostlist, not one node name",
            crate::text::cap(&name.escape_debug().to_string(), crate::text::PIECE_MAX)
        )));
    }
    node_names(name, 1).map(|_| name)
}

/// The line of `node` among `shown` (the lines `scontrol show node <node>`
/// printed): the one that names it; else, when Slurm printed exactly one
/// node, that one (Slurm found it by its NodeHostname). Several lines none
/// of which names it are no answer: another node's reason must never be
/// taken for this one's.
fn line_of(node: &str, mut shown: Vec<NodeStatus>) -> Option<NodeStatus> {
    match shown.iter().position(|s| s.name == node) {
        Some(at) => Some(shown.swap_remove(at)),
        None if shown.len() == 1 => shown.pop(),
        None => None,
    }
}

impl Scontrol {
    /// Every node of `hostlist` (None: every node) as slurmctld sees it, in
    /// one call.
    pub fn nodes(&self, hostlist: Option<&str>) -> Result<Vec<NodeStatus>> {
        let mut args = vec!["show", "node"];
        args.extend(hostlist);
        args.push("-o");
        // Streamed: 100,000 nodes' lines are far beyond any output cap, and
        // a node cut off would silently lose its rack.
        Ok(self
            .run_streamed(&args, "scontrol show node", parse_node_line)?
            .items)
    }

    /// Each node of `hostlist` that Slurm shows, each from its own line,
    /// even when Slurm does not know them all (it prints "Node n4 not
    /// found" in the place of an unknown one, and exits 1 after the rest).
    /// A node it printed no line for is simply absent. An answer with no
    /// node at all from a failed call is the call's error. `hostlist` is
    /// one its caller checked ([`node_names`], within its own bound).
    pub fn nodes_shown(&self, hostlist: &str) -> Result<Vec<NodeStatus>> {
        let what = format!("scontrol show node {hostlist}");
        let args = ["show", "node", hostlist, "-o"];
        let answer = crate::process::run_streamed_any(
            self.program(),
            &args,
            self.timeout(),
            &what,
            parse_node_line,
        )?;
        if answer.items.is_empty() && !answer.output.success() {
            return Err(Error::command(format!(
                "{what} failed: {}",
                answer.output.one_line()
            )));
        }
        Ok(answer.items)
    }

    /// One node's state, reason and Extra, from its own line of the
    /// answer. `node` must be one node's name ([`node_name`]): a hostlist
    /// or a malformed name is refused before Slurm is asked.
    pub fn node(&self, node: &str) -> Result<NodeStatus> {
        node_name(node)?;
        let out = self.run(
            &["show", "node", node, "-o"],
            &format!("scontrol show node {node}"),
        )?;
        let shown = out.stdout.lines().filter_map(parse_node_line).collect();
        line_of(node, shown).ok_or_else(|| {
            Error::command(format!(
                "cannot read node {node} from scontrol output (no line of its own): {}",
                out.one_line()
            ))
        })
    }

    /// `scontrol update NodeName=<node> Extra=<extra>`.
    pub fn set_extra(&self, node: &str, extra: &str) -> Result<()> {
        self.update_node(node, &[&format!("Extra={extra}")], "Extra")
    }

    /// `scontrol update NodeName=<node> State=DRAIN Reason=<reason>`.
    pub fn drain(&self, node: &str, reason: &str) -> Result<()> {
        self.update_node(
            node,
            &["State=DRAIN", &format!("Reason={reason}")],
            "State=DRAIN",
        )
    }

    /// `scontrol update NodeName=<node> State=RESUME`.
    pub fn resume(&self, node: &str) -> Result<()> {
        self.update_node(node, &["State=RESUME"], "State=RESUME")
    }

    fn update_node(&self, node: &str, fields: &[&str], what: &str) -> Result<()> {
        let name = format!("NodeName={node}");
        let mut args = vec!["update", name.as_str()];
        args.extend_from_slice(fields);
        self.run(&args, &format!("scontrol update {name} {what}"))
            .map(drop)
    }
}

/// One node as slurmctld holds it, asked at most once however many
/// decisions need it (whether to resume it, what its Extra holds), and only
/// when one does: `slurm-imex check` makes no read when nothing changed.
pub struct NodeRead<'a> {
    scontrol: &'a Scontrol,
    node: &'a str,
    answer: std::cell::OnceCell<Result<NodeStatus>>,
    /// slurmctld's own verdict on the node, when slurmd passed it to its
    /// HealthCheckProgram ([`NodeRead::telling`]).
    healthy: Option<bool>,
}

impl<'a> NodeRead<'a> {
    pub fn new(scontrol: &'a Scontrol, node: &'a str) -> NodeRead<'a> {
        NodeRead {
            scontrol,
            node,
            answer: std::cell::OnceCell::new(),
            healthy: None,
        }
    }

    /// What slurmctld told slurmd of the node, as `SLURM_NODE_IS_HEALTHY`
    /// holds it (Slurm 26.05.2+ with `SlurmctldParameters=health_check_report`,
    /// the default from 26.11): "yes" when it is neither down, drained,
    /// draining, failing nor in maintenance, "no" when it is; unset or
    /// anything else says nothing.
    pub fn telling(mut self, slurm_node_is_healthy: Option<&str>) -> NodeRead<'a> {
        self.healthy = match slurm_node_is_healthy.map(str::trim) {
            Some("yes") => Some(true),
            Some("no") => Some(false),
            _ => None,
        };
        self
    }

    /// slurmctld's verdict, when slurmd gave it: `Some(true)` means the
    /// node is in service (not drained), with no read.
    pub fn told_healthy(&self) -> Option<bool> {
        self.healthy
    }

    /// `scontrol show node <node> -o`, the first time; its answer after.
    pub fn get(&self) -> Result<&NodeStatus> {
        self.answer
            .get_or_init(|| self.scontrol.node(self.node))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Whether slurmctld was asked (successfully or not).
    pub fn asked(&self) -> bool {
        self.answer.get().is_some()
    }

    /// Whether slurmctld was asked and answered.
    pub fn answered(&self) -> bool {
        matches!(self.answer.get(), Some(Ok(_)))
    }

    pub fn node(&self) -> &str {
        self.node
    }

    pub fn scontrol(&self) -> &Scontrol {
        self.scontrol
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_scontrol_node_lines() {
        let l = "NodeName=n2 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 State=IDLE+DRAIN ThreadsPerCore=1 \
                 Partitions=imex BootTime=2026-11-22T01:00:00 LastBusyTime=2026-11-22T02:00:00 \
                 Reason=imex-health: xid gpu0 1650924060001: XID 79 (REBOOT) on 0000:1a:00: GPU has fallen off the bus. [root@2026-11-22T02:10:00]";
        let s = parse_node_line(l).unwrap();
        assert_eq!(s.state, "IDLE+DRAIN");
        assert!(s.is_drained());
        assert_eq!(s.reason.as_deref(), Some("imex-health: xid gpu0 1650924060001: XID 79 (REBOOT) on 0000:1a:00: GPU has fallen off the bus."));
        let s = parse_node_line("NodeName=n1 State=IDLE Partitions=imex").unwrap();
        assert_eq!(s.reason, None);
        assert_eq!((s.name.as_str(), s.extra.as_deref()), ("n1", None));
        assert!(!s.is_drained());
        assert!(parse_node_line("garbage").is_none());
    }

    #[test]
    fn extra_is_read_up_to_the_next_field() {
        let l = "NodeName=n3 Arch=x86_64 State=IDLE Comment=(null) Extra={\"nvlink_clique\":\"u.2\",\"note\":\"two words\"} \
                 Partitions=imex BootTime=2026-11-22T01:00:00";
        let s = parse_node_line(l).unwrap();
        assert_eq!(
            s.extra.as_deref(),
            Some("{\"nvlink_clique\":\"u.2\",\"note\":\"two words\"}")
        );
        let s = parse_node_line("NodeName=n1 State=IDLE Extra=(null) Partitions=x").unwrap();
        assert_eq!(s.extra, None);
        let s = parse_node_line("NodeName=n1 State=IDLE Extra=rack 7 spare Partitions=x").unwrap();
        assert_eq!(s.extra.as_deref(), Some("rack 7 spare"));
        let s = parse_node_line("NodeName=n1 State=IDLE Extra=last").unwrap();
        assert_eq!(s.extra.as_deref(), Some("last"));
    }

    #[test]
    fn a_name_that_is_no_node_is_refused_in_one_line() {
        for (bad, says) in [
            ("", "empty hostlist"),
            ("  ", "whitespace cannot be in a host name"),
            ("n 1", "whitespace cannot be in a host name"),
            ("n1;reboot", "';' cannot be in a host name"),
            ("n[1-", "never closed"),
            ("n1,", "empty host name between commas"),
            ("-o", "\"-o\" is not a node name"),
        ] {
            let e = node_names(bad, 10).unwrap_err().to_string();
            assert!(e.contains(says), "{bad:?}: {e}");
            assert!(node_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(node_names("n[1-2],m3", 10).unwrap(), ["n1", "n2", "m3"]);
        assert_eq!(node_name("gb-r1-01").unwrap(), "gb-r1-01");
        let e = node_name("n[1-2]").unwrap_err().to_string();
        assert!(e.contains("is a hostlist, not one node name"), "{e}");
    }

    /// A stand-in scontrol printing `answer` to `show node`, logging calls.
    fn answering(dir: &std::path::Path, answer: &str) -> Scontrol {
        use std::os::unix::fs::PermissionsExt;
        let script = dir.join("scontrol");
        let body = format!(
            "#!/bin/sh\necho \"$*\" >> {}\ncat <<'EOF'\n{answer}\nEOF\n",
            dir.join("calls").display()
        );
        std::fs::write(&script, body).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        Scontrol::new(&script, std::time::Duration::from_secs(10))
    }

    #[test]
    fn a_node_is_read_from_its_own_line_only() {
        let d = tempfile::tempdir().unwrap();
        let two = "NodeName=n1 State=IDLE+DRAIN Reason=imex-health: xid gpu0 [root@t]\n\
                   NodeName=n2 State=IDLE+DRAIN Reason=admin: bad DIMM [root@t]";
        let sc = answering(d.path(), two);
        let n2 = sc.node("n2").unwrap();
        assert_eq!(
            (n2.name.as_str(), n2.reason.as_deref()),
            ("n2", Some("admin: bad DIMM"))
        );
        // Two lines, neither n3's: no answer, never the first line's reason.
        let e = sc.node("n3").unwrap_err().to_string();
        assert!(e.contains("cannot read node n3"), "{e}");
        // One line under another name: Slurm found the node by its hostname.
        let sc = answering(d.path(), "NodeName=n7 State=IDLE");
        assert_eq!(sc.node("host7").unwrap().name, "n7");
    }

    #[test]
    fn a_bad_name_asks_slurm_nothing() {
        let d = tempfile::tempdir().unwrap();
        let sc = answering(d.path(), "NodeName=n1 State=IDLE");
        for bad in ["", " ", "n[1-2]", "n1,n2", "-o"] {
            assert!(sc.node(bad).is_err(), "{bad:?}");
        }
        assert!(!d.path().join("calls").exists(), "Slurm was asked");
    }

    #[test]
    fn our_key_in_extra_survives_any_text_an_admin_puts_beside_it() {
        let extra = r#"{"note":"drained: Reason=flaky \"tray\" Partitions=x","nvlink_clique":"u.2","owner":"it's Bob's"}"#;
        let l = format!(
            "NodeName=n1 State=IDLE+DRAIN Comment=see Extra=old Extra={extra} Reason=GPU gone [root@2026-11-24T01:00:00]"
        );
        let s = parse_node_line(&l).unwrap();
        assert_eq!(s.extra.as_deref(), Some(extra));
        assert_eq!(s.reason.as_deref(), Some("GPU gone"));
        let v: serde_json::Value = serde_json::from_str(s.extra.as_deref().unwrap()).unwrap();
        assert_eq!(v["nvlink_clique"], "u.2");
    }
}
