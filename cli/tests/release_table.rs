//! The table of Slurm releases (scripts/slurm-releases) is the one list the
//! builds, packages and the e2e matrix read (scripts/releases.sh): the .deb
//! variants cargo-deb reads from this crate's manifest are written from it
//! (`scripts/releases.sh sync`), and must not drift from it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is its failure

use std::path::Path;
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

fn releases_sh(args: &[&str]) -> std::process::Output {
    Command::new("bash")
        .arg(repo().join("scripts/releases.sh"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_deb_variants_are_what_the_release_table_makes() {
    let out = releases_sh(&["check"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What the table says of each release: (release, deb column).
fn table() -> Vec<(String, String)> {
    let listed = String::from_utf8(releases_sh(&["list"]).stdout).unwrap();
    let text = std::fs::read_to_string(repo().join("scripts/slurm-releases")).unwrap();
    listed
        .lines()
        .map(|release| {
            let line = text
                .lines()
                .find(|l| l.split_whitespace().next() == Some(release))
                .unwrap();
            let deb = line.split_whitespace().nth(3).unwrap();
            (release.to_string(), deb.to_string())
        })
        .collect()
}

#[test]
fn every_packaged_release_has_a_variant_and_no_other_does() {
    let manifest = std::fs::read_to_string(repo().join("cli/Cargo.toml")).unwrap();
    let table = table();
    assert!(table.len() >= 8, "{table:?}");
    for (release, deb) in &table {
        let header = format!(
            "[package.metadata.deb.variants.slurm{}]",
            release.replace('.', "-")
        );
        assert_eq!(
            manifest.contains(&header),
            deb != "none",
            "{release} ({deb})"
        );
    }
    let variants = manifest.matches("[package.metadata.deb.variants.").count();
    let packaged = table.iter().filter(|(_, deb)| deb != "none").count();
    assert_eq!(variants, packaged);
}
