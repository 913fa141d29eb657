//! `slurm-imex topology --map` on what a large or broken cluster hands it:
//! an answer far beyond any capture cap (every node must keep its rack), a
//! map no prolog would load (it is never written), and a corrupt map in
//! place (it is replaced, the old one kept beside it).

mod common;
use common::*;
use std::path::{Path, PathBuf};

const UUID: &str = "dc6e40c4-d722-4357-9ba6-5291dd461278";

struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new() -> Site {
        Site { dir: scratch() }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A fake scontrol whose `show node -o` prints `nodes` realistic lines,
    /// 18 to a clique, after `extra_lines` (more node lines, verbatim).
    fn scontrol(&self, nodes: usize, extra_lines: &str) -> PathBuf {
        let p = self.path("scontrol");
        let lines = self.path("extra-lines");
        write_mode(&lines, extra_lines.as_bytes(), 0o644);
        let script = format!(
            "#!/bin/sh\n[ \"$1\" = show ] || exit 1\ncat {}\nawk 'BEGIN {{ for (i = 1; i <= {nodes}; i++) \
             printf \"NodeName=gb%06d Arch=aarch64 CoresPerSocket=72 CPUAlloc=0 CPUEfctv=144 CPUTot=144 \
             CPULoad=0.01 AvailableFeatures=gb200,nvl72 ActiveFeatures=gb200,nvl72 Gres=gpu:gb200:4 \
             NodeAddr=gb%06d NodeHostName=gb%06d Version=24.11.5 OS=Linux 6.8.0-1017-nvidia-64k \
             RealMemory=884000 AllocMem=0 FreeMem=870000 Sockets=2 Boards=1 State=IDLE ThreadsPerCore=1 \
             TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu BootTime=2026-11-20T08:00:00 \
             SlurmdStartTime=2026-11-20T08:01:00 LastBusyTime=2026-11-24T10:00:00 ResumeAfterTime=None \
             CfgTRES=cpu=144,mem=884000M,billing=144,gres/gpu=4 AllocTRES= CurrentWatts=0 AveWatts=0 \
             Comment=(null) Extra={{\\\"nvlink_clique\\\":\\\"{UUID}.%d\\\"}}\\n\", i, i, i, int((i - 1) / 18) + 1 }}'\n",
            lines.display()
        );
        write_mode(&p, script.as_bytes(), 0o755);
        p
    }

    fn config(&self, scontrol: &Path, max_nodes: usize) -> PathBuf {
        let p = self.path("imex.toml");
        let topology = self.path("topology.conf");
        let topology = if topology.exists() {
            format!("\"{}\"", topology.display())
        } else {
            "\"none\"".into()
        };
        let text = format!(
            "[node]\nstate_dir = \"{}\"\n[imex]\nrack_map = \"{}\"\nmax_nodes = {max_nodes}\n\
             [slurm]\nscontrol = \"{}\"\nconfig = \"none\"\ntopology = {topology}\n[health]\nenabled = false\n",
            self.path("state").display(),
            self.path("imex-racks.toml").display(),
            scontrol.display()
        );
        write_mode(&p, text.as_bytes(), 0o644);
        p
    }

    fn map(&self, scontrol: &Path, max_nodes: usize) -> Ran {
        let cfg = self.config(scontrol, max_nodes);
        let out = self.path("imex-racks.toml");
        run(
            &bin("slurm-imex"),
            &["topology", "--map", "-o", out.to_str().unwrap()],
            &[("SLURM_IMEX_CONFIG", os(cfg.to_str().unwrap()))],
        )
    }
}

#[test]
fn a_cluster_far_past_the_old_4_mib_cap_keeps_every_rack() {
    // 12,000 nodes of ~900-byte lines: about 11 MB, where the old 4 MiB
    // capture cut at about 4,600 nodes and every node past it lost its rack.
    let site = Site::new();
    let scontrol = site.scontrol(12_000, "");
    let ran = site.map(&scontrol, 4096);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let map = std::fs::read_to_string(site.path("imex-racks.toml")).unwrap();
    assert_eq!(map.matches("[[rack]]").count(), 12_000_usize.div_ceil(18));
    assert!(
        map.contains("nodes = \"gb[011989-012000]\""),
        "{}",
        &map[map.len() - 300..]
    );
    assert!(!map.contains("publish no NVLink clique"));
}

