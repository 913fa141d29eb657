//! Racks as Slurm's `topology/block` describes them, and the rule that one
//! IMEX domain must sit inside one NVLink domain: an `--imex` job whose
//! nodes lie in more than one block cannot share GPU memory across them.
//!
//! Two formats, both read from slurm.conf's directory unless configured:
//! `topology.yaml` (Slurm >= 25.05; when it exists, Slurm ignores
//! topology.conf) and `topology.conf` `BlockName=` lines (>= 23.11).
//! topology.conf is parsed by hand: it is Slurm's own `Key=value` format,
//! for which no crate exists. YAML goes through yaml-rust2 (pure Rust).

use crate::rack::nvlink_domain::NvlinkDomain;
use slurm_imex_core::config::{AutoPath, SlurmConfig};
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::slurm::hostlist;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use yaml_rust2::{Yaml, YamlLoader};

/// Largest topology file read.
pub(crate) const MAX_FILE_BYTES: u64 = 16 << 20;

/// The topology file in force, or None when there is none to check against.
pub fn locate(cfg: &SlurmConfig, slurm_conf: Option<&Path>) -> Option<PathBuf> {
    match &cfg.topology {
        AutoPath::None => None,
        AutoPath::Path(p) => Some(p.clone()),
        AutoPath::Auto => {
            let dir = slurm_conf?.parent()?;
            ["topology.yaml", "topology.conf"]
                .iter()
                .map(|name| dir.join(name))
                .find(|p| p.exists())
        }
    }
}

/// (topology name, node -> block name); topology.conf has one, unnamed.
type NamedTopology = (String, HashMap<String, String>);

/// Every block topology in one file: for each, which block each node is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocks {
    pub source: PathBuf,
    /// SHA-256 of the file's bytes, hex.
    pub digest: String,
    topologies: Vec<NamedTopology>,
}

impl Blocks {
    /// Parse `path` (YAML when it ends in .yaml/.yml). `max_nodes` bounds
    /// every block's hostlist.
    pub fn load(path: &Path, max_nodes: usize) -> Result<Blocks> {
        let text = slurm_imex_core::fsutil::read_bounded_text(path, MAX_FILE_BYTES)?;
        let yaml = matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml")
        );
        let parsed = if yaml {
            parse_yaml(&text, max_nodes)
        } else {
            parse_conf(&text, max_nodes)
        };
        parsed
            .map(|topologies| Blocks {
                source: path.to_path_buf(),
                digest: crate::digest::sha256_hex(text.as_bytes()),
                topologies,
            })
            .map_err(|e| e.context(path.display()))
    }

    /// Ok when, in every block topology that knows any of `nodes`, all of
    /// them lie in one block. Otherwise the line that tells the user why
    /// the job cannot have one IMEX domain and how to ask for one.
    pub fn check_one_block(&self, nodes: &[String]) -> Result<()> {
        for (name, node_block) in &self.topologies {
            if !nodes.iter().any(|n| node_block.contains_key(n)) {
                continue;
            }
            // Blocks in the order the job's nodes first reach them.
            let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
            for node in nodes {
                let block = node_block.get(node).map_or("(no block)", |b| b.as_str());
                match groups.iter_mut().find(|(b, _)| *b == block) {
                    Some((_, members)) => members.push(node),
                    None => groups.push((block, vec![node])),
                }
            }
            if groups.len() > 1 {
                let spans: Vec<String> = groups
                    .iter()
                    .map(|(b, members)| format!("{b} ({})", summarize(members, 8)))
                    .collect();
                let topo = if name.is_empty() {
                    String::new()
                } else {
                    format!(" topology {name}")
                };
                return Err(Error::invalid(format!(
                    "the job's nodes span {} NVLink blocks ({}{topo}): {}; one IMEX domain \
                     must stay in one rack: submit with --segment=<nodes per job>, \
                     --exclusive=topo, or to a partition per rack",
                    groups.len(),
                    self.source.display(),
                    spans.join(", ")
                )));
            }
        }
        Ok(())
    }
}

