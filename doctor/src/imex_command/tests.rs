use super::*;
use crate::check::Status;
use slurm_imex_domain::imex::daemon_config::DaemonConfigFile;
use std::os::unix::fs::PermissionsExt;

const BASE: &str = "/etc/nvidia-imex/config.cfg";

const RUNNING: &str = "/run/slurm-imex/nvidia-imex.cfg";

fn cfg(path: &str, text: &str, origin: Origin) -> DaemonCfg {
    DaemonCfg {
        path: path.into(),
        file: DaemonConfigFile::parse(text),
        origin,
    }
}

fn base(text: &str) -> Effective {
    Effective {
        base: cfg(BASE, text, Origin::Base),
        running: None,
        running_refused: None,
    }
}

/// The base config, and the running daemon's copy.
fn with_running(base_text: &str, running_text: &str) -> Effective {
    let mut e = base(base_text);
    e.running = Some(cfg(RUNNING, running_text, Origin::Running));
    e
}

/// The one line, asserting there is one.
fn check(effective: &Effective, listeners: &Listeners) -> Check {
    let found = super::check(effective, listeners);
    assert_eq!(found.len(), 1, "{found:#?}");
    found.into_iter().next().unwrap()
}

fn listening(addrs: &[&str]) -> Listeners {
    Listeners {
        sockets: addrs.iter().map(|a| a.parse().unwrap()).collect(),
        unread: Vec::new(),
    }
}

fn tcp(bind: &str) -> String {
    format!("IMEX_CMD_ENABLED=1\nIMEX_CMD_BIND_INTERFACE_IP={bind}\nIMEX_CMD_PORT=50005\n")
}

#[test]
fn a_port_open_beyond_loopback_fails_naming_the_key_and_file() {
    for addr in [
        "0.0.0.0:50005",
        "[::]:50005",
        "10.0.0.5:50005",
        "[::ffff:0.0.0.0]:50005",
    ] {
        let f = check(&base(&tcp("")), &listening(&["127.0.0.1:50005", addr]));
        assert_eq!(f.verdict, Status::Fail, "{addr}: {}", f.line());
        assert!(
            f.found
                .contains(&addr.parse::<SocketAddr>().unwrap().to_string()),
            "{}",
            f.line()
        );
        assert!(
            f.remedy.contains(
                "set IMEX_CMD_BIND_INTERFACE_IP=127.0.0.1 in /etc/nvidia-imex/config.cfg"
            ),
            "{}",
            f.line()
        );
    }
    let f = check(&base(&tcp("")), &listening(&["0.0.0.0:50005"]));
    assert!(
        f.found.contains("0.0.0.0:50005 (every interface)"),
        "{}",
        f.line()
    );
}

#[test]
fn loopback_listeners_and_other_ports_are_not_exposure() {
    let loopback = [
        "127.0.0.1:50005",
        "[::1]:50005",
        "[::ffff:127.0.0.1]:50005",
        "0.0.0.0:22",
        "[::]:50000",
    ];
    let f = check(&base(&tcp("127.0.0.1")), &listening(&loopback));
    assert_eq!(f.verdict, Status::Pass, "{}", f.line());
    assert!(
        f.found.contains("listens on 127.0.0.1:50005, [::1]:50005"),
        "{}",
        f.line()
    );
}