#[test]
fn a_map_no_prolog_would_load_is_never_written() {
    let site = Site::new();
    let old = "# an older good map\n";
    write_mode(&site.path("imex-racks.toml"), old.as_bytes(), 0o644);
    // A rack of 18 with [imex] max_nodes = 8: the prolog would refuse it.
    let scontrol = site.scontrol(36, "");
    let ran = site.map(&scontrol, 8);
    ran.one_line_error(
        2,
        &[
            "--map wrote nothing",
            "would not load",
            "a rack holds at most [imex] max_nodes",
        ],
        "rack above max_nodes",
    );
    let now = std::fs::read_to_string(site.path("imex-racks.toml")).unwrap();
    assert_eq!(now, old, "the old map must be left as it was");
}

#[test]
fn a_corrupt_map_is_replaced_and_kept_beside() {
    let site = Site::new();
    let corrupt = "[[rack]\nthis is not a map\n";
    write_mode(&site.path("imex-racks.toml"), corrupt.as_bytes(), 0o644);
    let scontrol = site.scontrol(36, "");
    let ran = site.map(&scontrol, 4096);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(ran.stderr.contains("the old one is kept as"), "{ran:?}");
    let kept = std::fs::read_to_string(site.path("imex-racks.toml.corrupt")).unwrap();
    assert_eq!(kept, corrupt);
    let map = std::fs::read_to_string(site.path("imex-racks.toml")).unwrap();
    assert_eq!(map.matches("[[rack]]").count(), 2);
}

#[test]
fn an_over_long_scontrol_line_fails_saying_so() {
    let site = Site::new();
    let long = format!("NodeName=x State=IDLE Comment={}\n", "y".repeat(2 << 20));
    let scontrol = site.scontrol(36, &long);
    let ran = site.map(&scontrol, 4096);
    ran.one_line_error(2, &["longer than 1048576 bytes"], "a 2 MiB line");
    assert!(!site.path("imex-racks.toml").exists());
}

#[test]
fn a_node_listed_twice_or_nameless_never_reaches_a_map() {
    let site = Site::new();
    let twice = format!("NodeName=gb000001 State=IDLE Extra={{\"nvlink_clique\":\"{UUID}.9\"}}\n");
    let scontrol = site.scontrol(36, &twice);
    let ran = site.map(&scontrol, 4096);
    ran.one_line_error(
        2,
        &["--map wrote nothing", "node gb000001 is in both rack"],
        "a node listed twice",
    );
    assert!(!site.path("imex-racks.toml").exists());
    let nameless = format!("NodeName= State=IDLE Extra={{\"nvlink_clique\":\"{UUID}.9\"}}\n");
    let scontrol = site.scontrol(36, &nameless);
    let ran = site.map(&scontrol, 4096);
    ran.one_line_error(2, &["printed a node with no NodeName"], "a nameless node");
    assert!(!site.path("imex-racks.toml").exists());
}

#[test]
fn racks_take_the_names_of_blocks_that_hold_exactly_their_clique() {
    let site = Site::new();
    // rackA holds clique 1's nodes; mixed holds clique 2's and one of
    // clique 3's, so clique 2's rack keeps a generated name.
    write_mode(
        &site.path("topology.conf"),
        b"BlockName=rackA Nodes=gb[000001-000018]\nBlockName=mixed Nodes=gb[000019-000037]\n",
        0o644,
    );
    let scontrol = site.scontrol(54, "");
    let ran = site.map(&scontrol, 4096);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let map = std::fs::read_to_string(site.path("imex-racks.toml")).unwrap();
    assert!(
        map.contains("name = \"rackA\"\nclique = \"dc6e40c4-d722-4357-9ba6-5291dd461278.1\""),
        "{map}"
    );
    assert!(
        map.contains("name = \"rack2\"\nclique = \"dc6e40c4-d722-4357-9ba6-5291dd461278.2\""),
        "{map}"
    );
    assert!(!map.contains("\"mixed\""), "{map}");
}