impl Blocks {
    /// `node`'s NVLink domain among the job's `nodes`: the job's nodes in
    /// `node`'s block, in the first block topology that knows any of them.
    /// A node in no block of that topology is a domain of its own, named
    /// after itself: nothing says it shares NVLink with anyone. The whole
    /// job when no topology knows any of its nodes.
    pub fn domain_of(&self, node: &str, nodes: &[String]) -> NvlinkDomain {
        let Some(node_block) = self.block_of(nodes) else {
            return NvlinkDomain::whole_job(nodes.to_vec());
        };
        let Some(block) = node_block.get(node) else {
            return NvlinkDomain {
                name: Some(node.to_string()),
                nodes: vec![node.to_string()],
                source: Some(self.source.display().to_string()),
            };
        };
        NvlinkDomain {
            name: Some(block.clone()),
            nodes: nodes
                .iter()
                .filter(|n| node_block.get(n.as_str()) == Some(block))
                .cloned()
                .collect(),
            source: Some(self.source.display().to_string()),
        }
    }
}

impl Blocks {
    /// Whether this file says exactly what the rack map `racks` (name,
    /// nodes) says: one block topology whose blocks are those racks, by
    /// name and node for node. Then every job's domains are the same by
    /// either file, and a prolog that has the map need not parse this one
    /// (`crate::rack::index`, `crate::rack::sources`).
    pub fn same_racks_as<'r>(&self, racks: impl Iterator<Item = (&'r str, &'r [String])>) -> bool {
        let [(_, node_block)] = self.topologies.as_slice() else {
            return false;
        };
        let mut listed = 0;
        for (name, nodes) in racks {
            for node in nodes {
                if node_block.get(node).map(String::as_str) != Some(name) {
                    return false;
                }
                listed += 1;
            }
        }
        listed == node_block.len()
    }
}

impl Blocks {
    /// Node -> block, in the first block topology that knows any of `nodes`
    /// (the one `domain_of` splits by).
    pub fn block_of(&self, nodes: &[String]) -> Option<&HashMap<String, String>> {
        self.topologies
            .iter()
            .find(|(_, map)| nodes.iter().any(|n| map.contains_key(n)))
            .map(|(_, map)| map)
    }
}

impl Blocks {
    /// Every node of `node`'s block, in natural order, from the first block
    /// topology that lists `node` (`[imex] domain = "rack"`); None when no
    /// topology lists it.
    pub fn rack_of(&self, node: &str) -> Option<NvlinkDomain> {
        self.topologies.iter().find_map(|(_, node_block)| {
            let block = node_block.get(node)?;
            let mut nodes: Vec<String> = node_block
                .iter()
                .filter(|(_, b)| *b == block)
                .map(|(n, _)| n.clone())
                .collect();
            slurm_imex_core::slurm::hostlist::sort_natural(&mut nodes);
            Some(NvlinkDomain {
                name: Some(block.clone()),
                nodes,
                source: Some(self.source.display().to_string()),
            })
        })
    }
}

/// `a,b,c,… (N more)` for lists that may be long.
fn summarize(items: &[&str], keep: usize) -> String {
    let shown = items
        .iter()
        .take(keep)
        .copied()
        .collect::<Vec<_>>()
        .join(",");
    match items.len().saturating_sub(keep) {
        0 => shown,
        more => format!("{shown},… ({more} more)"),
    }
}

/// Most host names one topology file may expand to, every block of every
/// topology together: the rack map's bound on a whole cluster
/// ([`crate::rack::map::MAX_MAP_NODES`], 262,144). A 2 KB topology.conf of
/// `n[1-4096]` blocks, or a small YAML file whose aliases repeat one
/// hostlist, stops here instead of filling memory.
pub const MAX_FILE_HOSTS: usize = crate::rack::map::MAX_MAP_NODES;

/// What a file has expanded so far, against [`MAX_FILE_HOSTS`].
struct HostBudget(usize);

