//! Where an `--imex` job's racks (NVLink domains) come from: files on the
//! node only, never slurmctld (docs/controller-calls.md). In order: Slurm's
//! topology/block file when it describes the job's nodes; else the rack map
//! (`crate::rack::map`) when it lists every one of them; else nothing, and the
//! whole job is one domain. Every node of a rack reads the same files, so
//! every node computes the same membership; a slow or unreachable controller
//! cannot give one node another split.
//!
//! The fabric is checked locally. When the topology file and the rack map
//! both speak for the job's nodes they must agree (no block holding two
//! cliques, no clique spanning two blocks), and the rack map must agree with
//! this node's own GPUs (the clique the prolog's gate reads), or the job
//! fails before any daemon starts: a wrong line would otherwise yield domains
//! that never form, or that form and fail inside CUDA.

use crate::config::Config;
use crate::rack::map::RackMap;
use crate::rack::nvlink_domain::NvlinkDomain;
use crate::rack::topology::{self, Blocks};
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::text::{cap, PIECE_MAX};
use std::collections::{BTreeMap, BTreeSet};

/// What the racks of a job's nodes are known from.
pub struct RackSources {
    /// The topology file in force, read.
    pub blocks: Option<Blocks>,
    /// The rack map, read.
    pub map: Option<RackMap>,
}

impl RackSources {
    /// Read both files. One that exists but cannot be read or trusted is
    /// this node's config fault.
    pub fn read(cfg: &Config) -> Result<RackSources> {
        RackSources::read_with(cfg, RackMap::load_configured(cfg)?)
    }

    /// As [`Self::read`], for a job's `nodes` only: of an indexed rack map
    /// (`crate::rack::index`) just the pieces they need, so a prolog's
    /// read does not grow with the cluster. Ask about these nodes only.
    /// A topology file whose blocks are exactly the indexed map's racks
    /// (the map says so, with the file's sha256) is not parsed: both give
    /// every job the same domains, and the map's are read in pieces. Only
    /// its bytes are hashed, to know it is that file (about 1 ms at
    /// 100,000 nodes, where parsing it costs 48; benches/scale-bench.sh).
    pub fn read_for(cfg: &Config, nodes: &[String]) -> Result<RackSources> {
        let map = RackMap::load_configured_for(cfg, nodes)?;
        let spoken_for = map.as_ref().filter(|m| m.speaks_for_topology(nodes));
        if spoken_for.is_some_and(|m| topology_is(cfg, m.same_as_topology.as_deref())) {
            return Ok(RackSources { blocks: None, map });
        }
        RackSources::read_with(cfg, map)
    }

    /// As [`Self::read`], but a rack map the config names that does not
    /// exist yet is no map, and one that exists but does not load (it is
    /// corrupt) is no map either, its error given beside: for `slurm-imex
    /// topology --map`, which writes it. A map root must not trust is still
    /// refused.
    pub fn read_before_writing_the_map(cfg: &Config) -> Result<(RackSources, Option<Error>)> {
        let Some(path) = crate::rack::configured_map::locate(cfg)
            .filter(|p| std::fs::symlink_metadata(p).is_ok())
        else {
            return Ok((RackSources::read_with(cfg, None)?, None));
        };
        let expect = if crate::rack::index::is_indexed(&path) {
            slurm_imex_core::trust::Expect::Dir
        } else {
            slurm_imex_core::trust::Expect::File
        };
        slurm_imex_core::trust::check(&path, expect, "[imex] rack_map")?;
        let (map, corrupt) = match RackMap::load(&path, cfg.engine.max_nodes) {
            Ok(map) => (Some(map), None),
            Err(e) => (None, Some(e)),
        };
        Ok((RackSources::read_with(cfg, map)?, corrupt))
    }

    fn read_with(cfg: &Config, map: Option<RackMap>) -> Result<RackSources> {
        let slurm_conf = slurm_imex_core::slurm::conf::locate(&cfg.slurm);
        let blocks =
            match topology::locate(&cfg.slurm, slurm_conf.as_deref()) {
                // Slurm's own file, read as Slurm reads it (its owner and mode
                // are Slurm's business; the rack map, ours, is held to the
                // trust boundary).
                Some(path) => Some(Blocks::load(&path, cfg.engine.max_nodes).map_err(|e| {
                    e.context("cannot read Slurm's block topology ([slurm] topology)")
                })?),
                None => None,
            };
        Ok(RackSources { blocks, map })
    }

    /// The topology file when it describes any of `nodes`.
    fn blocks_for(&self, nodes: &[String]) -> Option<&Blocks> {
        self.blocks.as_ref().filter(|b| b.block_of(nodes).is_some())
    }

