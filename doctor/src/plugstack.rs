//! The plugstack.conf line that registers our plugin, and the plugin it
//! names: present, trusted, loadable, and stamped for the running Slurm.
//!
//! plugstack.conf is split by hand (no crate reads it), as Slurm's
//! `src/common/spank.c` does: each line is `required|optional path [args]`
//! or `include pattern`, `#` starts a comment. An include's pattern is
//! expanded with glob(3)'s rules (the `glob` crate), relative to the
//! including file's directory (`_spank_conf_include`). Slurm itself has no
//! guard against files that include each other; here each file is read once
//! (a visited set), and the number of files and the time spent are bounded.

use crate::check::{Check, CheckName};
use crate::pattern;
use crate::slurm_view::{major_minor, SlurmView};
use slurm_imex_core::fsutil::read_bounded_text;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const MAX_FILE_BYTES: u64 = 1 << 20;
const MAX_INCLUDE_DEPTH: usize = 4;
/// Most plugstack files read in all, through every include.
const MAX_FILES: usize = 256;
/// Longest the search for our line may take.
const TIME_LIMIT: Duration = Duration::from_secs(10);
const PLUGIN_FILE: &str = "spank_imex.so";

/// Our plugin's line: how it is registered, its path and its config= arg.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginLine {
    pub origin: String,
    pub required: bool,
    pub path: String,
    pub config: Option<String>,
}

/// Where the search has been: each file once, by device and inode.
struct Walk {
    visited: HashSet<(u64, u64)>,
    deadline: Instant,
}

/// Find our line in `file` and what it includes. Err is the reason, which
/// the check puts after "cannot read <plugstack.conf>".
pub fn find_line(file: &Path) -> std::result::Result<Option<PluginLine>, String> {
    let mut walk = Walk {
        visited: HashSet::new(),
        deadline: Instant::now() + TIME_LIMIT,
    };
    walk.find(file, 0)
}

impl Walk {
    fn find(
        &mut self,
        file: &Path,
        depth: usize,
    ) -> std::result::Result<Option<PluginLine>, String> {
        use std::os::unix::fs::MetadataExt;
        if let Ok(meta) = std::fs::metadata(file) {
            if !self.visited.insert((meta.dev(), meta.ino())) {
                return Ok(None);
            }
        }
        if self.visited.len() > MAX_FILES || Instant::now() > self.deadline {
            return Err(format!(
                "its includes lead to more than {MAX_FILES} files, or take longer than \
                 {TIME_LIMIT:?} to read (at {}): include fewer files",
                file.display()
            ));
        }
        let text = read_bounded_text(file, MAX_FILE_BYTES).map_err(|e| e.to_string())?;
        for (n, line) in text.lines().enumerate() {
            let mut words = line.split('#').next().unwrap_or("").split_whitespace();
            match words.next() {
                Some("include") if depth < MAX_INCLUDE_DEPTH => {
                    for included in words.flat_map(|pattern| glob(file, pattern)) {
                        if let Some(found) = self.find(&included, depth + 1)? {
                            return Ok(Some(found));
                        }
                    }
                }
                Some(kind @ ("required" | "optional")) => {
                    let Some(path) = words.next().filter(|p| p.ends_with(PLUGIN_FILE)) else {
                        continue;
                    };
                    let config = words
                        .find_map(|arg| arg.strip_prefix("config="))
                        .map(str::to_string);
                    return Ok(Some(PluginLine {
                        origin: format!("{}:{}", file.display(), n + 1),
                        required: kind == "required",
                        path: path.to_string(),
                        config,
                    }));
                }
                _ => {}
            }
        }
        Ok(None)
    }
}

/// The files an `include` names, relative to the including file.
fn glob(from: &Path, pattern: &str) -> Vec<PathBuf> {
    pattern::expand(
        from.parent().unwrap_or(Path::new("/")),
        pattern,
        MAX_FILES + 1,
    )
}

/// Where Slurm finds the plugin a line names: an absolute path as is, a
/// bare name in PluginDir.
pub fn resolve(line: &PluginLine, slurm: &SlurmView) -> Option<PathBuf> {
    let path = Path::new(&line.path);
    if path.is_absolute() {
        return Some(path.to_path_buf());
    }
    slurm
        .plugin_dirs()
        .into_iter()
        .map(|d| d.join(path))
        .find(|p| p.exists())
}

