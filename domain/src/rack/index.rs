//! The indexed rack map: the rack map as a directory (`imex-racks.d`), so
//! a prolog reads only the racks of its job's nodes, in time that does not
//! grow with the cluster (benches/scale-bench.sh: a few KiB at 100,000
//! nodes, where the whole map is 589 KiB). `slurm-imex topology --map -o
//! <dir>` writes it off the job path, atomically (the new directory is
//! exchanged with the old one by `renameat2(RENAME_EXCHANGE)`, so a reader
//! sees the old map or the new one, never neither).
//!
//! ```text
//! imex-racks.d/
//!   map.toml            the whole map, as imex-racks.toml (tools read it whole)
//!   index.toml          format, the map's sha256, bucket count
//!   nodes/00017.toml    node = "rack" for the nodes that hash to bucket 17
//!   racks/rack12.toml   one rack: name, clique, nodes
//! ```
//!
//! A node's bucket is the first 8 bytes of its name's SHA-256, big-endian,
//! modulo the bucket count: every architecture computes the same one. Every
//! piece names the map it belongs to (`map = "<sha256 of map.toml>"`) and
//! ends with `# sha256 <hex>` of the bytes before that line, so a truncated
//! or corrupt piece, or one copied from another map, is refused in one line
//! naming the file. The digest every failure line names is the map's: what
//! `sha256sum imex-racks.d/map.toml` prints on every node.
//!
//! The pieces are TOML, read with the toml crate like the whole map.

use crate::digest::{sha256, sha256_hex};
use crate::rack::map::{self, Rack, RackMap};
use serde::Deserialize;
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::slurm::hostlist;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// The whole map inside the directory.
pub const MAP_FILE: &str = "map.toml";
const INDEX_FILE: &str = "index.toml";
const FORMAT: u32 = 1;
/// Nodes per bucket the writer aims at: a bucket is about 1 KiB.
const NODES_PER_BUCKET: usize = 32;
const MAX_BUCKETS: u32 = 1 << 16;
/// Largest piece read: an index or a bucket is about 1 KiB, a rack of
/// `[imex] max_nodes` nodes as a hostlist far less than this.
const MAX_PIECE_BYTES: u64 = 256 << 10;
/// The last line of every piece, before its hex digest.
const SEAL: &str = "# sha256 ";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IndexFile {
    format: u32,
    map: String,
    buckets: u32,
    racks: usize,
    nodes: usize,
    /// The sha256 of the Slurm topology file whose blocks are exactly
    /// these racks, when `topology --map` read one (`Blocks::same_racks_as`).
    #[serde(default)]
    topology: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BucketFile {
    map: String,
    #[serde(default)]
    nodes: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RackFile {
    map: String,
    name: String,
    clique: String,
    nodes: String,
}

/// Whether `path` is an indexed map (a directory) rather than one file.
pub fn is_indexed(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_dir())
}

/// Whether `dir` holds an indexed map (its index.toml), as opposed to an
/// empty or half-copied directory, or another directory altogether.
pub fn holds_index(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir.join(INDEX_FILE)).is_ok()
}

/// The bucket `node` is in, of `buckets`.
fn bucket_of(node: &str, buckets: u32) -> u32 {
    let hash = sha256(node.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&hash[..8]);
    (u64::from_be_bytes(first) % u64::from(buckets.max(1))) as u32
}

fn bucket_name(bucket: u32) -> String {
    format!("nodes/{bucket:05}.toml")
}

fn rack_file_name(rack: &str) -> String {
    format!("racks/{rack}.toml")
}

/// `body` with its seal line appended.
fn sealed(body: String) -> String {
    let digest = sha256_hex(body.as_bytes());
    format!("{body}{SEAL}{digest}\n")
}

