//! Bad config files: wrong types, out-of-range values, syntax errors, and
//! files or programs root must not trust. Each case goes through the admin
//! CLI and the prolog; both must refuse it with one line naming the file
//! (and line and key where there is one) and the fix, and never panic.

mod common;
use common::*;
use std::path::Path;

/// (config text, what the one line must name)
const VALUE_CASES: &[(&str, &[&str])] = &[
    (
        "[imex]\nready_timeout = true\n",
        &[":2", "[imex] ready_timeout", "not a duration"],
    ),
    (
        "[imex]\nready_timeout = \"many\"\n",
        &[":2", "[imex] ready_timeout", "\"many\""],
    ),
    (
        "[imex]\nready_timeout = -5\n",
        &[":2", "[imex] ready_timeout", "negative"],
    ),
    (
        "[imex]\nready_timeout = 1.5\n",
        &[":2", "[imex] ready_timeout", "not a duration"],
    ),
    (
        "[imex]\nready_timeout = []\n",
        &[":2", "[imex] ready_timeout"],
    ),
    (
        "[imex]\nready_timeout = \"0s\"\n",
        &[":2", "[imex] ready_timeout", "out of range"],
    ),
    (
        "[imex]\nready_timeout = \"1000000h\"\n",
        &[":2", "[imex] ready_timeout", "1h"],
    ),
    (
        "[imex]\nready_timeout = \"99999999999999999999s\"\n",
        &[":2", "[imex] ready_timeout"],
    ),
    (
        "[imex]\nready_timeout = 9223372036854775807\n",
        &[":2", "[imex] ready_timeout", "out of range"],
    ),
    (
        "[imex]\nready_poll_max = \"0ms\"\n",
        &[":2", "[imex] ready_poll_max"],
    ),
    (
        "[imex]\nready_poll_max = \"2h\"\n",
        &[":2", "[imex] ready_poll_max"],
    ),
    (
        "[imex]\nchannel_count = \"x\"\n",
        &[":2", "[imex] channel_count"],
    ),
    (
        "[imex]\nchannel_count = 1\n",
        &[":2", "channel_count", "between 2 and"],
    ),
    (
        "[imex]\nchannel_count = 9999999999\n",
        &[":2", "channel_count"],
    ),
    ("[imex]\nport_base = 70000\n", &[":2", "[imex] port_base"]),
    ("[imex]\nport_base = -1\n", &[":2", "[imex] port_base"]),
    ("[imex]\nport_base = 0\n", &[":2", "port_base", "65535"]),
    ("[imex]\nport_base = 60000\n", &[":2", "port_base", "65535"]),
    ("[imex]\nport_span = 0\n", &[":2", "port_span"]),
    (
        "[imex]\nmax_nodes = 0\n",
        &[":2", "[imex] max_nodes", "1 to 16384"],
    ),
    (
        "[imex]\nmax_nodes = 1000000000\n",
        &[":2", "[imex] max_nodes", "out of range"],
    ),
    ("[imex]\nmax_nodes = -1\n", &[":2", "[imex] max_nodes"]),
    (
        "[imex]\nmax_nodes = \"many\"\n",
        &[":2", "[imex] max_nodes"],
    ),
    (
        "[imex]\nstate_dir = \"run/imex\"\n",
        &[":2", "[imex] state_dir", "absolute"],
    ),
    (
        "[imex]\nchannel_dir = \"\"\n",
        &[":2", "[imex] channel_dir", "absolute"],
    ),
    (
        "[imex]\nchannels = \"both\"\n",
        &[":2", "[imex] channels", "both"],
    ),
    (
        "[imex]\nhide_channels_from_other_jobs = \"yes\"\n",
        &[":2", "hide_channels_from_other_jobs"],
    ),
    (
        "[imex.daemon]\nmanager = \"upstart\"\n",
        &[":2", "[imex.daemon] manager", "upstart"],
    ),
    (
        "[imex.daemon]\nstop_timeout = \"0s\"\n",
        &[":2", "[imex.daemon] stop_timeout"],
    ),
    (
        "[imex.daemon]\nstart_timeout = \"100d\"\n",
        &[":2", "[imex.daemon] start_timeout"],
    ),
    (
        "[imex.daemon]\nctl_timeout = \"1ns\"\n",
        &[":2", "[imex.daemon] ctl_timeout"],
    ),
    (
        "[imex.daemon]\nnodes_config = \"nodes.cfg\"\n",
        &[":2", "nodes_config", "absolute"],
    ),
    ("[imex.daemon]\nbogus = 1\n", &[":2", "bogus"]),
    (
        "[imex.addresses]\nsource = \"ldap\"\n",
        &[":2", "[imex.addresses] source", "ldap"],
    ),
    (
        "[slurm]\ntopology = \"relative/topology.conf\"\n",
        &[":2", "[slurm] topology", "absolute"],
    ),
    ("[slurm]\nconfig = 5\n", &[":2", "[slurm] config"]),
    (
        "[health]\ngate_timeout = \"1000000h\"\n",
        &[":2", "[health] gate_timeout", "10m"],
    ),
    (
        "[health]\ngate_timeout = \"0s\"\n",
        &[":2", "[health] gate_timeout"],
    ),
    (
        "[health]\nscontrol_timeout = \"0s\"\n",
        &[":2", "[health] scontrol_timeout"],
    ),
    (
        "[slurm]\nscontrol_timeout = \"0s\"\n",
        &[":2", "[slurm] scontrol_timeout"],
    ),
    (
        "[slurm]\nscontrol = \"/a\"\n[health]\nscontrol = \"/b\"\n",
        &[
            ":4",
            "[health] scontrol = \"/b\" and [slurm] scontrol = \"/a\" disagree",
        ],
    ),
    // The new key inside an inline table is the key written, too.
    (
        "slurm = { scontrol = \"/a\" }\n[health]\nscontrol = \"/b\"\n",
        &[
            ":3",
            "[health] scontrol = \"/b\" and [slurm] scontrol = \"/a\" disagree",
        ],
    ),
    (
        "[health]\nexpected_gpus = 100000\n",
        &[":2", "[health] expected_gpus", "1024"],
    ),
    (
        "[health]\nexpected_gpus = -2\n",
        &[":2", "[health] expected_gpus"],
    ),
    ("[health]\nmig = \"maybe\"\n", &[":2", "[health] mig"]),
    (
        "[health]\ngpu_jobs = \"some\"\n",
        &[":2", "[health] gpu_jobs"],
    ),
    (
        "[database]\nbusy_timeout = \"30d\"\n",
        &[":2", "[database] busy_timeout", "10m"],
    ),
    (
        "[database]\nretention = \"1s\"\n",
        &[":2", "[database] retention", "or 0"],
    ),
    (
        "[database]\nretention = \"1000000d\"\n",
        &[":2", "[database] retention"],
    ),
    (
        "[database]\npath = \"jobs.db\"\n",
        &[":2", "[database] path", "absolute"],
    ),
    ("[database]\npath = 7\n", &[":2", "[database] path"]),
    ("[imex\n", &[":1"]),
    ("[imex]\nmax_nodes = 4\nmax_nodes = 5\n", &[":3"]),
    ("[imex]\n[imex]\n", &[":2"]),
    ("[gpus]\n", &[":1", "gpus"]),
    ("imex = 5\n", &[":1", "imex"]),
    (
        "# comment\n\n[health]\n\n\nrequire_ecc = \"on\"\n",
        &[":6", "[health] require_ecc"],
    ),
    // Values the TOML lexer itself rejects still name their key.
    (
        "[imex]\nport_base = 99999999999999999999\n",
        &[":2", "[imex] port_base", "too large"],
    ),
    (
        "[imex.daemon]\nstop_timeout = 99999999999999999999\n",
        &[":2", "[imex.daemon] stop_timeout"],
    ),
    ("[imex]\nmax_nodes = 1e400\n", &[":2", "[imex] max_nodes"]),
    (
        "[node]\nstate_dir = \"run/imex\"\n",
        &[":2", "[node] state_dir", "absolute"],
    ),
    // A URL is checked when the file is read, not when `job` first uses it.
    (
        "[job]\nprometheus_url = \"host:9090\"\n",
        &[":2", "[job] prometheus_url", "http://host:9090"],
    ),
    (
        "[job]\nprometheus_url = \"https://u:secret@prom:9090\"\n",
        &[
            ":2",
            "[job] prometheus_url",
            "holds credentials",
            "prometheus_password_file",
        ],
    ),
    (
        "[job]\nprometheus_url = \"http://prom:9090\"\nprometheus_ca_file = \"/etc/ca.pem\"\n",
        &[":3", "[job] prometheus_ca_file", "plain http", "https://"],
    ),
    (
        "[job]\nprometheus_url = \"http://\"\n",
        &[":2", "[job] prometheus_url", "host"],
    ),
    (
        "[job]\nprometheus_url = \"http://prom:99999\"\n",
        &[":2", "[job] prometheus_url", "port"],
    ),
    (
        "[job]\nprometheus_url = \"http://prom:9090/?x=1\"\n",
        &[":2", "[job] prometheus_url"],
    ),
    (
        "[job]\n\nprometheus_url = \"http://prom 9090\"\n",
        &[":3", "[job] prometheus_url"],
    ),
];

struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new() -> Site {
        Site { dir: scratch() }
    }
    fn config(&self, text: &str) -> std::path::PathBuf {
        let p = self.dir.path().join("imex.toml");
        write_mode(&p, text.as_bytes(), 0o644);
        p
    }
}

/// The CLI (exit 2) and the prolog (exit 1, a node fault) both refuse it.
/// The prolog keeps its reason in the default state directory when the
/// config names none: its own, private `/run` (`run_hook_privately`).
fn both_refuse(config: &Path, needles: &[&str], case: &str) {
    let cfg = config.to_str().unwrap();
    let cli = run(
        &bin("slurm-imex"),
        &["--config", cfg, "history", "--db", "/nonexistent/jobs.db"],
        &[],
    );
    cli.one_line_error(2, needles, &format!("cli: {case}"));
    let prolog = run_hook_privately(
        &bin("slurm-imex-prolog"),
        &[],
        &[
            ("SLURM_IMEX_CONFIG", os(cfg)),
            ("SLURM_JOB_ID", os("7")),
            ("SLURMD_NODENAME", os("n1")),
        ],
    );
    prolog.one_line_error(1, needles, &format!("prolog: {case}"));
}

#[test]
fn bad_values_types_and_syntax_name_file_line_and_key() {
    let site = Site::new();
    for (text, needles) in VALUE_CASES {
        let p = site.config(text);
        let mut all = vec![p.to_str().unwrap()];
        all.extend_from_slice(needles);
        both_refuse(&p, &all, &format!("{text:?}"));
    }
    eprintln!("bad-input: {} config value cases", VALUE_CASES.len());
}

