//! `slurm-imex check`: the health gate now (slurmd's HealthCheckProgram or
//! an admin's command). The hook runs in `slurm_imex_hooks::check`; this
//! file checks `--node`, loads imex.toml as the prolog does, and prints the
//! report. Exit 1 on a drain verdict; 2 when it could not check, an
//! imex.toml that does not load among them (with `--drain` the node is
//! drained with its line: `slurm_imex_hooks::config_fault`).

use crate::args::Cli;
use crate::output::{self, print_json};
use crate::table::Table;
use crate::this_node::this_node;
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::slurm::node::node_name;
use slurm_imex_gpu::health::Verdict;
use slurm_imex_hooks as hooks;
use slurm_imex_hooks::check::CheckReport;
use slurm_imex_hooks::drain::CheckFlags;
use slurm_imex_settings::Config;

/// `slurm-imex check`: the hook runs (`slurm_imex_hooks::check`), and its
/// report is printed. Exit 1 on a drain verdict.
pub fn check(cli: &Cli, drain_node: bool, undrain: bool, node: Option<String>) -> Result<u8> {
    let flags = CheckFlags {
        drain: drain_node,
        undrain,
    };
    if let Some(n) = &node {
        node_name(n).map_err(|e| {
            Error::invalid(format!(
                "--node is not a node name: {e}: give this node's Slurm name, such as n1"
            ))
        })?;
    }
    let node = this_node(node);
    let config = match Config::load_trusted(cli.config.as_deref()) {
        Ok((config, _)) => config,
        Err(e) => return cannot_load(cli, &node, flags, e),
    };
    let report = hooks::check::check(&config, node, flags)?;
    for w in &report.warnings {
        err!("slurm-imex: warning: {w}");
    }
    if cli.json {
        print_json(&report)?;
    } else {
        print_check_report(&report)?;
    }
    Ok(if report.verdict == Verdict::Drain {
        1
    } else {
        0
    })
}

/// imex.toml does not load: with `--drain` the node is drained with its
/// line (once), which is printed; the line is the command's error (exit 2).
fn cannot_load(cli: &Cli, node: &str, flags: CheckFlags, e: Error) -> Result<u8> {
    match hooks::config_fault::check(node, cli.config.as_deref(), &e, flags) {
        Ok(action) => {
            if let Some(done) = action.and_then(|a| a.describe(node)) {
                out!("{done}");
            }
            Err(e)
        }
        Err(not) => Err(Error::of(
            e.kind(),
            format!("{e}; {node} not drained for it: {not}"),
        )),
    }
}

/// The check's report as an admin reads it: the verdict line, the findings
/// table, what was done to the node, the clique it publishes.
fn print_check_report(report: &CheckReport) -> Result<()> {
    out!(
        "{}: {} ({} GPUs checked in {} ms)",
        report.node,
        report.verdict.as_str(),
        report.gpus,
        report.elapsed_ms
    );
    let mut t = Table::new(&["SEVERITY", "CHECK", "GPU", "SERIAL", "DETAIL"]);
    for f in &report.findings {
        t.row(vec![
            format!("{:?}", f.severity).to_uppercase(),
            f.check.clone(),
            f.gpu.as_ref().map_or("-".into(), |g| g.index.to_string()),
            f.gpu.as_ref().map_or("-".into(), |g| g.serial.clone()),
            f.detail.clone(),
        ]);
    }
    if !report.findings.is_empty() {
        output::table(&t)?;
    }
    if let Some(a) = &report.action {
        out!("{a}");
    }
    if let (Some(c), Some(p)) = (&report.clique, &report.published) {
        out!("NVLink clique {c}: {p}");
    }
    Ok(())
}