/// The whole map in `dir/map.toml`, read and checked as a one-file map is,
/// held to the index's digest, and every piece checked against it (a
/// directory copied in part, or by hand, is found here before a job finds
/// it): for the tools that read every rack (`topology --check`, doctor),
/// never for a prolog.
pub fn load_whole(dir: &Path, max_nodes: usize) -> Result<RackMap> {
    let reader = Reader::open(dir)?;
    let path = dir.join(MAP_FILE);
    slurm_imex_core::trust::check(
        &path,
        slurm_imex_core::trust::Expect::File,
        "[imex] rack_map",
    )?;
    let mut whole = RackMap::load_file(&path, max_nodes)?;
    if whole.digest != reader.index.map {
        return Err(reader.bad(
            MAP_FILE,
            format!(
                "it is not the map index.toml was written for (sha256 {} against {})",
                short(&whole.digest),
                short(&reader.index.map)
            ),
        ));
    }
    reader.agrees_with(&whole, max_nodes)?;
    whole.source = dir.to_path_buf();
    whole.same_as_topology = reader.index.topology.clone();
    Ok(whole)
}

/// The racks of `nodes` only, from the index: what a prolog needs for its
/// job. A node no rack lists is left out, as the whole map leaves it out.
/// A read that fails is read once more from the index: a map exchanged or
/// copied in while this one read its pieces is then read whole, new, and
/// only a map still bad fails the job.
pub fn load_for(dir: &Path, max_nodes: usize, nodes: &[String]) -> Result<RackMap> {
    read_for(dir, max_nodes, nodes).or_else(|_| read_for(dir, max_nodes, nodes))
}

fn read_for(dir: &Path, max_nodes: usize, nodes: &[String]) -> Result<RackMap> {
    let reader = Reader::open(dir)?;
    let rack_of_wanted = reader.racks_of(nodes)?;
    let mut by_rack: BTreeMap<&String, Vec<&String>> = BTreeMap::new();
    for (node, rack) in &rack_of_wanted {
        by_rack.entry(rack).or_default().push(node);
    }
    let mut racks = Vec::new();
    for (name, wanted) in by_rack {
        let rack = reader.rack(name, max_nodes)?;
        let listed: HashSet<&String> = rack.nodes.iter().collect();
        let unlisted = wanted.iter().find(|n| !listed.contains(*n)).map(|node| {
            format!("the index puts {node} in rack \"{name}\", which does not list it")
        });
        let elsewhere = rack.nodes.iter().find_map(|node| {
            let indexed = rack_of_wanted.get(node).filter(|r| *r != name)?;
            Some(format!(
                "node {node} is in both rack \"{indexed}\" and rack \"{name}\""
            ))
        });
        if let Some(why) = unlisted.or(elsewhere) {
            return Err(reader.bad(&rack_file_name(name), why));
        }
        racks.push(rack);
    }
    let mut map = RackMap::from_racks(dir.to_path_buf(), reader.index.map.clone(), racks)
        .map_err(|why| reader.bad("racks/", why))?;
    map.same_as_topology = reader.index.topology.clone();
    Ok(map)
}

/// One indexed map being read: its directory, trusted, and its index.
struct Reader {
    dir: PathBuf,
    index: IndexFile,
}

impl Reader {
    fn open(dir: &Path) -> Result<Reader> {
        slurm_imex_core::trust::check(dir, slurm_imex_core::trust::Expect::Dir, "[imex] rack_map")?;
        let mut reader = Reader {
            dir: dir.to_path_buf(),
            index: IndexFile {
                format: FORMAT,
                map: String::new(),
                buckets: 1,
                racks: 0,
                nodes: 0,
                topology: None,
            },
        };
        let index: IndexFile = reader.piece(INDEX_FILE)?;
        if index.format != FORMAT {
            return Err(reader.bad(
                INDEX_FILE,
                format!(
                    "format {} is not {FORMAT}, the one this release reads",
                    index.format
                ),
            ));
        }
        let digests_ok = is_digest(&index.map) && index.topology.as_deref().is_none_or(is_digest);
        if !(1..=MAX_BUCKETS).contains(&index.buckets) || !digests_ok {
            return Err(reader.bad(
                INDEX_FILE,
                "its buckets or map digest are out of range".into(),
            ));
        }
        if index.nodes > map::MAX_MAP_NODES || index.racks > index.nodes.max(1) {
            return Err(reader.bad(
                INDEX_FILE,
                "it counts more nodes or racks than a map holds".into(),
            ));
        }
        reader.index = index;
        Ok(reader)
    }