fn add_block(
    map: &mut HashMap<String, String>,
    block: &str,
    nodes: &str,
    max_nodes: usize,
    budget: &mut HostBudget,
) -> Result<()> {
    // A block name becomes a rack's name (the rack map, SLURM_IMEX_DOMAIN):
    // one the map would refuse is refused here, where it is written.
    if !crate::rack::map::is_rack_name(block) {
        return Err(Error::invalid(format!(
            "block \"{}\": a block name slurm-imex takes as a rack's is 1 to {} letters, \
             digits or ._:- (rename the block)",
            slurm_imex_core::text::cap(block, 64),
            crate::rack::map::MAX_NAME_LEN
        )));
    }
    let room = MAX_FILE_HOSTS - budget.0;
    let hosts = hostlist::expand(nodes, max_nodes.min(room)).map_err(|e| {
        if room < max_nodes {
            Error::invalid(format!(
                "block {block}: the file expands to more than {MAX_FILE_HOSTS} host names in \
                 all (slurm-imex reads at most {MAX_FILE_HOSTS}): list each node once"
            ))
        } else {
            e.context(format!("block {block}: nodes \"{nodes}\""))
        }
    })?;
    budget.0 += hosts.len();
    for host in hosts {
        if let Some(other) = map.insert(host.clone(), block.to_string()) {
            if other != block {
                return Err(Error::invalid(format!(
                    "node {host} is in both block {other} and {block}"
                )));
            }
        }
    }
    Ok(())
}

