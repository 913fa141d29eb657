//! The rack map: which nodes share an NVLink clique (a rack), as a file every
//! node keeps, so a prolog learns a job's racks without asking slurmctld
//! anything (docs/controller-calls.md). `slurm-imex topology --map` writes
//! it once, off the job path, from the cliques the nodes publish in Slurm;
//! the site installs the same file on every node, beside imex.toml
//! (`[imex] rack_map`). Every node of a rack then computes the same
//! membership from the same bytes, and its digest (the `sha256sum` of the
//! file) names those bytes in every failure line.
//!
//! The format is TOML, read with the toml crate:
//!
//! ```toml
//! [[rack]]
//! name = "rack1"
//! clique = "dc6e40c4-d722-4357-9ba6-5291dd461278.1"
//! nodes = "gb-r1-[01-18]"
//! ```

use crate::rack::nvlink_domain::NvlinkDomain;
use serde::Deserialize;
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::slurm::hostlist;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The file's name beside imex.toml (`[imex] rack_map = "auto"`).
pub const FILE_NAME: &str = "imex-racks.toml";
/// The indexed map's name beside imex.toml (`crate::rack::index`), looked
/// for first.
pub const DIR_NAME: &str = "imex-racks.d";
/// Largest rack map read: 16,384 nodes in racks of 18 are about 100 KiB.
const MAX_FILE_BYTES: u64 = 4 << 20;
/// Longest rack name: it becomes SLURM_IMEX_DOMAIN and a word in messages.
pub const MAX_NAME_LEN: usize = 64;
/// Most nodes a map may list: the whole cluster, far beyond the largest
/// (a hostlist typo such as `n[1-99999999]` is refused, not expanded).
pub const MAX_MAP_NODES: usize = 1 << 18;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MapFile {
    #[serde(default)]
    rack: Vec<RackEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RackEntry {
    name: String,
    clique: String,
    nodes: String,
}

/// One rack of the map: its name, the NVLink clique its GPUs report, its
/// nodes in natural order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rack {
    pub name: String,
    pub clique: String,
    pub nodes: Vec<String>,
}

impl Rack {
    /// A rack from its fields as a map spells them, checked; at most
    /// `max_nodes` nodes. Err is the reason.
    pub(crate) fn checked(
        name: String,
        clique: &str,
        nodes: &str,
        max_nodes: usize,
    ) -> std::result::Result<Rack, String> {
        let named = format!(
            "rack \"{}\"",
            slurm_imex_core::text::cap(&name, MAX_NAME_LEN)
        );
        if !is_rack_name(&name) {
            return Err(format!(
                "{named}: a name is 1 to {MAX_NAME_LEN} letters, digits or ._:-"
            ));
        }
        let Some(clique) = crate::rack::clique::canonical(clique) else {
            return Err(format!(
                "{named}: clique \"{}\" is not <cluster uuid>.<clique id> as NVML reports it",
                slurm_imex_core::text::cap(clique, 80)
            ));
        };
        let mut nodes = hostlist::expand(nodes, max_nodes).map_err(|e| {
            format!("{named}: nodes: {e} (a rack holds at most [imex] max_nodes, the map {MAX_MAP_NODES})")
        })?;
        hostlist::sort_natural(&mut nodes);
        Ok(Rack {
            name,
            clique,
            nodes,
        })
    }

    fn named(&self) -> String {
        format!("rack \"{}\"", self.name)
    }
}

/// A rack map, read and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RackMap {
    pub source: PathBuf,
    /// SHA-256 of the file's bytes, hex (what `sha256sum` prints).
    pub digest: String,
    racks: Vec<Rack>,
    /// Node name -> index into `racks`.
    rack_of_node: HashMap<String, usize>,
    /// Of an indexed map: the digest of the Slurm topology file whose
    /// blocks are exactly its racks (`crate::rack::index`).
    pub same_as_topology: Option<String>,
    rack_names: std::collections::HashSet<String>,
}

impl RackMap {
    /// Parse the one-file map at `path`.
    pub(crate) fn load_file(path: &Path, max_nodes: usize) -> Result<RackMap> {
        let bytes = slurm_imex_core::fsutil::read_bounded(path, MAX_FILE_BYTES)?;
        RackMap::parse(path, bytes, max_nodes)
    }

