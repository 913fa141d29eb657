//! The stage budgets of docs/development.md ("Stage budgets") are the ones
//! tests/run-all.sh's table is held to (tests/stage-table.sh): every stage
//! run-all.sh times and every e2e phase (tests/e2e/phases.sh) has its row,
//! and no row names a stage that no longer exists.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is its failure

use std::collections::BTreeSet;
use std::path::Path;

fn read(path: &str) -> String {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    std::fs::read_to_string(repo.join(path)).unwrap()
}

/// The stage names of the doc's budget table (its rows' first cell).
fn budget_rows() -> BTreeSet<String> {
    let doc = read("docs/development.md");
    let section = doc
        .split("### Stage budgets")
        .nth(1)
        .expect("docs/development.md has a Stage budgets section");
    let section = section.split("\n#").next().unwrap();
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(String::from)
        .collect()
}

/// The names run-all.sh gives its stages (`stage "NAME" …`).
fn timed_stages() -> BTreeSet<String> {
    read("tests/run-all.sh")
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("stage \""))
        .filter_map(|l| l.split('"').next())
        .map(String::from)
        .collect()
}

/// Every e2e phase (phases.sh's PHASES).
fn phases() -> Vec<String> {
    let text = read("tests/e2e/phases.sh");
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("PHASES=\""))
        .expect("phases.sh sets PHASES");
    line.trim_end_matches('"')
        .split_whitespace()
        .map(String::from)
        .collect()
}

#[test]
fn every_stage_and_phase_has_a_budget() {
    let rows = budget_rows();
    let stages = timed_stages();
    assert!(stages.len() >= 10, "{stages:?}");
    for stage in &stages {
        assert!(rows.contains(stage), "no budget row for stage `{stage}`");
    }
    for phase in phases() {
        let row = format!("e2e {phase}");
        assert!(rows.contains(&row), "no budget row `{row}`");
    }
    for row in ["whole run", "e2e arm64 native", "background: Slurm build"] {
        assert!(rows.contains(row), "no budget row `{row}`");
    }
}

#[test]
fn no_budget_names_a_stage_that_is_gone() {
    let stages = timed_stages();
    let phases = phases();
    for row in budget_rows() {
        let known = stages.contains(&row)
            || row == "whole run"
            || row.starts_with("background: ")
            || row == "e2e arm64 native"
            || row
                .strip_prefix("e2e ")
                .is_some_and(|p| phases.iter().any(|q| q == p));
        assert!(
            known,
            "budget row `{row}` names no stage run-all.sh or versions.sh times"
        );
    }
}
