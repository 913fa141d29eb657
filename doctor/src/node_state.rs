//! This node's own side: the config file, NVML and the driver, the job
//! database, the metrics textfile directory, and the topology file against
//! the NVLink cliques the nodes publish.

use crate::finding::Finding;
use slurm_imex_core::config::Config;
use slurm_imex_core::trust::{self, Expect};
use std::path::Path;

/// The config file: read, trusted, every value in range, and the files and
/// programs it names held to the trust boundary.
pub fn config_file(path: &Path, loaded: &Result<(), String>, config: &Config) -> Finding {
    if let Err(e) = loaded {
        return Finding::fail(
            "config",
            e.clone(),
            "fix what it names (conf-examples/imex.toml documents every key)",
        );
    }
    if let Err(e) = config.check_trust() {
        return Finding::fail(
            "config",
            e.to_string(),
            "make what it names root's and writable by root only",
        );
    }
    if std::fs::symlink_metadata(path).is_err() {
        return Finding::warn("config", format!("no {}: every key at its default", path.display()),
            "install imex.toml beside slurm.conf (or set $SLURM_IMEX_CONFIG) if this node needs other values");
    }
    Finding::pass("config", format!("{} read and trusted", path.display()))
}

pub fn nvml(config: &Config) -> Finding {
    let library = &config.gpu.nvml_library;
    let expected = config.health.expected_gpus;
    // Root loads only a library root alone can change (a bare soname is the
    // loader's search path, as in the hooks).
    if library.is_absolute() && library.exists() {
        if let Err(e) = trust::check(library, Expect::File, "[gpu] nvml_library") {
            return Finding::fail(
                "nvml",
                e.to_string(),
                "make the library root's and writable by root only",
            );
        }
    }
    match slurm_imex_gpu::nvml::GpuReader::open(library) {
        Ok(reader) => {
            let count = reader.device_count().unwrap_or(0);
            let driver = reader.driver_version().unwrap_or_else(|| "unknown".into());
            if expected > 0 && count != expected {
                return Finding::fail("nvml", format!("NVML sees {count} GPUs, [health] expected_gpus = {expected} (driver {driver})"),
                    "reseat or replace the missing GPU, or fix expected_gpus");
            }
            Finding::pass(
                "nvml",
                format!("{} loads: driver {driver}, {count} GPUs", library.display()),
            )
        }
        Err(e) if expected > 0 => Finding::fail(
            "nvml",
            e.to_string(),
            "install the NVIDIA driver's libnvidia-ml.so.1, or set [gpu] nvml_library",
        ),
        Err(e) => Finding::warn(
            "nvml",
            e.to_string(),
            "on a GPU node, install the driver's libnvidia-ml.so.1 (a CPU node needs nothing)",
        ),
    }
}

pub fn database(config: &Config) -> Finding {
    let path = &config.database.path;
    if let Some(problem) = slurm_imex_jobdb::storage_problem(path) {
        return Finding::fail(
            "database",
            problem,
            "free space or remount read-write; epilogs keep running meanwhile",
        );
    }
    if std::fs::symlink_metadata(path).is_err() {
        return made_on_first_use(
            "database",
            path,
            "[database] path's directory",
            "the first epilog makes it",
            "make the directory root's and not writable by others (chown root:root; chmod 0755)",
        );
    }
    match slurm_imex_jobdb::JobDb::open(path, config.database.busy_timeout.0) {
        Ok(_) => Finding::pass(
            "database",
            format!("{} opens, schema current", path.display()),
        ),
        Err(e) => Finding::fail(
            "database",
            e.to_string(),
            "fix what it names (the directory root's and not writable by others, the file 0600); a corrupt file: move it aside, the next epilog starts a new one",
        ),
    }
}

/// A path the hooks make on first use: fine while absent when the
/// directory above it is root's and only root can write it.
pub(crate) fn made_on_first_use(
    check: &'static str,
    path: &Path,
    parent_what: &str,
    who_makes_it: &str,
    fix_parent: &str,
) -> Finding {
    match path
        .parent()
        .map(|p| trust::check(p, Expect::Dir, parent_what))
    {
        Some(Ok(())) => Finding::pass(
            check,
            format!("{} not made yet: {who_makes_it}", path.display()),
        ),
        Some(Err(e)) => Finding::fail(check, e.to_string(), fix_parent),
        None => Finding::fail(
            check,
            format!("{} has no parent directory", path.display()),
            format!("set {parent_what} to an absolute path"),
        ),
    }
}

pub fn textfile_dir(config: &Config) -> Finding {
    let Some(dir) = config.metrics.textfile_dir() else {
        return Finding::pass(
            "textfile-dir",
            "metrics export off ([metrics] textfile_dir)",
        );
    };
    match trust::check(&dir, Expect::Dir, "[metrics] textfile_dir") {
        Ok(()) => Finding::pass("textfile-dir", format!("{} (node_exporter's textfile collector)", dir.display())),
        Err(e) => Finding::fail("textfile-dir", e.to_string(), "make it root's, or point [metrics] textfile_dir at node_exporter's --collector.textfile.directory"),
    }
}

/// The topology file (when there is one) parses and agrees with the
/// cliques the nodes publish.
pub fn topology(config: &Config, slurm_conf: Option<&Path>) -> Finding {
    use slurm_imex_core::{clique, racks::RackSources, slurm_node, topology as topo};
    let Some(file) = topo::locate(&config.slurm, slurm_conf) else {
        return Finding::pass(
            "topology",
            "no topology file: racks come from the cliques the nodes publish",
        );
    };
    let blocks = match topo::Blocks::load(&file, config.imex.max_nodes) {
        Ok(b) => b,
        Err(e) => {
            return Finding::fail(
                "topology",
                e.to_string(),
                "fix the file (slurm-imex topology prints one from the fabric)",
            )
        }
    };
    let names = match slurm_node::nodes_status(&config.health, None) {
        Ok(nodes) => nodes.into_iter().map(|n| n.name).collect::<Vec<_>>(),
        Err(e) => {
            return Finding::warn(
                "topology",
                format!("{} not compared: {e}", file.display()),
                "run doctor where scontrol answers",
            )
        }
    };
    let cliques = clique::published(&config.health, None).unwrap_or_default();
    let found = RackSources {
        blocks: Some(blocks),
        cliques,
    }
    .check_file(&names);
    if found.is_empty() {
        return Finding::pass(
            "topology",
            format!(
                "{} agrees with the published NVLink cliques",
                file.display()
            ),
        );
    }
    Finding::fail("topology", format!("{} disagrees with the fabric: {}", file.display(), slurm_imex_core::text::summarize_list(&found, 300)),
        "fix the file; `slurm-imex topology --check` lists every disagreement and `slurm-imex topology` prints the fabric's racks")
}