#[test]
fn nothing_listening_yet_is_judged_on_the_config() {
    for (bind, says) in [
        ("", " is empty, which is every interface"),
        ("0.0.0.0", "=0.0.0.0, which is every interface"),
        ("::", "=::, which is every interface"),
        ("10.1.1.1", "=10.1.1.1, not a loopback address"),
        ("localhost", "=localhost is not an IP address"),
    ] {
        let f = check(&base(&tcp(bind)), &listening(&[]));
        assert_eq!(f.verdict, Status::Fail, "{bind}: {}", f.line());
        assert!(
            f.found
                .contains(&format!("IMEX_CMD_BIND_INTERFACE_IP{says}"))
                && f.found.contains("port 50005"),
            "{}",
            f.line()
        );
        assert!(
            f.remedy.starts_with(
                "set IMEX_CMD_BIND_INTERFACE_IP=127.0.0.1 in /etc/nvidia-imex/config.cfg"
            ),
            "{}",
            f.line()
        );
    }
    for bind in ["127.0.0.1", "::1", "127.0.0.53"] {
        let f = check(&base(&tcp(bind)), &listening(&[]));
        assert_eq!(f.verdict, Status::Pass, "{bind}: {}", f.line());
        assert!(f.found.contains("nothing listens now"), "{}", f.line());
    }
    // An absent key is the daemon's default: every interface.
    let f = check(&base("IMEX_CMD_ENABLED=1\n"), &listening(&[]));
    assert_eq!(f.verdict, Status::Fail, "{}", f.line());
}

#[test]
fn a_daemon_started_before_the_fix_is_named_with_when_it_takes_effect() {
    let f = check(&base(&tcp("127.0.0.1")), &listening(&["0.0.0.0:50005"]));
    assert_eq!(f.verdict, Status::Fail);
    assert!(
        f.remedy.contains("already keeps it off the network"),
        "{}",
        f.line()
    );
}

#[test]
fn the_running_copys_port_is_watched_too() {
    let e = with_running(
        &tcp("127.0.0.1"),
        "IMEX_CMD_ENABLED=1\nIMEX_CMD_BIND_INTERFACE_IP=127.0.0.1\nIMEX_CMD_PORT=50105\n",
    );
    let f = check(&e, &listening(&["[::]:50105"]));
    assert_eq!(f.verdict, Status::Fail, "{}", f.line());
    assert!(f.found.contains("[::]:50105"), "{}", f.line());
    assert_eq!(
        check(&e, &listening(&["127.0.0.1:50105"])).verdict,
        Status::Pass
    );
}

#[test]
fn a_disabled_service_passes_and_a_bad_port_fails() {
    let f = check(&base("IMEX_CMD_ENABLED=0\n"), &listening(&[]));
    assert_eq!(f.verdict, Status::Pass, "{}", f.line());
    let f = check(
        &base("IMEX_CMD_ENABLED=1\nIMEX_CMD_PORT=fifty\n"),
        &listening(&[]),
    );
    assert_eq!(f.verdict, Status::Fail);
    assert!(
        f.found.contains("IMEX_CMD_PORT=fifty") && f.remedy.contains(BASE),
        "{}",
        f.line()
    );
}

#[test]
fn what_listens_unread_is_a_warning_not_a_pass() {
    let mut l = listening(&[]);
    l.unread
        .push("/proc/net/tcp: No such file or directory".into());
    let f = check(&base(&tcp("127.0.0.1")), &l);
    assert_eq!(f.verdict, Status::Warn, "{}", f.line());
    assert!(f.found.contains("/proc/net/tcp"), "{}", f.line());
}

