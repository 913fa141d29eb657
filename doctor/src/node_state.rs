//! This node's own side: the config file, NVML and the driver, NVML
//! accounting mode (per-job utilization) and what keeps it, the job
//! database, the metrics textfile directory, and the rack files (topology
//! file, rack map) against each other and this node's GPUs.

use crate::check::{Check, CheckName};
use crate::nvml_read::{Answer, Gpus, NvmlRead};
use slurm_imex_core::error::Error;
use slurm_imex_core::trust::{self, Expect};
use slurm_imex_settings::Config;
use std::path::Path;

/// The config file: read, trusted, every value in range, and the files and
/// programs it names held to the trust boundary.
pub fn config_file(path: &Path, loaded: &Result<(), Error>, config: &Config) -> Check {
    if let Err(e) = loaded {
        return Check::fail(
            CheckName::Config,
            e.to_string(),
            "fix what it names (conf-examples/imex.toml documents every key)",
        );
    }
    if let Err(e) = config.check_trust() {
        return Check::fail(
            CheckName::Config,
            e.to_string(),
            "make what it names root's and writable by root only",
        );
    }
    // The address map: every --imex job fails on a bad one (docs/blame.md).
    if let Err(e) = slurm_imex_domain::addresses::Resolver::new(&config.engine.addresses) {
        return Check::fail(
            CheckName::Config,
            e.to_string(),
            "fix the address map (root's, writable by root only, node = \"address\" lines): every --imex job fails until then",
        );
    }
    if std::fs::symlink_metadata(path).is_err() {
        return Check::warn(CheckName::Config, format!("no {}: every key at its default", path.display()),
            "install imex.toml beside slurm.conf (or set $SLURM_IMEX_CONFIG) if this node needs other values");
    }
    Check::pass(
        CheckName::Config,
        format!("{} read and trusted", path.display()),
    )
}

/// NVML loads and sees the GPUs this node must have, every call answering
/// within its budget (`nvml_read`).
pub fn nvml(config: &Config, read: &NvmlRead) -> Check {
    let expected = config.health.expected_gpus;
    match read.answer() {
        Answer::Read(gpus) => nvml_gpus(config, read, gpus),
        Answer::Hung { .. } => Check::fail(
            CheckName::Nvml,
            read.hung().unwrap_or_default(),
            HUNG_REMEDY,
        ),
        Answer::Untrusted(e) => Check::fail(
            CheckName::Nvml,
            e.to_string(),
            "make the library root's and writable by root only",
        ),
        Answer::Failed(e) if expected > 0 => Check::fail(
            CheckName::Nvml,
            e.to_string(),
            "install the NVIDIA driver's libnvidia-ml.so.1, or set [gpu] nvml_library",
        ),
        Answer::Failed(e) => Check::warn(
            CheckName::Nvml,
            e.to_string(),
            "on a GPU node, install the driver's libnvidia-ml.so.1 (a CPU node needs nothing)",
        ),
    }
}

/// What to do about an NVML call that hangs (the health gate drains the
/// node for it).
const HUNG_REMEDY: &str = "the driver or a GPU is wedged: look for XIDs (dmesg) and at `nvidia-smi -q`, then reset the GPU or reboot the node";

/// The `nvml` line once NVML loaded: a hung GPU read, else the count.
fn nvml_gpus(config: &Config, read: &NvmlRead, gpus: &Gpus) -> Check {
    let expected = config.health.expected_gpus;
    let (count, driver) = (gpus.count, &gpus.driver);
    if let Some(hung) = read.hung() {
        return Check::fail(CheckName::Nvml, hung, HUNG_REMEDY);
    }
    if expected > 0 && count != expected {
        return Check::fail(
            CheckName::Nvml,
            format!(
                "NVML sees {count} GPUs, [health] expected_gpus = {expected} (driver {driver})"
            ),
            "reseat or replace the missing GPU, or fix expected_gpus",
        );
    }
    let library = config.gpu.nvml_library.display();
    Check::pass(
        CheckName::Nvml,
        format!("{library} loads: driver {driver}, {count} GPUs"),
    )
}

