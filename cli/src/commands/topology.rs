//! `slurm-imex topology`: the racks as the NVLink fabric sees them. Reads
//! every node's published clique in one `scontrol show node` call, off the
//! job path (the controller host or a login node), and prints them as a
//! Slurm topology.conf (`BlockName=` lines), a topology.yaml fragment, or the
//! rack map every prolog reads instead of asking slurmctld (`--map`,
//! `slurm_imex_domain::rack::map`); or with `--check` compares Slurm's topology
//! file and the rack map with them and lists each disagreement (exit 1 on
//! any). The racks themselves are `slurm_imex_domain::rack::survey`'s; this
//! file reads the arguments and writes the text.

use crate::args::{Cli, TopologyArgs};
use serde::Serialize;
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::slurm::hostlist;
use slurm_imex_domain::rack::index as rack_index;
use slurm_imex_domain::rack::map::{self as rack_map, RackMap};
use slurm_imex_domain::rack::sources::RackSources;
use slurm_imex_domain::rack::survey::{map_disagreements, racks, Rack};
use slurm_imex_domain::rack::topology::Blocks;
use slurm_imex_settings::Config;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[derive(Serialize)]
struct Report {
    racks: Vec<Rack>,
    /// Nodes that publish no trusted clique.
    unpublished: Vec<String>,
    /// The Slurm topology file compared (--check).
    topology_file: Option<String>,
    /// The rack map compared (--check), with its digest.
    rack_map: Option<String>,
    disagreements: Vec<String>,
}

pub fn topology(cli: &Cli, config: &Config, args: &TopologyArgs) -> Result<u8> {
    let (names, cliques) = slurm_imex_domain::rack::clique::published_cluster(
        &slurm_imex_core::slurm::Scontrol::of(&config.slurm),
    )?;
    let (files, corrupt_map) = RackSources::read_before_writing_the_map(config)?;
    match (&corrupt_map, args.map) {
        (Some(e), false) => return Err(e.clone()),
        (Some(e), true) if args.output.is_none() => {
            err!("slurm-imex topology: the installed map does not load ({e}); write a new one")
        }
        _ => {}
    }
    let mut report = report_of(&names, &cliques, &files, args.map);
    if args.check {
        report.disagreements = check(&files, &cliques, &names)?;
    }
    let text = if cli.json {
        serde_json::to_string_pretty(&report)
            .map_err(|e| Error::new(format!("cannot encode JSON: {e}")))?
            + "\n"
    } else if args.check {
        check_text(&report)
    } else if args.map {
        map_text(&report, names.len())
    } else if args.yaml {
        yaml_text(&report)
    } else {
        conf_text(&report)
    };
    let map = if args.map && !cli.json {
        Some(validate_map(&text, args.output.as_deref(), config)?)
    } else {
        None
    };
    match (&args.output, map) {
        (Some(path), Some(map)) if rack_index::wants_index(path) => {
            write_indexed(path, &map, &text, files.blocks.as_ref())?
        }
        (Some(path), map) => {
            if map.is_some() {
                keep_a_corrupt_map_beside(path, config)?;
            }
            slurm_imex_core::fsutil::write_atomic(path, text.as_bytes(), 0o644)?
        }
        (None, _) if cli.json => crate::output::print_json(&report)?,
        (None, _) if args.check => {
            for line in check_lines(&report) {
                out!("{line}");
            }
        }
        (None, _) => crate::output::lines(&text)?,
    }
    Ok(u8::from(!report.disagreements.is_empty()))
}

/// The indexed map of `map` (whose text is `text`) at `path`. A topology
/// file in force that says exactly what the map says is named in it, so a
/// prolog holding that file need not parse it.
fn write_indexed(path: &Path, map: &RackMap, text: &str, blocks: Option<&Blocks>) -> Result<()> {
    let racks = || {
        map.racks()
            .iter()
            .map(|r| (r.name.as_str(), r.nodes.as_slice()))
    };
    let same = blocks.filter(|b| b.same_racks_as(racks()));
    rack_index::write(path, map, text, same.map(|b| b.digest.as_str()))?;
    if let Some(blocks) = same {
        err!(
            "slurm-imex topology: {} has exactly these racks: a prolog that has it and this map \
             hashes it instead of parsing it",
            blocks.source.display()
        );
    }
    Ok(())
}

/// What the cliques say, beside the files in force (`map`: racks named
/// after the blocks they are, for the rack map).
fn report_of(
    names: &[String],
    cliques: &BTreeMap<String, String>,
    files: &RackSources,
    map: bool,
) -> Report {
    Report {
        // The map's racks take the blocks' names, so a job's domain has one
        // name whichever file cut it; a topology file printed afresh does not.
        racks: racks(names, cliques, files.blocks.as_ref().filter(|_| map)),
        unpublished: names
            .iter()
            .filter(|n| !cliques.contains_key(*n))
            .cloned()
            .collect(),
        topology_file: files
            .blocks
            .as_ref()
            .map(|b| b.source.display().to_string()),
        rack_map: files.map.as_ref().map(RackMap::describe),
        disagreements: Vec::new(),
    }
}

