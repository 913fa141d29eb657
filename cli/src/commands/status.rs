//! `slurm-imex status`: this node's IMEX daemon and domain state, as
//! `slurm_imex_domain::imex::status` reads it.

use crate::args::Cli;
use crate::cells::or_dash;
use crate::output::print_json;
use slurm_imex_core::error::Result;
use slurm_imex_domain::imex;
use slurm_imex_settings::Config;

/// `slurm-imex status`: who owns the daemon, whether IMEX is expected here
/// now, its state, the domain, the prolog's record, problems and config
/// deprecations, one line each.
pub fn status(cli: &Cli, config: &Config) -> Result<u8> {
    let s = imex::status::node_status(config);
    if cli.json {
        print_json(&s)?;
        return Ok(0);
    }
    out!("IMEX owner job:   {}", or_dash(s.owner));
    if s.owner.is_none() {
        if let Some(serves) = &s.serves {
            out!("daemon serves:    {serves} ([imex] domain = \"rack\")");
        }
    }
    let expected = if s.imex_expected { "yes" } else { "no" };
    out!("IMEX expected:    {expected} ({})", s.imex_expected_because);
    out!("daemon:           {}", s.daemon);
    out!("local state:      {}", s.local_state);
    if let Some(d) = &s.domain {
        let (ready, total) = s.nodes_ready.unwrap_or((0, 0));
        out!("domain:           {d} ({ready}/{total} nodes READY)");
    }
    if let Some(r) = &s.record {
        match r.channel {
            Some(c) => out!("channel:          {c}"),
            None => out!("channel:          Slurm's (switch/nvidia_imex)"),
        }
        out!("server port:      {}", r.server_port);
        out!("nodes:            {}", r.nodes.join(","));
        if let Some(source) = &r.rack_source {
            out!("members from:     {source}");
        }
        out!("prolog outcome:   {:?}", r.outcome);
    }
    for p in &s.problems {
        out!("problem:          {p}");
    }
    for d in &config.deprecations {
        out!("config:           {d}");
    }
    Ok(0)
}
