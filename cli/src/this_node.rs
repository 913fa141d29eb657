//! Which Slurm node a command is about when it runs on the node itself
//! (`check`, `undrain`): `--node`, else the name slurmd exports, else the
//! short hostname.

/// --node, else the Slurm node name slurmd exports, else the short hostname.
pub fn this_node(node: Option<String>) -> String {
    node.or_else(|| {
        std::env::var("SLURMD_NODENAME")
            .ok()
            .filter(|n| !n.is_empty())
    })
    .unwrap_or_else(|| {
        nix::unistd::gethostname()
            .map(|h| {
                h.to_string_lossy()
                    .split('.')
                    .next()
                    .unwrap_or_default()
                    .to_string()
            })
            .unwrap_or_default()
    })
}
