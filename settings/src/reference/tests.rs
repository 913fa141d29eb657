//! The settings reference held to the code: each section's key table to
//! its struct, the reference to the file's sections, and the shipped
//! imex.toml and docs/settings.md to the reference.

use super::*;
use crate::File;
use slurm_imex_core::config::field_names;
use std::collections::BTreeSet;

/// Each section's table says every key serde reads, and no other, with
/// the code's defaults.
#[test]
fn every_key_is_documented_beside_its_struct_with_the_codes_default() {
    let problems: Vec<String> = sections()
        .iter()
        .filter_map(|s| (s.check)().err())
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The reference's tables are the file's: its sections (the whole file's
/// reader's) and `[imex]`'s subtables (the engine's).
#[test]
fn the_reference_covers_every_table_of_the_file() {
    let listed: BTreeSet<&str> = sections().iter().map(|s| s.table).collect();
    let engine = toml::Table::try_from(EngineConfig::default()).unwrap();
    let subtables = engine
        .iter()
        .filter(|(_, v)| v.is_table())
        .map(|(k, _)| format!("imex.{k}"));
    let file: BTreeSet<String> = field_names::<File>()
        .iter()
        .map(|s| s.to_string())
        .chain(subtables)
        .collect();
    let listed: BTreeSet<String> = listed.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        listed, file,
        "settings::reference::sections() against the file"
    );
}

/// docs/settings.md is the reference as the code renders it.
#[test]
fn docs_settings_md_is_the_reference_the_code_renders() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/settings.md");
    let want = markdown();
    if std::env::var_os("UPDATE_SETTINGS_REFERENCE").is_some() {
        std::fs::write(path, &want).unwrap();
    }
    let have = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        have == want,
        "docs/settings.md is not the reference the code renders: run \
         UPDATE_SETTINGS_REFERENCE=1 cargo test -p slurm-imex-settings reference \
         (or slurm-imex config --reference > docs/settings.md)"
    );
}

/// The keys conf-examples/imex.toml names, by table: each `key = value`
/// line, and each key shown commented out as `#key = value` (an optional
/// key, unset by default); a comment's prose starts `# `.
fn keys_in_example(text: &str) -> BTreeSet<(String, String)> {
    let mut table = String::new();
    let mut keys = BTreeSet::new();
    for line in text.lines() {
        if let Some(header) = line.strip_prefix('[') {
            table = header.trim_end_matches(']').to_string();
            continue;
        }
        let key_line = line.strip_prefix('#').unwrap_or(line);
        if key_line.starts_with(' ') || key_line.is_empty() {
            continue;
        }
        if let Some((key, _)) = key_line.split_once(" = ") {
            keys.insert((table.clone(), key.to_string()));
        }
    }
    keys
}

/// Every key the code reads is in conf-examples/imex.toml (set to its
/// default, or shown commented out when unset by default), and every key
/// it names is one the code reads. (`shipped_example_parses_and_equals_defaults`
/// holds the values it sets to the code's defaults.)
#[test]
fn conf_examples_imex_toml_names_every_key_the_code_reads_and_no_other() {
    let text = include_str!("../../../conf-examples/imex.toml");
    let example = keys_in_example(text);
    let code: BTreeSet<(String, String)> = sections()
        .iter()
        .flat_map(|s| {
            s.keys
                .iter()
                .map(|k| (s.table.to_string(), k.name.to_string()))
        })
        .collect();
    let missing: Vec<String> = code
        .difference(&example)
        .map(|(t, k)| format!("conf-examples/imex.toml lacks [{t}] {k}, which the code reads"))
        .collect();
    let extra: Vec<String> = example
        .difference(&code)
        .map(|(t, k)| format!("conf-examples/imex.toml names [{t}] {k}, which no code reads"))
        .collect();
    let problems = [missing, extra].concat();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_example_reader_finds_set_and_commented_keys_and_skips_prose() {
    let keys = keys_in_example("# a = b is prose\n[t]\nx = 1\n#y = \"z\"\n# w = 2\n");
    let want: BTreeSet<(String, String)> = [("t", "x"), ("t", "y")]
        .into_iter()
        .map(|(t, k)| (t.to_string(), k.to_string()))
        .collect();
    assert_eq!(keys, want);
}
