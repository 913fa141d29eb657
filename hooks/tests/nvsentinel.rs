//! The NVSentinel slurm-drain-monitor config we ship
//! (`conf-examples/nvsentinel/slurm-drain-monitor.toml`) against every class
//! of drain reason the code writes (`slurm_imex_gpu::health::reasons`), each
//! reason as the code writes it, alone and as a prolog or epilog gives it to
//! Slurm (`drain::for_job`, ` (job N)`), parsed as the monitor parses it
//! (NVIDIA/NVSentinel health-monitors/slurm-drain-monitor `pkg/parser`:
//! trim, split on `reasonDelimiter`, trim each piece, run every pattern on
//! each): exactly one pattern, the class's own, matches each. A class added
//! to the code without its pattern fails here, and so does a pattern no
//! class matches.
// A test file: its helpers panic on a broken fixture, as its tests do.
#![allow(clippy::unwrap_used)]

use regex::Regex;
use serde::Deserialize;
use slurm_imex_gpu::health::reasons::{reason_classes, ReasonClass};
use slurm_imex_hooks::drain::for_job;
use std::collections::BTreeSet;

/// The monitor's config (`pkg/config/types.go`); a key it does not know is
/// refused here, as a misspelt key would be lost there.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Config {
    reason_delimiter: String,
    patterns: Vec<Pattern>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Pattern {
    name: String,
    regex: String,
    check_name: String,
    component_class: String,
    is_fatal: bool,
    message: String,
    recommended_action: String,
}

/// The RecommendedAction names of NVSentinel's
/// `data-models/protobufs/health_event.proto` in every version (later ones
/// add CUSTOM and REMEDIATE); the monitor refuses to start on another.
const RECOMMENDED_ACTIONS: [&str; 9] = [
    "NONE",
    "COMPONENT_RESET",
    "CONTACT_SUPPORT",
    "RUN_FIELDDIAG",
    "RESTART_VM",
    "RESTART_BM",
    "REPLACE_VM",
    "RUN_DCGMEUD",
    "UNKNOWN",
];

/// The delimiters a reason is split on: the shipped one, and the chart's
/// "; ", which a site may keep for its own patterns.
fn delimiters(config: &Config) -> [&str; 2] {
    [config.reason_delimiter.as_str(), "; "]
}

fn shipped() -> Config {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../conf-examples/nvsentinel/slurm-drain-monitor.toml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    toml::from_str(&text).unwrap()
}

/// The patterns, compiled.
fn compiled(config: &Config) -> Vec<(&Pattern, Regex)> {
    config
        .patterns
        .iter()
        .map(|p| (p, Regex::new(&p.regex).unwrap()))
        .collect()
}

/// The names of the patterns that match the pieces of `reason`, as the
/// monitor's `Parser.Parse` finds them (one per piece and pattern).
fn parse<'a>(patterns: &'a [(&Pattern, Regex)], delimiter: &str, reason: &str) -> Vec<&'a str> {
    let reason = reason.trim();
    let pieces: Vec<&str> = if delimiter.is_empty() {
        vec![reason]
    } else {
        reason.split(delimiter).collect()
    };
    let mut matched = Vec::new();
    for piece in pieces.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
        for (pattern, regex) in patterns {
            if regex.is_match(piece) {
                matched.push(pattern.name.as_str());
            }
        }
    }
    matched
}

/// Every reason of a class: each example alone and for a job.
fn reasons(class: &ReasonClass) -> Vec<String> {
    class
        .examples
        .iter()
        .flat_map(|e| [e.clone(), for_job(e, 7), for_job(e, u32::MAX)])
        .collect()
}

