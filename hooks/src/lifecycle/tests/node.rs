//! Node n1's own files in a temporary directory, for the rows whose blame
//! the real domain step decides (`Live::form_domain`: `domain::form`): the
//! config's paths, the channel device line, the address map, slurm.conf
//! and the rack files as each row has them, and stand-ins for the programs
//! the config names: `nvidia-imex` (a process that stays up, or one that
//! exits at start), `nvidia-imex-ctl` (a canned `-N -j` and `-q` answer)
//! and `scontrol` (a canned `show job`). No daemon, no Slurm.

use super::job;
use slurm_imex_core::config::AutoPath;
use slurm_imex_core::slurm::env::JobEnv;
use slurm_imex_core::state::StateDir;
use slurm_imex_domain::config::DomainScope;
use slurm_imex_domain::imex::daemon::Daemon;
use slurm_imex_settings::Config;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Two NVLink cliques of one cluster, as NVML reports them.
pub const CLIQUE_7: &str = "5bd3a7e0-1c2f-4e8a-9d6b-0a1b2c3d4e5f.7";
pub const CLIQUE_8: &str = "5bd3a7e0-1c2f-4e8a-9d6b-0a1b2c3d4e5f.8";

/// n1, running the prolog of `job(true)` (nodes n[1-2]).
pub struct TestNode {
    dir: tempfile::TempDir,
    pub cfg: Config,
    pub job: JobEnv,
}

impl TestNode {
    /// n1 where the job's domain forms: a per-job domain with slurm-imex's
    /// channels, no rack files, an address map listing n1 and n2, a daemon
    /// that stays up, and a ctl that says both are READY and connected.
    pub fn new() -> TestNode {
        let dir = tempfile::tempdir().unwrap();
        let cfg = Config::parse(&config_text(dir.path()), Path::new("imex.toml")).unwrap();
        let node = TestNode {
            dir,
            cfg,
            job: job(true),
        };
        node.file(
            "proc-devices",
            "Character devices:\n195 nvidia\n508 nvidia-caps-imex-channels\n",
        );
        node.file("addresses.toml", "n1 = \"127.0.0.1\"\nn2 = \"127.0.0.2\"\n");
        node.base_config("IMEX_CMD_ENABLED=1");
        node.program("nvidia-imex", "exec sleep 30");
        let answers = node.path("answers");
        node.program(
            "nvidia-imex-ctl",
            &format!(
                "for a in \"$@\"; do [ \"$a\" = -q ] && exec cat {0}/ctl-q; done\n\
                 exec cat {0}/ctl-N-j",
                answers.display()
            ),
        );
        node.program(
            "scontrol",
            &format!("exec cat {}/scontrol", answers.display()),
        );
        node.ctl_says("UP", "READY", "READY", "CONNECTED");
        node
    }

