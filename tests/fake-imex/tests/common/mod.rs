//! What the fake-imex integration tests share: a node's imex.toml, over
//! the files each test writes in its own directory (proc-devices, the
//! address map, slurm.conf, the admin's base config) and the fake daemon
//! and ctl cargo built for the tests.

use std::path::Path;

/// The imex.toml of a test node whose files are in `dir`: per-job domains
/// on the fake daemon (the process manager), addresses from `map.toml`.
pub fn node_toml(dir: &Path) -> String {
    let p = |n: &str| dir.join(n).display().to_string();
    format!(
        r#"[node]
state_dir = "{state}"
[imex]
proc_devices = "{pd}"
ready_timeout = "1500ms"
ready_poll_max = "100ms"
channels = "plugin"
[slurm]
config = "{slurm_conf}"
topology = "none"
[imex.daemon]
manager = "process"
binary = "{bin}"
ctl = "{ctl}"
base_config = "{base}"
nodes_config = "{nodes}"
job_config = "{job}"
stop_timeout = "2s"
[imex.addresses]
source = "map"
map_file = "{map}"
"#,
        state = p("state"),
        pd = p("proc-devices"),
        slurm_conf = p("slurm.conf"),
        bin = env!("CARGO_BIN_EXE_nvidia-imex"),
        ctl = env!("CARGO_BIN_EXE_nvidia-imex-ctl"),
        base = p("base.cfg"),
        nodes = p("nodes_config.cfg"),
        job = p("job.cfg"),
        map = p("map.toml"),
    )
}
