//! The admin's base IMEX daemon config (`[imex.daemon] base_config`) that
//! is not text: random bytes, a NUL, bytes that are not UTF-8, a control
//! byte. Every daemon config slurm-imex writes is rendered from it, so a
//! lossy read would hand the daemon garbage. The prolog of an `--imex` job
//! refuses it as any bad local config (this node's fault, docs/blame.md):
//! it exits 1 with one line naming the file, what is wrong and what to do,
//! and writes no per-job config. The real doctor FAILs `imex-config`
//! naming it.

mod common;
use common::*;
use std::path::PathBuf;

/// Bytes no admin wrote: xorshift noise, the same on every run.
fn random_bytes(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect()
}

/// (what the base config holds, what the line must say of it, the case)
fn not_text() -> Vec<(Vec<u8>, &'static str, &'static str)> {
    let good = b"IMEX_CMD_ENABLED=1\nIMEX_CMD_BIND_INTERFACE_IP=127.0.0.1\nIMEX_CMD_PORT=50005\n";
    vec![
        (random_bytes(8192), "is not text: ", "random bytes"),
        (
            [&good[..], b"SERVER_PORT=50000\0\n"].concat(),
            "is not text: line 4 holds a NUL byte",
            "a NUL",
        ),
        (
            [&good[..], b"# caf\xe9\n"].concat(),
            "is not text: byte 0xe9 on line 4 is not UTF-8",
            "Latin-1, not UTF-8",
        ),
        (
            [&b"\xff\xfe"[..], good].concat(),
            "is not text: byte 0xff on line 1 is not UTF-8",
            "a UTF-16 byte-order mark",
        ),
        (
            [&good[..], b"LOG_LEVEL=4\x1b[2J\n"].concat(),
            "is not text: line 4 holds the control byte 0x1b",
            "an escape sequence",
        ),
    ]
}

/// A node for job 7 on n[1-2] whose addresses come from a map, with its
/// base config, nodes config and per-job config in the scratch directory.
struct Node {
    node: ImexNode,
    config: PathBuf,
}

impl Node {
    fn new() -> Node {
        let node = ImexNode::new();
        write_mode(
            &node.path("imex-addresses.toml"),
            b"n1 = \"10.0.0.1\"\nn2 = \"10.0.0.2\"\n",
            0o644,
        );
        write_mode(&node.path("slurm.conf"), b"ClusterName=c\n", 0o644);
        let p = |n: &str| node.path(n).display().to_string();
        let config = node.config(
            "rack_map = \"none\"\n",
            &format!(
                "[imex.daemon]\nmanager = \"process\"\nbase_config = \"{}\"\nnodes_config = \"{}\"\n\
                 job_config = \"{}\"\n[imex.addresses]\nsource = \"map\"\nmap_file = \"{}\"\n\
                 [gpu]\nnvml_library = \"{}\"\n[database]\npath = \"{}\"\n\
                 [slurm]\nconfig = \"{}\"\ntopology = \"none\"\nscontrol = \"/bin/false\"\n",
                p("config.cfg"),
                p("nodes_config.cfg"),
                p("job.cfg"),
                p("imex-addresses.toml"),
                p("no-libnvidia-ml.so.1"),
                p("db/jobs.db"),
                p("slurm.conf"),
            ),
        );
        Node { node, config }
    }

    fn base(&self) -> PathBuf {
        self.node.path("config.cfg")
    }
}

#[test]
fn a_base_daemon_config_that_is_not_text_fails_the_prolog_and_writes_no_job_config() {
    let mut n = 0;
    for (bytes, says, case) in not_text() {
        let node = Node::new();
        write_mode(&node.base(), &bytes, 0o644);
        let ran = node.node.prolog(&node.config);
        let base = node.base().display().to_string();
        let named = format!("{base} ([imex.daemon] base_config) {says}");
        ran.one_line_error(
            1,
            &[
                &named,
                "install NVIDIA's config.cfg there (KEY=VALUE lines), or set [imex.daemon] base_config",
            ],
            case,
        );
        for written in ["job.cfg", "nodes_config.cfg"] {
            assert!(
                !node.node.path(written).exists(),
                "{case}: {written} was written from a config that is not text"
            );
        }
        n += 1;
    }
    eprintln!("bad-input: {n} base daemon configs that are not text, refused by the prolog");
}

#[test]
fn a_base_daemon_config_that_is_not_text_fails_the_real_doctor_naming_it() {
    for (bytes, says, case) in not_text() {
        let node = Node::new();
        write_mode(&node.base(), &bytes, 0o644);
        let env = [
            ("SLURM_IMEX_CONFIG", node.config.clone().into_os_string()),
            ("SLURMD_NODENAME", os("n1")),
        ];
        let ran = run(&bin("slurm-imex"), &["doctor"], &env);
        ran.ended_without_panic("doctor");
        let line = |check: &str| -> Vec<String> {
            ran.stdout
                .lines()
                .filter(|l| l.split_whitespace().nth(1) == Some(check))
                .map(str::to_string)
                .collect()
        };
        let config = line("imex-config");
        assert_eq!(config.len(), 1, "{case}: {}", ran.stdout);
        let base = node.base().display().to_string();
        assert!(
            config[0].starts_with("FAIL  imex-config ")
                && config[0].contains(&format!("{base} ([imex.daemon] base_config) {says}"))
                && config[0].contains(" -> install NVIDIA's config.cfg there"),
            "{case}: {}",
            config[0]
        );
        // The checks that judge the daemon's config say they could not.
        for check in ["imex-command", "imex-tls"] {
            let lines = line(check);
            assert!(
                lines.len() == 1
                    && lines[0].starts_with("WARN")
                    && lines[0].contains("not checked"),
                "{case}: {lines:#?}"
            );
        }
    }
}