/// The plugstack and plugin checks.
pub fn check(slurm: &SlurmView, config_path: &Path, suggested_plugin: &str) -> Vec<Check> {
    let Some(stack) = slurm.plugstack() else {
        return vec![Check::fail(
            CheckName::Plugstack,
            "Slurm names no plugstack.conf (no PlugStackConfig, no SLURM_CONF)",
            "set PlugStackConfig in slurm.conf",
        )];
    };
    let add_line = format!(
        "add `required {suggested_plugin} config={}` to {}",
        config_path.display(),
        stack.display()
    );
    let line = match find_line(&stack) {
        Err(e) => {
            return vec![Check::fail(
                CheckName::Plugstack,
                format!("cannot read {}: {e}", stack.display()),
                add_line,
            )]
        }
        Ok(None) => {
            return vec![Check::fail(
                CheckName::Plugstack,
                format!(
                    "no line of {} (or what it includes) names {PLUGIN_FILE}",
                    stack.display()
                ),
                add_line,
            )]
        }
        Ok(Some(line)) => line,
    };
    let mut found = vec![registration(&line, config_path)];
    found.push(plugin_file(&line, slurm, suggested_plugin));
    found
}

fn registration(line: &PluginLine, config_path: &Path) -> Check {
    if !line.required {
        return Check::warn(CheckName::Plugstack, format!("{}: optional {}", line.origin, line.path),
            "write `required`: with `optional`, a node where the plugin fails to load runs --imex jobs without their channel");
    }
    match &line.config {
        Some(c) if !same_file(Path::new(c), config_path) => Check::warn(CheckName::Plugstack,
            format!("{}: the plugin reads {c}, this node's prolog and CLI read {}", line.origin, config_path.display()),
            "point config= and the prolog at one file (imex.toml beside slurm.conf, or $SLURM_IMEX_CONFIG)"),
        _ => Check::pass(CheckName::Plugstack, format!("{}: required {}", line.origin, line.path)),
    }
}

/// One file under two names (a bind mount, a symlink), or the same path.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => (x.dev(), x.ino()) == (y.dev(), y.ino()),
        _ => a == b,
    }
}

fn plugin_file(line: &PluginLine, slurm: &SlurmView, suggested_plugin: &str) -> Check {
    let Some(path) = resolve(line, slurm) else {
        return Check::fail(
            CheckName::Plugin,
            format!(
                "{} names {}, which is in no PluginDir ({})",
                line.origin,
                line.path,
                slurm.get("PluginDir").unwrap_or("unset")
            ),
            format!(
                "install the plugin for Slurm {} as {suggested_plugin}",
                slurm.major_minor()
            ),
        );
    };
    let release_hint = format!("install the plugin built for Slurm {} (the slurm-imex package +slurm{}, or plugins/{} of the release tarball)", slurm.major_minor(), slurm.major_minor(), slurm.major_minor());
    if let Err(e) =
        slurm_imex_core::trust::check(&path, slurm_imex_core::trust::Expect::File, "plugin")
    {
        return Check::fail(CheckName::Plugin, e.to_string(), release_hint);
    }
    match crate::plugin_stamp::read(&path, &slurm.plugin_dirs()) {
        Err(e) => Check::fail(
            CheckName::Plugin,
            format!("{} does not load: {e}", path.display()),
            release_hint,
        ),
        Ok(stamp) if major_minor(&stamp) != slurm.major_minor() => Check::fail(
            CheckName::Plugin,
            format!(
                "{} is stamped for Slurm {stamp}, this Slurm is {}: slurmd refuses to load it",
                path.display(),
                slurm.version
            ),
            release_hint,
        ),
        Ok(stamp) => Check::pass(
            CheckName::Plugin,
            format!(
                "{} loads, stamped for Slurm {stamp} (running {})",
                path.display(),
                slurm.version
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_line_through_an_include_and_reads_its_config() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("plugstack.conf.d")).unwrap();
        std::fs::write(
            d.path().join("plugstack.conf"),
            "# stack\nrequired /x/pyxis.so\ninclude plugstack.conf.d/*.conf\n",
        )
        .unwrap();
        std::fs::write(
            d.path().join("plugstack.conf.d/imex.conf"),
            "\noptional spank_imex.so config=/etc/slurm/imex.toml # ours\n",
        )
        .unwrap();
        let line = find_line(&d.path().join("plugstack.conf"))
            .unwrap()
            .unwrap();
        assert!(!line.required);
        assert_eq!(line.path, "spank_imex.so");
        assert_eq!(line.config.as_deref(), Some("/etc/slurm/imex.toml"));
        assert!(line.origin.ends_with("imex.conf:2"), "{}", line.origin);
    }

    #[test]
    fn an_include_loop_ends() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("plugstack.conf"), "include plugstack.conf\n").unwrap();
        assert_eq!(find_line(&d.path().join("plugstack.conf")).unwrap(), None);
    }

    /// Files that include each other through globs: each read once, so
    /// the search ends at once (it used to read 20^4 files).
    #[test]
    fn files_including_each_other_through_globs_are_read_once() {
        let d = tempfile::tempdir().unwrap();
        for i in 0..20 {
            std::fs::write(d.path().join(format!("p{i:02}.conf")), "include p*.conf\n").unwrap();
        }
        std::fs::write(d.path().join("plugstack.conf"), "include p?[0-9].conf\n").unwrap();
        let started = Instant::now();
        assert_eq!(find_line(&d.path().join("plugstack.conf")).unwrap(), None);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        std::fs::write(
            d.path().join("p19.conf"),
            "include p*.conf\nrequired spank_imex.so\n",
        )
        .unwrap();
        let line = find_line(&d.path().join("plugstack.conf"))
            .unwrap()
            .unwrap();
        assert!(line.origin.ends_with("p19.conf:2"), "{}", line.origin);
    }

    #[test]
    fn too_many_files_are_refused_in_one_line() {
        let d = tempfile::tempdir().unwrap();
        for i in 0..300 {
            std::fs::write(d.path().join(format!("p{i:03}.conf")), "# nothing\n").unwrap();
        }
        std::fs::write(d.path().join("plugstack.conf"), "include p*.conf\n").unwrap();
        let e = find_line(&d.path().join("plugstack.conf")).unwrap_err();
        assert!(e.contains("more than 256 files"), "{e}");
    }
}