    /// The rack each of `nodes` is in, by the index; unlisted nodes absent.
    fn racks_of(&self, nodes: &[String]) -> Result<HashMap<String, String>> {
        let mut by_bucket: BTreeMap<u32, Vec<&String>> = BTreeMap::new();
        for node in nodes {
            by_bucket
                .entry(bucket_of(node, self.index.buckets))
                .or_default()
                .push(node);
        }
        let mut found = HashMap::new();
        for (bucket, wanted) in by_bucket {
            let name = bucket_name(bucket);
            let file: BucketFile = self.piece(&name)?;
            self.same_map(&name, &file.map)?;
            for node in wanted {
                if let Some(rack) = file.nodes.get(node) {
                    if !map::is_rack_name(rack) {
                        return Err(self.bad(
                            &name,
                            format!(
                                "node {node}: rack name is not 1 to {} letters, digits or ._:-",
                                map::MAX_NAME_LEN
                            ),
                        ));
                    }
                    found.insert(node.clone(), rack.clone());
                }
            }
        }
        Ok(found)
    }

    /// Every piece says what `whole` (map.toml) says: each rack's piece is
    /// its rack, each bucket puts its nodes where `whole` does, and the
    /// counts add up.
    fn agrees_with(&self, whole: &RackMap, max_nodes: usize) -> Result<()> {
        let nodes: usize = whole.racks().iter().map(|r| r.nodes.len()).sum();
        if (self.index.racks, self.index.nodes) != (whole.racks().len(), nodes) {
            return Err(self.bad(
                INDEX_FILE,
                format!(
                    "it counts {} racks and {} nodes, map.toml holds {} and {nodes}",
                    self.index.racks,
                    self.index.nodes,
                    whole.racks().len()
                ),
            ));
        }
        for rack in whole.racks() {
            if self.rack(&rack.name, max_nodes)? != *rack {
                return Err(self.bad(
                    &rack_file_name(&rack.name),
                    "it differs from map.toml's rack".into(),
                ));
            }
        }
        let mut listed = 0;
        for bucket in 0..self.index.buckets {
            let name = bucket_name(bucket);
            let file: BucketFile = self.piece(&name)?;
            self.same_map(&name, &file.map)?;
            for (node, rack) in &file.nodes {
                let misplaced = bucket_of(node, self.index.buckets) != bucket;
                let in_whole = whole.rack_of(node).map(|r| r.name.as_str());
                if misplaced || in_whole != Some(rack.as_str()) {
                    return Err(self.bad(
                        &name,
                        format!(
                            "it puts {node} in rack \"{rack}\", map.toml in {}",
                            in_whole.map_or("none".to_string(), |r| format!("rack \"{r}\""))
                        ),
                    ));
                }
                listed += 1;
            }
        }
        if listed != nodes {
            return Err(self.bad(
                INDEX_FILE,
                format!("its buckets list {listed} nodes, map.toml {nodes}"),
            ));
        }
        Ok(())
    }

    /// One rack's piece, checked as the whole map checks a rack.
    fn rack(&self, name: &str, max_nodes: usize) -> Result<Rack> {
        let file_name = rack_file_name(name);
        let file: RackFile = self.piece(&file_name)?;
        self.same_map(&file_name, &file.map)?;
        if file.name != name {
            return Err(self.bad(
                &file_name,
                format!(
                    "it names rack \"{}\"",
                    slurm_imex_core::text::cap(&file.name, map::MAX_NAME_LEN)
                ),
            ));
        }
        Rack::checked(file.name, &file.clique, &file.nodes, max_nodes)
            .map_err(|why| self.bad(&file_name, why))
    }

    fn same_map(&self, name: &str, map: &str) -> Result<()> {
        if map == self.index.map {
            return Ok(());
        }
        Err(self.bad(
            name,
            format!(
                "it belongs to map sha256 {}, index.toml to {}: the directory is mixed from two \
                 maps (install it whole: `rsync -a --delete --delay-updates`, or write it on the \
                 node with `slurm-imex topology --map -o`)",
                short(map),
                short(&self.index.map)
            ),
        ))
    }

