//! Where an `--imex` job's racks (NVLink domains) come from, in order: a
//! Slurm topology/block file when there is one; else the NVLink cliques the
//! job's nodes publish in Slurm (`crate::clique`), when every one of them
//! publishes a trusted one; else nothing, and the whole job is one domain.
//! When a topology file and published cliques both speak for the job's nodes
//! they must agree (no block holding two cliques, no clique spanning two
//! blocks), or the job fails before any daemon starts: a wrong `BlockName=`
//! line would otherwise yield domains that never form.

use crate::config::Config;
use crate::error::Result;
use crate::text::{cap, PIECE_MAX};
use crate::topology::{self, Blocks, NvlinkDomain};
use std::collections::{BTreeMap, BTreeSet};

/// What the racks of a job's nodes are known from.
pub struct RackSources {
    /// The topology file in force, read.
    pub blocks: Option<Blocks>,
    /// Published cliques, by node (only nodes that publish a trusted one).
    pub cliques: BTreeMap<String, String>,
}

impl RackSources {
    /// Read both sources for `nodes` (a job's expanded hostlist, `list` its
    /// Slurm expression): the topology file (an unreadable one is this
    /// node's config fault), and the published cliques in one scontrol call
    /// (when Slurm cannot be asked, the topology file or one domain decide).
    pub fn read(cfg: &Config, list: &str, nodes: &[String]) -> Result<RackSources> {
        let slurm_conf = crate::slurm_conf::locate(&cfg.slurm);
        let blocks =
            match topology::locate(&cfg.slurm, slurm_conf.as_deref()) {
                Some(path) => Some(Blocks::load(&path, cfg.imex.max_nodes).map_err(|e| {
                    e.context("cannot read Slurm's block topology ([slurm] topology)")
                })?),
                None => None,
            };
        let cliques = if nodes.len() > 1 {
            crate::clique::published(&cfg.health, Some(list)).unwrap_or_else(|e| {
                // The journal, not stderr: the prolog's stderr is its one failure line.
                tracing::info!("cannot read the NVLink cliques the job's nodes publish: {e}");
                BTreeMap::new()
            })
        } else {
            BTreeMap::new()
        };
        Ok(RackSources { blocks, cliques })
    }

    /// `node`'s domain among the job's `nodes`, by the first source that
    /// knows them.
    pub fn domain_of(&self, node: &str, nodes: &[String]) -> NvlinkDomain {
        if let Some(blocks) = &self.blocks {
            return blocks.domain_of(node, nodes);
        }
        let all_published = nodes.iter().all(|n| self.cliques.contains_key(n));
        match self.cliques.get(node) {
            Some(mine) if all_published => NvlinkDomain {
                name: Some(mine.clone()),
                nodes: nodes
                    .iter()
                    .filter(|n| self.cliques.get(*n) == Some(mine))
                    .cloned()
                    .collect(),
            },
            _ => NvlinkDomain::whole_job(nodes.to_vec()),
        }
    }

    /// `node`'s whole rack (`[imex] domain = "rack"`): its block in the
    /// topology file, else every node that publishes `node`'s NVLink clique
    /// (one scontrol call for all nodes), in natural order. None when
    /// neither source places `node`.
    pub fn whole_rack(&self, cfg: &Config, node: &str) -> Result<Option<NvlinkDomain>> {
        if let Some(rack) = self.blocks.as_ref().and_then(|b| b.rack_of(node)) {
            return Ok(Some(rack));
        }
        let everyone = crate::clique::published(&cfg.health, None)?;
        let Some(mine) = everyone.get(node) else {
            return Ok(None);
        };
        let mut nodes: Vec<String> = everyone
            .iter()
            .filter(|(_, c)| *c == mine)
            .map(|(n, _)| n.clone())
            .collect();
        crate::hostlist::sort_natural(&mut nodes);
        Ok(Some(NvlinkDomain {
            name: Some(mine.clone()),
            nodes,
        }))
    }

    /// The one line that fails the job when the topology file and the
    /// published cliques disagree about its nodes.
    pub fn disagreement(&self, nodes: &[String]) -> Option<String> {
        let blocks = self.blocks.as_ref()?;
        let conflict = self.disagreements(nodes).into_iter().next()?;
        Some(format!(
            "the racks of the job's nodes disagree: {conflict}; the blocks come from {} and the \
             cliques from the GPUs' fabric (published in each node's Slurm Extra): fix the \
             topology file (`slurm-imex topology --check` lists every disagreement)",
            blocks.source.display()
        ))
    }

    /// What `slurm-imex topology --check` and `doctor` list: every
    /// [`Self::disagreements`] about `nodes`, and each node that publishes a
    /// clique but is in no block of the topology file.
    pub fn check_file(&self, nodes: &[String]) -> Vec<String> {
        let mut found = self.disagreements(nodes);
        let node_block = self.blocks.as_ref().and_then(|b| b.block_of(nodes));
        for (node, clique) in &self.cliques {
            if !node_block.is_some_and(|m| m.contains_key(node)) {
                found.push(format!("{node} (clique {clique}) is in no block"));
            }
        }
        found
    }