    /// A map of some racks, read elsewhere (`crate::rack::index`); Err is
    /// why they do not make one map.
    pub(crate) fn from_racks(
        source: PathBuf,
        digest: String,
        racks: Vec<Rack>,
    ) -> std::result::Result<RackMap, String> {
        let mut map = RackMap {
            source,
            digest,
            racks: Vec::new(),
            rack_of_node: HashMap::new(),
            same_as_topology: None,
            rack_names: Default::default(),
        };
        for rack in racks {
            map.insert(rack)?;
        }
        Ok(map)
    }

    /// The map in `bytes`, as [`RackMap::load`] reads it from `path`: the
    /// one check every map passes, whether a prolog loads it or
    /// `slurm-imex topology --map` is about to write it.
    pub fn parse(path: &Path, bytes: Vec<u8>, max_nodes: usize) -> Result<RackMap> {
        let digest = crate::digest::sha256_hex(&bytes);
        let fail = |why: String| {
            Error::new(format!(
                "bad rack map {}: {why} (`slurm-imex topology --map` writes one)",
                path.display()
            ))
        };
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(fail(format!("it is larger than {MAX_FILE_BYTES} bytes")));
        }
        let text = String::from_utf8(bytes).map_err(|_| fail("it is not UTF-8".into()))?;
        let file: MapFile = toml::from_str(&text).map_err(|e| fail(toml_error_at(&text, &e)))?;
        let mut map = RackMap {
            source: path.to_path_buf(),
            digest,
            racks: Vec::new(),
            rack_of_node: HashMap::new(),
            same_as_topology: None,
            rack_names: Default::default(),
        };
        for entry in file.rack {
            map.add(entry, max_nodes).map_err(fail)?;
        }
        Ok(map)
    }

    /// Err is the reason, which `load` wraps in its "bad rack map" line.
    fn add(&mut self, entry: RackEntry, max_nodes: usize) -> std::result::Result<(), String> {
        let room = MAX_MAP_NODES.saturating_sub(self.rack_of_node.len());
        let rack = Rack::checked(entry.name, &entry.clique, &entry.nodes, max_nodes.min(room))?;
        self.insert(rack)
    }

    /// `rack` added, unless its name or one of its nodes is taken.
    fn insert(&mut self, rack: Rack) -> std::result::Result<(), String> {
        // Hashed, so a map's read costs no more than its size (5,556 racks
        // for 100,000 nodes; benches/scale-bench.sh).
        if !self.rack_names.insert(rack.name.clone()) {
            return Err(format!("{} is listed twice", rack.named()));
        }
        let index = self.racks.len();
        for node in &rack.nodes {
            if let Some(other) = self.rack_of_node.insert(node.clone(), index) {
                return Err(format!(
                    "node {node} is in both rack \"{}\" and {}",
                    self.racks
                        .get(other)
                        .map_or(rack.name.as_str(), |r| &r.name),
                    rack.named()
                ));
            }
        }
        self.racks.push(rack);
        Ok(())
    }

    /// The map as admins compare it between nodes: `<path> (sha256 <first 12>)`.
    pub fn describe(&self) -> String {
        format!(
            "{} (sha256 {})",
            self.source.display(),
            &self.digest[..12.min(self.digest.len())]
        )
    }

    pub fn racks(&self) -> &[Rack] {
        &self.racks
    }

    /// Whether this map stands for the Slurm topology file it was written
    /// from (`same_as_topology`) for a job on `nodes`: it lists every one of
    /// them, so the file's blocks would split the job exactly as its racks.
    pub fn speaks_for_topology(&self, nodes: &[String]) -> bool {
        self.same_as_topology.is_some() && nodes.iter().all(|n| self.rack_of_node.contains_key(n))
    }

    /// The rack `node` is in, if the map lists it.
    pub fn rack_of(&self, node: &str) -> Option<&Rack> {
        self.rack_of_node.get(node).and_then(|i| self.racks.get(*i))
    }

    /// Node -> clique, for the job's `nodes` the map lists.
    pub fn cliques_of(&self, nodes: &[String]) -> Vec<(String, String)> {
        nodes
            .iter()
            .filter_map(|n| Some((n.clone(), self.rack_of(n)?.clique.clone())))
            .collect()
    }

    /// `node`'s NVLink domain among the job's `nodes`: the job's nodes in
    /// `node`'s rack, in the job's order. None when the map does not list
    /// every node of the job (then nothing splits it: one domain).
    pub fn domain_of(&self, node: &str, nodes: &[String]) -> Option<NvlinkDomain> {
        if !nodes.iter().all(|n| self.rack_of_node.contains_key(n)) {
            return None;
        }
        let mine = self.rack_of_node.get(node)?;
        Some(NvlinkDomain {
            name: Some(self.racks[*mine].name.clone()),
            nodes: nodes
                .iter()
                .filter(|n| self.rack_of_node.get(*n) == Some(mine))
                .cloned()
                .collect(),
            source: Some(self.describe()),
        })
    }
}

