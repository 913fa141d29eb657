//! The `shared-nodes` check (doctor --cluster): which partitions can start
//! an `--imex` job on a node another job shares, and whether the shipped
//! job_submit.lua (conf-examples/, docs/shared-nodes.md) is wired in to
//! steer such jobs to whole nodes at submission. In per-job domains one node
//! serves one job's domain; in rack-wide domains jobs may share nodes.

use crate::check::{Check, CheckName};
use crate::slurm_view::SlurmView;
use slurm_imex_domain::config::{DomainScope, SharedNodes};
use slurm_imex_settings::Config;
use std::path::{Path, PathBuf};

/// Largest job_submit.lua read (site scripts are a few KiB).
const MAX_SCRIPT_BYTES: u64 = 1 << 20;
/// Most partitions named in one line of the report.
const MAX_NAMED: usize = 8;

/// What the block of conf-examples/job_submit.lua must be, and be called.
const GUARD_MARKS: [&str; 3] = [
    "BEGIN slurm_imex",
    "slurm_imex.submit(",
    "slurm_imex.modify(",
];

/// A partition as `scontrol -o show partition` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    pub name: String,
    /// "EXCLUSIVE", "NO", "YES:4", "FORCE:2".
    pub oversubscribe: String,
    /// Slurm 26.05+: "NODE", "TOPO", "USER" or "NO" (`Exclusive=`, which
    /// now carries what `OverSubscribe=EXCLUSIVE` used to).
    pub exclusive: Option<String>,
}

impl Partition {
    fn forces_sharing(&self) -> bool {
        self.oversubscribe.to_ascii_uppercase().starts_with("FORCE")
    }

    /// Whether two jobs can run on one of its nodes: any OverSubscribe but
    /// EXCLUSIVE, except NO under select/linear (which allocates whole nodes).
    fn shares_nodes(&self, select_linear: bool) -> bool {
        let o = self.oversubscribe.to_ascii_uppercase();
        let whole = matches!(self.exclusive.as_deref(), Some("NODE" | "TOPO"));
        !(o == "EXCLUSIVE" || whole || (o == "NO" && select_linear))
    }
}

/// The partitions of a `scontrol -o show partition` answer.
/// `Key=value` words split by hand: no crate reads scontrol's one-liners.
pub fn parse_partitions(text: &str) -> Vec<Partition> {
    text.lines()
        .filter_map(|line| {
            let value = |key: &str| {
                line.split_whitespace()
                    .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
                    .map(str::to_string)
            };
            Some(Partition {
                name: value("PartitionName")?,
                oversubscribe: value("OverSubscribe").unwrap_or_else(|| "NO".into()),
                exclusive: value("Exclusive").map(|e| e.to_ascii_uppercase()),
            })
        })
        .collect()
}

/// Whether slurmctld runs the guard: `lua` among JobSubmitPlugins, and a
/// job_submit.lua beside slurm.conf that holds and calls the slurm_imex
/// block. Err: what is missing, as the end of a sentence.
pub fn guard_wired(slurm: &SlurmView, script: &Path) -> Result<(), String> {
    let plugins = slurm.get("JobSubmitPlugins").unwrap_or("");
    let has_lua = plugins
        .split(',')
        .any(|p| matches!(p.trim(), "lua" | "job_submit/lua"));
    if !has_lua {
        return Err(format!(
            "JobSubmitPlugins ({}) has no lua",
            or_unset(plugins)
        ));
    }
    let text = slurm_imex_core::fsutil::read_bounded_text(script, MAX_SCRIPT_BYTES)
        .map_err(|e| format!("{}: {e}", script.display()))?;
    match GUARD_MARKS.iter().find(|m| !text.contains(*m)) {
        None => Ok(()),
        Some(mark) => Err(format!(
            "{} has no `{mark}` (the slurm_imex block, called from slurm_job_submit and slurm_job_modify)",
            script.display()
        )),
    }
}

fn or_unset(v: &str) -> &str {
    if v.is_empty() {
        "unset"
    } else {
        v
    }
}