    /// A piece read, its seal checked, parsed.
    fn piece<T: serde::de::DeserializeOwned>(&self, name: &str) -> Result<T> {
        let path = self.dir.join(name);
        if std::fs::symlink_metadata(&path).is_err() {
            return Err(self.bad(name, "it is missing: the directory is incomplete".into()));
        }
        slurm_imex_core::trust::check(
            &path,
            slurm_imex_core::trust::Expect::File,
            "[imex] rack_map",
        )?;
        let bytes = slurm_imex_core::fsutil::read_bounded(&path, MAX_PIECE_BYTES)
            .map_err(|e| self.bad(name, e.to_string()))?;
        let text =
            String::from_utf8(bytes).map_err(|_| self.bad(name, "it is not UTF-8".into()))?;
        let body = unseal(&text).ok_or_else(|| {
            self.bad(
                name,
                "it is truncated or corrupt (its sha256 seal does not match)".into(),
            )
        })?;
        toml::from_str(body).map_err(|e| self.bad(name, map::toml_error_at(body, &e)))
    }

    /// The one line for a bad piece: the directory, the map's digest once
    /// the index is read, the piece, why, and what to do.
    fn bad(&self, name: &str, why: String) -> Error {
        let digest = if self.index.map.is_empty() {
            String::new()
        } else {
            format!(" (sha256 {})", short(&self.index.map))
        };
        Error::new(format!(
            "bad rack map {}{digest}: {name}: {why} (`slurm-imex topology --map -o {}` writes it again)",
            self.dir.display(),
            self.dir.display()
        ))
    }
}

/// The body of a sealed piece, when its seal matches.
fn unseal(text: &str) -> Option<&str> {
    let body_end = text.strip_suffix('\n')?.rfind('\n').map_or(0, |i| i + 1);
    let (body, seal) = text.split_at(body_end);
    let digest = seal.strip_prefix(SEAL)?.strip_suffix('\n')?;
    (sha256_hex(body.as_bytes()) == digest).then_some(body)
}