/// Whether jobs' utilization and peak memory can be recorded: NVML
/// accounting mode on each GPU, or the prolog turning it on
/// (`[gpu] accounting`), and persistence mode keeping it (the driver forgets
/// it whenever it unloads, which it does with no process holding the GPU
/// unless persistence mode is on). FAIL naming the NVML call that hung
/// where one did (a GPU it could not read); None where NVML does not load
/// (the `nvml` check says why).
pub fn accounting(config: &Config, read: &NvmlRead) -> Option<Check> {
    use slurm_imex_gpu::config::Accounting;
    use slurm_imex_gpu::nvml::Reading;
    if let Some(hung) = read.hung() {
        return Some(Check::fail(CheckName::Accounting, hung, HUNG_REMEDY));
    }
    let gpus = read.snapshots()?;
    let which = |pick: &dyn Fn(&slurm_imex_gpu::nvml::GpuSnapshot) -> bool| -> Vec<String> {
        gpus.iter()
            .filter(|g| pick(g))
            .map(|g| format!("gpu{}", g.index))
            .collect()
    };
    let off = which(&|g| g.accounting_mode == Reading::Value(false));
    let forgets = which(&|g| g.persistence == Reading::Value(false));
    let on = gpus.len() - off.len();
    let turns_on = config.gpu.accounting == Accounting::On;
    Some(if !forgets.is_empty() && turns_on {
        Check::warn(CheckName::Accounting, format!("persistence mode is off on {}: the driver forgets NVML accounting mode whenever no process holds the GPU, so jobs' utilization and peak memory go unrecorded", forgets.join(",")),
            "run nvidia-persistenced (or nvidia-smi -pm 1) on every GPU node")
    } else if !off.is_empty() && !turns_on {
        Check::warn(CheckName::Accounting, format!("NVML accounting mode is off on {} and [gpu] accounting = \"leave\": jobs' utilization and peak memory are not recorded", off.join(",")),
            "set [gpu] accounting = \"on\", or turn it on at boot (nvidia-smi -am 1)")
    } else if off.is_empty() {
        Check::pass(
            CheckName::Accounting,
            format!("NVML accounting mode on for {on} GPUs; persistence mode keeps it"),
        )
    } else {
        Check::pass(CheckName::Accounting, format!("NVML accounting mode off on {} (as after every boot): the next GPU job's prolog turns it on ([gpu] accounting = \"on\"); persistence mode keeps it", off.join(",")))
    })
}

pub fn database(config: &Config) -> Check {
    let path = &config.database.path;
    if let Some(problem) = slurm_imex_jobdb::storage_problem(path) {
        return Check::fail(
            CheckName::Database,
            problem,
            "free space or remount read-write; epilogs keep running meanwhile",
        );
    }
    if std::fs::symlink_metadata(path).is_err() {
        return made_on_first_use(
            CheckName::Database,
            path,
            "[database] path's directory",
            "the first epilog makes it",
            "make the directory root's and not writable by others (chown root:root; chmod 0755)",
        );
    }
    match slurm_imex_jobdb::JobDb::open(path, config.database.busy_timeout.0) {
        Ok(_) => Check::pass(
            CheckName::Database,
            format!("{} opens, schema current", path.display()),
        ),
        Err(e) => Check::fail(
            CheckName::Database,
            e.to_string(),
            "fix what it names (the directory root's and not writable by others, the file 0600); a corrupt file: move it aside, the next epilog starts a new one",
        ),
    }
}

/// A path the hooks make on first use: fine while absent when the
/// directory above it is root's and only root can write it.
pub(crate) fn made_on_first_use(
    check: CheckName,
    path: &Path,
    parent_what: &str,
    who_makes_it: &str,
    fix_parent: &str,
) -> Check {
    match path
        .parent()
        .map(|p| trust::check(p, Expect::Dir, parent_what))
    {
        Some(Ok(())) => Check::pass(
            check,
            format!("{} not made yet: {who_makes_it}", path.display()),
        ),
        Some(Err(e)) => Check::fail(check, e.to_string(), fix_parent),
        None => Check::fail(
            check,
            format!("{} has no parent directory", path.display()),
            format!("set {parent_what} to an absolute path"),
        ),
    }
}

