//! `slurm-imex topology`: the racks as the NVLink fabric sees them. Reads
//! every node's published clique (one `scontrol show node`), prints them as
//! a Slurm topology.conf (`BlockName=` lines) or topology.yaml fragment, or
//! with `--check` compares Slurm's topology file with them and lists each
//! disagreement (exit 1 on any).

use crate::Cli;
use serde::Serialize;
use slurm_imex_core::config::Config;
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::hostlist;
use slurm_imex_core::racks::RackSources;
use slurm_imex_core::topology::{self, Blocks};

/// One rack: the nodes that publish one clique, in Slurm's node order.
#[derive(Serialize)]
struct Rack {
    name: String,
    clique: String,
    nodes: String,
}

#[derive(Serialize)]
struct Report {
    racks: Vec<Rack>,
    /// Nodes that publish no trusted clique.
    unpublished: Vec<String>,
    /// The Slurm topology file compared (--check).
    topology_file: Option<String>,
    disagreements: Vec<String>,
}

pub fn topology(cli: &Cli, config: &Config, yaml: bool, check: bool) -> Result<u8> {
    let nodes = slurm_imex_core::slurm_node::nodes_status(&config.health, None)?;
    let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
    let cliques = slurm_imex_core::clique::published(&config.health, None)?;
    let mut report = Report {
        racks: racks(&names, &cliques),
        unpublished: names
            .iter()
            .filter(|n| !cliques.contains_key(*n))
            .cloned()
            .collect(),
        topology_file: None,
        disagreements: Vec::new(),
    };
    if check {
        let path = topology::locate(&config.slurm, slurm_imex_core::slurm_conf::locate(&config.slurm).as_deref())
            .ok_or_else(|| Error::new("no Slurm topology file to check (set [slurm] topology, or put topology.conf or topology.yaml beside slurm.conf)"))?;
        let blocks = Blocks::load(&path, config.imex.max_nodes)?;
        report.topology_file = Some(path.display().to_string());
        report.disagreements = disagreements(blocks, cliques, &names);
    }
    if cli.json {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| Error::new(format!("cannot encode JSON: {e}")))?;
        out!("{text}");
    } else if check {
        print_check(&report)?;
    } else if yaml {
        print_yaml(&report)?;
    } else {
        print_conf(&report)?;
    }
    Ok(u8::from(!report.disagreements.is_empty()))
}

/// Nodes grouped by clique, racks named in the order their first node comes.
fn racks(names: &[String], cliques: &std::collections::BTreeMap<String, String>) -> Vec<Rack> {
    let mut groups: Vec<(&str, Vec<String>)> = Vec::new();
    for name in names {
        let Some(clique) = cliques.get(name) else {
            continue;
        };
        match groups.iter_mut().find(|(c, _)| c == clique) {
            Some((_, members)) => members.push(name.clone()),
            None => groups.push((clique, vec![name.clone()])),
        }
    }
    groups
        .into_iter()
        .enumerate()
        .map(|(i, (clique, members))| Rack {
            name: format!("rack{}", i + 1),
            clique: clique.to_string(),
            nodes: hostlist::compress(&members),
        })
        .collect()
}

/// Every disagreement, plus published nodes the topology file leaves out.
fn disagreements(
    blocks: Blocks,
    cliques: std::collections::BTreeMap<String, String>,
    names: &[String],
) -> Vec<String> {
    RackSources {
        blocks: Some(blocks),
        cliques,
    }
    .check_file(names)
}

fn print_conf(report: &Report) -> Result<()> {
    out!("# NVLink racks from the cliques the nodes publish (slurm-imex topology)");
    for rack in &report.racks {
        out!("# {}: clique {}", rack.name, rack.clique);
        out!("BlockName={} Nodes={}", rack.name, rack.nodes);
    }
    print_unpublished(report)
}

fn print_yaml(report: &Report) -> Result<()> {
    out!("# NVLink racks from the cliques the nodes publish (slurm-imex topology)");
    out!("- topology: nvlink");
    out!("  cluster_default: true");
    out!("  block:");
    out!("    blocks:");
    for rack in &report.racks {
        out!("      # clique {}", rack.clique);
        out!("      - block: {}", rack.name);
        out!("        nodes: {}", rack.nodes);
    }
    print_unpublished(report)
}

fn print_unpublished(report: &Report) -> Result<()> {
    if !report.unpublished.is_empty() {
        out!(
            "# publish no NVLink clique (run slurm-imex check there): {}",
            hostlist::compress(&report.unpublished)
        );
    }
    Ok(())
}

fn print_check(report: &Report) -> Result<()> {
    let file = report.topology_file.as_deref().unwrap_or("-");
    if report.disagreements.is_empty() {
        out!(
            "{file} agrees with the NVLink cliques of {} rack(s)",
            report.racks.len()
        );
    }
    for d in &report.disagreements {
        out!("{file}: {d}");
    }
    Ok(())
}