/// The rack map text for `racks` (name, clique, nodes as a hostlist), with
/// a header saying where it came from and where it goes.
pub fn render(racks: &[(String, String, String)], origin: &str) -> String {
    let mut text = format!(
        "# slurm-imex rack map: the NVLink racks of this cluster, one per clique.\n\
         # Written by `slurm-imex topology --map` {origin}.\n\
         # Install the same file on every node as imex-racks.toml beside imex.toml\n\
         # ([imex] rack_map): the prolog reads it and asks slurmctld nothing.\n"
    );
    for (name, clique, nodes) in racks {
        text.push_str(&format!(
            "\n[[rack]]\nname = {}\nclique = {}\nnodes = {}\n",
            toml_string(name),
            toml_string(clique),
            toml_string(nodes)
        ));
    }
    text
}

/// A TOML error as `line N, key K: what`: the line its span starts on, and
/// the key that line sets (a value of the wrong type names its key).
pub(crate) fn toml_error_at(text: &str, e: &toml::de::Error) -> String {
    let what = e.message().trim().replace('\n', " ");
    let Some(span) = e.span() else {
        return what;
    };
    let start = span.start.min(text.len());
    let number = text[..start].matches('\n').count() + 1;
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or("");
    let key = line
        .split_once('=')
        .map(|(k, _)| k.trim())
        .filter(|k| !k.is_empty() && !k.starts_with('['));
    match key {
        Some(key) => format!(
            "line {number}, key {}: {what}",
            slurm_imex_core::text::cap(key, 40)
        ),
        None => format!("line {number}: {what}"),
    }
}