#[test]
fn a_config_that_is_not_utf8_is_refused_naming_the_line() {
    let site = Site::new();
    let p = site.dir.path().join("imex.toml");
    write_mode(&p, b"[imex]\n# caf\xe9\nport_base = 33792\n", 0o644);
    let path = p.to_str().unwrap();
    both_refuse(&p, &[path, ":2", "0xe9 is not UTF-8"], "a Latin-1 comment");
}

#[test]
fn the_old_state_dir_key_still_works_and_status_names_it() {
    let site = Site::new();
    let state = site.dir.path().join("state");
    let p = site.config(&format!("[imex]\nstate_dir = \"{}\"\n", state.display()));
    let cli = run(
        &bin("slurm-imex"),
        &["--config", p.to_str().unwrap(), "status"],
        &[],
    );
    assert_eq!(cli.code, Some(0), "{}", cli.stderr);
    assert_eq!(cli.stderr, "", "no extra stderr line");
    assert!(
        cli.stdout
            .contains(":2: [imex] state_dir is deprecated: rename it to [node] state_dir"),
        "{}",
        cli.stdout
    );
}

#[test]
fn a_good_config_gets_past_loading() {
    let site = Site::new();
    let p = site.config("[imex]\nready_timeout = \"30s\"\n[database]\nretention = 0\n");
    let cli = run(
        &bin("slurm-imex"),
        &[
            "--config",
            p.to_str().unwrap(),
            "history",
            "--db",
            "/nonexistent/jobs.db",
        ],
        &[],
    );
    assert_eq!(cli.code, Some(0), "good config: {}", cli.stderr);
    assert!(
        cli.stderr
            .contains("note: no job database at /nonexistent/jobs.db"),
        "{}",
        cli.stderr
    );
}