    /// `node`'s domain among the job's `nodes`, by the first source that
    /// knows them, with where it came from.
    pub fn domain_of(&self, node: &str, nodes: &[String]) -> NvlinkDomain {
        if let Some(blocks) = self.blocks_for(nodes) {
            return blocks.domain_of(node, nodes);
        }
        self.map
            .as_ref()
            .and_then(|m| m.domain_of(node, nodes))
            .unwrap_or_else(|| NvlinkDomain::whole_job(nodes.to_vec()))
    }

    /// `node`'s whole rack (`[imex] domain = "rack"`): its block in the
    /// topology file, else its rack in the rack map, in natural order. None
    /// when neither places `node`.
    pub fn whole_rack(&self, node: &str) -> Option<NvlinkDomain> {
        if let Some(rack) = self.blocks.as_ref().and_then(|b| b.rack_of(node)) {
            return Some(rack);
        }
        let map = self.map.as_ref()?;
        let rack = map.rack_of(node)?;
        Some(NvlinkDomain {
            name: Some(rack.name.clone()),
            nodes: rack.nodes.clone(),
            source: Some(map.describe()),
        })
    }

    /// The one line that fails the job when the topology file and the rack
    /// map disagree about its nodes.
    pub fn disagreement(&self, nodes: &[String]) -> Option<String> {
        let blocks = self.blocks.as_ref()?;
        let map = self.map.as_ref()?;
        let conflict = self.disagreements(nodes).into_iter().next()?;
        Some(format!(
            "the racks of the job's nodes disagree: {conflict}; the blocks come from {} and the \
             cliques from the rack map {}: fix the one that is wrong (`slurm-imex topology \
             --check` compares both with the fabric)",
            blocks.source.display(),
            map.describe()
        ))
    }

    /// The line that fails the job when the rack map, its racks' source
    /// for these `nodes` (no topology file describes them), lists some of
    /// them but not all: a node added since the map was written. Without
    /// it the job would be one domain across racks, and its daemons would
    /// wait for peers they can never reach.
    pub fn stale_map(&self, nodes: &[String]) -> Option<String> {
        if self.blocks_for(nodes).is_some() {
            return None;
        }
        let map = self.map.as_ref()?;
        let (listed, missing): (Vec<&String>, Vec<&String>) =
            nodes.iter().partition(|n| map.rack_of(n).is_some());
        if listed.is_empty() || missing.is_empty() {
            return None;
        }
        let missing: Vec<String> = missing.into_iter().cloned().collect();
        Some(format!(
            "the rack map {} is stale: it lists {} of the job's nodes but not {}: write it again \
             (`slurm-imex topology --map`) and install it on every node",
            map.describe(),
            listed.len(),
            cap(
                &slurm_imex_core::slurm::hostlist::compress(&missing),
                PIECE_MAX
            )
        ))
    }

    /// The line that fails the job when this node's own GPUs (`live`, the
    /// clique the gate read from NVML) are not in the clique the rack map
    /// gives `node`: the tray moved, or the map is stale.
    pub fn live_clique_disagreement(&self, node: &str, live: &str) -> Option<String> {
        let map = self.map.as_ref()?;
        let rack = map.rack_of(node)?;
        (rack.clique != live).then(|| {
            format!(
                "{node}'s GPUs report NVLink clique {} (NVML fabric info), but the rack map {} \
                 puts {node} in rack {} (clique {}): write the map again (`slurm-imex topology \
                 --map`) and install it on every node",
                cap(live, 80),
                map.describe(),
                rack.name,
                cap(&rack.clique, 80)
            )
        })
    }

    /// Every disagreement between the topology file and `cliques` (node ->
    /// clique: the rack map's, or those the nodes publish) about `nodes`: a
    /// block holding two cliques, a clique spanning two blocks. Nodes one
    /// side does not know are not compared.
    pub fn disagreements_with(
        &self,
        cliques: &BTreeMap<String, String>,
        nodes: &[String],
    ) -> Vec<String> {
        let Some(node_block) = self.blocks.as_ref().and_then(|b| b.block_of(nodes)) else {
            return Vec::new();
        };
        let both: Vec<(&str, &str, &str)> = nodes
            .iter()
            .filter_map(|n| {
                let block = node_block.get(n)?;
                Some((n.as_str(), block.as_str(), cliques.get(n)?.as_str()))
            })
            .collect();
        let mut found = split_blocks(&both);
        found.extend(spanning_cliques(&both));
        found
    }