#[cfg(test)]
mod stamp_tests {
    use super::*;
    use crate::check::Status;

    /// A shared object carrying a SPANK plugin's stamp for Slurm 22.05,
    /// built with the C compiler the Rust toolchain links with.
    fn plugin_for_2205(dir: &Path) -> PathBuf {
        let src = dir.join("p.c");
        std::fs::write(
            &src,
            "const char plugin_name[] = \"imex\";\nconst char plugin_type[] = \"spank\";\n\
                              const unsigned int plugin_version = 0x160508;\n",
        )
        .unwrap();
        let so = dir.join("spank_imex.so");
        let ok = std::process::Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&so)
            .arg(&src)
            .status()
            .unwrap();
        assert!(ok.success());
        so
    }

    #[test]
    fn a_plugin_stamped_for_another_slurm_fails_and_a_missing_line_or_file_fails() {
        let d = tempfile::tempdir().unwrap();
        let so = plugin_for_2205(d.path());
        assert_eq!(crate::plugin_stamp::read(&so, &[]).unwrap(), "22.05.8");
        let stack = d.path().join("plugstack.conf");
        let mut slurm = SlurmView::parse(&format!(
            "PlugStackConfig = {}\nPluginDir = {}\n",
            stack.display(),
            d.path().display()
        ));
        slurm.version = "24.11.5".into();
        let cfg = Path::new("/etc/slurm/imex.toml");

        std::fs::write(&stack, "required /x/pyxis.so\n").unwrap();
        let f = &check(&slurm, cfg, "/p/spank_imex.so")[0];
        assert_eq!((f.check, f.verdict), (CheckName::Plugstack, Status::Fail));
        assert!(
            f.remedy
                .contains("required /p/spank_imex.so config=/etc/slurm/imex.toml"),
            "{}",
            f.remedy
        );

        std::fs::write(
            &stack,
            "required spank_imex.so config=/etc/slurm/imex.toml\n",
        )
        .unwrap();
        let found = check(&slurm, cfg, "/p/spank_imex.so");
        assert_eq!(found[0].verdict, Status::Pass);
        assert_eq!(
            (found[1].check, found[1].verdict),
            (CheckName::Plugin, Status::Fail),
            "{}",
            found[1].line()
        );
        assert!(
            found[1]
                .found
                .contains("stamped for Slurm 22.05.8, this Slurm is 24.11.5"),
            "{}",
            found[1].found
        );
        assert!(found[1].remedy.contains("+slurm24.11"));

        std::fs::remove_file(&so).unwrap();
        let found = check(&slurm, cfg, "/p/spank_imex.so");
        assert_eq!(found[1].verdict, Status::Fail);
        assert!(
            found[1].found.contains("in no PluginDir"),
            "{}",
            found[1].found
        );

        std::fs::write(&stack, "optional /x/spank_imex.so\n").unwrap();
        assert_eq!(
            check(&slurm, cfg, "/p/spank_imex.so")[0].verdict,
            Status::Warn
        );
    }
}
