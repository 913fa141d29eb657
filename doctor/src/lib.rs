//! `slurm-imex doctor`: the preflight an admin runs on a node (and on the
//! controller host) to check an installation end to end. Each check gives
//! one [`Check`]: PASS, WARN or FAIL, what it found, and the exact remedy.
//! The checks read; the only thing they may create is nothing (the job
//! database is opened only when it exists).

mod check;
mod daemon_cfg;
mod imex_command;
mod imex_node;
mod imex_tls;
mod listening;
mod node_state;
mod nvml_read;
mod pattern;
mod plugin_stamp;
mod plugstack;
mod shared_nodes;
mod slurm_view;
mod slurm_wiring;
mod tls_file;

pub use check::{Check, CheckName, Status};
pub use listening::{parse_listen_line, ProcNet};
pub use slurm_view::SlurmView;

use nvml_read::NvmlRead;
use slurm_imex_core::error::Error;
use slurm_imex_settings::Config;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// What the doctor is given: the config it loaded (defaults when the file
/// failed, with `loaded` saying why) and where this node's programs live.
pub struct Patient<'a> {
    pub config: &'a Config,
    pub config_path: &'a Path,
    pub loaded: Result<(), Error>,
    /// Where slurm-imex-prolog and -epilog are installed (for remedies).
    pub sbin: PathBuf,
    /// Only the cluster-wide checks: on the controller or a login node,
    /// which have no IMEX daemon, channels or GPUs.
    pub cluster_only: bool,
}

/// Longest a whole doctor run may take: every helper it runs is bounded
/// on its own, and this bounds their sum (and anything not foreseen).
pub const TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// [`examine`] on a thread, bounded by `limit`: when the checks do not
/// finish in time, the one FAIL line saying so (the thread is left behind,
/// and ends with the process).
pub fn examine_within(
    config: Config,
    config_path: PathBuf,
    loaded: Result<(), Error>,
    sbin: PathBuf,
    cluster_only: bool,
    limit: std::time::Duration,
) -> Vec<Check> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let patient = Patient {
            config: &config,
            config_path: &config_path,
            loaded,
            sbin,
            cluster_only,
        };
        let _ = tx.send(examine(&patient));
    });
    bounded(rx, limit)
}

fn bounded(rx: std::sync::mpsc::Receiver<Vec<Check>>, limit: std::time::Duration) -> Vec<Check> {
    rx.recv_timeout(limit).unwrap_or_else(|_| {
        vec![Check::fail(
            CheckName::Doctor,
            format!("the checks did not finish within {limit:?}, so none is reported"),
            "find what it waits on (a slow controller, a stuck file system: `strace -f \
             slurm-imex doctor`), fix that, then run doctor again",
        )]
    })
}

/// Every check, in the order an admin fixes them: Slurm's wiring, the
/// config, the IMEX daemon and channels, then GPUs and records.
pub fn examine(p: &Patient) -> Vec<Check> {
    if p.cluster_only {
        let mut found = slurm_side(p, None);
        found.push(node_state::config_file(p.config_path, &p.loaded, p.config));
        return found;
    }
    // NVML is read meanwhile, within the gate's budgets.
    let nvml = NvmlRead::start(p.config);
    let mut found = slurm_side(p, Some(&nvml));
    found.push(node_state::config_file(p.config_path, &p.loaded, p.config));
    found.extend(imex_node::programs(p.config));
    found.push(imex_node::base_config(p.config));
    found.extend(imex_exposure(
        p.config,
        &ProcNet::default(),
        SystemTime::now(),
    ));
    found.push(imex_node::channel_device(p.config));
    found.push(imex_node::channel_dir(p.config));
    found.push(imex_node::ports(p.config));
    found.push(imex_node::systemd_unit(p.config));
    found.push(node_state::nvml(p.config, &nvml));
    found.extend(node_state::accounting(p.config, &nvml));
    found.push(node_state::database(p.config));
    found.push(node_state::textfile_dir(p.config));
    found
}

