//! The racks as the nodes' published cliques draw them, for `slurm-imex
//! topology` (off the job path): nodes grouped by clique into racks, each
//! named after the topology file's block when the block holds exactly that
//! clique, and where the rack map and what the nodes publish disagree. The
//! CLI prints them as topology.conf, topology.yaml, or the rack map (`map`).

use super::map::RackMap;
use super::topology::Blocks;
use serde::Serialize;
use slurm_imex_core::slurm::hostlist;
use std::collections::BTreeMap;

/// One rack: the nodes that publish one clique, in Slurm's node order.
#[derive(Serialize)]
pub struct Rack {
    pub name: String,
    pub clique: String,
    /// The nodes, as a compressed hostlist.
    pub nodes: String,
}

/// Nodes grouped by clique, in the order their first node comes. A rack
/// takes the name of the topology file's block when the block holds exactly
/// its nodes' clique, else `rack<N>`.
pub fn racks(
    names: &[String],
    cliques: &BTreeMap<String, String>,
    blocks: Option<&Blocks>,
) -> Vec<Rack> {
    // Indexed by clique, so grouping costs no more than the node count
    // (100,000 nodes in 5,556 racks; benches/scale-bench.sh).
    let mut groups: Vec<(&str, Vec<String>)> = Vec::new();
    let mut group_of: std::collections::HashMap<&str, usize> = Default::default();
    for name in names {
        let Some(clique) = cliques.get(name) else {
            continue;
        };
        let next = groups.len();
        let at = *group_of.entry(clique.as_str()).or_insert(next);
        match groups.get_mut(at) {
            Some((_, members)) => members.push(name.clone()),
            None => groups.push((clique, vec![name.clone()])),
        }
    }
    let mut taken: std::collections::HashSet<String> = Default::default();
    let mut mixed = MixedBlocks::default();
    groups
        .into_iter()
        .enumerate()
        .map(|(i, (clique, members))| {
            let name = blocks
                .and_then(|b| block_name(b, &members, cliques, &mut mixed))
                .filter(|n| !taken.contains(n))
                .unwrap_or_else(|| format!("rack{}", i + 1));
            taken.insert(name.clone());
            Rack {
                name,
                clique: clique.to_string(),
                nodes: hostlist::compress(&members),
            }
        })
        .collect()
}

/// The blocks of one block topology that hold nodes of more than one
/// clique, found once per topology (a pass over its nodes), so naming every
/// rack costs no more than the cluster's size.
type MixedBlocks = std::collections::HashMap<usize, std::collections::HashSet<String>>;

fn mixed_blocks<'a>(
    node_block: &std::collections::HashMap<String, String>,
    cliques: &BTreeMap<String, String>,
    cache: &'a mut MixedBlocks,
) -> &'a std::collections::HashSet<String> {
    let key = std::ptr::from_ref(node_block) as usize;
    cache.entry(key).or_insert_with(|| {
        let mut first: std::collections::HashMap<&str, &str> = Default::default();
        let mut mixed = std::collections::HashSet::new();
        for (node, block) in node_block {
            let Some(clique) = cliques.get(node) else {
                continue;
            };
            if *first.entry(block.as_str()).or_insert(clique.as_str()) != clique.as_str() {
                mixed.insert(block.clone());
            }
        }
        mixed
    })
}

/// The block all of `members` are in, when no node of another clique is.
fn block_name(
    blocks: &Blocks,
    members: &[String],
    cliques: &BTreeMap<String, String>,
    cache: &mut MixedBlocks,
) -> Option<String> {
    let node_block = blocks.block_of(members)?;
    let block = node_block.get(members.first()?)?;
    let same_block = members.iter().all(|m| node_block.get(m) == Some(block));
    let only_this_clique = !mixed_blocks(node_block, cliques, cache).contains(block);
    (same_block && only_this_clique).then(|| block.clone())
}

/// Where the rack map and what the nodes publish differ: a node in another
/// rack's clique (a tray moved, or the map is stale), a publishing node the
/// map leaves out.
pub fn map_disagreements(map: &RackMap, cliques: &BTreeMap<String, String>) -> Vec<String> {
    let mut found = Vec::new();
    for (node, clique) in cliques {
        match map.rack_of(node) {
            Some(rack) if rack.clique != *clique => found.push(format!(
                "the rack map puts {node} in rack {} (clique {}), but it publishes clique {clique}",
                rack.name, rack.clique
            )),
            Some(_) => {}
            None => found.push(format!(
                "{node} (clique {clique}) is in no rack of the rack map"
            )),
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const C1: &str = "dc6e40c4-d722-4357-9ba6-5291dd461278.1";
    const C2: &str = "dc6e40c4-d722-4357-9ba6-5291dd461278.2";

    fn published(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(n, c)| (n.to_string(), c.to_string()))
            .collect()
    }

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn racks_group_nodes_by_clique_and_take_a_block_name_only_when_it_is_theirs_alone() {
        let all = names(&["n1", "n2", "n3", "n4", "n5"]);
        let cliques = published(&[("n1", C1), ("n3", C2), ("n2", C1), ("n4", C2)]);
        let found = racks(&all, &cliques, None);
        let got: Vec<(&str, &str, &str)> = found
            .iter()
            .map(|r| (r.name.as_str(), r.clique.as_str(), r.nodes.as_str()))
            .collect();
        assert_eq!(got, [("rack1", C1, "n[1-2]"), ("rack2", C2, "n[3-4]")]);

        // Block b1 holds exactly C1's nodes; b2 mixes C2 with n5 (no clique
        // published) and n6 (C1): only b1 names its rack.
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("topology.conf");
        std::fs::write(
            &file,
            "BlockName=b1 Nodes=n[1-2]\nBlockName=b2 Nodes=n[3-6]\n",
        )
        .unwrap();
        let blocks = Blocks::load(&file, 100).unwrap();
        let all = names(&["n1", "n2", "n3", "n4", "n5", "n6"]);
        let cliques = published(&[("n1", C1), ("n2", C1), ("n3", C2), ("n4", C2), ("n6", C1)]);
        let named: Vec<String> = racks(&all, &cliques, Some(&blocks))
            .into_iter()
            .map(|r| format!("{} {}", r.name, r.nodes))
            .collect();
        assert_eq!(named, ["rack1 n[1-2,6]", "rack2 n[3-4]"]);
        let cliques = published(&[("n1", C1), ("n2", C1), ("n3", C2), ("n4", C2)]);
        let named: Vec<String> = racks(&all, &cliques, Some(&blocks))
            .into_iter()
            .map(|r| format!("{} {}", r.name, r.nodes))
            .collect();
        assert_eq!(named, ["b1 n[1-2]", "b2 n[3-4]"]);
    }

    #[test]
    fn the_rack_map_disagrees_where_a_node_moved_or_is_missing() {
        let text =
            super::super::map::render(&[("rack1".into(), C1.into(), "n[1-2]".into())], "in a test");
        let map = RackMap::parse(Path::new("imex-racks.toml"), text.into_bytes(), 100).unwrap();
        let cliques = published(&[("n1", C1), ("n2", C2), ("n3", C1)]);
        assert_eq!(
            map_disagreements(&map, &cliques),
            [
                format!("the rack map puts n2 in rack rack1 (clique {C1}), but it publishes clique {C2}"),
                format!("n3 (clique {C1}) is in no rack of the rack map"),
            ]
        );
        assert!(map_disagreements(&map, &published(&[("n1", C1)])).is_empty());
    }
}