#[test]
fn a_unix_socket_needs_a_root_only_directory() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("cmd");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let sock = dir.join("imex.sock");
    let socket_only = base(&format!(
        "IMEX_CMD_ENABLED=1\nIMEX_CMD_PORT=\nIMEX_CMD_UNIX_DOMAIN_PATH={}\n",
        sock.display()
    ));
    let f = check(&socket_only, &listening(&[]));
    assert_eq!(f.verdict, Status::Fail, "-N needs the port: {}", f.line());
    assert!(
        f.remedy
            .contains("set IMEX_CMD_PORT=50005 and IMEX_CMD_BIND_INTERFACE_IP=127.0.0.1"),
        "{}",
        f.line()
    );
    let unix_only = |path: &str| {
        base(&format!(
            "IMEX_CMD_ENABLED=1\nIMEX_CMD_PORT=50005\nIMEX_CMD_BIND_INTERFACE_IP=127.0.0.1\nIMEX_CMD_UNIX_DOMAIN_PATH={path}\n"
        ))
    };
    let f = check(
        &unix_only(&sock.display().to_string()),
        &listening(&["127.0.0.1:50005"]),
    );
    assert_eq!(
        f.verdict,
        Status::Pass,
        "loopback and a root-only socket: {}",
        f.line()
    );
    assert!(
        f.found.contains(&format!("unix socket {}", sock.display())),
        "{}",
        f.line()
    );
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let f = check(&unix_only(&sock.display().to_string()), &listening(&[]));
    assert_eq!(f.verdict, Status::Fail, "{}", f.line());
    assert!(
        f.found.contains("open to others (mode 0755)") && f.remedy.contains("chmod o-rwx"),
        "{}",
        f.line()
    );
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o770)).unwrap();
    let f = check(&unix_only(&sock.display().to_string()), &listening(&[]));
    assert!(
        f.found.contains("writable by group or others"),
        "{}",
        f.line()
    );
    let f = check(&unix_only("imex.sock"), &listening(&[]));
    assert!(f.found.contains("not an absolute path"), "{}", f.line());
    let f = check(
        &unix_only(&d.path().join("none/imex.sock").display().to_string()),
        &listening(&[]),
    );
    assert_eq!(f.verdict, Status::Fail);
    assert!(
        f.found.contains("does not exist") && f.remedy.contains("mkdir -p"),
        "{}",
        f.line()
    );
    // Beside a loopback TCP port, both are named.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let text = format!(
        "{}IMEX_CMD_UNIX_DOMAIN_PATH={}\n",
        tcp("127.0.0.1"),
        sock.display()
    );
    let f = check(&base(&text), &listening(&["127.0.0.1:50005"]));
    assert_eq!(f.verdict, Status::Pass, "{}", f.line());
    assert!(
        f.found.contains("127.0.0.1:50005") && f.found.contains("unix socket"),
        "{}",
        f.line()
    );
}

#[test]
fn the_shipped_example_binds_the_command_service_to_loopback() {
    let shipped = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../conf-examples/nvidia-imex-config.cfg"
    );
    let text = std::fs::read_to_string(shipped).unwrap();
    let f = check(&base(&text), &listening(&[]));
    assert_eq!(f.verdict, Status::Pass, "{}", f.line());
}

#[test]
fn a_running_copy_open_to_the_network_fails_naming_it_though_the_base_is_fixed() {
    // The admin fixed the base; the running daemon's copy, which the
    // watcher restarts a dead daemon on, still opens the port.
    for (running, says) in [
        (tcp(""), " is empty, which is every interface"),
        (tcp("0.0.0.0"), "=0.0.0.0, which is every interface"),
        (tcp("::"), "=::, which is every interface"),
        (tcp("10.1.1.1"), "=10.1.1.1, not a loopback address"),
        (tcp("localhost"), "=localhost is not an IP address"),
        (
            "IMEX_CMD_ENABLED=1\nIMEX_CMD_PORT=50005\n".to_string(),
            " is empty, which is every interface",
        ),
    ] {
        let e = with_running(&tcp("127.0.0.1"), &running);
        // The daemon is dead (nothing listens), or listens on loopback.
        for now in [&[][..], &["127.0.0.1:50005"][..]] {
            let f = check(&e, &listening(now));
            assert_eq!(f.verdict, Status::Fail, "{running:?} {now:?}: {}", f.line());
            assert!(
                f.found.starts_with(&format!(
                    "{RUNNING} (the running daemon's copy, [imex.daemon] job_config): IMEX_CMD_BIND_INTERFACE_IP{says}"
                )) && f.found.contains("when the watcher restarts the daemon on it"),
                "{}",
                f.line()
            );
            assert!(
                f.remedy.starts_with(&format!(
                    "set IMEX_CMD_BIND_INTERFACE_IP=127.0.0.1 in {RUNNING} too"
                )) && !f.remedy.contains(BASE),
                "{}",
                f.line()
            );
        }
    }
}

