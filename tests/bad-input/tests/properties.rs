//! Property tests for every parser and every computation on outside
//! values: whatever the input, no panic, results within their bounds, and
//! where the input is well-formed, the answer Slurm or the driver would
//! give. Case counts are bounded for CI (PROPTEST_CASES overrides).

use proptest::prelude::*;
use slurm_imex_core::channel::{channel_for_job, parse_channel_major};
use slurm_imex_core::slurm::hostlist;
use slurm_imex_core::text::{cap, summarize_list};
use slurm_imex_core::timespec::{format_ts, parse_point};
use slurm_imex_domain::imex::ctl::{assess, parse_domain_json, parse_domain_text, parse_query};
use slurm_imex_domain::imex::daemon_config::DaemonConfigFile;
use slurm_imex_domain::imex::daemon_proc::{parse_stat, ProcId};
use slurm_imex_domain::imex::port::server_port;
use slurm_imex_gpu::xid;
use slurm_imex_settings::Config;
use std::path::Path;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(256),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn sample(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../data/samples")
            .join(name),
    )
    .unwrap()
}

/// Printable text plus the characters that break naive parsers.
fn nasty() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[ -~\t\n\r\u{0}\u{7f}é\u{1b}\\[\\],:{}\"-]{0,200}").unwrap()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn hostlist_never_panics_and_respects_the_bound(s in nasty(), max in 1usize..5000) {
        if let Ok(hosts) = hostlist::expand(&s, max) {
            prop_assert!(hosts.len() <= max);
            for h in &hosts {
                prop_assert!(!h.is_empty());
                prop_assert!(h.chars().all(|c| c.is_ascii_alphanumeric() || "-._".contains(c)), "{h:?}");
            }
        }
        if let Err(e) = hostlist::expand(&s, max) {
            prop_assert!(!e.to_string().contains('\n'));
            prop_assert!(e.to_string().len() < 4200);
        }
    }

    #[test]
    fn hostlist_ranges_expand_like_slurm(prefix in "[a-z]{1,6}", lo in 0u32..500, n in 1u32..40, width in 1usize..5) {
        let hi = lo + n - 1;
        let expr = format!("{prefix}[{lo:0width$}-{hi}]");
        let hosts = hostlist::expand(&expr, 10_000).unwrap();
        prop_assert_eq!(hosts.len() as u32, n);
        for (i, h) in hosts.iter().enumerate() {
            prop_assert_eq!(h, &format!("{prefix}{:0width$}", lo + i as u32));
        }
    }

    #[test]
    fn ctl_output_parsers_never_panic(s in nasty()) {
        let _ = parse_domain_json(&s);
        let _ = parse_domain_text(&s);
        let _ = parse_query(&s);
        if let Err(e) = parse_domain_json(&s) {
            prop_assert!(e.to_string().len() < 4200);
        }
    }

    #[test]
    fn ctl_json_with_any_values_is_judged_not_crashed(status in nasty(), idx in any::<i64>(), peer in any::<i64>(), n in 0usize..100, local in 0usize..100) {
        let json = serde_json::json!({
            "status": status,
            "nodes": { idx.to_string(): { "status": "READY", "connections": { peer.to_string(): "CONNECTED" } } }
        }).to_string();
        if let Ok(s) = parse_domain_json(&json) {
            let _ = assess(&s, n, local);
        }
    }

    #[test]
    fn mutated_published_ctl_outputs_never_panic(cut in 0usize..4000, junk in nasty()) {
        for name in ["imex-ctl-N-j-1.json", "imex-ctl-N-j-2.json", "imex-ctl-N-1.txt", "imex-ctl-N-2.txt", "imex-ctl-q.txt"] {
            let s = sample(name);
            let mut at = cut.min(s.len());
            while !s.is_char_boundary(at) { at -= 1; }
            let mutated = format!("{}{junk}{}", &s[..at], &s[at..]);
            let _ = parse_domain_json(&mutated);
            let _ = parse_domain_text(&mutated);
            let _ = parse_query(&mutated);
        }
    }

    #[test]
    fn kernel_log_lines_never_panic(s in nasty(), seq in any::<u64>()) {
        let line = format!("3,{seq},1,-;NVRM: Xid (PCI:{s}): {s}");
        let _ = xid::parse_line(&line, seq);
        let _ = xid::parse_line(&s, seq);
        let _ = xid::normalise_pci(&s);
        let _ = xid::classify(seq as u32);
    }

    #[test]
    fn proc_devices_and_stat_never_panic(s in nasty()) {
        let _ = parse_channel_major(&s);
        let _ = parse_stat(&s);
        let _ = ProcId::parse(&s);
        let d = DaemonConfigFile::parse(&s);
        let _ = d.cmd_port(Path::new("x"));
        let _ = d.render();
    }

    #[test]
    fn config_text_never_panics_and_errors_are_one_line(s in nasty()) {
        if let Err(e) = Config::parse(&s, Path::new("/etc/slurm/imex.toml")) {
            let line = e.to_string();
            prop_assert!(!line.contains('\n'));
            prop_assert!(line.contains("/etc/slurm/imex.toml"));
        }
    }

    #[test]
    fn config_numbers_of_any_size_are_bounded_or_refused(key in prop::sample::select(vec![
        "imex.max_nodes", "imex.ready_timeout", "imex.channel_count", "imex.port_base", "imex.port_span",
        "health.gate_timeout", "health.expected_gpus", "database.busy_timeout", "database.retention",
        "imex.daemon.stop_timeout", "imex.daemon.ctl_timeout", "health.scontrol_timeout",
        "slurm.scontrol_timeout"]), v in any::<i64>()) {
        let (section, name) = key.rsplit_once('.').unwrap();
        let text = format!("[{section}]\n{name} = {v}\n");
        if let Ok(c) = Config::parse(&text, Path::new("t.toml")) {
            prop_assert!(c.engine.max_nodes >= 1 && c.engine.max_nodes <= 16384);
            prop_assert!(c.engine.ready_timeout.0.as_secs() <= 3600);
            prop_assert!(c.health.gate_timeout.0.as_secs() <= 600);
            prop_assert!(c.database.busy_timeout.0.as_secs() <= 600);
            prop_assert!(c.database.retention.0.as_secs() <= 36500 * 86400);
        } else {
            let e = Config::parse(&text, Path::new("t.toml")).unwrap_err().to_string();
            prop_assert!(e.contains(name), "{e}");
        }
    }

    #[test]
    fn time_points_never_overflow(s in nasty(), n in any::<u64>(), unit in prop::sample::select(vec!["s", "m", "h", "d", "y"]), now in 0i64..4_000_000_000) {
        let _ = parse_point(&s, now, "--since");
        if let Ok(t) = parse_point(&format!("{n}{unit}"), now, "--since") {
            prop_assert!(t >= 0 && t <= now);
        }
    }

    #[test]
    fn any_stored_timestamp_prints(ts in any::<i64>()) {
        let s = format_ts(ts);
        prop_assert!(!s.is_empty());
    }

    #[test]
    fn ports_and_channels_stay_in_range(job in any::<u32>(), base in 1u16..=65535, span in 1u16..=65535, count in 2u32..=(1 << 20)) {
        if base as u32 + span as u32 - 1 <= 65535 {
            let p = server_port(job, base, span, None);
            prop_assert!(p >= base && (p as u32) < base as u32 + span as u32);
        }
        let c = channel_for_job(job, count);
        prop_assert!(c >= 1 && c < count);
    }

    #[test]
    fn caps_are_bounded(s in ".{0,3000}", max in 0usize..2000, items in prop::collection::vec("[a-z0-9]{0,40}", 0..300)) {
        prop_assert!(cap(&s, max).len() <= max + 40);
        prop_assert!(summarize_list(&items, max).len() <= max + 60);
    }
}
