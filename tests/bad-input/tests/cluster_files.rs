//! The files the whole cluster shares besides the rack map (docs/blame.md,
//! "Files the whole cluster shares"): a topology file and an address map
//! that cannot be read, are refused, or do not parse. Each is the same on
//! every node, so a bad one is the job's fault: the prolog of an `--imex`
//! job records the cause, which the SPANK plugin fails the job with, says
//! it in one line, and exits 0. The node is not drained.

mod common;
use common::*;
use std::path::PathBuf;

struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new() -> Site {
        let site = Site { dir: scratch() };
        write_mode(
            &site.path("proc-devices"),
            b"Character devices:\n507 nvidia-caps-imex-channels\n",
            0o644,
        );
        site
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A config with no GPU gate and no rack map, plus `extra` (its
    /// `[slurm]` and `[imex.addresses]` tables).
    fn config(&self, extra: &str) -> PathBuf {
        let p = self.path("imex.toml");
        let text = format!(
            "[node]\nstate_dir = \"{}\"\n[imex]\nproc_devices = \"{}\"\nrack_map = \"none\"\nchannels = \"plugin\"\n\
             [health]\nenabled = false\n{extra}",
            self.path("state").display(),
            self.path("proc-devices").display(),
        );
        write_mode(&p, text.as_bytes(), 0o644);
        p
    }

    /// The prolog of an --imex job on n1 of n[1-2] under `extra`: it must
    /// exit 0 with one line holding `needles`, and the job's record must
    /// hold the cause as the job's fault.
    fn refuses(&self, extra: &str, needles: &[&str], case: &str) {
        let cfg = self.config(extra);
        let ran = run(
            &bin("slurm-imex-prolog"),
            &[],
            &[
                ("SLURM_IMEX_CONFIG", os(cfg.to_str().unwrap())),
                ("SLURM_JOB_ID", os("7")),
                ("SLURMD_NODENAME", os("n1")),
                ("SLURM_JOB_NODELIST", os("n[1-2]")),
                ("SPANK_IMEX", os("1")),
            ],
        );
        let mut all = vec!["job 7 cannot use IMEX"];
        all.extend_from_slice(needles);
        ran.one_line_error(0, &all, case);
        let record = std::fs::read_to_string(self.path("state/jobs/7.json")).unwrap_or_default();
        assert!(
            record.contains("\"node_fault\": false"),
            "{case}: the job's record must hold the cause as the job's fault: {record}"
        );
        for n in needles {
            assert!(
                record.contains(n),
                "{case}: {n:?} not in the record: {record}"
            );
        }
        let _ = std::fs::remove_file(self.path("state/jobs/7.json"));
    }
}

#[test]
fn a_bad_topology_file_fails_the_job_and_drains_nothing() {
    let site = Site::new();
    let topo = site.path("topology.yaml");
    let slurm = format!(
        "[slurm]\nconfig = \"none\"\ntopology = \"{}\"\n",
        topo.display()
    );
    let name = topo.display().to_string();
    write_mode(&topo, b"- topology: [unclosed\n", 0o644);
    site.refuses(&slurm, &[&name], "a topology.yaml that does not parse");
    write_mode(
        &topo,
        b"- topology: t\n  cluster_default: true\n  block:\n    block_sizes: [2]\n    blocks:\n      - block: b1\n        nodes: n[1-2]\n",
        0o666,
    );
    site.refuses(
        &slurm,
        &[&name, "writable"],
        "a topology file anyone can write",
    );
    std::fs::remove_file(&topo).unwrap();
    site.refuses(&slurm, &[&name], "a topology file that is not there");
}

#[test]
fn a_bad_address_map_fails_the_job_and_drains_nothing() {
    let site = Site::new();
    let map = site.path("imex-addresses.toml");
    let extra = format!(
        "[slurm]\nconfig = \"none\"\ntopology = \"none\"\n[imex.addresses]\nsource = \"map\"\nmap_file = \"{}\"\n",
        map.display()
    );
    let name = map.display().to_string();
    write_mode(&map, b"n1 = [unclosed\n", 0o644);
    site.refuses(&extra, &[&name], "an address map that does not parse");
    write_mode(&map, b"n1 = \"10.0.0.1\"\nn2 = \"10.0.0.2\"\n", 0o666);
    site.refuses(
        &extra,
        &[&name, "writable"],
        "an address map anyone can write",
    );
    std::fs::remove_file(&map).unwrap();
    site.refuses(&extra, &[&name], "an address map that is not there");
}
