//! Slurm's own configuration, as far as slurm-imex needs it: where this
//! node's slurm.conf is, whether Slurm's `switch/nvidia_imex` hands out IMEX
//! channels (and so which [`ChannelMode`] is in force), and the job id range
//! slurmctld runs with.
//!
//! slurm.conf is read the way Slurm's own parser reads it
//! (`src/common/parse_config.c`, `s_p_parse_file`), rule by rule, each cited
//! where it is coded: no Rust crate parses this format, and reading it
//! differently from slurmctld would let a rack-wide job run on a channel
//! range slurmctld does not use. Numbers are read as `parse_value.c` reads
//! them (`super::number`), the job id range as `read_config.c` checks it.

use super::number;
use crate::config::{AutoPath, ChannelMode, Config, SlurmConfig};
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where configless slurmd keeps the slurm.conf it fetched (Slurm >= 20.11).
pub const CONFIGLESS_CACHE: &str = "/run/slurm/conf/slurm.conf";
/// Debian's compiled-in location.
pub const DEFAULT_SLURM_CONF: &str = "/etc/slurm/slurm.conf";
/// Largest slurm.conf (and included file) read; real ones are kilobytes.
const MAX_FILE_BYTES: u64 = 4 << 20;
/// Deepest `Include` nesting followed.
const MAX_INCLUDE_DEPTH: usize = 8;
/// Most files read in all, slurm.conf and every `Include` (a fan-out of
/// files that each include several others is bounded by this, not depth).
pub const MAX_FILES_READ: usize = 64;
/// Values kept of a list key ([`LIST_KEYS`]); past it the file is refused,
/// never read with some of its values missing. Every other key keeps its
/// last value only (the last one wins, as in Slurm), so no count of lines
/// (a million `NodeName=` lines) changes what is read.
const MAX_LIST_VALUES: usize = 1024;
/// The keys slurm-imex reads that Slurm reads as lists (`S_P_ARRAY` in
/// read_config.c: each value is one more program, `_load_script`).
const LIST_KEYS: [&str; 2] = ["Epilog", "Prolog"];
/// The keys slurm-imex takes from slurm.conf: for these, a line slurmctld
/// would refuse is refused here too (for the rest, only the first
/// `Key=value` of a line is kept, and never consulted).
const KEYS_READ: [&str; 14] = [
    "ClusterName",
    "DebugFlags",
    "Epilog",
    "FirstJobId",
    "HealthCheckInterval",
    "HealthCheckProgram",
    "MaxJobId",
    "PluginDir",
    "PlugStackConfig",
    "Prolog",
    "PrologFlags",
    "SwitchType",
    "TopologyParam",
    "TopologyPlugin",
];

/// The slurm.conf this node runs with, or None when `[slurm] config = "none"`.
pub fn locate(cfg: &SlurmConfig) -> Option<PathBuf> {
    match &cfg.config {
        AutoPath::None => None,
        AutoPath::Path(p) => Some(p.clone()),
        AutoPath::Auto => {
            if let Some(p) = std::env::var_os("SLURM_CONF").filter(|p| !p.is_empty()) {
                return Some(PathBuf::from(p));
            }
            let cache = Path::new(CONFIGLESS_CACHE);
            Some(if cache.exists() {
                cache.to_path_buf()
            } else {
                PathBuf::from(DEFAULT_SLURM_CONF)
            })
        }
    }
}

/// slurm.conf as this node reads it: every global `Key=value` line (keys
/// case-insensitive; a key given twice keeps each value, in order, as Slurm
/// does for `Prolog`/`Epilog`, and the last one wins for the rest, however
/// many times it is given), with
/// `Include`d files read in place. Lines that define a node, partition or
/// the like (`NodeName=n1 CPUs=2 ...`) are kept under their first key too,
/// and never consulted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlurmConf {
    /// The file read first.
    pub path: PathBuf,
    values: BTreeMap<String, Vec<String>>,
    files_read: usize,
}

/// Slurm's defaults for the job id range (`src/common/read_config.h`).
pub const DEFAULT_FIRST_JOB_ID: u32 = 1;
pub const DEFAULT_MAX_JOB_ID: u32 = 0x03ff_0000;
/// The largest job id (`MAX_JOB_ID`, `slurm/slurm.h`): a larger `MaxJobId`
/// is lowered to it by slurmctld (read_config.c).
pub const MAX_JOB_ID: u32 = 0x03ff_ffff;

