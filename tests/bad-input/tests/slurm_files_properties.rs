//! Property tests for reading Slurm's files as Slurm reads them (issue 25):
//! numbers as strtoul(…, 0) reads them, slurm.conf keys in any case and
//! values in quotes, cliques in any spelling, a node's Extra beside any
//! text, topology files of any shape, and the rack map `--map` writes.
//! Whatever the input: no panic, one-line errors, and where the input is
//! well-formed, Slurm's answer.

use proptest::prelude::*;
use slurm_imex_core::slurm::conf::SlurmConf;
use slurm_imex_core::slurm::node::parse_node_line;
use slurm_imex_core::slurm::number::parse_u32;
use slurm_imex_domain::rack::clique::{canonical, clique_in_extra, is_clique};
use slurm_imex_domain::rack::map::{self as rack_map, RackMap};
use slurm_imex_domain::rack::topology::Blocks;
use std::path::Path;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(128),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn nasty() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[ -~\t\n\r\u{0}\u{7f}é\u{1b}\\[\\],:{}\"#=\\\\-]{0,200}")
        .unwrap()
}

/// Any case of an ASCII word.
fn any_case(word: &'static str) -> impl Strategy<Value = String> {
    prop::collection::vec(any::<bool>(), word.len()).prop_map(move |upper| {
        word.chars()
            .zip(upper)
            .map(|(c, u)| {
                if u {
                    c.to_ascii_uppercase()
                } else {
                    c.to_ascii_lowercase()
                }
            })
            .collect()
    })
}

fn read_conf(text: &str) -> Result<SlurmConf, String> {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("slurm.conf");
    std::fs::write(&p, text).unwrap();
    SlurmConf::read(&p).map_err(|e| e.to_string())
}

