//! `slurm-imex undrain`: resume the nodes slurm-imex drained, each node of
//! a hostlist judged alone by its own reason (`slurm_imex_hooks::check`
//! decides), one line each.

use crate::args::Cli;
use crate::output::print_json;
use crate::this_node::this_node;
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::slurm::node::node_names;
use slurm_imex_hooks as hooks;
use slurm_imex_hooks::drain::DrainAction;
use slurm_imex_settings::Config;

/// `slurm-imex undrain [--node HOSTLIST]`: each node judged alone, one line
/// each. Exit 0 when every node was resumed or not drained, 1 when one was
/// left drained (not ours), 2 when one could not be read or resumed.
pub fn undrain(cli: &Cli, config: &Config, node: Option<String>) -> Result<u8> {
    let here = this_node(None);
    let hostlist = node.unwrap_or_else(|| here.clone());
    let names = node_names(&hostlist, config.engine.max_nodes).map_err(|e| {
        Error::invalid(format!(
            "--node: {e}: give a Slurm node name or hostlist, such as n1 or gb-r1-[01-18]"
        ))
    })?;
    let (outcomes, warning) = hooks::check::undrain(config, &hostlist, &names, &here)?;
    if let Some(w) = warning {
        err!("slurm-imex: warning: {w}");
    }
    let mut code = 0;
    let mut objects = Vec::new();
    for (name, outcome) in &outcomes {
        match outcome {
            Ok(action) => {
                if matches!(action, DrainAction::LeftDrained { .. }) {
                    code = code.max(1);
                }
                let line = action.describe(name).unwrap_or_default();
                if !cli.json {
                    out!("{line}");
                }
                objects.push(serde_json::json!({"node": name, "result": line}));
            }
            Err(e) => {
                code = 2;
                err!("slurm-imex: {e}");
                objects.push(serde_json::json!({"node": name, "error": e.to_string()}));
            }
        }
    }
    if cli.json {
        match objects.as_slice() {
            [one] => print_json(one)?,
            _ => print_json(&objects)?,
        }
    }
    Ok(code)
}