/// The job_submit.lua slurmctld loads: beside the slurm.conf it read.
pub fn script_path(slurm: &SlurmView) -> PathBuf {
    slurm
        .slurm_conf()
        .and_then(|c| c.parent().map(|d| d.join("job_submit.lua")))
        .unwrap_or_else(|| PathBuf::from("/etc/slurm/job_submit.lua"))
}

/// The check, on what the controller runs with.
pub fn check(
    config: &Config,
    slurm: &SlurmView,
    partitions: Result<Vec<Partition>, String>,
) -> Check {
    if config.engine.domain == DomainScope::Rack {
        return Check::pass(
            CheckName::SharedNodes,
            "rack-wide IMEX domains: --imex jobs may share nodes, each with its own channel",
        );
    }
    let partitions = match partitions {
        Ok(p) => p,
        Err(e) => {
            return Check::warn(
                CheckName::SharedNodes,
                format!("partitions not read: {e}"),
                "run doctor --cluster where slurmctld answers",
            )
        }
    };
    let linear = slurm
        .get("SelectType")
        .is_some_and(|s| s.ends_with("linear"));
    let sharing: Vec<&Partition> = partitions
        .iter()
        .filter(|p| p.shares_nodes(linear))
        .collect();
    if sharing.is_empty() {
        return Check::pass(CheckName::SharedNodes, "every partition gives whole nodes (OverSubscribe=EXCLUSIVE): --imex jobs never share a node");
    }
    let script = script_path(slurm);
    match guard_wired(slurm, &script) {
        Ok(()) => Check::pass(CheckName::SharedNodes, steered(config.engine.shared_nodes, &sharing)),
        Err(missing) => Check::fail(
            CheckName::SharedNodes,
            format!(
                "--imex jobs can start on a node another job shares in {} and then fail at their first task (one IMEX domain per node): nothing steers them at submission, {missing}",
                named(&sharing)
            ),
            format!(
                "copy job_submit.lua (conf-examples/; the packages install /usr/share/doc/slurm-imex/examples/job_submit.lua) to {} or paste its slurm_imex block into yours, set JobSubmitPlugins=lua, then `scontrol reconfigure`; or make those partitions OverSubscribe=EXCLUSIVE",
                script.display()
            ),
        ),
    }
}

/// The PASS line when the guard is wired: what happens in which partitions.
fn steered(policy: SharedNodes, sharing: &[&Partition]) -> String {
    let (forced, open): (Vec<&Partition>, Vec<&Partition>) =
        sharing.iter().partition(|p| p.forces_sharing());
    let mut said = Vec::new();
    if !open.is_empty() {
        said.push(match policy {
            SharedNodes::Exclusive => format!(
                "job_submit.lua makes --imex jobs whole-node in {}",
                named(&open)
            ),
            SharedNodes::Refuse => format!(
                "job_submit.lua refuses --imex jobs without --exclusive in {}",
                named(&open)
            ),
        });
    }
    if !forced.is_empty() {
        said.push(format!("refuses them at submission in {}", named(&forced)));
    }
    said.join("; ")
}