/// A TOML basic string (the toml crate's own quoting).
fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// A name a rack may have (a topology file's block names are held to it).
pub fn is_rack_name(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._:-".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "dc6e40c4-d722-4357-9ba6-5291dd461278.1";
    const B: &str = "dc6e40c4-d722-4357-9ba6-5291dd461278.2";

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(FILE_NAME);
        std::fs::write(&p, text).unwrap();
        (d, p)
    }

    fn nodes(list: &str) -> Vec<String> {
        hostlist::expand(list, 1000).unwrap()
    }

    #[test]
    fn what_topology_map_writes_reads_back() {
        let text = render(
            &[
                ("rack1".into(), A.into(), "n[1-2]".into()),
                ("rack2".into(), B.into(), "n[3-4]".into()),
            ],
            "from 4 nodes",
        );
        let (_d, p) = write(&text);
        let map = RackMap::load(&p, 100).unwrap();
        assert_eq!(map.racks().len(), 2);
        assert_eq!(map.rack_of("n3").unwrap().clique, B);
        assert_eq!(map.digest.len(), 64);
        assert!(map
            .describe()
            .ends_with(&format!("(sha256 {})", &map.digest[..12])));
        let job = nodes("n4,n1,n3");
        let d = map.domain_of("n3", &job).unwrap();
        assert_eq!(
            (d.name.as_deref(), d.nodes),
            (Some("rack2"), nodes("n4,n3"))
        );
        // A job node the map does not list: nothing splits the job.
        assert_eq!(map.domain_of("n1", &nodes("n1,n9")), None);
        assert_eq!(map.cliques_of(&nodes("n1,n9")), [("n1".into(), A.into())]);
    }

    #[test]
    fn a_clique_spelled_another_way_is_read_in_its_one_spelling() {
        let text = "[[rack]]\nname = \"r\"\nclique = \"DC6E40C4-D722-4357-9BA6-5291DD461278.+0001\"\nnodes = \"n1\"\n";
        let (_d, p) = write(text);
        assert_eq!(
            RackMap::load(&p, 10).unwrap().rack_of("n1").unwrap().clique,
            A
        );
    }

    #[test]
    fn the_same_bytes_have_the_same_digest_and_others_another() {
        let one = "[[rack]]\nname = \"r\"\nclique = \"".to_string() + A + "\"\nnodes = \"n1\"\n";
        let (_d, p) = write(&one);
        let (_e, q) = write(&one);
        let (_f, r) = write(&one.replace("n1", "n2"));
        let digest = |p: &Path| RackMap::load(p, 10).unwrap().digest;
        assert_eq!(digest(&p), digest(&q));
        assert_ne!(digest(&p), digest(&r));
    }

    #[test]
    fn bad_maps_are_one_line_naming_the_file_and_what_is_wrong() {
        let rack = |name: &str, clique: &str, nodes: &str| {
            format!("[[rack]]\nname = \"{name}\"\nclique = \"{clique}\"\nnodes = \"{nodes}\"\n")
        };
        let cases = [
            (
                rack("r1", A, "n[1-2]") + &rack("r2", B, "n[2-3]"),
                "node n2 is in both rack \"r1\" and rack \"r2\"",
            ),
            (
                rack("r1", A, "n1") + &rack("r1", B, "n2"),
                "rack \"r1\" is listed twice",
            ),
            (rack("r1", "rack-one", "n1"), "clique \"rack-one\" is not"),
            (rack("r 1", A, "n1"), "a name is 1 to 64"),
            (rack("r1", A, "n[1-"), "rack \"r1\": nodes:"),
            (
                rack("r1", A, "n[1-500]"),
                "a rack holds at most [imex] max_nodes",
            ),
            ("[[rack]]\nname = \"r\"\n".into(), "missing field"),
            (
                "[[rack]]\nname = \"r\"\nclique = \"x\"\nnodes = \"n\"\nextra = 1\n".into(),
                "unknown field",
            ),
            ("[rack\n".into(), "line 1"),
            (
                "[[rack]]\nname = \"r\"\nclique = 7\nnodes = \"n1\"\n".into(),
                "line 3, key clique: invalid type: integer `7`, expected a string",
            ),
        ];
        for (text, want) in cases {
            let (_d, p) = write(&text);
            let e = RackMap::load(&p, 100).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("bad rack map {}:", p.display())),
                "{e}"
            );
            assert!(e.contains(want), "{want:?} not in {e}");
            assert!(!e.contains('\n'), "{e}");
        }
        let (_d, p) = write("");
        assert!(RackMap::load(&p, 100).unwrap().racks().is_empty());
        std::fs::write(&p, b"name = \"\xff\"").unwrap();
        let e = RackMap::load(&p, 100).unwrap_err().to_string();
        assert!(e.contains("not UTF-8"), "{e}");
    }

    #[test]
    fn a_cluster_larger_than_max_nodes_fits_in_a_map() {
        // 4,608 nodes (256 NVL72 racks) with the default max_nodes (4096),
        // which bounds one rack, not the cluster.
        let racks: Vec<(String, String, String)> = (1..=256)
            .map(|r| {
                (
                    format!("rack{r}"),
                    format!("dc6e40c4-d722-4357-9ba6-5291dd461278.{r}"),
                    format!("gb-r{r:03}-[01-18]"),
                )
            })
            .collect();
        let (_d, p) = write(&render(&racks, "in a test"));
        let map = RackMap::load(&p, 4096).unwrap();
        assert_eq!(map.racks().len(), 256);
        assert_eq!(map.rack_of("gb-r256-18").unwrap().name, "rack256");
        // One rack beyond max_nodes is refused.
        let (_d, p) = write(&render(&[("r".into(), A.into(), "n[1-20]".into())], "x"));
        let e = RackMap::load(&p, 18).unwrap_err().to_string();
        assert!(e.contains("a rack holds at most [imex] max_nodes"), "{e}");
    }
}