    /// `name` in the node's directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Write `name`, mode 0644 whatever the umask (writable by its owner
    /// only, as the trust boundary wants); its path.
    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        path
    }

    /// The admin's daemon config: a log file, ports below the ephemeral
    /// range (no hint about reserving them in failure lines), then `lines`
    /// (the last value of a key is the one the daemon reads).
    pub fn base_config(&self, lines: &str) {
        let log = self.path("imex.log");
        self.file(
            "base.cfg",
            &format!(
                "SERVER_PORT=20000\nIMEX_CMD_PORT=1\nLOG_FILE_NAME={}\n{lines}\n",
                log.display()
            ),
        );
    }

    /// A stand-in program: a shell script running `body`.
    fn program(&self, name: &str, body: &str) {
        let path = self.file(name, &format!("#!/bin/sh\n{body}\n"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// What `nvidia-imex-ctl -N -j` says of the domain (n1 is node 0, n2
    /// node 1) and n1's link to n2; `-q` says n1's state.
    pub fn ctl_says(&self, domain: &str, n1: &str, n2: &str, link: &str) {
        let nodes = format!(
            r#"{{"0":{{"status":"{n1}","connections":{{"1":{{"status":"{link}"}}}}}},"1":{{"status":"{n2}"}}}}"#
        );
        self.file(
            "answers/ctl-N-j",
            &format!(r#"{{"status":"{domain}","nodes":{nodes}}}"#),
        );
        self.file("answers/ctl-q", &format!("{n1}\n"));
    }

    /// nvidia-imex exits at start, logging why; the ctl cannot reach it.
    pub fn daemon_exits(&self) {
        let log = self.path("imex.log");
        self.program(
            "nvidia-imex",
            &format!(
                "echo 'bind 0.0.0.0:24242: Address already in use' >> {}\nexit 1",
                log.display()
            ),
        );
        std::fs::remove_file(self.path("answers/ctl-N-j")).unwrap();
    }

    /// Job `owner` holds this node's domain, in `state` as Slurm says.
    pub fn owned_by(&self, owner: u32, state: &str) {
        let dir = StateDir::of(&self.cfg);
        dir.set_owner(&dir.lock().unwrap(), owner).unwrap();
        self.file(
            "answers/scontrol",
            &format!("JobId={owner} JobName=train UserId=bob(1001) JobState={state}\n"),
        );
    }

    /// The rack map (name, clique, hostlist per rack), in force; its path.
    pub fn rack_map(&mut self, racks: &[(&str, &str, &str)]) -> PathBuf {
        let text: String = racks
            .iter()
            .map(|(name, clique, nodes)| {
                format!("[[rack]]\nname = \"{name}\"\nclique = \"{clique}\"\nnodes = \"{nodes}\"\n")
            })
            .collect();
        let path = self.file("imex-racks.toml", &text);
        self.cfg.engine.rack_map = AutoPath::Path(path.clone());
        path
    }

    /// The rack map as `slurm-imex topology --map -o imex-racks.d` writes
    /// it (the indexed form a prolog reads in pieces), in force; its path.
    pub fn rack_map_indexed(&mut self, racks: &[(&str, &str, &str)]) -> PathBuf {
        let file = self.rack_map(racks);
        let text = std::fs::read_to_string(&file).unwrap();
        let map = slurm_imex_domain::rack::map::RackMap::load(&file, 100).unwrap();
        let dir = self.path("imex-racks.d");
        slurm_imex_domain::rack::index::write(&dir, &map, &text, None).unwrap();
        self.cfg.engine.rack_map = AutoPath::Path(dir.clone());
        dir
    }

    /// Slurm's topology file, in force; its path.
    pub fn topology(&mut self, text: &str) -> PathBuf {
        let path = self.file("topology.conf", text);
        self.cfg.slurm.topology = AutoPath::Path(path.clone());
        path
    }

    /// `[imex] domain = "rack"`, under a slurm.conf whose job ids each
    /// have their own channel (2047 ids, the job's among them).
    pub fn rack_scope(&mut self) {
        self.cfg.engine.domain = DomainScope::Rack;
        self.file("slurm.conf", "FirstJobId=4096\nMaxJobId=6142\n");
    }

    /// n1 as [`TestNode::new`] has it, its domain `scope`'s: a rack-wide
    /// domain's rack is r7, n[1-2], from the rack map.
    pub fn in_scope(scope: DomainScope) -> TestNode {
        let mut node = TestNode::new();
        if scope == DomainScope::Rack {
            node.rack_scope();
            node.rack_map(&[("r7", CLIQUE_7, "n[1-2]")]);
        }
        node
    }

    /// Whether a daemon was started (the process manager's pid file).
    pub fn daemon_started(&self) -> bool {
        StateDir::of(&self.cfg).pid_file().exists()
    }
}

impl Drop for TestNode {
    /// Stop the daemon stand-in a row left running (a domain that formed
    /// is left to the job's epilog).
    fn drop(&mut self) {
        let state = StateDir::of(&self.cfg);
        let _ = Daemon::new(&self.cfg.engine.daemon, &state).stop();
    }
}

/// imex.toml for a node whose files are all in `dir`.
fn config_text(dir: &Path) -> String {
    let p = |name: &str| dir.join(name).display().to_string();
    format!(
        r#"[node]
state_dir = "{state}"
[imex]
proc_devices = "{proc_devices}"
channels = "plugin"
port_base = 20000
rack_map = "none"
ready_timeout = "300ms"
ready_poll_max = "50ms"
[imex.daemon]
manager = "process"
binary = "{binary}"
ctl = "{ctl}"
base_config = "{base}"
nodes_config = "{nodes}"
job_config = "{job}"
stop_timeout = "1s"
[imex.addresses]
source = "map"
map_file = "{map}"
[slurm]
config = "{slurm_conf}"
topology = "none"
scontrol = "{scontrol}"
"#,
        state = p("state"),
        proc_devices = p("proc-devices"),
        binary = p("nvidia-imex"),
        ctl = p("nvidia-imex-ctl"),
        base = p("base.cfg"),
        nodes = p("nodes_config.cfg"),
        job = p("job.cfg"),
        map = p("addresses.toml"),
        slurm_conf = p("slurm.conf"),
        scontrol = p("scontrol"),
    )
}
