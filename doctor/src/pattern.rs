//! Paths that Slurm expands with glob(3): plugstack.conf's `include` and
//! slurm.conf's `Prolog=`/`Epilog=`. The one place the doctor expands a
//! pattern, with the `glob` crate.

use std::path::{Path, PathBuf};

/// The files `pattern` names with glob(3)'s rules (`*`, `?`, `[...]` in any
/// component; sorted, as glob(3) sorts), relative to `dir` unless absolute,
/// at most `max` of them. A pattern with no special character names its
/// path whether or not it exists, so a missing file is reported by whoever
/// reads it.
pub(crate) fn expand(dir: &Path, pattern: &str, max: usize) -> Vec<PathBuf> {
    let pattern = if Path::new(pattern).is_absolute() {
        PathBuf::from(pattern)
    } else {
        dir.join(pattern)
    };
    let text = pattern.to_string_lossy();
    if !text.contains(['*', '?', '[']) {
        return vec![pattern.clone()];
    }
    let mut found: Vec<PathBuf> = match glob::glob(&text) {
        Ok(paths) => paths.flatten().take(max).collect(),
        Err(_) => Vec::new(),
    };
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_expand_sorted_relative_and_bounded() {
        let d = tempfile::tempdir().unwrap();
        for name in ["b.conf", "a.conf", "c.txt"] {
            std::fs::write(d.path().join(name), "").unwrap();
        }
        let found = expand(d.path(), "*.conf", 10);
        assert_eq!(found, [d.path().join("a.conf"), d.path().join("b.conf")]);
        assert_eq!(expand(d.path(), "*", 2).len(), 2);
        // No special character: the path itself, present or not.
        assert_eq!(expand(d.path(), "/x/none", 10), [PathBuf::from("/x/none")]);
        assert_eq!(expand(d.path(), "none", 10), [d.path().join("none")]);
    }
}
