//! Bad rack maps (`[imex] rack_map`, the file every prolog reads instead of
//! asking slurmctld): a map root must not trust, one that does not parse or
//! contradicts itself, a FIFO, a huge file. The prolog of an `--imex` job
//! refuses each with one line naming the file and what is wrong, and never
//! panics or hangs. The rack map is a file the whole cluster shares, so a
//! bad one is the job's fault (docs/blame.md): the prolog exits 0 and
//! records the cause, which the SPANK plugin fails the job with; the node
//! is not drained.

mod common;
use common::*;
use std::path::{Path, PathBuf};

const A: &str = "dc6e40c4-d722-4357-9ba6-5291dd461278.1";
const B: &str = "dc6e40c4-d722-4357-9ba6-5291dd461278.2";

/// A node whose imex.toml names a rack map; no GPU gate, no topology file.
struct Site {
    node: ImexNode,
}

impl Site {
    fn new() -> Site {
        Site {
            node: ImexNode::new(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.node.path(name)
    }

    /// The prolog of an --imex job on n1 of n[1-2], with `map`.
    fn prolog(&self, map: &Path) -> Ran {
        let config = self.node.config(
            &format!("rack_map = \"{}\"\n", map.display()),
            "[slurm]\ntopology = \"none\"\n",
        );
        self.node.prolog(&config)
    }

    fn refuses(&self, map: &Path, needles: &[&str], case: &str) {
        self.node
            .assert_jobs_fault(&self.prolog(map), map, needles, case);
    }
}

fn rack(name: &str, clique: &str, nodes: &str) -> String {
    format!("[[rack]]\nname = \"{name}\"\nclique = \"{clique}\"\nnodes = \"{nodes}\"\n")
}

#[test]
fn rack_maps_that_do_not_parse_or_contradict_themselves_are_refused() {
    let site = Site::new();
    let cases: Vec<(String, &[&str])> = vec![
        (
            rack("r1", A, "n[1-2]") + &rack("r2", B, "n2"),
            &["node n2 is in both rack \"r1\" and rack \"r2\""],
        ),
        (
            rack("r1", A, "n1") + &rack("r1", B, "n2"),
            &["listed twice"],
        ),
        (
            rack("r1", "rack-one", "n1"),
            &["clique \"rack-one\" is not"],
        ),
        (
            rack("r1", "00000000-0000-0000-0000-000000000000.1", "n1"),
            &["is not <cluster uuid>.<clique id>"],
        ),
        (rack("r1", A, "n[1-"), &["rack \"r1\": nodes"]),
        (
            rack("r1", A, "n[1-99999999]"),
            &["a rack holds at most [imex] max_nodes"],
        ),
        (rack("$(reboot)", A, "n1"), &["a name is 1 to 64"]),
        (rack(&"r".repeat(100), A, "n1"), &["a name is 1 to 64"]),
        ("[[rack]]\nname = \"r\"\n".into(), &["missing field"]),
        (
            "[[rack]]\nname = 1\nclique = \"x\"\nnodes = \"n\"\n".into(),
            &["line 2, key name: invalid type"],
        ),
        (
            format!("[[rack]]\nname = \"r\"\nclique = \"{A}\"\nnodes = [\"n1\"]\n"),
            &["line 4, key nodes: invalid type"],
        ),
        ("rack = \"everything\"\n".into(), &["bad rack map"]),
        ("[[rack]\n".into(), &["line 1"]),
    ];
    for (i, (text, needles)) in cases.iter().enumerate() {
        let map = site.path(&format!("map{i}.toml"));
        write_mode(&map, text.as_bytes(), 0o644);
        site.refuses(&map, needles, &format!("{text:?}"));
    }
    // Not UTF-8, and far too big.
    let garbage = site.path("garbage.toml");
    write_mode(&garbage, &[0xff, 0xfe, b'[', 0x80, b'\n'], 0o644);
    site.refuses(&garbage, &["not UTF-8"], "binary garbage");
    let huge = site.path("huge.toml");
    write_mode(&huge, "# x\n".repeat(1_200_000).as_bytes(), 0o644);
    site.refuses(&huge, &["larger than"], "huge file");
    eprintln!("bad-input: {} rack map text cases", cases.len() + 2);
}

#[test]
fn rack_maps_root_must_not_trust_are_refused_before_reading() {
    use std::os::unix::fs::{symlink, PermissionsExt};
    if !is_root() {
        eprintln!("skipped: the trust cases need root (CI runs as root)");
        return;
    }
    let site = Site::new();
    let map = site.path("imex-racks.toml");
    write_mode(&map, rack("r1", A, "n[1-2]").as_bytes(), 0o664);
    site.refuses(
        &map,
        &["refusing [imex] rack_map", "writable by group or others"],
        "group-writable",
    );
    std::fs::set_permissions(&map, std::fs::Permissions::from_mode(0o644)).unwrap();
    nix::unistd::chown(&map, Some(nix::unistd::Uid::from_raw(4242)), None).unwrap();
    site.refuses(
        &map,
        &["refusing [imex] rack_map", "owned by uid 4242"],
        "foreign owner",
    );
    nix::unistd::chown(&map, Some(nix::unistd::Uid::from_raw(0)), None).unwrap();
    let fifo = site.path("fifo.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    site.refuses(&fifo, &["refusing [imex] rack_map", "a FIFO"], "fifo");
    let open = site.path("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let in_open = open.join("imex-racks.toml");
    write_mode(&in_open, rack("r1", A, "n1").as_bytes(), 0o644);
    let link = site.path("link.toml");
    symlink(&in_open, &link).unwrap();
    site.refuses(
        &link,
        &["refusing [imex] rack_map", "symlink to"],
        "symlink into a world-writable dir",
    );
    let missing = site.path("absent.toml");
    site.refuses(&missing, &["does not exist"], "named but missing");
    eprintln!("bad-input: 5 rack map trust cases");
}

#[test]
fn a_good_rack_map_gets_past_reading() {
    let site = Site::new();
    let map = site.path("imex-racks.toml");
    write_mode(
        &map,
        (rack("r1", A, "n1") + &rack("r2", B, "n2")).as_bytes(),
        0o644,
    );
    let ran = site.prolog(&map);
    ran.ended_without_panic("good map");
    // Past the map, the prolog stops at the daemon (none here), a fault it names.
    assert!(!ran.stderr.contains("rack map"), "{}", ran.stderr);
}

#[test]
fn a_job_node_missing_from_the_map_is_a_stale_map_not_a_peer_fault() {
    let site = Site::new();
    let map = site.path("stale.toml");
    // The job runs on n[1-2]; the map was written before n2 joined.
    write_mode(&map, rack("r1", A, "n1").as_bytes(), 0o644);
    // The job's fault (the node stays up): the prolog exits 0 and the job
    // is failed with one line naming the map and the node it lacks.
    let ran = site.prolog(&map);
    ran.ended_without_panic("stale map");
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let lines: Vec<&str> = ran
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(lines.len(), 1, "{}", ran.stderr);
    for needle in [
        "job 7 cannot use IMEX: the rack map",
        "stale.toml",
        "is stale: it lists 1 of the job's nodes but not n2",
        "slurm-imex topology --map",
    ] {
        assert!(lines[0].contains(needle), "{needle:?} not in {}", lines[0]);
    }
    assert!(!ran.stderr.contains("never became ready"), "{}", ran.stderr);
}

/// An indexed map (`imex-racks.d`) of r1 = n1 and r2 = n2, written as
/// `slurm-imex topology --map -o` writes it; its path.
fn indexed(site: &Site, name: &str) -> PathBuf {
    use slurm_imex_domain::rack::{index, map::RackMap};
    let text = rack("r1", A, "n1") + &rack("r2", B, "n2");
    let file = site.path(&format!("{name}.toml"));
    write_mode(&file, text.as_bytes(), 0o644);
    let dir = site.path(&format!("{name}.d"));
    index::write(&dir, &RackMap::load(&file, 100).unwrap(), &text, None).unwrap();
    dir
}

/// `body` as a piece of the map in `dir`: naming that map, sealed.
fn sealed_piece(body: &str) -> Vec<u8> {
    use sha2::Digest;
    let digest: String = sha2::Sha256::digest(body.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{body}# sha256 {digest}\n").into_bytes()
}

#[test]
fn hostile_pieces_of_an_indexed_map_are_refused_in_one_line() {
    let site = Site::new();
    let good = indexed(&site, "good");
    let ran = site.prolog(&good);
    ran.ended_without_panic("good indexed map");
    assert!(!ran.stderr.contains("rack map"), "{}", ran.stderr);
    let map = std::fs::read_to_string(good.join("index.toml")).unwrap();
    let digest = map.split('"').nth(1).unwrap().to_string();
    let big_nodes =
        format!("map = \"{digest}\"\nname = \"r1\"\nclique = \"{A}\"\nnodes = \"n[1-99999999]\"\n");
    let cases: Vec<(&str, Vec<u8>, &[&str])> = vec![
        (
            "racks/r1.toml",
            b"\xff\xfe garbage".to_vec(),
            &["racks/r1.toml: it is not UTF-8"],
        ),
        (
            "racks/r1.toml",
            "x".repeat(300 << 10).into_bytes(),
            &["racks/r1.toml:", "larger than"],
        ),
        (
            "racks/r1.toml",
            sealed_piece("name = [\n"),
            &["racks/r1.toml: line 1"],
        ),
        (
            "racks/r1.toml",
            sealed_piece(&big_nodes),
            &[
                "racks/r1.toml: rack \"r1\": nodes",
                "at most [imex] max_nodes",
            ],
        ),
        (
            "racks/r1.toml",
            sealed_piece(&format!(
                "map = \"{digest}\"\nname = \"r9\"\nclique = \"{A}\"\nnodes = \"n1\"\n"
            )),
            &["racks/r1.toml: it names rack \"r9\""],
        ),
        (
            "index.toml",
            sealed_piece(&format!(
                "format = 1\nmap = \"{digest}\"\nbuckets = 0\nracks = 2\nnodes = 2\n"
            )),
            &["index.toml: its buckets or map digest are out of range"],
        ),
        (
            "index.toml",
            sealed_piece("format = 1\nmap = \"$(reboot)\"\nbuckets = 1\nracks = 2\nnodes = 2\n"),
            &["index.toml: its buckets or map digest are out of range"],
        ),
        (
            "index.toml",
            sealed_piece(&format!(
                "format = 9\nmap = \"{digest}\"\nbuckets = 1\nracks = 2\nnodes = 2\n"
            )),
            &["index.toml: format 9 is not 1"],
        ),
        (
            "index.toml",
            Vec::new(),
            &["index.toml: it is truncated or corrupt"],
        ),
        (
            "nodes/00000.toml",
            sealed_piece(&format!(
                "map = \"{digest}\"\n[nodes]\nn1 = \"../../etc/passwd\"\n"
            )),
            &["nodes/00000.toml: node n1: rack name is not"],
        ),
    ];
    for (i, (piece, bytes, needles)) in cases.iter().enumerate() {
        let dir = indexed(&site, &format!("case{i}"));
        write_mode(&dir.join(piece), bytes, 0o644);
        site.refuses(&dir, needles, &format!("case {i}: {piece}"));
    }
    eprintln!("bad-input: {} indexed rack map cases", cases.len());
}