impl SlurmConf {
    /// Read `path` and the files it includes.
    pub fn read(path: &Path) -> Result<SlurmConf> {
        let mut conf = SlurmConf {
            path: path.to_path_buf(),
            values: BTreeMap::new(),
            files_read: 0,
        };
        conf.read_file(path, 0)?;
        Ok(conf)
    }

    /// The last value of `key`, None when unset or empty.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.last(key).filter(|v| !v.is_empty())
    }

    /// The last value of `key`, even an empty one (`Key=""`).
    fn last(&self, key: &str) -> Option<&str> {
        self.values
            .get(&key.to_ascii_lowercase())
            .and_then(|v| v.last())
            .map(String::as_str)
    }

    /// Every value of a list key, in file order (`Prolog` may be given many
    /// times); for any other key, its last value alone.
    pub fn get_all(&self, key: &str) -> Vec<&str> {
        self.values
            .get(&key.to_ascii_lowercase())
            .map(|v| v.iter().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// True when Slurm's own IMEX channel plugin is configured.
    pub fn nvidia_imex_switch(&self) -> bool {
        self.get("SwitchType")
            .is_some_and(|t| t.eq_ignore_ascii_case("switch/nvidia_imex"))
    }

    /// `FirstJobId` and `MaxJobId` as slurmctld runs with them, or the one
    /// line saying why slurmctld refuses them (read_config.c,
    /// `_validate_and_set_defaults`):
    /// - unset, `FirstJobId` is 1 and `MaxJobId` 0x03ff0000 (read_config.h);
    /// - each is an `S_P_UINT32`, read by [`number::parse_u32`];
    /// - `FirstJobId` 0 is fatal ("FirstJobId cannot be zero");
    /// - a `MaxJobId` above `MAX_JOB_ID` (0x03ffffff) is lowered to it;
    /// - `FirstJobId` above `MaxJobId` is refused ("FirstJobId > MaxJobId").
    pub fn job_id_range(&self) -> Result<(u32, u32)> {
        let refused = |why: String| {
            Error::invalid(format!(
                "{}: {why}, so slurmctld refuses this slurm.conf (Slurm's read_config.c): fix \
                 FirstJobId/MaxJobId there",
                self.path.display()
            ))
        };
        let number = |key: &str, default: u32| match self.last(key) {
            None => Ok(default),
            Some(v) => number::parse_u32(key, v)
                .map_err(|e| refused(crate::text::cap(&e.to_string(), 120))),
        };
        let first = number("FirstJobId", DEFAULT_FIRST_JOB_ID)?;
        let max = number("MaxJobId", DEFAULT_MAX_JOB_ID)?.min(MAX_JOB_ID);
        if first == 0 {
            return Err(refused(
                "FirstJobId is 0 (\"FirstJobId cannot be zero\")".into(),
            ));
        }
        if first > max {
            return Err(refused(format!(
                "FirstJobId {first} is above MaxJobId {max} (\"FirstJobId > MaxJobId\")"
            )));
        }
        Ok((first, max))
    }

    fn read_file(&mut self, path: &Path, depth: usize) -> Result<()> {
        self.files_read += 1;
        if self.files_read > MAX_FILES_READ {
            return Err(Error::new(format!(
                "{}: more than {MAX_FILES_READ} files read through Include (slurm-imex reads at \
                 most {MAX_FILES_READ}; Slurm would read them all): include fewer files",
                self.path.display()
            )));
        }
        let text = crate::fsutil::read_bounded_text(path, MAX_FILE_BYTES)?;
        for (number, line) in logical_lines(&text) {
            let at = || format!("{}:{number}", path.display());
            if let Some(name) = include_target(&line) {
                let name = name.map_err(|e| e.context(at()))?;
                if depth >= MAX_INCLUDE_DEPTH {
                    return Err(Error::new(format!(
                        "{}: Include nested deeper than {MAX_INCLUDE_DEPTH} levels",
                        at()
                    )));
                }
                let included = self.include_path(&name).map_err(|e| e.context(at()))?;
                self.read_file(&included, depth + 1)?;
                continue;
            }
            match key_value(&line) {
                Some((key, value, rest)) => self.keep(key, value, rest, &at)?,
                None if line.trim().is_empty() => {}
                None => {
                    return Err(Error::new(format!(
                        "{}: \"{}\" is not Key=value, so slurmctld refuses this file \
                         (\"Parse error\", Slurm's parse_config.c)",
                        at(),
                        crate::text::cap(line.trim(), 60)
                    )))
                }
            }
        }
        Ok(())
    }

    /// Keep `key`'s value. For a key slurm-imex reads, anything but blanks
    /// after the value is what slurmctld refuses (s_p_parse_file: "after
    /// parsing only whitespace is left over"); other keys (NodeName=,
    /// PartitionName=) take the rest of their line in Slurm, and are never
    /// consulted here.
    fn keep(&mut self, key: &str, value: &str, rest: &str, at: &dyn Fn() -> String) -> Result<()> {
        let read = KEYS_READ.iter().any(|k| k.eq_ignore_ascii_case(key));
        if read && !rest.trim().is_empty() {
            return Err(Error::new(format!(
                "{}: \"{}\" follows {key}={value} on its line, so slurmctld refuses this file \
                 (\"Parse error\", Slurm's parse_config.c): one Key=value per line",
                at(),
                crate::text::cap(rest.trim(), 60)
            )));
        }
        let values = self.values.entry(key.to_ascii_lowercase()).or_default();
        if !LIST_KEYS.iter().any(|k| k.eq_ignore_ascii_case(key)) {
            // S_P_STRING, S_P_UINT32, ...: a later line replaces the value.
            values.clear();
        } else if values.len() >= MAX_LIST_VALUES {
            return Err(Error::invalid(format!(
                "{}: {key}= is given more than {MAX_LIST_VALUES} times; slurm-imex reads at most \
                 {MAX_LIST_VALUES} (Slurm runs them all): list the programs in fewer lines, \
                 comma-separated, or call them from one script",
                at()
            )));
        }
        values.push(value.to_string());
        Ok(())
    }

    /// Where an `Include`d file is (`get_extra_conf_path`, read_config.c):
    /// an absolute name as it is, a relative one in the directory of the
    /// slurm.conf read first (not of the file that includes it). `%c` is the
    /// `ClusterName` read so far, lower-cased (`_parse_for_format`,
    /// parse_config.c). A `*` is refused: Slurm does not expand globs in
    /// `Include` (23.11 and later say "Slurm does not support glob parsing"
    /// and fail the Include; earlier releases look for a file named `*`).
    fn include_path(&self, name: &str) -> Result<PathBuf> {
        let mut name = name.to_string();
        if name.contains("%c") {
            let cluster = self.get("ClusterName").ok_or_else(|| {
                Error::invalid(
                    "Include names %c, and no ClusterName is set before it (parse_config.c)",
                )
            })?;
            name = name.replace("%c", &cluster.to_ascii_lowercase());
        }
        if name.contains('*') {
            return Err(Error::invalid(format!(
                "Include {name}: Slurm does not expand globs in Include (\"Slurm does not \
                 support glob parsing\", parse_config.c), so slurmctld fails this Include: \
                 name each file"
            )));
        }
        let name = Path::new(&name);
        Ok(match (name.is_absolute(), self.path.parent()) {
            (false, Some(dir)) => dir.join(name),
            _ => name.to_path_buf(),
        })
    }
}

/// The file's lines as `_get_next_line` (parse_config.c) hands them on,
/// each with the number of its first physical line:
/// - everything from a `#` not escaped by an odd run of `\` is a comment
///   (`_strip_comments`);
/// - a line ending in an odd run of `\` (blanks after it allowed) goes on
///   on the next line, the last `\` dropped (`_strip_continuation`);
/// - then each `\x` becomes `x` (`_strip_escapes`): `\#` is a `#`.
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut lines = Vec::new();
    let mut joined = String::new();
    let mut first = 0;
    for (i, raw) in text.split_inclusive('\n').enumerate() {
        if joined.is_empty() {
            first = i + 1;
        }
        let kept = strip_comment(raw);
        match continued(kept) {
            Some(head) => joined.push_str(head),
            None => {
                joined.push_str(kept);
                lines.push((first, strip_escapes(&joined)));
                joined.clear();
            }
        }
    }
    if !joined.is_empty() {
        lines.push((first, strip_escapes(&joined)));
    }
    lines
}