/// `--check`: every disagreement of the files in force with the cliques.
fn check(
    files: &RackSources,
    cliques: &BTreeMap<String, String>,
    names: &[String],
) -> Result<Vec<String>> {
    if files.blocks.is_none() && files.map.is_none() {
        return Err(Error::new(
            "nothing to check: no Slurm topology file (set [slurm] topology, or put \
             topology.conf or topology.yaml beside slurm.conf) and no rack map ([imex] \
             rack_map; `slurm-imex topology --map` writes one)",
        ));
    }
    let mut found = files.check_file(cliques, names);
    if let Some(map) = &files.map {
        found.extend(map_disagreements(map, cliques));
    }
    Ok(found)
}

/// The map about to be written, read by the code every prolog loads it
/// with (`RackMap::parse`, with this config's `[imex] max_nodes`): a map no
/// prolog would load is never written. Its racks are what an indexed map
/// (`-o <dir>.d`) is cut from.
fn validate_map(text: &str, output: Option<&Path>, config: &Config) -> Result<RackMap> {
    let path = output.unwrap_or(Path::new("<stdout>"));
    RackMap::parse(path, text.as_bytes().to_vec(), config.engine.max_nodes).map_err(|e| {
        Error::new(format!(
            "slurm-imex topology --map wrote nothing: the map it built would not load: {e} \
             (fix what the nodes publish, or raise [imex] max_nodes)"
        ))
    })
}

/// An existing file at `path` that does not load as a rack map is kept
/// beside it, as `<name>.corrupt`, before the new map replaces it: a hard
/// link, so `path` itself never goes missing (a prolog reading it meanwhile
/// sees the old bytes or the new ones).
fn keep_a_corrupt_map_beside(path: &Path, config: &Config) -> Result<()> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(());
    }
    let Err(why) = RackMap::load(path, config.engine.max_nodes) else {
        return Ok(());
    };
    let mut kept = path.as_os_str().to_owned();
    kept.push(".corrupt");
    let kept = PathBuf::from(kept);
    let _ = std::fs::remove_file(&kept);
    std::fs::hard_link(path, &kept).map_err(|e| {
        Error::new(format!(
            "cannot keep the corrupt map {} as {}: {e}; nothing written",
            path.display(),
            kept.display()
        ))
    })?;
    err!(
        "slurm-imex topology: replacing a map that does not load ({why}); the old one is kept as {}",
        kept.display()
    );
    Ok(())
}

fn conf_text(report: &Report) -> String {
    let mut t =
        String::from("# NVLink racks from the cliques the nodes publish (slurm-imex topology)\n");
    for rack in &report.racks {
        let _ = writeln!(t, "# {}: clique {}", rack.name, rack.clique);
        let _ = writeln!(t, "BlockName={} Nodes={}", rack.name, rack.nodes);
    }
    t + &unpublished_text(report)
}

fn yaml_text(report: &Report) -> String {
    let mut t = String::from(
        "# NVLink racks from the cliques the nodes publish (slurm-imex topology)\n\
         - topology: nvlink\n  cluster_default: true\n  block:\n    blocks:\n",
    );
    for rack in &report.racks {
        let _ = writeln!(t, "      # clique {}", rack.clique);
        let _ = writeln!(t, "      - block: {}", rack.name);
        let _ = writeln!(t, "        nodes: {}", rack.nodes);
    }
    t + &unpublished_text(report)
}

fn map_text(report: &Report, node_count: usize) -> String {
    let racks: Vec<(String, String, String)> = report
        .racks
        .iter()
        .map(|r| (r.name.clone(), r.clique.clone(), r.nodes.clone()))
        .collect();
    let origin = format!(
        "at {} from the cliques {} of {node_count} nodes publish",
        slurm_imex_core::timespec::format_ts(slurm_imex_core::timespec::now_s()),
        node_count - report.unpublished.len()
    );
    rack_map::render(&racks, &origin) + &unpublished_text(report)
}

fn unpublished_text(report: &Report) -> String {
    if report.unpublished.is_empty() {
        return String::new();
    }
    format!(
        "# publish no NVLink clique (run slurm-imex check there): {}\n",
        hostlist::compress(&report.unpublished)
    )
}

fn check_text(report: &Report) -> String {
    check_lines(report).into_iter().map(|l| l + "\n").collect()
}

/// What `--check` says, a line each: one per disagreement (which may
/// quote what a node published), or that the files agree.
fn check_lines(report: &Report) -> Vec<String> {
    let files: Vec<&str> = [report.topology_file.as_deref(), report.rack_map.as_deref()]
        .into_iter()
        .flatten()
        .collect();
    let verb = if files.len() > 1 { "agree" } else { "agrees" };
    let files = files.join(" and ");
    if report.disagreements.is_empty() {
        return vec![format!(
            "{files} {verb} with the NVLink cliques of {} rack(s)",
            report.racks.len()
        )];
    }
    report
        .disagreements
        .iter()
        .map(|d| format!("{files}: {d}"))
        .collect()
}
