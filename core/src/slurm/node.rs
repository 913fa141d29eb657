//! A node as Slurm's controller sees it: its state, reason and Extra
//! (`scontrol show node -o`), and the changes slurm-imex makes to it: DRAIN
//! with a reason, RESUME, and its Extra. Whether to drain or resume is
//! decided in one place only, the drain decision (`slurm_imex_hooks::drain`);
//! what goes in Extra, in `slurm_imex_domain::rack::clique`.

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

    /// One node's state, reason and Extra.
    pub fn node(&self, node: &str) -> Result<NodeStatus> {
        let out = self.run(
            &["show", "node", node, "-o"],
            &format!("scontrol show node {node}"),
        )?;
        parse_node_line(out.stdout.trim()).ok_or_else(|| {
            Error::new(format!(
                "cannot read node {node} from scontrol output: {}",
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
}

impl<'a> NodeRead<'a> {
    pub fn new(scontrol: &'a Scontrol, node: &'a str) -> NodeRead<'a> {
        NodeRead {
            scontrol,
            node,
            answer: std::cell::OnceCell::new(),
        }
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