#[test]
fn config_files_root_must_not_trust_are_refused() {
    use std::os::unix::fs::{symlink, PermissionsExt};
    if !is_root() {
        eprintln!("skipped: the trust cases need root (CI runs as root)");
        return;
    }
    let mut n = 0;
    let site = Site::new();
    let p = site.config("");
    // World- and group-writable files.
    for mode in [0o666, 0o646, 0o664, 0o620] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        both_refuse(
            &p,
            &[
                "refusing config",
                "writable by group or others",
                "chmod go-w",
            ],
            &format!("mode {mode:o}"),
        );
        n += 1;
    }
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    // Owned by another user.
    nix::unistd::chown(&p, Some(nix::unistd::Uid::from_raw(4242)), None).unwrap();
    both_refuse(
        &p,
        &["refusing config", "owned by uid 4242", "chown root"],
        "foreign owner",
    );
    nix::unistd::chown(&p, Some(nix::unistd::Uid::from_raw(0)), None).unwrap();
    n += 1;
    // In a world-writable directory (no sticky bit), and in a foreign one.
    let open = site.dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let in_open = open.join("imex.toml");
    write_mode(&in_open, b"", 0o644);
    both_refuse(
        &in_open,
        &["refusing config", "open is writable by group or others"],
        "world-writable dir",
    );
    n += 1;
    let foreign = site.dir.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    let in_foreign = foreign.join("imex.toml");
    write_mode(&in_foreign, b"", 0o644);
    nix::unistd::chown(&foreign, Some(nix::unistd::Uid::from_raw(4242)), None).unwrap();
    both_refuse(
        &in_foreign,
        &["refusing config", "owned by uid 4242"],
        "foreign dir",
    );
    n += 1;
    // A symlink to a file in the open directory, and one to a foreign file.
    let link = site.dir.path().join("link.toml");
    symlink(&in_open, &link).unwrap();
    both_refuse(
        &link,
        &["refusing config", "symlink to", "writable"],
        "symlink to untrusted",
    );
    n += 1;
    let dangling = site.dir.path().join("dangling.toml");
    symlink("/nonexistent/imex.toml", &dangling).unwrap();
    both_refuse(
        &dangling,
        &["refusing config", "does not resolve"],
        "dangling symlink",
    );
    n += 1;
    // A FIFO must not hang anyone; a directory and a device are not files.
    let fifo = site.dir.path().join("fifo.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    both_refuse(
        &fifo,
        &["refusing config", "a FIFO, not a regular file"],
        "fifo",
    );
    let dir = site.dir.path().join("dir.toml");
    std::fs::create_dir(&dir).unwrap();
    both_refuse(
        &dir,
        &["refusing config", "a directory, not a regular file"],
        "directory",
    );
    both_refuse(
        Path::new("/dev/null"),
        &["refusing config", "a character device"],
        "device",
    );
    both_refuse(
        Path::new("/nonexistent/imex.toml"),
        &["/nonexistent/imex.toml", "does not exist"],
        "missing",
    );
    n += 4;
    // Not UTF-8, and far too big.
    let garbage = site.dir.path().join("garbage.toml");
    write_mode(&garbage, &[0xff, 0xfe, b'[', 0x80, b'\n'], 0o644);
    both_refuse(&garbage, &["bad config", "garbage.toml"], "binary garbage");
    let huge = site.dir.path().join("huge.toml");
    write_mode(&huge, "# x\n".repeat(400_000).as_bytes(), 0o644);
    both_refuse(&huge, &["huge.toml", "larger than"], "huge file");
    n += 2;
    // A symlink to a trusted file is fine.
    let good = site.dir.path().join("good.toml");
    write_mode(&good, b"", 0o644);
    let good_link = site.dir.path().join("good-link.toml");
    symlink(&good, &good_link).unwrap();
    let cli = run(
        &bin("slurm-imex"),
        &[
            "--config",
            good_link.to_str().unwrap(),
            "history",
            "--db",
            "/nonexistent/x.db",
        ],
        &[],
    );
    assert_eq!(
        cli.code,
        Some(0),
        "symlink to a trusted file: {}",
        cli.stderr
    );
    assert!(
        cli.stderr.contains("note: no job database"),
        "{}",
        cli.stderr
    );
    n += 1;
    eprintln!("bad-input: {n} config trust cases");
}