/// Two block topologies that put one node in blocks of different members
/// would give each node another rack for it (a node takes its rack from the
/// first topology that lists it): refused, naming the conflict, so every
/// node computes the same racks or the job fails saying why.
fn refuse_overlaps(topologies: &[NamedTopology]) -> Result<()> {
    let members: Vec<HashMap<&str, Vec<&str>>> = topologies
        .iter()
        .map(|(_, map)| {
            let mut by_block: HashMap<&str, Vec<&str>> = HashMap::new();
            for (node, block) in map {
                by_block.entry(block).or_default().push(node);
            }
            by_block.values_mut().for_each(|v| v.sort_unstable());
            by_block
        })
        .collect();
    for (j, (name_j, map_j)) in topologies.iter().enumerate() {
        for (i, (name_i, map_i)) in topologies[..j].iter().enumerate() {
            for (node, block_j) in map_j {
                let Some(block_i) = map_i.get(node) else {
                    continue;
                };
                if members[i].get(block_i.as_str()) != members[j].get(block_j.as_str()) {
                    return Err(Error::invalid(format!(
                        "block topologies {name_i} and {name_j} overlap: node {node} is in \
                         block {block_i} of {name_i} and block {block_j} of {name_j}, which \
                         hold other nodes, so nodes would disagree about its rack: list each \
                         node in one block topology (or in blocks of the same nodes)"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// topology.conf: `BlockName=<name> Nodes=<hostlist>` lines; `BlockSizes=`
/// and tree `SwitchName=` lines are not about blocks and are skipped.
fn parse_conf(text: &str, max_nodes: usize) -> Result<Vec<NamedTopology>> {
    let mut map = HashMap::new();
    let mut budget = HostBudget(0);
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        let mut block = None;
        let mut nodes = None;
        for word in line.split_whitespace() {
            let Some((key, value)) = word.split_once('=') else {
                continue;
            };
            if key.eq_ignore_ascii_case("BlockName") {
                block = Some(value);
            } else if key.eq_ignore_ascii_case("Nodes") {
                nodes = Some(value);
            }
        }
        match (block, nodes) {
            (Some(b), Some(n)) => add_block(&mut map, b, n, max_nodes, &mut budget)
                .map_err(|e| e.context(format_args!("line {}", i + 1)))?,
            (Some(b), None) => {
                return Err(Error::invalid(format!(
                    "line {}: block {b} has no Nodes=",
                    i + 1
                )))
            }
            _ => {}
        }
    }
    Ok(if map.is_empty() {
        Vec::new()
    } else {
        vec![(String::new(), map)]
    })
}

/// topology.yaml: a list of topologies; each `block:` one contributes its
/// `blocks:` entries (`block:` name, `nodes:` hostlist or list of them).
/// Most YAML nodes a topology file may expand to, aliases included: a
/// 16384-node cluster's file is a few thousand; an alias bomb (`&a [*b, *b]`
/// nested) is billions, which the loader would build in memory.
const MAX_YAML_NODES: u64 = 1_000_000;

/// Counts the nodes a YAML text expands to, aliases included, from the
/// parser's events (linear in the text), before anything is built.
#[derive(Default)]
struct ExpansionCount {
    /// Size of every anchored node, by anchor id.
    anchored: HashMap<usize, u64>,
    /// Open collections: (anchor id, nodes so far).
    open: Vec<(usize, u64)>,
    total: u64,
}

impl ExpansionCount {
    fn add(&mut self, size: u64) {
        self.total = self.total.saturating_add(size);
        if let Some((_, count)) = self.open.last_mut() {
            *count = count.saturating_add(size);
        }
    }

    fn close(&mut self) {
        if let Some((anchor, size)) = self.open.pop() {
            if anchor > 0 {
                self.anchored.insert(anchor, size);
            }
            if let Some((_, count)) = self.open.last_mut() {
                *count = count.saturating_add(size);
            }
        }
    }
}

impl yaml_rust2::parser::EventReceiver for ExpansionCount {
    fn on_event(&mut self, ev: yaml_rust2::Event) {
        use yaml_rust2::Event;
        match ev {
            Event::Scalar(_, _, anchor, _) => {
                if anchor > 0 {
                    self.anchored.insert(anchor, 1);
                }
                self.add(1);
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                self.total = self.total.saturating_add(1);
                self.open.push((anchor, 1));
            }
            Event::SequenceEnd | Event::MappingEnd => self.close(),
            Event::Alias(id) => self.add(self.anchored.get(&id).copied().unwrap_or(1)),
            _ => {}
        }
    }
}

fn parse_yaml(text: &str, max_nodes: usize) -> Result<Vec<NamedTopology>> {
    let mut count = ExpansionCount::default();
    yaml_rust2::parser::Parser::new_from_str(text)
        .load(&mut count, true)
        .map_err(|e| Error::invalid(e.to_string()))?;
    if count.total > MAX_YAML_NODES {
        return Err(Error::invalid(format!(
            "its aliases expand to more than {MAX_YAML_NODES} YAML nodes: write the blocks out \
             without anchors and aliases"
        )));
    }
    let docs = YamlLoader::load_from_str(text).map_err(|e| Error::invalid(e.to_string()))?;
    let Some(doc) = docs.into_iter().next() else {
        return Ok(Vec::new());
    };
    let topologies = match doc {
        Yaml::Array(list) => list,
        Yaml::Null => return Ok(Vec::new()),
        _ => {
            return Err(Error::invalid(
                "expected a list of topologies (\"- topology: name\")",
            ))
        }
    };
    let mut out = Vec::new();
    let mut budget = HostBudget(0);
    for (i, topo) in topologies.iter().enumerate() {
        let name = topo["topology"].as_str().ok_or_else(|| {
            Error::invalid(format!("topology #{} has no \"topology:\" name", i + 1))
        })?;
        let block_topo = &topo["block"];
        if block_topo.is_badvalue() || block_topo.is_null() {
            continue; // a flat, tree, ring or torus topology
        }
        let mut map = HashMap::new();
        let blocks = block_topo["blocks"].as_vec().map_or(&[][..], Vec::as_slice);
        for b in blocks {
            let block = b["block"].as_str().ok_or_else(|| {
                Error::invalid(format!("topology {name}: a block has no \"block:\" name"))
            })?;
            let lists: Vec<&str> = match &b["nodes"] {
                Yaml::String(s) => vec![s.as_str()],
                Yaml::Array(v) => v.iter().filter_map(Yaml::as_str).collect(),
                _ => {
                    return Err(Error::invalid(format!(
                        "topology {name}: block {block} has no nodes"
                    )))
                }
            };
            for nodes in lists {
                add_block(&mut map, block, nodes, max_nodes, &mut budget)
                    .map_err(|e| e.context(format_args!("topology {name}")))?;
            }
        }
        out.push((name.to_string(), map));
    }
    refuse_overlaps(&out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(list: &str) -> Vec<String> {
        hostlist::expand(list, 1000).unwrap()
    }

    fn load(name: &str, text: &str) -> Blocks {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(name);
        std::fs::write(&p, text).unwrap();
        Blocks::load(&p, 4096).unwrap()
    }

    #[test]
    fn topology_conf_blocks() {
        let b = load(
            "topology.conf",
            "# two NVL72 racks\nBlockName=rack1 Nodes=gb-r1-[01-18]\nblockname=rack2 nodes=gb-r2-[01-18]\n\
             BlockSizes=18\n",
        );
        assert_eq!(b.check_one_block(&nodes("gb-r1-[01-18]")), Ok(()));
        assert_eq!(b.check_one_block(&nodes("gb-r2-[03-04]")), Ok(()));
        let e = b
            .check_one_block(&nodes("gb-r1-[17-18],gb-r2-01"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("span 2 NVLink blocks"), "{e}");
        assert!(
            e.contains("rack1 (gb-r1-17,gb-r1-18), rack2 (gb-r2-01)"),
            "{e}"
        );
        assert!(
            e.contains("--segment") && e.contains("--exclusive=topo"),
            "{e}"
        );
        // A node the topology does not know is not in the job's rack.
        let e = b
            .check_one_block(&nodes("gb-r1-01,login1"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("(no block) (login1)"), "{e}");
        // Nodes the topology knows nothing about: nothing to check.
        assert_eq!(b.check_one_block(&nodes("cpu[1-4]")), Ok(()));
    }

    #[test]
    fn each_node_gets_the_jobs_nodes_in_its_own_block_in_slurms_order() {
        let b = load(
            "topology.conf",
            "BlockName=b1 Nodes=n[1-2]\nBlockName=b2 Nodes=n[3-4]\nBlockSizes=2,4\n",
        );
        let job = nodes("n4,n1,n3,n2,login1");
        let d = b.domain_of("n3", &job);
        assert_eq!(d.name.as_deref(), Some("b2"));
        assert_eq!(d.nodes, ["n4", "n3"]);
        assert_eq!(b.domain_of("n1", &job).nodes, ["n1", "n2"]);
        // No block: a domain of its own.
        let alone = b.domain_of("login1", &job);
        assert_eq!(
            (alone.name.as_deref(), alone.nodes),
            (Some("login1"), vec!["login1".to_string()])
        );
        assert!(alone.source.unwrap().ends_with("topology.conf"));
        // A single node of a rack still has its rack's name.
        assert_eq!(b.domain_of("n1", &nodes("n1,n3")).nodes, ["n1"]);
        // Nodes no topology knows: the whole job.
        assert_eq!(
            b.domain_of("cpu1", &nodes("cpu[1-2]")),
            NvlinkDomain::whole_job(nodes("cpu[1-2]"))
        );
    }

    #[test]
    fn a_yaml_alias_bomb_is_refused_in_one_line_without_expanding_it() {
        let mut text = String::from("- topology: racks\n  block:\n    x0: &a0 [n1, n1]\n");
        for i in 1..40 {
            text.push_str(&format!("    x{i}: &a{i} [*a{}, *a{}]\n", i - 1, i - 1));
        }
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("topology.yaml");
        std::fs::write(&p, &text).unwrap();
        let started = std::time::Instant::now();
        let e = Blocks::load(&p, 4096).unwrap_err().to_string();
        assert!(e.contains("aliases expand to more than"), "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        // Aliases that expand a little are fine.
        let ok = "- topology: racks\n  block:\n    blocks:\n      - block: b1\n        nodes: &r n[1-2]\n      - block: b2\n        nodes: n[3-4]\n    extra: *r\n";
        std::fs::write(&p, ok).unwrap();
        let b = Blocks::load(&p, 4096).unwrap();
        assert_eq!(b.domain_of("n3", &nodes("n[1-4]")).nodes, ["n3", "n4"]);
    }

    #[test]
    fn topology_yaml_block_topologies() {
        let b = load(
            "topology.yaml",
            "---\n- topology: racks\n  cluster_default: true\n  block:\n    block_sizes:\n      - 2\n    \
             blocks:\n      - block: b1\n        nodes: n[1-2]\n      - block: b2\n        nodes: n[3-4]\n\
             - topology: flat1\n  flat: true\n",
        );
        assert_eq!(b.check_one_block(&nodes("n[1-2]")), Ok(()));
        let e = b.check_one_block(&nodes("n[1-4]")).unwrap_err().to_string();
        assert!(
            e.contains("b1 (n1,n2), b2 (n3,n4)") && e.contains("topology racks"),
            "{e}"
        );
    }

    #[test]
    fn long_spans_are_summarised() {
        let b = load(
            "topology.conf",
            "BlockName=a Nodes=n[1-100]\nBlockName=b Nodes=m[1-100]\n",
        );
        let e = b
            .check_one_block(&nodes("n[1-100],m[1-100]"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("(92 more)"), "{e}");
        assert!(e.len() < 600, "{} bytes: {e}", e.len());
    }

    #[test]
    fn bad_files_say_where() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("topology.conf");
        std::fs::write(&p, "BlockName=a Nodes=n[1-2\n").unwrap();
        let e = Blocks::load(&p, 4096).unwrap_err().to_string();
        assert!(e.contains("topology.conf: line 1: block a"), "{e}");
        std::fs::write(&p, "BlockName=a Nodes=n1\nBlockName=b Nodes=n1\n").unwrap();
        let e = Blocks::load(&p, 4096).unwrap_err().to_string();
        assert!(e.contains("both block a and b"), "{e}");
        let p = d.path().join("topology.yaml");
        std::fs::write(&p, "- topology: t\n  block: [1, 2\n").unwrap();
        let e = Blocks::load(&p, 4096).unwrap_err().to_string();
        assert!(e.contains("topology.yaml") && !e.contains('\n'), "{e}");
    }

    fn load_err(name: &str, text: &str) -> String {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(name);
        std::fs::write(&p, text).unwrap();
        Blocks::load(&p, 4096).unwrap_err().to_string()
    }

    #[test]
    fn a_file_expands_to_a_bounded_number_of_host_names_said_in_one_line() {
        // 2.5 KB of topology.conf: 65 blocks of 4,096 names each.
        let conf: String = (0..65)
            .map(|i| format!("BlockName=b{i} Nodes=r{i}n[1-4096]\n"))
            .collect();
        let e = load_err("topology.conf", &conf);
        assert!(
            e.contains("line 65: block b64: the file expands to more than 262144 host names"),
            "{e}"
        );
        // A small YAML file whose aliases repeat one hostlist: few YAML
        // nodes (the alias guard passes), 286,720 host names.
        let aliases = ", *h".repeat(69);
        let yaml = format!(
            "- topology: t\n  block:\n    blocks:\n      - block: b\n        nodes: [&h \"n[1-4096]\"{aliases}]\n"
        );
        assert!(yaml.len() < 600);
        let e = load_err("topology.yaml", &yaml);
        assert!(e.contains("more than 262144 host names in all"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn overlapping_block_topologies_are_refused_naming_the_conflict() {
        let yaml = "- topology: t1\n  block:\n    blocks:\n      - block: b1\n        nodes: n[1-4]\n\
                    - topology: t2\n  block:\n    blocks:\n      - block: c1\n        nodes: n[1-2]\n\
                    \x20     - block: c2\n        nodes: n[3-4]\n";
        let e = load_err("topology.yaml", yaml);
        assert!(
            e.contains("block topologies t1 and t2 overlap: node n"),
            "{e}"
        );
        assert!(e.contains("block b1 of t1"), "{e}");
        // The same blocks under two names give every node one answer.
        let same = yaml
            .replace("n[1-2]", "n[1-4]")
            .replace("      - block: c2\n        nodes: n[3-4]\n", "");
        let b = load("topology.yaml", &same);
        assert_eq!(b.rack_of("n3").unwrap().nodes, nodes("n[1-4]"));
    }

    #[test]
    fn a_block_name_the_rack_map_would_refuse_is_refused_at_the_source() {
        let e = load_err("topology.conf", "BlockName=rack/1 Nodes=n[1-2]\n");
        assert!(e.contains("line 1: block \"rack/1\": a block name"), "{e}");
        let long = "b".repeat(65);
        let e = load_err(
            "topology.yaml",
            &format!(
                "- topology: t\n  block:\n    blocks:\n      - block: {long}\n        nodes: n1\n"
            ),
        );
        assert!(e.contains("1 to 64 letters"), "{e}");
    }

    #[test]
    fn locate_prefers_yaml_beside_slurm_conf() {
        let d = tempfile::tempdir().unwrap();
        let conf = d.path().join("slurm.conf");
        let cfg = SlurmConfig::default();
        assert_eq!(locate(&cfg, Some(&conf)), None);
        std::fs::write(d.path().join("topology.conf"), "").unwrap();
        assert_eq!(
            locate(&cfg, Some(&conf)),
            Some(d.path().join("topology.conf"))
        );
        std::fs::write(d.path().join("topology.yaml"), "").unwrap();
        assert_eq!(
            locate(&cfg, Some(&conf)),
            Some(d.path().join("topology.yaml"))
        );
        let off = SlurmConfig {
            topology: AutoPath::None,
            ..SlurmConfig::default()
        };
        assert_eq!(locate(&off, Some(&conf)), None);
    }
}