    /// [`Self::disagreements_with`] the rack map.
    pub fn disagreements(&self, nodes: &[String]) -> Vec<String> {
        let cliques = self
            .map
            .as_ref()
            .map(|m| m.cliques_of(nodes).into_iter().collect())
            .unwrap_or_default();
        self.disagreements_with(&cliques, nodes)
    }

    /// What `slurm-imex topology --check` lists: every disagreement of the
    /// topology file with `cliques` (what the nodes publish) about `nodes`,
    /// and each node that publishes a clique but is in no block.
    pub fn check_file(&self, cliques: &BTreeMap<String, String>, nodes: &[String]) -> Vec<String> {
        let mut found = self.disagreements_with(cliques, nodes);
        let node_block = self.blocks.as_ref().and_then(|b| b.block_of(nodes));
        for (node, clique) in cliques {
            if !node_block.is_some_and(|m| m.contains_key(node)) {
                found.push(format!("{node} (clique {clique}) is in no block"));
            }
        }
        found
    }
}

/// Blocks whose nodes report more than one clique.
/// Whether the topology file in force, if any, hashes to `digest`.
fn topology_is(cfg: &Config, digest: Option<&str>) -> bool {
    let slurm_conf = slurm_imex_core::slurm::conf::locate(&cfg.slurm);
    topology::locate(&cfg.slurm, slurm_conf.as_deref()).is_none_or(|path| {
        slurm_imex_core::fsutil::read_bounded(&path, topology::MAX_FILE_BYTES)
            .is_ok_and(|bytes| digest == Some(crate::digest::sha256_hex(&bytes).as_str()))
    })
}

fn split_blocks(both: &[(&str, &str, &str)]) -> Vec<String> {
    conflicts(
        both,
        |(_, block, clique)| (block, clique),
        |block, n| {
            let members = member_list(both, |(node, b, c)| {
                (b == block).then(|| format!("{node} (clique {c})"))
            });
            format!("block {block} holds {n} NVLink cliques: {members}")
        },
    )
}

/// Cliques whose nodes lie in more than one block.
fn spanning_cliques(both: &[(&str, &str, &str)]) -> Vec<String> {
    conflicts(
        both,
        |(_, block, clique)| (clique, block),
        |clique, n| {
            let members = member_list(both, |(node, b, c)| {
                (c == clique).then(|| format!("{node} (block {b})"))
            });
            format!(
                "NVLink clique {} spans {n} blocks: {members}",
                cap(clique, 80)
            )
        },
    )
}