fn is_digest(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The first 12 characters of a digest (any text a piece holds: cut on a
/// character boundary, never panicking).
fn short(digest: &str) -> &str {
    digest
        .char_indices()
        .nth(12)
        .map_or(digest, |(end, _)| &digest[..end])
}

/// The files of the indexed form of `whole`, whose text is `map_text`, with
/// the digest of the topology file it says exactly the same as, if any:
/// (relative path, contents).
pub fn pieces(whole: &RackMap, map_text: &str, topology: Option<&str>) -> Vec<(String, String)> {
    let node_count: usize = whole.racks().iter().map(|r| r.nodes.len()).sum();
    let buckets = node_count
        .div_ceil(NODES_PER_BUCKET)
        .clamp(1, MAX_BUCKETS as usize) as u32;
    let quote = |s: &str| toml::Value::String(s.to_string()).to_string();
    let map = quote(&whole.digest);
    let topology = topology.map_or(String::new(), |t| format!("topology = {}\n", quote(t)));
    let mut files = vec![
        (MAP_FILE.to_string(), map_text.to_string()),
        (
            INDEX_FILE.to_string(),
            sealed(format!(
                "# slurm-imex indexed rack map (slurm-imex topology --map)\nformat = {FORMAT}\n\
                 map = {map}\nbuckets = {buckets}\nracks = {}\nnodes = {node_count}\n{topology}",
                whole.racks().len()
            )),
        ),
    ];
    let mut bucket_text: Vec<String> = vec![String::new(); buckets as usize];
    for rack in whole.racks() {
        for node in &rack.nodes {
            let text = &mut bucket_text[bucket_of(node, buckets) as usize];
            text.push_str(&format!("{} = {}\n", quote(node), quote(&rack.name)));
        }
        files.push((
            rack_file_name(&rack.name),
            sealed(format!(
                "map = {map}\nname = {}\nclique = {}\nnodes = {}\n",
                quote(&rack.name),
                quote(&rack.clique),
                quote(&hostlist::compress(&rack.nodes))
            )),
        ));
    }
    for (bucket, text) in bucket_text.into_iter().enumerate() {
        files.push((
            bucket_name(bucket as u32),
            sealed(format!("map = {map}\n[nodes]\n{text}")),
        ));
    }
    files
}

/// Whether `topology --map -o <path>` writes the indexed form there: a
/// path that ends in `.d`, or a directory already (which [`write`] then
/// replaces only if it holds an indexed map and nothing else).
pub fn wants_index(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "d") || is_indexed(path)
}

/// What an indexed map's directory holds, and nothing else.
const ENTRIES: [&str; 4] = [MAP_FILE, INDEX_FILE, "nodes", "racks"];

/// Why the existing `target` may not be replaced by an indexed map: it is
/// not a directory, or holds something an indexed map does not (a typo such
/// as `-o /etc/slurm` must never swap out and delete a real directory).
fn refuse_to_replace(target: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(target).ok()?;
    if !meta.is_dir() {
        return Some(
            "it exists and is not a directory (write the indexed map to a new path ending in .d)"
                .into(),
        );
    }
    let foreign = std::fs::read_dir(target)
        .map_err(|e| e.to_string())
        .and_then(|listing| {
            listing
                .map(|entry| entry.map(|e| e.file_name()).map_err(|e| e.to_string()))
                .find(|name| {
                    name.as_ref()
                        .map_or(true, |n| !ENTRIES.iter().any(|ok| n == *ok))
                })
                .transpose()
        });
    match foreign {
        Ok(None) if holds_index(target) => None,
        Ok(None) => Some("it is a directory without an index.toml, not an indexed rack map: write to a new path ending in .d".into()),
        Ok(Some(name)) => Some(format!(
            "it is a directory holding {:?}, which an indexed rack map does not: write to a new path ending in .d",
            name
        )),
        Err(e) => Some(e),
    }
}

/// Write the indexed form of `whole` (whose text is `map_text`) at
/// `target`: built in a new directory beside it, flushed, then exchanged
/// with the old one in one `renameat2(RENAME_EXCHANGE)`, so a prolog reads
/// the old map or the new one, whole; the old one is then removed.
/// `topology`: the digest of the Slurm topology file whose blocks are
/// exactly these racks (`Blocks::same_racks_as`), which a prolog holding
/// the same file then need not parse.
pub fn write(target: &Path, whole: &RackMap, map_text: &str, topology: Option<&str>) -> Result<()> {
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        Error::io(format!("cannot {what} {}: {e}", target.display()))
    };
    let parent = target
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .ok_or_else(|| fail("write", &"not a directory path"))?;
    slurm_imex_core::trust::check(parent, slurm_imex_core::trust::Expect::Dir, "directory")?;
    if let Some(why) = refuse_to_replace(target) {
        return Err(fail("replace", &why));
    }
    let name = target
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| fail("write", &"not a directory path"))?;
    let fresh = parent.join(format!(
        ".{name}.new.{}.{}",
        std::process::id(),
        slurm_imex_core::timespec::now_s()
    ));
    let built =
        build(&fresh, &pieces(whole, map_text, topology)).and_then(|()| swap_in(&fresh, target));
    if built.is_err() {
        let _ = std::fs::remove_dir_all(&fresh);
    }
    built.map_err(|e| fail("write the indexed rack map", &e))
}

/// Every piece written under the new directory `dir`, then flushed once.
fn build(dir: &Path, files: &[(String, String)]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let mut mkdir = std::fs::DirBuilder::new();
    mkdir.mode(0o755);
    mkdir.create(dir)?;
    mkdir.create(dir.join("nodes"))?;
    mkdir.create(dir.join("racks"))?;
    for (name, text) in files {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(dir.join(name))?;
        file.write_all(text.as_bytes())?;
    }
    let handle = std::fs::File::open(dir)?;
    nix::unistd::syncfs(std::os::fd::AsRawFd::as_raw_fd(&handle))?;
    Ok(())
}