pub fn textfile_dir(config: &Config) -> Check {
    let Some(dir) = config.metrics.textfile_dir() else {
        return Check::pass(
            CheckName::TextfileDir,
            "metrics export off ([metrics] textfile_dir)",
        );
    };
    match trust::check(&dir, Expect::Dir, "[metrics] textfile_dir") {
        Ok(()) => Check::pass(CheckName::TextfileDir, format!("{} (node_exporter's textfile collector)", dir.display())),
        Err(e) => Check::fail(CheckName::TextfileDir, e.to_string(), "make it root's, or point [metrics] textfile_dir at node_exporter's --collector.textfile.directory"),
    }
}

/// The rack files a prolog reads (the topology file, the rack map) parse,
/// agree with each other, and, on a node, with the clique its own GPUs
/// report (`nvml`: None on the controller, which has no GPUs; a GPU read
/// that hung leaves the clique unknown, a FAIL naming the call). All local:
/// it asks slurmctld nothing.
pub fn topology(config: &Config, nvml: Option<&NvmlRead>) -> Check {
    use slurm_imex_domain::rack::sources::RackSources;
    let racks = match RackSources::read(config) {
        Ok(r) => r,
        Err(e) => return Check::fail(CheckName::Topology, e.to_string(),
            "fix the file (`slurm-imex topology` prints a topology.conf and `slurm-imex topology --map` a rack map from the fabric)"),
    };
    let topo = racks
        .blocks
        .as_ref()
        .map(|b| b.source.display().to_string());
    let map = racks.map.as_ref().map(|m| m.describe());
    let sources = match (&topo, &map) {
        (None, None) => return Check::warn(CheckName::Topology,
            "no topology file and no rack map: an --imex job is one IMEX domain, whatever racks its nodes are in",
            "write a rack map (`slurm-imex topology --map -o imex-racks.d` where scontrol answers) and install it beside imex.toml on every node, or describe the racks in topology.conf/topology.yaml"),
        (Some(t), Some(m)) => format!("{t} and the rack map {m}"),
        (Some(one), None) | (None, Some(one)) => one.clone(),
    };
    let node = this_node();
    let found = disagreements(&racks, &node, nvml);
    // This node's clique left unknown by a hung GPU read: the files may be
    // right, the GPUs cannot say.
    let hung = nvml
        .filter(|read| read.clique().is_none())
        .and_then(NvmlRead::hung);
    if let Some(hung) = hung.filter(|_| found.is_empty()) {
        return Check::fail(
            CheckName::Topology,
            format!("{sources}: {node}'s clique is unknown: {hung}"),
            HUNG_REMEDY,
        );
    }
    if found.is_empty() {
        let mine = racks
            .whole_rack(&node)
            .and_then(|r| r.name)
            .map(|r| format!("; {node} is in rack {r}"))
            .unwrap_or_default();
        return Check::pass(CheckName::Topology, format!("{sources}{mine}"));
    }
    Check::fail(CheckName::Topology, format!("{sources}: {}", slurm_imex_core::text::summarize_list(&found, 300)),
        "fix the file that is wrong; `slurm-imex topology --check` compares both with the cliques every node publishes")
}

/// Where the rack files disagree with each other, and with the clique
/// `node`'s GPUs report (when they were read).
fn disagreements(
    racks: &slurm_imex_domain::rack::sources::RackSources,
    node: &str,
    nvml: Option<&NvmlRead>,
) -> Vec<String> {
    let mut found = racks
        .map
        .as_ref()
        .map(|m| {
            let nodes: Vec<String> = m.racks().iter().flat_map(|r| r.nodes.clone()).collect();
            racks.disagreements(&nodes)
        })
        .unwrap_or_default();
    if let Some(live) = nvml.and_then(NvmlRead::clique) {
        found.extend(racks.live_clique_disagreement(node, &live));
    }
    found
}

/// The Slurm node name: $SLURMD_NODENAME, else the short hostname.
fn this_node() -> String {
    std::env::var("SLURMD_NODENAME")
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| {
            nix_hostname()
                .split('.')
                .next()
                .unwrap_or_default()
                .to_string()
        })
}

fn nix_hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}