#[test]
fn a_running_copy_open_in_any_other_way_the_check_knows_fails_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let open_dir = d.path().join("open");
    std::fs::create_dir(&open_dir).unwrap();
    std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let sock = open_dir.join("imex.sock");
    for (running, says, fix) in [
        (
            format!("{}IMEX_CMD_UNIX_DOMAIN_PATH={}\n", tcp("127.0.0.1"), sock.display()),
            "open to others (mode 0755)",
            "chmod o-rwx",
        ),
        (
            format!(
                "IMEX_CMD_ENABLED=1\nIMEX_CMD_PORT=\nIMEX_CMD_UNIX_DOMAIN_PATH={}\n",
                sock.display()
            ),
            "IMEX_CMD_PORT is empty",
            "set IMEX_CMD_PORT=50005 and IMEX_CMD_BIND_INTERFACE_IP=127.0.0.1 in /run/slurm-imex/nvidia-imex.cfg too",
        ),
        (
            "IMEX_CMD_ENABLED=1\nIMEX_CMD_PORT=fifty\n".to_string(),
            "IMEX_CMD_PORT=fifty",
            "set IMEX_CMD_PORT in /run/slurm-imex/nvidia-imex.cfg too",
        ),
    ] {
        let e = with_running(&tcp("127.0.0.1"), &running);
        let found = super::check(&e, &listening(&["127.0.0.1:50005"]));
        let f = found
            .iter()
            .find(|f| f.found.contains(says))
            .unwrap_or_else(|| panic!("{says}: {found:#?}"));
        assert_eq!(f.verdict, Status::Fail, "{}", f.line());
        assert!(
            f.found.contains(RUNNING) && f.remedy.contains(fix),
            "{}",
            f.line()
        );
        assert!(
            found.iter().all(|f| f.verdict == Status::Fail),
            "{found:#?}"
        );
    }
}

#[test]
fn both_configs_open_are_a_line_each_and_an_open_port_names_both() {
    let e = with_running(&tcp("0.0.0.0"), &tcp(""));
    let found = super::check(&e, &listening(&[]));
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found[0].found.starts_with(&format!("{BASE}: ")) && found[0].remedy.contains(BASE),
        "{}",
        found[0].line()
    );
    assert!(
        found[1].found.starts_with(RUNNING) && found[1].remedy.contains(RUNNING),
        "{}",
        found[1].line()
    );
    // Listening on every interface now: one line, whose remedy names each
    // config that would open it again.
    let f = check(&e, &listening(&["0.0.0.0:50005"]));
    assert!(
        f.remedy.contains(&format!("127.0.0.1 in {BASE};"))
            && f.remedy.contains(&format!("127.0.0.1 in {RUNNING} too")),
        "{}",
        f.line()
    );
    // Only the running copy open: the remedy names it, not "already off".
    let e = with_running(&tcp("127.0.0.1"), &tcp(""));
    let f = check(&e, &listening(&["0.0.0.0:50005"]));
    assert!(
        f.remedy.contains(RUNNING) && !f.remedy.contains("already keeps"),
        "{}",
        f.line()
    );
}

#[test]
fn a_running_copy_like_the_base_is_judged_with_it_and_a_good_one_is_named() {
    let e = with_running(&tcp("127.0.0.1"), &tcp("127.0.0.1"));
    let f = check(&e, &listening(&[]));
    assert_eq!(f.verdict, Status::Pass, "{}", f.line());
    assert!(!f.found.contains(RUNNING), "{}", f.line());
    let e = with_running(&tcp("127.0.0.1"), &tcp("::1"));
    let f = check(&e, &listening(&["[::1]:50005"]));
    assert_eq!(f.verdict, Status::Pass, "{}", f.line());
    assert!(
        f.found.contains(BASE)
            && f.found
                .contains(&format!("{RUNNING} (the running daemon's copy")),
        "{}",
        f.line()
    );
}
