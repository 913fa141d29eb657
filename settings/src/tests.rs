//! The whole file: the tests that read more than the plugin's sections.

use super::*;
use slurm_imex_domain::config::{AddressSource, DaemonManager, SharedNodes};
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
    assert_eq!(c.engine.port_base, 33792);
    assert_eq!(c.engine.port_span.0, 16384);
    assert_eq!(c.engine.ready_timeout.0, Duration::from_secs(60));
    assert_eq!(c.engine.daemon.manager, DaemonManager::Systemd);
    assert_eq!(c.engine.addresses.source, AddressSource::Dns);
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

// Moved here with `[imex]`'s engine keys from core, whose parse (the
// plugin's) no longer reads them: the programs' load says the same.

#[test]
fn shared_nodes_is_exclusive_or_refuse_and_a_bad_value_names_its_line() {
    assert_eq!(
        parse("").unwrap().engine.shared_nodes,
        SharedNodes::Exclusive
    );
    let c = parse("[imex]\nshared_nodes = \"refuse\"\n").unwrap();
    assert_eq!(c.engine.shared_nodes, SharedNodes::Refuse);
    let e = parse("[imex]\n\nshared_nodes = \"share\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("bad config /etc/slurm/imex.toml:3: [imex] shared_nodes"),
        "{e}"
    );
}

#[test]
fn values_are_read() {
    let c = parse(
        "[imex]\nready_timeout = \"750ms\"\nchannel_count = 16\n[imex.daemon]\nmanager = \"process\"\n\
         [imex.addresses]\nsource = \"map\"\nmap_file = \"/x.toml\"\n",
    )
    .unwrap();
    assert_eq!(c.engine.ready_timeout.0, Duration::from_millis(750));
    assert_eq!(c.imex.channel_count.0, 16);
    assert_eq!(c.engine.daemon.manager, DaemonManager::Process);
    assert_eq!(c.engine.addresses.source, AddressSource::Map);
    let c = parse("[imex]\nready_timeout = 5\n").unwrap();
    assert_eq!(c.engine.ready_timeout.0, Duration::from_secs(5));
}

#[test]
fn unknown_key_names_file_line_and_key() {
    let e = parse("[imex]\nchannel_count = 8\nchanel_dir = \"/x\"\n").unwrap_err();
    let s = e.to_string();
    assert!(s.contains("/etc/slurm/imex.toml:3"), "{s}");
    assert!(s.contains("chanel_dir"), "{s}");
    assert!(!s.contains('\n'));
    // A key either reader of [imex] knows is no unknown key.
    assert!(parse("[imex]\nchannel_count = 8\nport_base = 40000\n").is_ok());
}

#[test]
fn bad_values_name_line_and_what_to_do() {
    let e = parse("\n[imex]\nchannel_count = 1\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains(":3") && e.contains("channel_count = 1"), "{e}");
    let e = parse("[imex]\nready_timeout = \"soon\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains(":2") && e.contains("not a duration"), "{e}");
    let e = parse("[imex.daemon]\nmanager = \"upstart\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains(":2") && e.contains("upstart"), "{e}");
    let e = parse("[imex]\nport_base = 60000\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("port_base") && e.contains("65535"), "{e}");
    let e = parse("[imex]\nstate_dir = \"run\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("[imex] state_dir") && e.contains("absolute"),
        "{e}"
    );
    let e = parse("[imex\n").unwrap_err().to_string();
    assert!(e.contains("imex.toml:1"), "{e}");
}