/// `_strip_comments`: cut at the first `#` after an even run of `\`.
fn strip_comment(line: &str) -> &str {
    let mut backslashes = 0;
    for (i, c) in line.char_indices() {
        match c {
            '#' if backslashes % 2 == 0 => return &line[..i],
            '\\' => backslashes += 1,
            _ => backslashes = 0,
        }
    }
    line
}

/// `_strip_continuation`: the line without its last `\` when it ends in an
/// odd run of them (blanks after the run allowed), else None.
fn continued(line: &str) -> Option<&str> {
    let body = line.trim_end_matches(|c: char| c.is_ascii_whitespace());
    let run = body.len() - body.trim_end_matches('\\').len();
    (run % 2 == 1).then(|| &body[..body.len() - 1])
}

/// `_strip_escapes`: drop each `\`, keeping the character after it.
fn strip_escapes(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

/// `_parse_include_directive` (parse_config.c): a line that starts (in its
/// first column) with `include`, any case, then at least one blank of any
/// kind (space, tab), is an Include of the next blank-free word. None when
/// the line is no Include; Err when it is one Slurm fails.
fn include_target(line: &str) -> Option<Result<String>> {
    let head = line.get(..7)?;
    if !head.eq_ignore_ascii_case("include") {
        return None;
    }
    let rest = &line[7..];
    if !rest.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let rest = rest.trim_start();
    let end = rest
        .find(|c: char| c.is_ascii_whitespace())
        .unwrap_or(rest.len());
    let (name, after) = rest.split_at(end);
    Some(if name.is_empty() {
        Err(Error::invalid("Include names no file"))
    } else if !after.trim().is_empty() {
        Err(Error::invalid(format!(
            "\"{}\" follows Include {name}, so slurmctld refuses this file (\"Parse error\", \
             parse_config.c): one file per Include",
            crate::text::cap(after.trim(), 60)
        )))
    } else {
        Ok(name.to_string())
    })
}

/// The first `Key=value` of a line, as `keyvalue_pattern` (parse_config.c)
/// matches it: blanks, a key of letters, digits, `_` and `.`, blanks, an
/// optional operator (`+ - * /`, ignored for the keys read here), `=`,
/// blanks, then a value that is either `"…"` (no `"` inside; the quotes are
/// dropped, blanks kept) followed by a blank or the end, or a run of
/// non-blanks. Returns the key, the value and what follows it.
fn key_value(line: &str) -> Option<(&str, &str, &str)> {
    let line = line.trim_start();
    let key_len = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .unwrap_or(line.len());
    if key_len == 0 {
        return None;
    }
    let (key, rest) = line.split_at(key_len);
    let rest = rest.trim_start();
    let rest = rest.strip_prefix(['+', '-', '*', '/']).unwrap_or(rest);
    let rest = rest.strip_prefix('=')?.trim_start();
    if let Some(quoted) = rest.strip_prefix('"') {
        if let Some(close) = quoted.find('"') {
            let after = &quoted[close + 1..];
            if after.is_empty() || after.starts_with(|c: char| c.is_ascii_whitespace()) {
                return Some((key, &quoted[..close], after));
            }
        }
    }
    let end = rest
        .find(|c: char| c.is_ascii_whitespace())
        .unwrap_or(rest.len());
    (end > 0).then(|| (key, &rest[..end], &rest[end..]))
}

/// The channel mode in force, and a warning when "auto" had to guess.
/// Reads slurm.conf (only for "auto"); a hook asks its context instead,
/// which reads it once (`slurm_imex_domain::context`).
pub fn channel_mode(cfg: &Config) -> (ChannelMode, Option<String>) {
    channel_mode_from(cfg.imex.channels, || {
        locate(&cfg.slurm).map(|path| SlurmConf::read(&path).map(|c| c.nvidia_imex_switch()))
    })
}

/// [`channel_mode`] from `channels` and, asked only for "auto", whether
/// slurm.conf names `switch/nvidia_imex` (None: no slurm.conf configured;
/// an error: it could not be read).
pub fn channel_mode_from(
    channels: ChannelMode,
    nvidia_imex_switch: impl FnOnce() -> Option<Result<bool>>,
) -> (ChannelMode, Option<String>) {
    match channels {
        ChannelMode::Auto => {}
        fixed => return (fixed, None),
    }
    match nvidia_imex_switch() {
        None | Some(Ok(false)) => (ChannelMode::Plugin, None),
        Some(Ok(true)) => (ChannelMode::Slurm, None),
        Some(Err(e)) => (
            ChannelMode::Plugin,
            Some(format!(
                "[imex] channels = \"auto\": {e}; assuming slurm-imex hands out channels \
                 (set [slurm] config, or channels = \"plugin\" or \"slurm\")"
            )),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn read(text: &str) -> Result<SlurmConf> {
        let d = tempfile::tempdir().unwrap();
        SlurmConf::read(&write(d.path(), "slurm.conf", text))
    }

    #[test]
    fn finds_switch_type_case_insensitively_past_comments() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "slurm.conf",
            "# SwitchType=switch/none\nClusterName=x\nswitchtype = switch/nvidia_imex # ours\n\
             SwitchParameters=imex_dev_major=507\n",
        );
        let c = SlurmConf::read(&p).unwrap();
        assert_eq!(c.get("switchtype"), Some("switch/nvidia_imex"));
        assert!(c.nvidia_imex_switch());
        let p = write(d.path(), "none.conf", "SwitchType=switch/none\n");
        assert!(!SlurmConf::read(&p).unwrap().nvidia_imex_switch());
        let p = write(d.path(), "empty.conf", "");
        assert_eq!(SlurmConf::read(&p).unwrap().get("SwitchType"), None);
    }

    /// keyvalue_pattern (parse_config.c): `"…"` is a value with its quotes
    /// dropped; an operator before `=` is allowed; blanks around `=` too.
    #[test]
    fn quoted_values_lose_their_quotes_as_in_slurm() {
        let c =
            read("SwitchType=\"switch/nvidia_imex\"\nClusterName = \"a b\"\nPrologFlags+=Alloc\n")
                .unwrap();
        assert!(c.nvidia_imex_switch());
        assert_eq!(c.get("ClusterName"), Some("a b"));
        assert_eq!(c.get("PrologFlags"), Some("Alloc"));
        // A quote not closed before a blank is part of a plain word.
        let c = read("NodeName=\"x\"y CPUs=2\n").unwrap();
        assert_eq!(c.get("NodeName"), Some("\"x\"y"));
    }

    /// _strip_comments / _strip_continuation / _strip_escapes (parse_config.c).
    #[test]
    fn comments_escapes_and_continued_lines_as_in_slurm() {
        let c = read("Prolog=/a\\#b # comment\nSwitchType=\\\n  switch/nvidia_imex\n").unwrap();
        assert_eq!(c.get("Prolog"), Some("/a#b"));
        assert!(c.nvidia_imex_switch(), "{c:?}");
        let c = read("Prolog=/a\\\\ # two backslashes: no continuation\nClusterName=x\n").unwrap();
        assert_eq!(c.get("Prolog"), Some("/a\\"));
        assert_eq!(c.get("ClusterName"), Some("x"));
    }

    /// s_p_parse_file: a key slurm-imex reads with more than blanks after
    /// its value is a parse error slurmctld refuses; a line that is not
    /// Key=value is one too.
    #[test]
    fn lines_slurmctld_refuses_are_refused_naming_file_and_line() {
        let e = read("ClusterName=x\nSwitchType=switch/nvidia_imex MaxJobId=5\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("slurm.conf:2: \"MaxJobId=5\" follows SwitchType"),
            "{e}"
        );
        assert!(e.contains("slurmctld refuses"), "{e}");
        let e = read("Switch Type=x\n").unwrap_err().to_string();
        assert!(
            e.contains("slurm.conf:1: \"Switch Type=x\" is not Key=value"),
            "{e}"
        );
        let e = read("  Include other.conf\n").unwrap_err().to_string();
        assert!(e.contains("is not Key=value"), "{e}");
        // Other keys' lines take the rest of the line in Slurm.
        let c = read("NodeName=n1 CPUs=2 State=UNKNOWN\n").unwrap();
        assert_eq!(c.get("NodeName"), Some("n1"));
    }

    #[test]
    fn repeated_keys_keep_every_value_and_the_job_id_range_has_defaults() {
        let c = read(
            "Prolog=/a\nprolog=/b\nNodeName=n1 CPUs=2\nMaxJobId=2047\nPrologFlags=Contain\nPrologFlags=Alloc\n",
        )
        .unwrap();
        assert_eq!(c.get_all("Prolog"), ["/a", "/b"]);
        assert_eq!(c.get("PrologFlags"), Some("Alloc"));
        assert_eq!(c.get_all("PrologFlags"), ["Alloc"]);
        assert_eq!(c.job_id_range(), Ok((1, 2047)));
        assert_eq!(read("").unwrap().job_id_range(), Ok((1, 0x03ff_0000)));
    }

    #[test]
    fn no_count_of_lines_changes_which_value_wins() {
        let mut text = String::new();
        for i in 0..5000 {
            text.push_str(&format!(
                "MaxJobId={}\nSwitchType=switch/none\nNodeName=n{i}\n",
                100_000 + i
            ));
        }
        text.push_str("maxjobid=2047\nSwitchType=switch/nvidia_imex\n");
        let c = read(&text).unwrap();
        assert_eq!(c.job_id_range(), Ok((1, 2047)));
        assert!(c.nvidia_imex_switch());
        assert_eq!(c.get("NodeName"), Some("n4999"));
        // A list is read whole up to its bound, and refused past it.
        let c = read(&"Prolog=/p\n".repeat(MAX_LIST_VALUES)).unwrap();
        assert_eq!(c.get_all("Prolog").len(), MAX_LIST_VALUES);
        let text = format!("{}Epilog=/e\n", "Epilog=/e\n".repeat(MAX_LIST_VALUES));
        let e = read(&text).unwrap_err().to_string();
        assert!(
            e.contains(&format!(
                "slurm.conf:{}: Epilog= is given more than",
                MAX_LIST_VALUES + 1
            )),
            "{e}"
        );
    }

    /// FirstJobId/MaxJobId are S_P_UINT32 (read_config.c): strtoul base 0
    /// and a k suffix (parse_value.c), then read_config.c's own checks.
    #[test]
    fn job_ids_are_numbers_as_slurmctld_reads_them() {
        let range = |text: &str| read(text).unwrap().job_id_range();
        assert_eq!(range("MaxJobId=03777\n"), Ok((1, 2047)));
        assert_eq!(range("MaxJobId=0x7ff\n"), Ok((1, 2047)));
        assert_eq!(range("FirstJobId=010\nMaxJobId=2k\n"), Ok((8, 2048)));
        assert_eq!(range("MaxJobId=\"2047\"\n"), Ok((1, 2047)));
        // Above MAX_JOB_ID, slurmctld lowers it (and so do we).
        assert_eq!(range("MaxJobId=UNLIMITED\n"), Ok((1, MAX_JOB_ID)));
        assert_eq!(range("MaxJobId=0x7fffffff\n"), Ok((1, MAX_JOB_ID)));
    }

    #[test]
    fn a_range_slurmctld_refuses_is_named_as_such_in_one_line() {
        let cases = [
            (
                "FirstJobId=5000\nMaxJobId=2047\n",
                "FirstJobId 5000 is above MaxJobId 2047",
            ),
            ("FirstJobId=0\n", "FirstJobId is 0"),
            (
                "FirstJobId=0x\n",
                "FirstJobId value (0x) is not a valid number",
            ),
            (
                "MaxJobId=lots\n",
                "MaxJobId value (lots) is not a valid number",
            ),
            ("MaxJobId=-1\n", "MaxJobId value (-1) is less than zero"),
            (
                "FirstJobId=INFINITE\n",
                "FirstJobId 4294967295 is above MaxJobId",
            ),
        ];
        for (text, why) in cases {
            let e = read(text).unwrap().job_id_range().unwrap_err();
            assert_eq!(e.kind(), crate::error::Kind::Invalid);
            let e = e.to_string();
            assert!(e.contains(why), "{text:?}: {e}");
            assert!(e.contains("slurmctld refuses this slurm.conf"), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    /// _parse_include_directive: `include` in any case, then any blank.
    #[test]
    fn include_takes_any_blank_and_any_case() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "net.conf", "SwitchType=switch/nvidia_imex\n");
        for line in [
            "Include net.conf",
            "Include\tnet.conf",
            "INCLUDE \t net.conf  ",
        ] {
            let p = write(d.path(), "slurm.conf", &format!("{line}\n"));
            assert!(
                SlurmConf::read(&p).unwrap().nvidia_imex_switch(),
                "{line:?}"
            );
        }
        let p = write(d.path(), "slurm.conf", "Include net.conf other.conf\n");
        let e = SlurmConf::read(&p).unwrap_err().to_string();
        assert!(e.contains("one file per Include"), "{e}");
    }

    /// get_extra_conf_path (read_config.c): relative to slurm.conf's own
    /// directory, even from a file included from elsewhere; `%c` is the
    /// cluster's name, lower-cased.
    #[test]
    fn includes_are_found_as_slurm_finds_them() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        write(d.path(), "net.conf", "SwitchType=switch/nvidia_imex\n");
        write(d.path(), "sub/mid.conf", "Include net.conf\n");
        let p = write(d.path(), "slurm.conf", "Include sub/mid.conf\n");
        assert!(SlurmConf::read(&p).unwrap().nvidia_imex_switch());
        write(d.path(), "gb.conf", "MaxJobId=2047\n");
        let p = write(d.path(), "slurm.conf", "ClusterName=GB\nInclude %c.conf\n");
        assert_eq!(SlurmConf::read(&p).unwrap().job_id_range(), Ok((1, 2047)));
        let p = write(d.path(), "slurm.conf", "Include *.conf\n");
        let e = SlurmConf::read(&p).unwrap_err().to_string();
        assert!(
            e.contains("slurm.conf:1: Include *.conf: Slurm does not expand globs"),
            "{e}"
        );
    }

    #[test]
    fn includes_are_bounded_in_depth_and_in_number() {
        let d = tempfile::tempdir().unwrap();
        let p = write(d.path(), "loop.conf", "include loop.conf\n");
        let e = SlurmConf::read(&p).unwrap_err().to_string();
        assert!(e.contains("nested deeper"), "{e}");
        let p = write(d.path(), "missing.conf", "Include nowhere.conf\n");
        let e = SlurmConf::read(&p).unwrap_err().to_string();
        assert!(e.contains("nowhere.conf"), "{e}");
        // A fan-out: each level includes the next one four times; depth 4
        // stays within the nesting bound but reads 1 + 4 + 16 + 64 + 256 files.
        for level in 0..4 {
            let next = format!("Include l{}.conf\n", level + 1).repeat(4);
            write(d.path(), &format!("l{level}.conf"), &next);
        }
        write(d.path(), "l4.conf", "ClusterName=x\n");
        let started = std::time::Instant::now();
        let e = SlurmConf::read(&d.path().join("l0.conf"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("more than {MAX_FILES_READ} files read")),
            "{e}"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn auto_mode_follows_slurm_conf_and_fixed_modes_do_not_read_it() {
        let d = tempfile::tempdir().unwrap();
        let with = write(d.path(), "a.conf", "SwitchType=switch/nvidia_imex\n");
        let without = write(d.path(), "b.conf", "SwitchType=switch/none\n");
        let mut cfg = Config::default();
        cfg.slurm.config = AutoPath::Path(with.clone());
        assert_eq!(channel_mode(&cfg), (ChannelMode::Slurm, None));
        cfg.slurm.config = AutoPath::Path(without);
        assert_eq!(channel_mode(&cfg), (ChannelMode::Plugin, None));
        cfg.imex.channels = ChannelMode::Plugin;
        cfg.slurm.config = AutoPath::Path(with);
        assert_eq!(channel_mode(&cfg), (ChannelMode::Plugin, None));
        cfg.imex.channels = ChannelMode::Auto;
        cfg.slurm.config = AutoPath::Path(d.path().join("absent.conf"));
        let (mode, warning) = channel_mode(&cfg);
        assert_eq!(mode, ChannelMode::Plugin);
        assert!(warning.unwrap().contains("absent.conf"));
    }
}