proptest! {
    #![proptest_config(config())]

    /// strtoul(…, 0): decimal, 0-prefixed octal and 0x hex of one number
    /// are that number; a k suffix is 1024 times it, or refused above 2^32-1.
    #[test]
    fn numbers_in_every_base_slurm_takes_read_the_same(n in any::<u32>(), upper in any::<bool>()) {
        let hex = if upper { format!("0X{n:X}") } else { format!("0x{n:x}") };
        for text in [n.to_string(), format!("0{n:o}"), hex, format!("+{n}")] {
            prop_assert_eq!(parse_u32("MaxJobId", &text), Ok(n), "{}", text);
        }
        let k = format!("{n}k");
        match u32::try_from(u64::from(n) * 1024) {
            Ok(v) => prop_assert_eq!(parse_u32("MaxJobId", &k), Ok(v)),
            Err(_) => prop_assert!(parse_u32("MaxJobId", &k).unwrap_err().to_string().contains("greater than 4294967295")),
        }
    }

    #[test]
    fn any_number_text_is_read_or_refused_in_one_line(s in nasty()) {
        if let Err(e) = parse_u32("FirstJobId", &s) {
            let e = e.to_string();
            prop_assert!(e.starts_with("FirstJobId value ("), "{}", e);
        }
    }

    /// Keys in any case, blanks around `=`, a value in quotes or not, a
    /// comment after it: slurmctld reads one value, and so do we.
    #[test]
    fn slurm_conf_values_read_as_slurm_reads_them(
        key in any_case("MaxJobId"),
        n in 1u32..0x03ff_ffff,
        quoted in any::<bool>(),
        blanks in "[ \t]{0,3}",
        comment in "[ -~]{0,20}",
        include in any_case("include"),
        sep in "[ \t]{1,3}",
    ) {
        let value = if quoted { format!("\"{n}\"") } else { n.to_string() };
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("ids.conf"),
            format!("{key}{blanks}={blanks}{value}{blanks}#{comment}\n"),
        ).unwrap();
        let p = d.path().join("slurm.conf");
        std::fs::write(&p, format!("{include}{sep}ids.conf\n")).unwrap();
        let conf = SlurmConf::read(&p).unwrap();
        prop_assert_eq!(conf.job_id_range(), Ok((1, n)));
    }

    #[test]
    fn any_slurm_conf_text_is_read_or_refused_in_one_line(s in nasty()) {
        match read_conf(&s) {
            Ok(conf) => if let Err(e) = conf.job_id_range().map_err(|e| e.to_string()) {
                prop_assert!(!e.contains('\n') && e.contains("slurmctld refuses"), "{}", e);
            },
            Err(e) => prop_assert!(!e.contains('\n'), "{}", e),
        }
    }

    /// Every spelling of a clique (UUID case, leading zeros, a `+`) has one
    /// canonical form, which is a clique and its own canonical form.
    #[test]
    fn a_clique_has_one_spelling(
        uuid in "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[1-9a-f][0-9a-f]{11}",
        id in 1u32..u32::MAX,
        zeros in 0usize..4,
        plus in any::<bool>(),
    ) {
        let spelled = format!("{}.{}{}{id}", uuid.to_ascii_uppercase(), if plus { "+" } else { "" }, "0".repeat(zeros));
        let one = canonical(&spelled).unwrap();
        prop_assert_eq!(&one, &format!("{uuid}.{id}"));
        prop_assert!(is_clique(&one));
        prop_assert_eq!(canonical(&one), Some(one.clone()));
        prop_assert_eq!(is_clique(&spelled), !plus && zeros == 0 && spelled == one);
    }

    /// Our key survives any text an admin puts beside it in Extra, when the
    /// node is read back from `scontrol show node -o`.
    #[test]
    fn our_key_survives_any_text_beside_it_in_extra(note in nasty(), other in nasty()) {
        let clique = "dc6e40c4-d722-4357-9ba6-5291dd461278.7";
        let extra = serde_json::json!({"note": note, "nvlink_clique": clique, "other": other}).to_string();
        let line = format!("NodeName=n1 Arch=x86_64 State=IDLE Comment=(null) Extra={extra} Partitions=p Reason=gone [root@2026-11-24T01:00:00]");
        let node = parse_node_line(&line).unwrap();
        prop_assert_eq!(node.extra.as_deref(), Some(extra.as_str()));
        let read = clique_in_extra(node.extra.as_deref());
        prop_assert_eq!(read.as_deref(), Some(clique));
    }

    #[test]
    fn node_lines_never_panic(s in nasty()) {
        let _ = parse_node_line(&s);
        let _ = parse_node_line(&format!("NodeName=n1 State=IDLE Extra={s}"));
    }

    /// Any topology text: loaded, or refused in one line; never a panic.
    #[test]
    fn topology_files_are_loaded_or_refused_in_one_line(s in nasty(), yaml in any::<bool>()) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(if yaml { "topology.yaml" } else { "topology.conf" });
        std::fs::write(&p, &s).unwrap();
        if let Err(e) = Blocks::load(&p, 4096) {
            prop_assert!(!e.to_string().contains('\n'), "{}", e);
        }
    }

    /// Racks of any size and name the topology parser accepts: what
    /// `--map` renders, the prolog's loader reads back, node for node.
    #[test]
    fn a_rendered_map_loads_back(racks in prop::collection::vec(("[a-z0-9._:-]{1,20}", 1u32..40), 1..30)) {
        let mut seen = std::collections::HashSet::new();
        let racks: Vec<(String, String, String)> = racks
            .into_iter()
            .enumerate()
            .filter(|(_, (name, _))| seen.insert(name.clone()))
            .map(|(i, (name, size))| {
                (name, format!("dc6e40c4-d722-4357-9ba6-5291dd461278.{}", i + 1), format!("r{i}n[1-{size}]"))
            })
            .collect();
        let text = rack_map::render(&racks, "in a property test");
        let map = RackMap::parse(Path::new("m.toml"), text.into_bytes(), 4096).unwrap();
        prop_assert_eq!(map.racks().len(), racks.len());
        for (name, clique, nodes) in &racks {
            // "r3n[1-7]": its first node is r3n1.
            let first = format!("{}1", nodes.split('[').next().unwrap());
            let rack = map.rack_of(&first).unwrap();
            prop_assert_eq!(&rack.name, name);
            prop_assert_eq!(&rack.clique, clique);
        }
    }
}