/// Who can reach the IMEX daemon: its command service (`imex-command`,
/// against the sockets `proc_net` lists) and the TLS between daemons
/// (`imex-tls`, certificates judged at `now`), on the effective daemon
/// config. Public for the bad-input suite, which injects both.
pub fn imex_exposure(config: &Config, proc_net: &ProcNet, now: SystemTime) -> Vec<Check> {
    const CHECKS: [CheckName; 2] = [CheckName::ImexCommand, CheckName::ImexTls];
    let effective = match daemon_cfg::Effective::read(config) {
        Ok(e) => e,
        Err(e) => {
            return CHECKS
                .into_iter()
                .map(|c| Check::warn(c, format!("not checked: {}", e.found), "make it a readable daemon config (imex-config names the base config's problem)"))
                .collect()
        }
    };
    let now = now
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let mut found = imex_command::check(&effective, &listening::read(proc_net));
    found.extend(imex_tls::check(&effective, now));
    // A running copy refused is a config a daemon is restarted on that
    // neither check could judge: each says so, naming it.
    if let Some(refused) = &effective.running_refused {
        for c in CHECKS {
            let at = found
                .iter()
                .rposition(|f| f.check == c)
                .map_or(found.len(), |p| p + 1);
            found.insert(
                at,
                Check::fail(
                    c,
                    format!("not judged: {}", refused.found),
                    refused.fix.clone(),
                ),
            );
        }
    }
    found
}

/// The checks of Slurm's side, on what the controller runs with, else on
/// the slurm.conf this node reads; one FAIL only when neither can be read.
fn slurm_side(p: &Patient, nvml: Option<&NvmlRead>) -> Vec<Check> {
    let slurm = match slurm_view(p) {
        Ok(found) => found,
        Err(fail) => return vec![fail],
    };
    let plugin_dir = slurm
        .plugin_dirs()
        .into_iter()
        .next()
        .unwrap_or_else(|| PathBuf::from("<PluginDir>"));
    let mut found = vec![slurm_check(&slurm, p)];
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
    found.push(slurm_wiring::adopted_processes(
        &slurm,
        Path::new("/etc/pam.d"),
    ));
    found.push(slurm_wiring::private_data(&slurm));
    found.push(slurm_wiring::rack_channels(p.config));
    if p.cluster_only {
        // job_submit.lua lives with slurmctld, not on the nodes.
        let scontrol = slurm_imex_core::slurm::Scontrol::of(&p.config.slurm);
        let partitions = scontrol
            .show_partitions()
            .map(|text| shared_nodes::parse_partitions(&text))
            .map_err(|e| e.to_string());
        found.push(shared_nodes::check(p.config, &slurm, partitions));
    }
    found.push(node_state::topology(p.config, nvml));
    found
}

/// What the controller runs with; when it does not answer, the slurm.conf
/// this node reads. Err: the one FAIL when neither can be read.
fn slurm_view(p: &Patient) -> Result<SlurmView, Check> {
    let scontrol = slurm_imex_core::slurm::Scontrol::of(&p.config.slurm);
    let asked = SlurmView::query(&scontrol);
    let controller_error = match asked {
        Ok(view) => return Ok(view),
        Err(e) => e,
    };
    let local = slurm_imex_core::slurm::conf::locate(&p.config.slurm)
        .ok_or_else(|| slurm_imex_core::Error::new("[slurm] config = \"none\""))
        .and_then(|path| slurm_imex_core::slurm::conf::SlurmConf::read(&path));
    match local {
        Ok(conf) => Ok(SlurmView::from_file(&conf, &scontrol)),
        Err(e) => Err(Check::fail(CheckName::Slurm, format!("{controller_error}; and this node's slurm.conf: {e}"),
            "start slurmctld, or point [slurm] scontrol at this Slurm's scontrol (e.g. /opt/slurm/bin/scontrol) and [slurm] config at its slurm.conf; the Slurm checks were skipped")),
    }
}

/// The `slurm` line: which Slurm, and where its values came from.
fn slurm_check(slurm: &SlurmView, p: &Patient) -> Check {
    let conf = slurm
        .slurm_conf()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "unknown".into());
    let version = if slurm.version.is_empty() {
        "of unknown version"
    } else {
        &slurm.version
    };
    match &slurm.from_file {
        None => Check::pass(CheckName::Slurm, format!("Slurm {version} (slurm.conf {conf})")),
        Some(file) => Check::warn(
            CheckName::Slurm,
            format!(
                "Slurm {version}: slurmctld did not answer `{} show config`, so the Slurm checks below read {}, the slurm.conf this node reads",
                p.config.slurm.scontrol.display(),
                file.display()
            ),
            "start slurmctld, or fix this node's way to it; slurmctld may run with other values than this file",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_does_not_finish_in_time_is_one_fail_line() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_secs(30));
            let _ = tx.send(Vec::new());
        });
        let started = std::time::Instant::now();
        let found = bounded(rx, std::time::Duration::from_millis(200));
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].verdict, Status::Fail);
        assert!(
            found[0].line().contains("did not finish within 200ms"),
            "{}",
            found[0].line()
        );
    }
}
