use super::*;
use crate::check::Status;
use slurm_imex_domain::imex::daemon_config::DaemonConfigFile;
use std::os::unix::fs::PermissionsExt;

const BASE: &str = "/etc/nvidia-imex/config.cfg";

fn cfg(path: &str, text: &str) -> DaemonCfg {
    DaemonCfg {
        path: path.into(),
        file: DaemonConfigFile::parse(text),
    }
}

fn base(text: &str) -> Effective {
    Effective {
        base: cfg(BASE, text),
        running: None,
    }
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
    let mut e = base(&tcp("127.0.0.1"));
    e.running = Some(cfg(
        "/run/slurm-imex/nvidia-imex.cfg",
        "IMEX_CMD_ENABLED=1\nIMEX_CMD_PORT=50105\n",
    ));
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