/// `fresh` at `target`: exchanged with the old directory, which is then
/// removed, or renamed into place when there was none.
fn swap_in(fresh: &Path, target: &Path) -> std::io::Result<()> {
    use nix::fcntl::{renameat2, RenameFlags};
    if std::fs::symlink_metadata(target).is_err() {
        std::fs::rename(fresh, target)?;
    } else {
        renameat2(None, fresh, None, target, RenameFlags::RENAME_EXCHANGE).map_err(|e| {
            let why = if matches!(e, nix::errno::Errno::EINVAL | nix::errno::Errno::ENOTSUP) {
                "this filesystem cannot exchange two directories in one rename (NFS cannot): \
                 write the map on a local disk and copy it with `rsync -a --delete --delay-updates`"
                    .to_string()
            } else {
                e.to_string()
            };
            std::io::Error::other(format!("exchange with the old map: {why}"))
        })?;
        std::fs::remove_dir_all(fresh)?;
    }
    if let Some(parent) = target.parent() {
        std::fs::File::open(parent)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rack::map::render;
    use std::collections::BTreeSet;
    use std::os::unix::fs::PermissionsExt;

    fn clique(r: usize) -> String {
        format!("dc6e40c4-d722-4357-9ba6-5291dd461278.{r}")
    }

    /// A cluster of `racks` racks of 18, written as both forms.
    fn cluster(racks: usize) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let list: Vec<(String, String, String)> = (1..=racks)
            .map(|r| (format!("rack{r}"), clique(r), format!("gb-r{r}-[01-18]")))
            .collect();
        let text = render(&list, "in a test");
        let file = d.path().join("imex-racks.toml");
        std::fs::write(&file, &text).unwrap();
        let whole = RackMap::load(&file, 4096).unwrap();
        let dir = d.path().join("imex-racks.d");
        write(&dir, &whole, &text, None).unwrap();
        (d, file, dir)
    }

    fn nodes(list: &str) -> Vec<String> {
        hostlist::expand(list, 10_000).unwrap()
    }

    fn reseal(path: &Path, edit: impl Fn(&str) -> String) {
        let text = std::fs::read_to_string(path).unwrap();
        let body = unseal(&text).unwrap();
        std::fs::write(path, sealed(edit(body))).unwrap();
    }

    #[test]
    fn the_index_answers_every_job_as_the_whole_map_does() {
        let (_d, file, dir) = cluster(20);
        let whole = RackMap::load(&file, 4096).unwrap();
        let jobs = [
            "gb-r1-[01-04]",
            "gb-r3-[17-18],gb-r4-[01-02]",
            "gb-r[1-20]-01",
            "gb-r7-05,nowhere1",
            "nowhere[1-3]",
        ];
        for job in jobs {
            let job = nodes(job);
            let part = load_for(&dir, 4096, &job).unwrap();
            assert_eq!(part.digest, whole.digest);
            assert_eq!(part.source, dir);
            for node in &job {
                assert_eq!(
                    part.domain_of(node, &job).map(|d| d.nodes),
                    whole.domain_of(node, &job).map(|d| d.nodes),
                    "{node}"
                );
                assert_eq!(part.rack_of(node), whole.rack_of(node), "{node}");
            }
            assert_eq!(part.cliques_of(&job), whole.cliques_of(&job));
        }
        // A whole rack is there for `[imex] domain = "rack"`.
        let part = load_for(&dir, 4096, &nodes("gb-r2-03")).unwrap();
        assert_eq!(
            part.rack_of("gb-r2-03").unwrap().nodes,
            nodes("gb-r2-[01-18]")
        );
        // The tools' whole read is the same map, named by the directory.
        let again = RackMap::load(&dir, 4096).unwrap();
        assert_eq!(
            (again.racks(), &again.digest),
            (whole.racks(), &whole.digest)
        );
    }

    #[test]
    fn a_job_reads_its_own_pieces_only() {
        let (_d, _file, dir) = cluster(200);
        let job = nodes("gb-r9-[01-04]");
        let mut needed: BTreeSet<String> =
            job.iter().map(|n| bucket_name(bucket_of(n, 113))).collect();
        needed.insert(rack_file_name("rack9"));
        let index = std::fs::read_to_string(dir.join(INDEX_FILE)).unwrap();
        assert!(index.contains("buckets = 113\n"), "{index}");
        // Everything else gone: the job is still answered.
        for sub in ["nodes", "racks"] {
            for entry in std::fs::read_dir(dir.join(sub)).unwrap() {
                let name = format!("{sub}/{}", entry.unwrap().file_name().to_str().unwrap());
                if !needed.contains(&name) {
                    std::fs::remove_file(dir.join(&name)).unwrap();
                }
            }
        }
        std::fs::remove_file(dir.join(MAP_FILE)).unwrap();
        let part = load_for(&dir, 4096, &job).unwrap();
        assert_eq!(part.domain_of("gb-r9-02", &job).unwrap().nodes, job);
        let read: u64 = needed
            .iter()
            .chain([&INDEX_FILE.to_string()])
            .map(|n| std::fs::metadata(dir.join(n)).unwrap().len())
            .sum();
        assert!(read < 8 << 10, "{read} bytes");
    }

    #[test]
    fn bad_pieces_are_one_line_naming_the_directory_the_piece_and_the_map() {
        let job = nodes("gb-r1-[01-02],gb-r2-01");
        type Case = (&'static str, fn(&Path), &'static str);
        let cases: [Case; 8] = [
            (
                "two racks",
                |dir| {
                    reseal(&dir.join("racks/rack2.toml"), |b| {
                        b.replace("gb-r2-[01-18]", "gb-r1-02,gb-r2-[01-18]")
                    })
                },
                "racks/rack2.toml: node gb-r1-02 is in both rack \"rack1\" and rack \"rack2\"",
            ),
            (
                "clique",
                |dir| {
                    reseal(&dir.join("racks/rack1.toml"), |b| {
                        b.replace("dc6e40c4-d722-4357-9ba6-5291dd461278.1", "rack-one")
                    })
                },
                "racks/rack1.toml: rack \"rack1\": clique \"rack-one\" is not",
            ),
            (
                "truncated",
                |dir| {
                    let p = dir.join("racks/rack1.toml");
                    let t = std::fs::read_to_string(&p).unwrap();
                    std::fs::write(&p, &t[..t.len() - 20]).unwrap();
                },
                "racks/rack1.toml: it is truncated or corrupt",
            ),
            (
                "corrupt",
                |dir| {
                    let p = dir.join(INDEX_FILE);
                    let t = std::fs::read_to_string(&p).unwrap();
                    std::fs::write(&p, t.replace("format = 1", "format = 2")).unwrap();
                },
                "index.toml: it is truncated or corrupt",
            ),
            (
                "writable",
                |dir| {
                    std::fs::set_permissions(
                        dir.join("racks/rack2.toml"),
                        std::fs::Permissions::from_mode(0o666),
                    )
                    .unwrap();
                },
                "refusing [imex] rack_map",
            ),
            (
                "missing",
                |dir| std::fs::remove_file(dir.join("racks/rack2.toml")).unwrap(),
                "racks/rack2.toml: it is missing",
            ),
            (
                "mixed",
                |dir| {
                    reseal(&dir.join("racks/rack2.toml"), |b| {
                        b.replace(&b[7..71], &"0".repeat(64))
                    })
                },
                "racks/rack2.toml: it belongs to map sha256 000000000000",
            ),
            (
                "unlisted",
                |dir| {
                    reseal(&dir.join("racks/rack2.toml"), |b| {
                        b.replace("gb-r2-[01-18]", "gb-r2-[02-18]")
                    })
                },
                "the index puts gb-r2-01 in rack \"rack2\", which does not list it",
            ),
        ];
        for (what, spoil, want) in cases {
            let (_d, _file, dir) = cluster(3);
            let digest = RackMap::load(&dir, 4096).unwrap().digest;
            spoil(&dir);
            let e = load_for(&dir, 4096, &job).unwrap_err().to_string();
            assert!(e.contains(want), "{what}: {want:?} not in {e}");
            assert!(!e.contains('\n'), "{what}: {e}");
            if want.starts_with("index.toml") {
                assert!(
                    e.starts_with(&format!("bad rack map {}: ", dir.display())),
                    "{e}"
                );
            } else if !want.starts_with("refusing") {
                let head = format!(
                    "bad rack map {} (sha256 {}): ",
                    dir.display(),
                    &digest[..12]
                );
                assert!(e.starts_with(&head), "{what}: {e}");
            } else {
                assert!(e.contains("rack2.toml"), "{what}: {e}");
            }
        }
    }

    #[test]
    fn the_whole_read_checks_every_piece_against_map_toml() {
        type Case = (&'static str, fn(&Path), &'static str);
        let spoil: [Case; 4] = [
            (
                "a rack",
                |dir| {
                    reseal(&dir.join("racks/rack2.toml"), |b| {
                        b.replace("gb-r2-[01-18]", "gb-r2-[01-17]")
                    })
                },
                "racks/rack2.toml: it differs from map.toml's rack",
            ),
            (
                "a bucket",
                |dir| {
                    let name = bucket_name(bucket_of("gb-r1-01", 2));
                    reseal(&dir.join(&name), |b| {
                        b.replace("\"gb-r1-01\" = \"rack1\"", "\"gb-r1-01\" = \"rack2\"")
                    })
                },
                "it puts gb-r1-01 in rack \"rack2\", map.toml in rack \"rack1\"",
            ),
            (
                "a node gone",
                |dir| {
                    let name = bucket_name(bucket_of("gb-r1-01", 2));
                    reseal(&dir.join(&name), |b| {
                        b.replace("\"gb-r1-01\" = \"rack1\"\n", "")
                    })
                },
                "index.toml: its buckets list 35 nodes, map.toml 36",
            ),
            (
                "a piece gone",
                |dir| std::fs::remove_file(dir.join(bucket_name(1))).unwrap(),
                "nodes/00001.toml: it is missing",
            ),
        ];
        for (what, spoil, want) in spoil {
            let (_d, _file, dir) = cluster(2);
            spoil(&dir);
            let e = RackMap::load(&dir, 4096).unwrap_err().to_string();
            assert!(e.contains(want), "{what}: {want:?} not in {e}");
        }
    }

    #[test]
    fn a_whole_map_that_is_not_the_indexed_one_is_refused() {
        let (_d, _file, dir) = cluster(2);
        let p = dir.join(MAP_FILE);
        let t = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, t.replace("in a test", "by hand")).unwrap();
        let e = RackMap::load(&dir, 4096).unwrap_err().to_string();
        assert!(
            e.contains("map.toml: it is not the map index.toml was written for"),
            "{e}"
        );
    }

    #[test]
    fn writing_again_exchanges_the_directory_whole_and_leaves_nothing_beside() {
        let (d, file, dir) = cluster(2);
        let before = RackMap::load(&dir, 4096).unwrap().digest;
        let text = render(
            &[("rack1".into(), clique(1), "gb-r1-[01-04]".into())],
            "again",
        );
        std::fs::write(&file, &text).unwrap();
        write(&dir, &RackMap::load(&file, 4096).unwrap(), &text, None).unwrap();
        let after = RackMap::load(&dir, 4096).unwrap();
        assert_ne!(after.digest, before);
        assert_eq!(after.racks().len(), 1);
        assert!(!dir.join("racks/rack2.toml").exists());
        let names: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        // A piece's digest is any text: named, never sliced mid-character.
        assert_eq!(short("ééééééééééééééé"), "éééééééééééé");
        assert_eq!(short("abc"), "abc");
        // A file where the directory goes is not replaced, nor a directory
        // that is not an indexed map (a typo such as `-o /etc/slurm`).
        let e = write(&file, &after, &text, None).unwrap_err().to_string();
        assert!(e.contains("not a directory"), "{e}");
        let etc = d.path().join("etc");
        std::fs::create_dir(&etc).unwrap();
        std::fs::write(etc.join("slurm.conf"), "ClusterName=c\n").unwrap();
        let e = write(&etc, &after, &text, None).unwrap_err().to_string();
        assert!(
            e.contains("holding \"slurm.conf\", which an indexed rack map does not"),
            "{e}"
        );
        assert!(etc.join("slurm.conf").exists());
        std::fs::remove_file(etc.join("slurm.conf")).unwrap();
        let e = write(&etc, &after, &text, None).unwrap_err().to_string();
        assert!(e.contains("without an index.toml"), "{e}");
        std::fs::write(dir.join("notes.txt"), "mine\n").unwrap();
        let e = write(&dir, &after, &text, None).unwrap_err().to_string();
        assert!(e.contains("holding \"notes.txt\""), "{e}");
        assert!(wants_index(Path::new("/etc/slurm/imex-racks.d")));
        assert!(!wants_index(&file));
    }
}