    /// Every disagreement between the topology file and the published
    /// cliques about `nodes`: a block holding two cliques, a clique spanning
    /// two blocks. Nodes one source does not know are not compared.
    pub fn disagreements(&self, nodes: &[String]) -> Vec<String> {
        let Some(node_block) = self.blocks.as_ref().and_then(|b| b.block_of(nodes)) else {
            return Vec::new();
        };
        let both: Vec<(&str, &str, &str)> = nodes
            .iter()
            .filter_map(|n| {
                let block = node_block.get(n)?;
                Some((n.as_str(), block.as_str(), self.cliques.get(n)?.as_str()))
            })
            .collect();
        let mut found = split_blocks(&both);
        found.extend(spanning_cliques(&both));
        found
    }
}

/// Blocks whose nodes report more than one clique.
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

    const A: &str = "dc6e40c4-d722-4357-9ba6-5291dd461278.1";
    const B: &str = "dc6e40c4-d722-4357-9ba6-5291dd461278.2";

    fn nodes(list: &str) -> Vec<String> {
        crate::hostlist::expand(list, 100).unwrap()
    }

    fn sources(
        topology: Option<&str>,
        cliques: &[(&str, &str)],
    ) -> (tempfile::TempDir, RackSources) {
        let d = tempfile::tempdir().unwrap();
        let blocks = topology.map(|text| {
            let p = d.path().join("topology.conf");
            std::fs::write(&p, text).unwrap();
            Blocks::load(&p, 100).unwrap()
        });
        let cliques = cliques
            .iter()
            .map(|(n, c)| (n.to_string(), c.to_string()))
            .collect();
        (d, RackSources { blocks, cliques })
    }

    #[test]
    fn without_a_topology_file_published_cliques_split_the_job() {
        let (_d, s) = sources(None, &[("n1", A), ("n2", A), ("n3", B), ("n4", B)]);
        let d = s.domain_of("n4", &nodes("n[1-4]"));
        assert_eq!((d.name.as_deref(), d.nodes), (Some(B), nodes("n[3-4]")));
        // One node without a trusted clique: nothing splits the job.
        let (_d, s) = sources(None, &[("n1", A), ("n2", A), ("n3", B)]);
        assert_eq!(
            s.domain_of("n1", &nodes("n[1-4]")),
            NvlinkDomain::whole_job(nodes("n[1-4]"))
        );
        let (_d, s) = sources(None, &[]);
        assert_eq!(s.domain_of("n1", &nodes("n[1-2]")).name, None);
    }

    #[test]
    fn a_topology_file_wins_and_must_agree_with_the_cliques() {
        let conf = "BlockName=b1 Nodes=n[1-2]\nBlockName=b2 Nodes=n[3-4]\n";
        let (_d, s) = sources(Some(conf), &[("n1", A), ("n2", A), ("n3", B), ("n4", B)]);
        assert_eq!(s.disagreement(&nodes("n[1-4]")), None);
        assert_eq!(
            s.domain_of("n2", &nodes("n[1-4]")).name.as_deref(),
            Some("b1")
        );
        // n2 is cabled into the other rack.
        let (_d, s) = sources(Some(conf), &[("n1", A), ("n2", B), ("n3", B), ("n4", B)]);
        let e = s.disagreement(&nodes("n[1-4]")).unwrap();
        assert!(
            e.contains(&format!(
                "block b1 holds 2 NVLink cliques: n1 (clique {A}), n2 (clique {B})"
            )),
            "{e}"
        );
        assert!(e.contains("topology.conf") && e.contains("Extra"), "{e}");
        let all = s.disagreements(&nodes("n[1-4]"));
        assert_eq!(all.len(), 2, "{all:?}");
        assert!(
            all[1].contains(&format!(
                "clique {B} spans 2 blocks: n2 (block b1), n3 (block b2), n4 (block b2)"
            )),
            "{all:?}"
        );
        // One clique split over two blocks.
        let conf = "BlockName=b1 Nodes=n1\nBlockName=b2 Nodes=n2\n";
        let (_d, s) = sources(Some(conf), &[("n1", A), ("n2", A)]);
        let e = s.disagreement(&nodes("n[1-2]")).unwrap();
        assert!(
            e.contains(&format!(
                "clique {A} spans 2 blocks: n1 (block b1), n2 (block b2)"
            )),
            "{e}"
        );
        // No published cliques: nothing to compare.
        let (_d, s) = sources(Some(conf), &[]);
        assert_eq!(s.disagreement(&nodes("n[1-2]")), None);
    }
}