/// Group (node, block, clique) by one side; for each group that holds more
/// than one value of the other side, `describe(group, how many)`.
fn conflicts<'a>(
    both: &[(&'a str, &'a str, &'a str)],
    sides: impl Fn((&'a str, &'a str, &'a str)) -> (&'a str, &'a str),
    describe: impl Fn(&str, usize) -> String,
) -> Vec<String> {
    let mut groups: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for entry in both {
        let (group, other) = sides(*entry);
        groups.entry(group).or_default().insert(other);
    }
    groups
        .into_iter()
        .filter(|(_, others)| others.len() > 1)
        .map(|(group, others)| describe(group, others.len()))
        .collect()
}

/// The members a `pick` names, joined and bounded.
fn member_list(
    both: &[(&str, &str, &str)],
    pick: impl Fn((&str, &str, &str)) -> Option<String>,
) -> String {
    let members: Vec<String> = both.iter().filter_map(|e| pick(*e)).collect();
    cap(&members.join(", "), PIECE_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rack::map as rack_map;

    const A: &str = "dc6e40c4-d722-4357-9ba6-5291dd461278.1";
    const B: &str = "dc6e40c4-d722-4357-9ba6-5291dd461278.2";

    fn nodes(list: &str) -> Vec<String> {
        slurm_imex_core::slurm::hostlist::expand(list, 100).unwrap()
    }

    /// Sources from a topology.conf text and a rack map of (name, clique,
    /// hostlist) racks.
    fn sources(
        topology: Option<&str>,
        racks: &[(&str, &str, &str)],
    ) -> (tempfile::TempDir, RackSources) {
        let d = tempfile::tempdir().unwrap();
        let blocks = topology.map(|text| {
            let p = d.path().join("topology.conf");
            std::fs::write(&p, text).unwrap();
            Blocks::load(&p, 100).unwrap()
        });
        let map = (!racks.is_empty()).then(|| {
            let racks: Vec<(String, String, String)> = racks
                .iter()
                .map(|(n, c, l)| (n.to_string(), c.to_string(), l.to_string()))
                .collect();
            let p = d.path().join(rack_map::FILE_NAME);
            std::fs::write(&p, rack_map::render(&racks, "in a test")).unwrap();
            RackMap::load(&p, 100).unwrap()
        });
        (d, RackSources { blocks, map })
    }

    /// A config naming the topology file `topology` and the indexed map of
    /// `racks`, written as `topology --map` writes it from that file.
    fn indexed_beside(topology: &str, racks: &[(&str, &str, &str)]) -> (tempfile::TempDir, Config) {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let topo = d.path().join("topology.conf");
        std::fs::write(&topo, topology).unwrap();
        let blocks = Blocks::load(&topo, 100).unwrap();
        let list: Vec<(String, String, String)> = racks
            .iter()
            .map(|(n, c, l)| (n.to_string(), c.to_string(), l.to_string()))
            .collect();
        let text = rack_map::render(&list, "in a test");
        let file = d.path().join("imex-racks.toml");
        std::fs::write(&file, &text).unwrap();
        let map = RackMap::load(&file, 100).unwrap();
        let same = blocks.same_racks_as(
            map.racks()
                .iter()
                .map(|r| (r.name.as_str(), r.nodes.as_slice())),
        );
        let dir = d.path().join("imex-racks.d");
        crate::rack::index::write(&dir, &map, &text, same.then_some(blocks.digest.as_str()))
            .unwrap();
        let mut cfg = Config::default();
        cfg.slurm.config = slurm_imex_core::config::AutoPath::None;
        cfg.slurm.topology = slurm_imex_core::config::AutoPath::Path(topo);
        cfg.engine.rack_map = slurm_imex_core::config::AutoPath::Path(dir);
        (d, cfg)
    }

    #[test]
    fn a_topology_file_the_indexed_map_says_exactly_is_hashed_not_parsed() {
        let racks = [("b1", A, "n[1-2]"), ("b2", B, "n[3-4]")];
        let (d, cfg) = indexed_beside(
            "BlockName=b1 Nodes=n[1-2]\nBlockName=b2 Nodes=n[3-4]\n",
            &racks,
        );
        let job = nodes("n[1-4]");
        let read = RackSources::read_for(&cfg, &job).unwrap();
        assert!(read.blocks.is_none(), "the same file is not parsed");
        let domain = read.domain_of("n3", &job);
        assert_eq!(
            (domain.name.as_deref(), domain.nodes),
            (Some("b2"), nodes("n[3-4]"))
        );
        // A job on a node the map does not list: the file is read, and
        // speaks for it as it always did.
        let odd = nodes("n1,n9");
        assert!(RackSources::read_for(&cfg, &odd).unwrap().blocks.is_some());
        // The file changed since: parsed again, and it wins.
        std::fs::write(
            d.path().join("topology.conf"),
            "BlockName=b1 Nodes=n[1-4]\n",
        )
        .unwrap();
        let read = RackSources::read_for(&cfg, &job).unwrap();
        assert!(read.blocks.is_some());
        assert_eq!(read.domain_of("n3", &job).nodes, job);
        // A file that is not exactly the map's racks is never named in it.
        let (_d, cfg) =
            indexed_beside("BlockName=b1 Nodes=n[1-3]\nBlockName=b2 Nodes=n4\n", &racks);
        assert!(RackSources::read_for(&cfg, &job).unwrap().blocks.is_some());
        let (_d, cfg) = indexed_beside(
            "BlockName=x1 Nodes=n[1-2]\nBlockName=b2 Nodes=n[3-4]\n",
            &racks,
        );
        assert!(RackSources::read_for(&cfg, &job).unwrap().blocks.is_some());
        let (_d, cfg) = indexed_beside(
            "BlockName=b1 Nodes=n[1-2]\nBlockName=b2 Nodes=n[3-5]\n",
            &racks,
        );
        assert!(RackSources::read_for(&cfg, &job).unwrap().blocks.is_some());
    }

    #[test]
    fn without_a_topology_file_the_rack_map_splits_the_job() {
        let (_d, s) = sources(None, &[("r1", A, "n[1-2]"), ("r2", B, "n[3-4]")]);
        let d = s.domain_of("n4", &nodes("n[1-4]"));
        assert_eq!(
            (d.name.as_deref(), &d.nodes),
            (Some("r2"), &nodes("n[3-4]"))
        );
        assert!(d.source.unwrap().contains("imex-racks.toml (sha256 "));
        assert_eq!(s.stale_map(&nodes("n[1-4]")), None);
        // One node the map does not list: nothing splits the job, and the
        // job fails naming the map as stale and the node (not a peer).
        let (_d, s) = sources(None, &[("r1", A, "n[1-2]"), ("r2", B, "n3")]);
        assert_eq!(
            s.domain_of("n1", &nodes("n[1-4]")),
            NvlinkDomain::whole_job(nodes("n[1-4]"))
        );
        let e = s.stale_map(&nodes("n[1-4]")).unwrap();
        assert!(e.contains("imex-racks.toml (sha256 "), "{e}");
        assert!(
            e.contains("is stale: it lists 3 of the job's nodes but not n4: write it again"),
            "{e}"
        );
        // A map that knows none of the job's nodes says nothing about them.
        assert_eq!(s.stale_map(&nodes("m[1-2]")), None);
        let (_d, s) = sources(None, &[]);
        assert_eq!(s.domain_of("n1", &nodes("n[1-2]")).name, None);
        assert_eq!(s.whole_rack("n1"), None);
    }

    #[test]
    fn a_topology_file_wins_and_must_agree_with_the_rack_map() {
        let conf = "BlockName=b1 Nodes=n[1-2]\nBlockName=b2 Nodes=n[3-4]\n";
        let (_d, s) = sources(Some(conf), &[("r1", A, "n[1-2]"), ("r2", B, "n[3-4]")]);
        assert_eq!(s.disagreement(&nodes("n[1-4]")), None);
        assert_eq!(
            s.domain_of("n2", &nodes("n[1-4]")).name.as_deref(),
            Some("b1")
        );
        assert!(s
            .domain_of("n2", &nodes("n[1-4]"))
            .source
            .unwrap()
            .ends_with("topology.conf"));
        // n2 is cabled into the other rack.
        let (_d, s) = sources(Some(conf), &[("r1", A, "n1"), ("r2", B, "n[2-4]")]);
        let e = s.disagreement(&nodes("n[1-4]")).unwrap();
        assert!(
            e.contains(&format!(
                "block b1 holds 2 NVLink cliques: n1 (clique {A}), n2 (clique {B})"
            )),
            "{e}"
        );
        assert!(
            e.contains("topology.conf") && e.contains("imex-racks.toml (sha256 "),
            "{e}"
        );
        let all = s.disagreements(&nodes("n[1-4]"));
        assert_eq!(all.len(), 2, "{all:?}");
        assert!(
            all[1].contains(&format!(
                "clique {B} spans 2 blocks: n2 (block b1), n3 (block b2), n4 (block b2)"
            )),
            "{all:?}"
        );
        // No rack map: nothing to compare.
        let (_d, s) = sources(Some(conf), &[]);
        assert_eq!(s.disagreement(&nodes("n[1-2]")), None);
        // A topology file that knows none of the job's nodes gives way to the map.
        let (_d, s) = sources(Some(conf), &[("r9", A, "m[1-2]")]);
        assert_eq!(
            s.domain_of("m1", &nodes("m[1-2]")).name.as_deref(),
            Some("r9")
        );
    }

    #[test]
    fn a_rack_map_that_contradicts_this_nodes_gpus_names_both() {
        let (_d, s) = sources(None, &[("r1", A, "n[1-2]"), ("r2", B, "n[3-4]")]);
        assert_eq!(s.live_clique_disagreement("n2", A), None);
        let e = s.live_clique_disagreement("n2", B).unwrap();
        assert!(
            e.starts_with(&format!(
                "n2's GPUs report NVLink clique {B} (NVML fabric info)"
            )),
            "{e}"
        );
        assert!(
            e.contains(&format!("puts n2 in rack r1 (clique {A})")),
            "{e}"
        );
        assert!(e.contains("slurm-imex topology --map"), "{e}");
        // A node the map does not list, or no map: nothing to compare.
        assert_eq!(s.live_clique_disagreement("n9", B), None);
        let (_d, s) = sources(Some("BlockName=b1 Nodes=n[1-2]\n"), &[]);
        assert_eq!(s.live_clique_disagreement("n2", B), None);
    }

    #[test]
    fn whole_racks_come_from_the_block_else_the_map_in_natural_order() {
        let (_d, s) = sources(
            Some("BlockName=b1 Nodes=n[1-2]\n"),
            &[("r2", B, "n10,n9,n3")],
        );
        assert_eq!(s.whole_rack("n1").unwrap().nodes, nodes("n[1-2]"));
        let r = s.whole_rack("n10").unwrap();
        assert_eq!(
            (r.name.as_deref(), r.nodes),
            (Some("r2"), nodes("n3,n9,n10"))
        );
        assert_eq!(s.whole_rack("n7"), None);
    }
}
