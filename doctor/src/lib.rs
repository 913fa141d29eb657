//! `slurm-imex doctor`: the preflight an admin runs on a node (and on the
//! controller host) to check an installation end to end. Each check gives
//! one [`Finding`]: PASS, WARN or FAIL, what it found, and the exact remedy.
//! The checks read; the only thing they may create is nothing (the job
//! database is opened only when it exists).

mod finding;
mod imex_node;
mod node_state;
mod plugin_stamp;
mod plugstack;
mod slurm_view;
mod slurm_wiring;

pub use finding::{Finding, Verdict};
pub use slurm_view::SlurmView;

use slurm_imex_core::config::Config;
use std::path::{Path, PathBuf};

/// What the doctor is given: the config it loaded (defaults when the file
/// failed, with `loaded` saying why) and where this node's programs live.
pub struct Patient<'a> {
    pub config: &'a Config,
    pub config_path: &'a Path,
    pub loaded: Result<(), String>,
    /// Where slurm-imex-prolog and -epilog are installed (for remedies).
    pub sbin: PathBuf,
    /// Only the cluster-wide checks: on the controller or a login node,
    /// which have no IMEX daemon, channels or GPUs.
    pub cluster_only: bool,
}

/// Every check, in the order an admin fixes them: Slurm's wiring, the
/// config, the IMEX daemon and channels, then GPUs and records.
pub fn examine(p: &Patient) -> Vec<Finding> {
    let mut found = slurm_side(p);
    found.push(node_state::config_file(p.config_path, &p.loaded, p.config));
    if p.cluster_only {
        return found;
    }
    found.extend(imex_node::programs(p.config));
    found.push(imex_node::base_config(p.config));
    found.push(imex_node::channel_device(p.config));
    found.push(imex_node::channel_dir(p.config));
    found.push(imex_node::ports(p.config));
    found.push(imex_node::systemd_unit(p.config));
    found.push(node_state::nvml(p.config));
    found.push(node_state::database(p.config));
    found.push(node_state::textfile_dir(p.config));
    found
}

/// The checks that need the running Slurm; one FAIL when scontrol cannot say.
fn slurm_side(p: &Patient) -> Vec<Finding> {
    let slurm = match SlurmView::query(&p.config.health.scontrol, p.config.health.scontrol_timeout.0) {
        Ok(s) => s,
        Err(e) => return vec![Finding::fail("slurm", e.to_string(),
            "start slurmctld, or point [health] scontrol at this Slurm's scontrol (e.g. /opt/slurm/bin/scontrol); the Slurm checks were skipped")],
    };
    let plugin_dir = slurm
        .plugin_dirs()
        .into_iter()
        .next()
        .unwrap_or_else(|| PathBuf::from("<PluginDir>"));
    let mut found = vec![Finding::pass(
        "slurm",
        format!(
            "Slurm {} (slurm.conf {})",
            slurm.version,
            slurm
                .slurm_conf()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "unknown".into())
        ),
    )];
    found.extend(plugstack::check(
        &slurm,
        p.config_path,
        &plugin_dir.join("spank_imex.so").display().to_string(),
    ));
    found.push(slurm_wiring::prolog_flags(&slurm));
    found.push(slurm_wiring::hook(
        &slurm,
        "Prolog",
        "slurm-imex-prolog",
        &p.sbin.join("slurm-imex-prolog"),
    ));
    found.push(slurm_wiring::hook(
        &slurm,
        "Epilog",
        "slurm-imex-epilog",
        &p.sbin.join("slurm-imex-epilog"),
    ));
    found.push(slurm_wiring::health_check(&slurm));
    found.push(slurm_wiring::switch(&slurm, p.config));
    found.push(node_state::topology(
        p.config,
        slurm.slurm_conf().as_deref(),
    ));
    found
}