#[test]
fn programs_root_must_not_trust_are_refused_before_running() {
    use std::os::unix::fs::PermissionsExt;
    if !is_root() {
        eprintln!("skipped: the trust cases need root (CI runs as root)");
        return;
    }
    let site = Site::new();
    let marker = site.dir.path().join("ran");
    let tool = site.dir.path().join("evil");
    write_mode(
        &tool,
        format!("#!/bin/sh\ntouch {}\n", marker.display()).as_bytes(),
        0o777,
    );
    let mut n = 0;
    for (key, section) in [
        ("binary", "[imex.daemon]"),
        ("ctl", "[imex.daemon]"),
        ("systemctl", "[imex.daemon]"),
        ("scontrol", "[health]"),
        ("scontrol", "[slurm]"),
    ] {
        let p = site.config(&format!("{section}\n{key} = \"{}\"\n", tool.display()));
        let r = run_hook_privately(
            &bin("slurm-imex-prolog"),
            &[],
            &[
                ("SLURM_IMEX_CONFIG", os(p.to_str().unwrap())),
                ("SLURM_JOB_ID", os("7")),
                ("SLURMD_NODENAME", os("n1")),
                ("SPANK_IMEX", os("1")),
            ],
        );
        r.one_line_error(
            1,
            &[&format!("{section} {key}"), "writable by group or others"],
            key,
        );
        assert!(!marker.exists(), "{key}: the untrusted program ran");
        n += 1;
    }
    // Owned by someone else, even with a safe mode.
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    nix::unistd::chown(&tool, Some(nix::unistd::Uid::from_raw(4242)), None).unwrap();
    let p = site.config(&format!("[health]\nscontrol = \"{}\"\n", tool.display()));
    let r = run(
        &bin("slurm-imex"),
        &["--config", p.to_str().unwrap(), "undrain", "--node", "n1"],
        &[],
    );
    r.one_line_error(2, &["owned by uid 4242"], "foreign scontrol");
    assert!(!marker.exists(), "foreign scontrol ran");
    n += 1;
    // A world-writable state directory.
    let state = site.dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o777)).unwrap();
    let p = site.config(&format!(
        "[node]\nstate_dir = \"{}\"\n[imex]\nproc_devices = \"/nonexistent\"\n",
        state.display()
    ));
    let r = run(
        &bin("slurm-imex-epilog"),
        &[],
        &[
            ("SLURM_IMEX_CONFIG", os(p.to_str().unwrap())),
            ("SLURM_JOB_ID", os("7")),
            ("SLURMD_NODENAME", os("n1")),
            ("SPANK_IMEX", os("1")),
        ],
    );
    r.one_line_error(
        1,
        &["state", "writable by group or others"],
        "world-writable state_dir",
    );
    n += 1;
    eprintln!("bad-input: {n} program and directory trust cases");
}

/// `slurm-imex config --reference` prints docs/settings.md byte for byte
/// (the page is the reference the code renders: settings' tests hold it).
#[test]
fn config_reference_prints_the_settings_page() {
    let page = include_str!("../../../docs/settings.md");
    let r = run(&bin("slurm-imex"), &["config", "--reference"], &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stdout == page,
        "config --reference is not docs/settings.md"
    );
}