#[test]
fn exactly_one_pattern_the_classs_own_matches_each_reason() {
    let config = shipped();
    let patterns = compiled(&config);
    let mut matched: BTreeSet<&str> = BTreeSet::new();
    let mut wrong = Vec::new();
    for delimiter in delimiters(&config) {
        for class in reason_classes() {
            for reason in reasons(&class) {
                let names = parse(&patterns, delimiter, &reason);
                if names != [class.name.as_str()] {
                    wrong.push(format!(
                        "{delimiter:?} {reason:?}: {names:?}, not [{}]",
                        class.name
                    ));
                }
                matched.extend(names);
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "reasons not matched by their class's pattern alone:\n{}",
        wrong.join("\n")
    );
    let dead: Vec<&str> = config
        .patterns
        .iter()
        .map(|p| p.name.as_str())
        .filter(|name| !matched.contains(name))
        .collect();
    assert!(dead.is_empty(), "patterns no reason matches: {dead:?}");
}

#[test]
fn reasons_not_ours_match_nothing() {
    let config = shipped();
    let patterns = compiled(&config);
    for reason in [
        "Prolog error",
        "Epilog error",
        "Not responding",
        "Kill task failed",
        "[HC] GPU ECC",
        "NHC: check_hw_gpu: imex-health: gpu_lost gpu0",
        "slurm-operator: cordon",
        "imex-health:xid gpu0",
        "imex-health: fabricx gpu0 S: x",
        "imex-health: recovery_action gpu0 S: driver asks for recovery action NONE (0)",
    ] {
        for delimiter in delimiters(&config) {
            let names = parse(&patterns, delimiter, reason);
            assert!(names.is_empty(), "{reason}: {names:?}");
        }
    }
}

/// What the monitor itself refuses (`pkg/config/loader.go`,
/// `initializer.validateRecommendedActions`), and this file's own rules:
/// one pattern per class, named as the class and anchored at our prefix;
/// the reason itself as the message; one check name per class (`SlurmImex`
/// and the class in CamelCase); GPU or NODE; and a fatal event exactly
/// where NVSentinel is to reboot the node.
#[test]
fn every_pattern_is_one_the_monitor_takes_and_keeps_this_files_rules() {
    let config = shipped();
    assert_eq!(config.reason_delimiter, "", "reasonDelimiter");
    let mut names = BTreeSet::new();
    let mut check_names = BTreeSet::new();
    for p in &config.patterns {
        assert!(names.insert(p.name.clone()), "pattern {} twice", p.name);
        assert!(
            check_names.insert(&p.check_name),
            "checkName {} twice",
            p.check_name
        );
        let camel: String = p.name.split(['_', '.']).map(capitalized).collect();
        assert_eq!(p.check_name, format!("SlurmImex{camel}"), "{}", p.name);
        assert!(
            p.regex.starts_with("^imex-health: "),
            "{}: anchored",
            p.name
        );
        assert!(
            ["GPU", "NODE"].contains(&p.component_class.as_str()),
            "{}",
            p.name
        );
        let action = p.recommended_action.as_str();
        assert!(
            RECOMMENDED_ACTIONS.contains(&action),
            "{}: {action}",
            p.name
        );
        assert!(
            ["RESTART_BM", "CONTACT_SUPPORT", "NONE"].contains(&action),
            "{}: {action}",
            p.name
        );
        assert_eq!(p.is_fatal, action == "RESTART_BM", "{}: isFatal", p.name);
        assert_eq!(
            p.message, "",
            "{}: the reason itself is the message",
            p.name
        );
    }
    let classes: BTreeSet<String> = reason_classes().into_iter().map(|c| c.name).collect();
    assert_eq!(names, classes, "one pattern per class, named as the class");
}

/// `GPU_RESET` as `Gpu` + `Reset`'s first word: `Gpu`.
fn capitalized(word: &str) -> String {
    let lower = word.to_ascii_lowercase();
    let mut chars = lower.chars();
    match chars.next() {
        Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
        None => String::new(),
    }
}

/// Go's regexp (RE2) and the regex crate read a common subset alike: ASCII
/// classes written out (`\d`, `\w`, `\s`, `\b` and `\pN` are Unicode-aware
/// in the regex crate, ASCII or absent in Go), no flags or groups with `(?`,
/// and no backreference (neither has them).
#[test]
fn every_regex_keeps_to_what_go_and_rust_read_alike() {
    for p in &shipped().patterns {
        for not_common in ["\\d", "\\w", "\\s", "\\b", "\\p", "(?", "\\1"] {
            assert!(
                !p.regex.contains(not_common),
                "{}: {not_common} in {}",
                p.name,
                p.regex
            );
        }
    }
}
