//! The end-to-end suite's hand-kept lists of its files, against the files:
//! every `tests/e2e/*.sh` that defines a `test_*` function is sourced by
//! `run.sh`'s feature loop (or, for the package, arm64 and listing tests,
//! by `versions.sh`), named in `phases.sh`'s header when it is a feature
//! file, and in docs/development.md's table of the suite. A file left out
//! of run.sh would never run; one left out of the docs would be unknown.
//! (`tests/e2e/listed.sh` checks the same for each test in a phase.)

// A test file: a panic is how its helpers fail the test.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    let at = repo().join(path);
    std::fs::read_to_string(&at).unwrap_or_else(|e| panic!("{}: {e}", at.display()))
}

/// Whether a line of shell defines a `test_*` function, in any of bash's
/// forms: `test_x() {`, `function test_x {`, `function test_x()`, indented,
/// the brace on the next line (as tests/e2e/listed.sh reads them).
fn defines_a_test(line: &str) -> bool {
    let line = line.trim_start();
    if let Some(rest) = line.strip_prefix("function") {
        return rest.starts_with(char::is_whitespace) && rest.trim_start().starts_with("test_");
    }
    let Some(rest) = line.strip_prefix("test_") else {
        return false;
    };
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_');
    rest.trim_start().starts_with("()")
}

/// The file names (`jobs.sh`) of every tests/e2e/*.sh that defines a test.
fn files_with_tests() -> BTreeSet<String> {
    let dir = repo().join("tests/e2e");
    let found: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".sh"))
        .filter(|n| read(&format!("tests/e2e/{n}")).lines().any(defines_a_test))
        .collect();
    assert!(
        found.len() > 10,
        "only {found:?} define tests: the search is broken"
    );
    found
}

/// The features run.sh sources: its `for feature in …; do` list.
fn run_sh_features() -> Vec<String> {
    let text = read("tests/e2e/run.sh");
    let start = text
        .find("for feature in ")
        .expect("tests/e2e/run.sh: no `for feature in …` loop")
        + "for feature in ".len();
    let len = text[start..]
        .find("; do")
        .expect("tests/e2e/run.sh: `for feature in …` has no `; do`");
    text[start..start + len]
        .split_whitespace()
        .filter(|w| *w != "\\")
        .map(|w| format!("{w}.sh"))
        .collect()
}

/// The test files versions.sh sources itself (`source tests/e2e/X.sh`).
fn versions_sh_sources() -> BTreeSet<String> {
    read("tests/e2e/versions.sh")
        .lines()
        .filter_map(|l| l.trim().strip_prefix("source tests/e2e/"))
        .map(|f| f.trim().to_string())
        .collect()
}

/// `listed` against `files` (`what_files`: what they are, for the message).
fn compare(what: &str, listed: &BTreeSet<String>, files: &BTreeSet<String>, what_files: &str) {
    assert!(
        listed == files,
        "{what}: missing {:?}; names {:?}, which is no {what_files}",
        files.difference(listed).collect::<Vec<_>>(),
        listed.difference(files).collect::<Vec<_>>()
    );
}

const FEATURE_FILE: &str =
    "feature file (a tests/e2e/*.sh defining a test_* function, not sourced by versions.sh)";

/// The feature files: every file with tests that versions.sh does not
/// source itself.
fn feature_files() -> BTreeSet<String> {
    let own = versions_sh_sources();
    files_with_tests()
        .into_iter()
        .filter(|f| !own.contains(f))
        .collect()
}

#[test]
fn run_sh_sources_every_feature_file_once() {
    let features = run_sh_features();
    let set: BTreeSet<String> = features.iter().cloned().collect();
    assert_eq!(set.len(), features.len(), "a feature twice: {features:?}");
    compare(
        "tests/e2e/run.sh's `for feature in` (a file of tests goes there, or, a package test, in versions.sh's `source` lines: one of the two)",
        &set,
        &feature_files(),
        FEATURE_FILE,
    );
}

#[test]
fn phases_sh_header_names_every_feature_file() {
    let text = read("tests/e2e/phases.sh");
    let header: String = text
        .lines()
        .take_while(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#').trim())
        .collect::<Vec<_>>()
        .join(" ");
    let from = "proves (";
    let start = header
        .find(from)
        .expect("tests/e2e/phases.sh's header: \"… named after what it proves (jobs.sh, …)\"")
        + from.len();
    let len = header[start..]
        .find(')')
        .expect("tests/e2e/phases.sh's header: no ) closes the list");
    let named: Vec<String> = header[start..start + len]
        .split(',')
        .map(|f| f.trim().to_string())
        .collect();
    let set: BTreeSet<String> = named.iter().cloned().collect();
    assert_eq!(set.len(), named.len(), "a file twice: {named:?}");
    compare(
        "tests/e2e/phases.sh's header",
        &set,
        &feature_files(),
        FEATURE_FILE,
    );
}

#[test]
fn development_md_e2e_table_lists_every_file_with_tests() {
    let text = read("docs/development.md");
    let start = text
        .find("| file | feature |\n|---|---|\n")
        .expect("docs/development.md: the e2e table (| file | feature |)");
    let rows: Vec<String> = text[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|row| {
            let cell = row.split('|').nth(1).unwrap_or_default().trim();
            cell.trim_matches('`').to_string()
        })
        .collect();
    let set: BTreeSet<String> = rows.iter().cloned().collect();
    assert_eq!(set.len(), rows.len(), "a file twice: {rows:?}");
    compare(
        "docs/development.md's e2e table",
        &set,
        &files_with_tests(),
        "tests/e2e/*.sh defining a test_* function",
    );
}

#[test]
fn a_test_is_found_in_each_of_bashs_forms() {
    for line in [
        "test_x() {",
        "  test_x () {",
        "test_x()",
        "function test_x {",
        "function test_x() {",
        "test_package_x() { # rootfs deb",
    ] {
        assert!(defines_a_test(line), "{line}");
    }
    for line in [
        "      test_x",
        "# test_x() {",
        "run_package_test test_x",
        "functional test_x()",
    ] {
        assert!(!defines_a_test(line), "{line}");
    }
}