/// "a (OverSubscribe=NO), b (OverSubscribe=FORCE:2)", at most MAX_NAMED.
fn named(parts: &[&Partition]) -> String {
    let mut text: Vec<String> = parts
        .iter()
        .take(MAX_NAMED)
        .map(|p| match p.exclusive.as_deref() {
            Some(e) if e != "NO" => format!(
                "{} (OverSubscribe={}, Exclusive={e})",
                p.name, p.oversubscribe
            ),
            _ => format!("{} (OverSubscribe={})", p.name, p.oversubscribe),
        })
        .collect();
    if parts.len() > MAX_NAMED {
        text.push(format!("{} more", parts.len() - MAX_NAMED));
    }
    text.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Status;

    const ANSWER: &str =
        "PartitionName=imex AllowGroups=ALL Default=YES OverSubscribe=EXCLUSIVE State=UP\n\
PartitionName=shared AllowGroups=ALL OverSubscribe=NO State=UP\n\
PartitionName=forced AllowGroups=ALL OverSubscribe=FORCE:2 State=UP\n";

    fn view(dir: &Path, plugins: &str, select: &str) -> SlurmView {
        SlurmView::parse(&format!(
            "SLURM_CONF = {}/slurm.conf\nJobSubmitPlugins = {plugins}\nSelectType = {select}\n",
            dir.display()
        ))
    }

    fn guard(dir: &Path) {
        let shipped = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../conf-examples/job_submit.lua"
        );
        std::fs::copy(shipped, dir.join("job_submit.lua")).unwrap();
    }

    #[test]
    fn partitions_are_read_from_scontrols_one_liners() {
        let parts = parse_partitions(ANSWER);
        assert_eq!(parts.len(), 3);
        assert_eq!(
            parts[2],
            Partition {
                name: "forced".into(),
                oversubscribe: "FORCE:2".into(),
                exclusive: None
            }
        );
        assert!(!parts[0].shares_nodes(false));
        assert!(parts[1].shares_nodes(false) && !parts[1].shares_nodes(true));
        assert!(parts[2].forces_sharing() && parts[2].shares_nodes(true));
    }

    #[test]
    fn sharing_partitions_without_the_guard_fail_naming_them_and_the_fix() {
        let d = tempfile::tempdir().unwrap();
        let c = check(
            &Config::default(),
            &view(d.path(), "(null)", "select/cons_tres"),
            Ok(parse_partitions(ANSWER)),
        );
        assert_eq!(c.verdict, Status::Fail);
        assert!(
            c.found
                .contains("shared (OverSubscribe=NO), forced (OverSubscribe=FORCE:2)"),
            "{}",
            c.found
        );
        assert!(
            c.found.ends_with("JobSubmitPlugins (unset) has no lua"),
            "{}",
            c.found
        );
        assert!(
            c.remedy
                .contains(&format!("{}/job_submit.lua", d.path().display())),
            "{}",
            c.remedy
        );
        // lua set, but the script lacks the block.
        std::fs::write(
            d.path().join("job_submit.lua"),
            "function slurm_job_submit() return slurm.SUCCESS end\n",
        )
        .unwrap();
        let c = check(
            &Config::default(),
            &view(d.path(), "lua", "select/cons_tres"),
            Ok(parse_partitions(ANSWER)),
        );
        assert_eq!(c.verdict, Status::Fail);
        assert!(c.found.contains("has no `BEGIN slurm_imex`"), "{}", c.found);
    }

    #[test]
    fn the_shipped_script_wired_in_passes_saying_what_it_does_where() {
        let d = tempfile::tempdir().unwrap();
        guard(d.path());
        let slurm = view(d.path(), "lua,require_timelimit", "select/cons_tres");
        let c = check(&Config::default(), &slurm, Ok(parse_partitions(ANSWER)));
        assert_eq!(c.verdict, Status::Pass, "{}", c.found);
        assert_eq!(c.found, "job_submit.lua makes --imex jobs whole-node in shared (OverSubscribe=NO); refuses them at submission in forced (OverSubscribe=FORCE:2)");
        let mut refuse = Config::default();
        refuse.engine.shared_nodes = SharedNodes::Refuse;
        let c = check(&refuse, &slurm, Ok(parse_partitions(ANSWER)));
        assert!(
            c.found
                .starts_with("job_submit.lua refuses --imex jobs without --exclusive in shared"),
            "{}",
            c.found
        );
    }

    #[test]
    fn whole_node_partitions_and_rack_domains_need_no_guard() {
        let d = tempfile::tempdir().unwrap();
        let exclusive = parse_partitions(
            "PartitionName=imex OverSubscribe=EXCLUSIVE\nPartitionName=b OverSubscribe=NO\n",
        );
        let c = check(
            &Config::default(),
            &view(d.path(), "(null)", "select/linear"),
            Ok(exclusive),
        );
        assert_eq!(c.verdict, Status::Pass, "{}", c.found);
        let mut rack = Config::default();
        rack.engine.domain = DomainScope::Rack;
        let c = check(
            &rack,
            &view(d.path(), "(null)", "select/cons_tres"),
            Ok(parse_partitions(ANSWER)),
        );
        assert_eq!(c.verdict, Status::Pass);
        assert!(c.found.contains("may share nodes"));
        let c = check(
            &Config::default(),
            &view(d.path(), "lua", "select/cons_tres"),
            Err("timed out".into()),
        );
        assert_eq!(c.verdict, Status::Warn);
    }
}
