//! The whole file: the tests that read more than the plugin's sections.

use super::*;
use slurm_imex_core::config::{AddressSource, DaemonManager};
use std::time::Duration;

fn parse(t: &str) -> Result<Config> {
    Config::parse(t, Path::new("/etc/slurm/imex.toml"))
}

#[test]
fn scontrol_moved_to_slurm_and_the_old_keys_still_work() {
    let c = parse("[health]\nscontrol = \"/opt/slurm/bin/scontrol\"\nscontrol_timeout = \"20s\"\n")
        .unwrap();
    assert_eq!(c.slurm.scontrol, Path::new("/opt/slurm/bin/scontrol"));
    assert_eq!(c.slurm.scontrol_timeout.0, Duration::from_secs(20));
    assert_eq!(
        (c.health.scontrol.clone(), c.health.scontrol_timeout),
        (None, None)
    );
    assert_eq!(
        c.deprecations,
        [
            "/etc/slurm/imex.toml:2: [health] scontrol is deprecated: rename it to [slurm] scontrol (same meaning)",
            "/etc/slurm/imex.toml:3: [health] scontrol_timeout is deprecated: rename it to [slurm] scontrol_timeout (same meaning)",
        ]
    );
    let c = parse("[slurm]\nscontrol = \"/x\"\n").unwrap();
    assert_eq!(c.slurm.scontrol, Path::new("/x"));
    assert!(c.deprecations.is_empty());
    let same = "[slurm]\nscontrol = \"/x\"\n[health]\nscontrol = \"/x\"\n";
    assert_eq!(parse(same).unwrap().slurm.scontrol, Path::new("/x"));
    let e = parse("[slurm]\nscontrol_timeout = \"5s\"\n[health]\nscontrol_timeout = \"9s\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("imex.toml:4") && e.contains("disagree") && e.contains("\"9s\""),
        "{e}"
    );
}

#[test]
fn empty_file_gives_contract_defaults() {
    let c = parse("").unwrap();
    assert_eq!(c, Config::default());
    assert_eq!(c.imex.channel_count.0, 2048);
    assert_eq!(c.imex.port_base, 33792);
    assert_eq!(c.imex.port_span.0, 16384);
    assert_eq!(c.imex.ready_timeout.0, Duration::from_secs(60));
    assert_eq!(c.imex.daemon.manager, DaemonManager::Systemd);
    assert_eq!(c.imex.addresses.source, AddressSource::Dns);
    assert_eq!(
        c.database.path,
        PathBuf::from("/var/lib/slurm-imex/jobs.db")
    );
}

#[test]
fn shipped_example_parses_and_equals_defaults() {
    let text = include_str!("../../conf-examples/imex.toml");
    let c = parse(text).unwrap();
    assert_eq!(
        c,
        Config::default(),
        "conf-examples/imex.toml must document the defaults"
    );
}

#[test]
fn a_url_is_checked_when_the_file_is_read() {
    let e = parse("[job]\n\nprometheus_url = \"host:9090\"\n")
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "bad config /etc/slurm/imex.toml:3: [job] prometheus_url = \"host:9090\" has no scheme: \
         write \"http://host:9090\" or \"https://host:9090\""
    );
    let c = parse("[job]\nprometheus_url = \"http://prom:9090\"\n").unwrap();
    assert_eq!(c.job.prometheus_url, "http://prom:9090");
}

#[test]
fn a_bad_key_in_any_section_or_an_unknown_section_names_its_line() {
    let e = parse("[imex]\nport_base = 1\n[gpu]\nnvml_libary = \"x\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("imex.toml:4") && e.contains("nvml_libary"),
        "{e}"
    );
    let e = parse("[database]\n\nretention = \"5m\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(
            "bad config /etc/slurm/imex.toml:3: [database] retention = 5m is out of range"
        ),
        "{e}"
    );
    let e = parse("[node]\n[metric]\njob_series = 1\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("imex.toml:2") && e.contains("metric"), "{e}");
}

#[test]
fn the_stores_tls_and_credentials_are_checked_when_the_file_is_read() {
    let head = "[job]\nprometheus_url = \"https://prom:9090\"\n";
    for (body, line, key, says) in [
        ("prometheus_ca_file = \"ca.pem\"\n", 3, "prometheus_ca_file = \"ca.pem\"", "must be an absolute path"),
        ("prometheus_ca_file = 5\n", 3, "prometheus_ca_file: invalid type", "conf-examples/imex.toml"),
        ("\nprometheus_password_file = \"/etc/slurm/p\"\n", 4, "prometheus_password_file = \"/etc/slurm/p\"", "needs [job] prometheus_user"),
        ("prometheus_user = \"imex\"\n", 3, "prometheus_user = \"imex\"", "needs [job] prometheus_password_file"),
        ("prometheus_user = \"a:b\"\nprometheus_password_file = \"/p\"\n", 3, "prometheus_user = \"a:b\"", "':'"),
        ("prometheus_bearer_token_file = \"t\"\n", 3, "prometheus_bearer_token_file = \"t\"", "absolute path"),
        ("prometheus_user = \"u\"\nprometheus_password_file = \"/p\"\nprometheus_bearer_token_file = \"/t\"\n", 5, "prometheus_bearer_token_file = \"/t\"", "keep one"),
    ] {
        let e = parse(&format!("{head}{body}")).unwrap_err().to_string();
        let start = format!("bad config /etc/slurm/imex.toml:{line}: [job] {key}");
        assert!(e.starts_with(&start), "{start}\n{e}");
        assert!(e.contains(says), "{e}");
    }
    let e = parse(
        "[job]\nprometheus_url = \"http://prom:9090\"\nprometheus_bearer_token_file = \"/t\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("bad config /etc/slurm/imex.toml:3: [job] prometheus_bearer_token_file = \"/t\" but [job] prometheus_url is \"http://prom:9090\", plain http"),
        "{e}"
    );
    let e = parse("[job]\nprometheus_url = \"https://imex:s3cret@prom\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        !e.contains("s3cret") && e.contains("never in the URL"),
        "{e}"
    );
    let c = parse(&format!("{head}prometheus_ca_file = \"/etc/slurm/ca.pem\"\n\nprometheus_user = \"imex\"\nprometheus_password_file = \"/etc/slurm/p\"\n")).unwrap();
    assert_eq!(c.job.prometheus_user, "imex");
    assert_eq!(
        c.place_of("job.prometheus_password_file"),
        "/etc/slurm/imex.toml:6"
    );
    assert_eq!(
        c.place_of("job.prometheus_bearer_token_file"),
        "/etc/slurm/imex.toml"
    );
}
