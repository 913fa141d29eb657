//! `slurm-imex doctor`'s `imex-command` and `imex-tls` checks on hostile
//! input. The socket tables (/proc/net/tcp, tcp6) are injected through
//! the doctor's own entry (`imex_exposure`): garbage, binary, huge, one
//! endless line, a FIFO, a directory. The TLS files go through the real
//! binary: a directory, symlinks (dangling, looping, into a directory
//! others can write), a FIFO, binary garbage, a PEM with no END line, an
//! expired certificate. Each run ends in time, never panics, and says what
//! is wrong in one line naming the file and the fix.

mod common;
use common::*;
use proptest::prelude::*;
use slurm_imex_doctor::{imex_exposure, parse_listen_line, Check, CheckName, ProcNet, Status};
use slurm_imex_settings::Config;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// A line of /proc/net/tcp as the kernel prints it on this machine.
fn tcp_line(ip: Ipv4Addr, port: u16, state: &str) -> String {
    format!(
        "  12: {:08X}:{port:04X} 00000000:0000 {state} 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0",
        u32::from_ne_bytes(ip.octets())
    )
}

/// A base daemon config binding the command service to loopback, and
/// socket tables to fill.
struct Node {
    dir: tempfile::TempDir,
    config: Config,
}

impl Node {
    fn new() -> Node {
        let dir = scratch();
        let mut config = Config::default();
        config.engine.daemon.base_config = dir.path().join("config.cfg");
        config.engine.daemon.job_config = dir.path().join("absent.cfg");
        write_mode(
            &config.engine.daemon.base_config,
            b"IMEX_CMD_ENABLED=1\nIMEX_CMD_BIND_INTERFACE_IP=127.0.0.1\nIMEX_CMD_PORT=50005\n",
            0o644,
        );
        Node { dir, config }
    }

    fn net(&self) -> ProcNet {
        ProcNet {
            tcp: self.dir.path().join("tcp"),
            tcp6: self.dir.path().join("tcp6"),
        }
    }

    /// The imex-command line with `tcp` as /proc/net/tcp, within 10 s.
    fn command_line(&self, tcp: &[u8]) -> Check {
        write_mode(&self.net().tcp, tcp, 0o444);
        self.command_line_as_is()
    }

    fn command_line_as_is(&self) -> Check {
        let started = Instant::now();
        let found = imex_exposure(&self.config, &self.net(), SystemTime::now());
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "took {:?}",
            started.elapsed()
        );
        let line = found
            .into_iter()
            .find(|c| c.check == CheckName::ImexCommand)
            .unwrap();
        assert!(
            !line.line().contains('\n') && line.line().len() < 1200,
            "{}",
            line.line()
        );
        line
    }
}

#[test]
fn garbage_lines_around_an_open_port_are_skipped_and_the_port_still_fails() {
    let node = Node::new();
    let mut text = b"  sl  local_address rem_address   st tx_queue\n\0\0\0\xff\xfe\n".to_vec();
    for junk in [
        "1: zz:zz zz 0A",
        "   3: 0100007F:C355",
        "::::",
        "   4: 0100007F:C355 0:0 0A",
        "\u{202e}0A",
    ] {
        text.extend_from_slice(junk.as_bytes());
        text.push(b'\n');
    }
    text.extend_from_slice(tcp_line(Ipv4Addr::UNSPECIFIED, 50005, "0A").as_bytes());
    text.extend_from_slice(b"\n\xc3\x28 trailing invalid utf-8");
    let f = node.command_line(&text);
    assert_eq!(f.verdict, Status::Fail, "{}", f.line());
    assert!(f.found.contains("0.0.0.0:50005"), "{}", f.line());
    assert!(
        f.remedy
            .contains("config.cfg already keeps it off the network"),
        "{}",
        f.line()
    );
}

#[test]
fn huge_tables_are_read_only_so_far_and_never_hang() {
    let node = Node::new();
    // 20 MiB of established connections, then a listener past the cap.
    let row = tcp_line(Ipv4Addr::new(10, 0, 0, 1), 50005, "01") + "\n";
    let mut text = row.repeat((20 << 20) / row.len()).into_bytes();
    text.extend_from_slice(tcp_line(Ipv4Addr::UNSPECIFIED, 50005, "0A").as_bytes());
    let f = node.command_line(&text);
    assert_eq!(
        f.verdict,
        Status::Pass,
        "past the cap is not read: {}",
        f.line()
    );
    // One endless line, no newline at all.
    let f = node.command_line(&vec![b'A'; 12 << 20]);
    assert_eq!(f.verdict, Status::Pass, "{}", f.line());
}

#[test]
fn tables_that_are_no_file_warn_and_never_block() {
    let node = Node::new();
    let tcp = node.net().tcp;
    std::fs::create_dir(&tcp).unwrap();
    let f = node.command_line_as_is();
    assert_eq!(f.verdict, Status::Warn, "{}", f.line());
    assert!(
        f.found.contains("not a regular file") && f.found.contains(&tcp.display().to_string()),
        "{}",
        f.line()
    );
    std::fs::remove_dir(&tcp).unwrap();
    nix::unistd::mkfifo(&tcp, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let f = node.command_line_as_is();
    assert_eq!(
        f.verdict,
        Status::Warn,
        "a FIFO nobody writes must not hang: {}",
        f.line()
    );
    // tcp6 may be absent (no IPv6); tcp itself may not.
    std::fs::remove_file(&tcp).unwrap();
    assert_eq!(node.command_line_as_is().verdict, Status::Warn);
}

/// What puts a bad running copy at a path.
type Make = fn(&Path);

#[test]
fn a_running_copy_that_is_no_file_or_not_text_fails_each_check_naming_it() {
    let node = Node::new();
    let running = &node.config.engine.daemon.job_config;
    let noise = |p: &Path| {
        let bytes: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        write_mode(p, &bytes, 0o644)
    };
    let cases: [(&str, Make, &str); 5] = [
        (
            "a directory",
            |p| std::fs::create_dir(p).unwrap(),
            "not a regular file",
        ),
        (
            "a FIFO",
            |p| nix::unistd::mkfifo(p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap(),
            "not a regular file",
        ),
        ("random bytes", noise, "is not text"),
        (
            "a NUL",
            |p| write_mode(p, b"IMEX_CMD_ENABLED=1\0\n", 0o644),
            "is not text: line 1 holds a NUL byte",
        ),
        (
            "not UTF-8",
            |p| write_mode(p, b"IMEX_CMD_BIND_INTERFACE_IP=\xff\n", 0o644),
            "is not text: byte 0xff on line 1 is not UTF-8",
        ),
    ];
    for (case, make, says) in cases {
        let _ = std::fs::remove_dir(running);
        let _ = std::fs::remove_file(running);
        make(running);
        let found = imex_exposure(&node.config, &node.net(), SystemTime::now());
        for check in [CheckName::ImexCommand, CheckName::ImexTls] {
            let fails: Vec<&Check> = found
                .iter()
                .filter(|f| f.check == check && f.verdict == Status::Fail)
                .collect();
            assert_eq!(fails.len(), 1, "{case}: {found:#?}");
            let f = fails[0];
            assert!(
                f.found.contains("[imex.daemon] job_config")
                    && f.found.contains(&running.display().to_string())
                    && f.found.contains(says)
                    && f.remedy
                        .contains("remove it while no job on this node uses IMEX"),
                "{case}: {}",
                f.line()
            );
        }
    }
}

#[test]
fn a_base_config_that_is_not_text_is_one_warning_per_check() {
    let node = Node::new();
    write_mode(
        &node.config.engine.daemon.base_config,
        b"IMEX_CMD_ENABLED=1\n\0\0\n",
        0o644,
    );
    let found = imex_exposure(&node.config, &node.net(), SystemTime::now());
    assert_eq!(found.len(), 2, "{found:#?}");
    for f in found {
        assert_eq!(f.verdict, Status::Warn, "{}", f.line());
        assert!(
            f.found.contains("base_config) is not text") && f.remedy.contains("imex-config"),
            "{}",
            f.line()
        );
    }
}

#[test]
fn a_running_copy_still_open_after_the_base_was_fixed_fails_naming_it() {
    let node = Node::new();
    let running = &node.config.engine.daemon.job_config;
    let loopback = tcp_line(Ipv4Addr::LOCALHOST, 50005, "0A") + "\n";
    for (copy, says) in [
        (
            "IMEX_CMD_BIND_INTERFACE_IP=0.0.0.0\n",
            "=0.0.0.0, which is every interface",
        ),
        (
            "IMEX_CMD_BIND_INTERFACE_IP=\n",
            " is empty, which is every interface",
        ),
        ("", " is empty, which is every interface"),
        (
            "IMEX_CMD_BIND_INTERFACE_IP=10.0.0.5\n",
            "=10.0.0.5, not a loopback address",
        ),
    ] {
        write_mode(
            running,
            format!("IMEX_CMD_ENABLED=1\nIMEX_CMD_PORT=50005\n{copy}").as_bytes(),
            0o644,
        );
        // The daemon is dead (the watcher will restart it on the copy), or
        // listens on loopback only.
        for tcp in ["", loopback.as_str()] {
            let f = node.command_line(tcp.as_bytes());
            assert_eq!(f.verdict, Status::Fail, "{copy:?}: {}", f.line());
            let named = running.display().to_string();
            assert!(
                f.found.starts_with(&format!(
                    "{named} (the running daemon's copy, [imex.daemon] job_config): IMEX_CMD_BIND_INTERFACE_IP{says}"
                )),
                "{copy:?}: {}",
                f.line()
            );
            assert!(
                f.remedy.starts_with(&format!(
                    "set IMEX_CMD_BIND_INTERFACE_IP=127.0.0.1 in {named} too"
                )),
                "{}",
                f.line()
            );
        }
    }
    // The copy fixed too: a pass.
    write_mode(
        running,
        b"IMEX_CMD_ENABLED=1\nIMEX_CMD_PORT=50005\nIMEX_CMD_BIND_INTERFACE_IP=127.0.0.1\n",
        0o644,
    );
    assert_eq!(node.command_line(loopback.as_bytes()).verdict, Status::Pass);
}

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

proptest! {
    #![proptest_config(config())]

    /// Any text: no panic, and whatever is found came from a LISTEN line.
    #[test]
    fn any_line_parses_without_panic(line in "\\PC{0,200}") {
        if parse_listen_line(&line).is_some() {
            prop_assert!(line.contains("0A"));
        }
    }

    /// Near-valid lines (hex fields of any length, any state) never panic.
    #[test]
    fn near_valid_lines_never_panic(addr in "[0-9A-Fa-fxX:]{0,40}", port in "[0-9A-Fa-f+-]{0,6}", st in "[0-9A-F]{0,3}") {
        let _ = parse_listen_line(&format!("  0: {addr}:{port} 00000000:0000 {st} 0 0"));
    }

    /// Well-formed IPv4 lines give back the address, port and state.
    #[test]
    fn well_formed_lines_round_trip(ip in any::<u32>(), port in any::<u16>(), listen in any::<bool>()) {
        let ip = Ipv4Addr::from(ip);
        let line = tcp_line(ip, port, if listen { "0A" } else { "06" });
        let want = listen.then_some(SocketAddr::new(IpAddr::V4(ip), port));
        prop_assert_eq!(parse_listen_line(&line), want);
    }
}

/// A node whose daemon config turns SSL_TLS on, with good files, for the
/// real `slurm-imex doctor` (no controller, no NVML: those checks fail
/// and are not looked at).
struct TlsNode {
    dir: tempfile::TempDir,
}

impl TlsNode {
    fn new() -> TlsNode {
        let node = TlsNode { dir: scratch() };
        let p = |n: &str| node.path(n).display().to_string();
        node.cert("server.crt", 2020, 2099);
        node.cert("ca.crt", 2020, 2099);
        let cfg = format!(
            "IMEX_CMD_ENABLED=1\nIMEX_CMD_BIND_INTERFACE_IP=127.0.0.1\nIMEX_ENABLE_AUTH_ENCRYPTION=1\n\
             IMEX_AUTH_ENCRYPTION_MODE=SSL_TLS\nIMEX_AUTH_SOURCE=FILE\nIMEX_SERVER_KEY={}\n\
             IMEX_SERVER_CERT={}\nIMEX_SERVER_CERT_AUTH={}\n",
            p("server.crt.key"),
            p("server.crt"),
            p("ca.crt")
        );
        write_mode(&node.path("config.cfg"), cfg.as_bytes(), 0o644);
        write_mode(
            &node.path("slurm.conf"),
            b"ClusterName=c\nPrologFlags=Alloc\n",
            0o644,
        );
        let imex = format!(
            "[node]\nstate_dir = \"{}\"\n[imex.daemon]\nbase_config = \"{}\"\njob_config = \"{}\"\n\
             [gpu]\nnvml_library = \"{}\"\n[database]\npath = \"{}\"\n\
             [slurm]\nconfig = \"{}\"\ntopology = \"none\"\nscontrol = \"/bin/false\"\n",
            p("state"),
            p("config.cfg"),
            p("absent.cfg"),
            p("no-libnvidia-ml.so.1"),
            p("db/jobs.db"),
            p("slurm.conf"),
        );
        write_mode(&node.path("imex.toml"), imex.as_bytes(), 0o644);
        node
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A self-signed certificate valid from Jan 1 of one year to another,
    /// and its key as `<name>.key` (mode 0600).
    fn cert(&self, name: &str, from: i32, until: i32) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["n1".to_string()]).unwrap();
        params.not_before = rcgen::date_time_ymd(from, 1, 1);
        params.not_after = rcgen::date_time_ymd(until, 1, 1);
        let cert = params.self_signed(&key).unwrap();
        write_mode(
            &self.path(&format!("{name}.key")),
            key.serialize_pem().as_bytes(),
            0o600,
        );
        self.put(name, cert.pem().as_bytes());
    }

    /// Replace `name` with a regular file holding `bytes`, mode 0640.
    fn put(&self, name: &str, bytes: &[u8]) {
        let _ = std::fs::remove_file(self.path(name));
        write_mode(&self.path(name), bytes, 0o640);
    }

    /// Rewrite the base config with each key naming a file of the node.
    fn name_files(&self, keys: &[(&str, &str)]) {
        let mut cfg = "IMEX_CMD_ENABLED=1\nIMEX_CMD_BIND_INTERFACE_IP=127.0.0.1\nIMEX_ENABLE_AUTH_ENCRYPTION=1\n\
             IMEX_AUTH_ENCRYPTION_MODE=SSL_TLS\nIMEX_AUTH_SOURCE=FILE\n"
            .to_string();
        for (key, name) in keys {
            cfg.push_str(&format!("{key}={}\n", self.path(name).display()));
        }
        write_mode(&self.path("config.cfg"), cfg.as_bytes(), 0o644);
    }

    /// The doctor's imex-tls lines, after it ended in time without a panic.
    fn tls_lines(&self) -> Vec<String> {
        let env = [
            ("SLURM_IMEX_CONFIG", self.path("imex.toml").into_os_string()),
            ("SLURMD_NODENAME", os("n1")),
        ];
        let started = Instant::now();
        let ran = run(&bin("slurm-imex"), &["doctor"], &env);
        ran.ended_without_panic("doctor");
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "doctor took {:?}",
            started.elapsed()
        );
        ran.stdout
            .lines()
            .filter(|l| l.split_whitespace().nth(1) == Some("imex-tls"))
            .map(str::to_string)
            .collect()
    }

    /// One FAIL line for the server certificate, naming it and `says`.
    fn fails_naming_the_cert(&self, says: &str, case: &str) {
        let lines = self.tls_lines();
        assert_eq!(lines.len(), 1, "{case}: {lines:#?}");
        let cert = self.path("server.crt").display().to_string();
        assert!(
            lines[0].starts_with("FAIL  imex-tls "),
            "{case}: {}",
            lines[0]
        );
        assert!(
            lines[0].contains(&cert) && lines[0].contains(says),
            "{case}: want {says:?}: {}",
            lines[0]
        );
        assert!(lines[0].contains(" -> "), "{case}: no remedy: {}", lines[0]);
    }
}

#[test]
fn good_tls_files_pass_through_the_real_binary() {
    let node = TlsNode::new();
    let lines = node.tls_lines();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].starts_with("PASS  imex-tls "), "{}", lines[0]);
}

#[test]
fn a_certificate_that_is_no_file_fails_without_being_opened() {
    let node = TlsNode::new();
    let cert = node.path("server.crt");
    std::fs::remove_file(&cert).unwrap();
    std::fs::create_dir(&cert).unwrap();
    node.fails_naming_the_cert("a directory, not a regular file", "directory");
    std::fs::remove_dir(&cert).unwrap();
    nix::unistd::mkfifo(&cert, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    node.fails_naming_the_cert("a FIFO, not a regular file", "fifo");
}

#[test]
fn symlinked_certificates_are_judged_by_where_they_lead() {
    let node = TlsNode::new();
    let cert = node.path("server.crt");
    let real = node.path("real.crt");
    std::fs::rename(&cert, &real).unwrap();
    symlink(&node.path("nowhere.crt"), &cert);
    node.fails_naming_the_cert("does not resolve", "dangling symlink");
    symlink(&cert, &cert);
    node.fails_naming_the_cert("does not resolve", "symlink to itself");
    let open = node.path("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::copy(&real, open.join("server.crt")).unwrap();
    symlink(&open.join("server.crt"), &cert);
    node.fails_naming_the_cert(
        "writable by group or others",
        "symlink into a world-writable directory",
    );
    symlink(&real, &cert);
    assert!(
        node.tls_lines()[0].starts_with("PASS"),
        "a symlink to a good file is fine"
    );
}

fn symlink(target: &Path, link: &Path) {
    let _ = std::fs::remove_file(link);
    std::os::unix::fs::symlink(target, link).unwrap();
}

#[test]
fn garbage_truncated_and_expired_certificates_fail_naming_the_file() {
    let node = TlsNode::new();
    let good = std::fs::read_to_string(node.path("server.crt")).unwrap();
    let mut binary: Vec<u8> = (0..=255u8).cycle().take(64 << 10).collect();
    binary.extend_from_slice(b"\n-----BEGIN CERTIFICATE\xff-----\n");
    node.put("server.crt", &binary);
    node.fails_naming_the_cert("PEM", "binary garbage");
    let no_end = good
        .lines()
        .filter(|l| !l.starts_with("-----END"))
        .collect::<Vec<_>>()
        .join("\n");
    node.put("server.crt", no_end.as_bytes());
    node.fails_naming_the_cert("a broken PEM block (incomplete PEM)", "no END line");
    node.put("server.crt", &vec![b'A'; 2 << 20]);
    node.fails_naming_the_cert("larger than", "a huge file");
    node.cert("server.crt", 2000, 2001);
    node.fails_naming_the_cert("expired on 2001-01-01", "expired");
}

#[test]
fn one_file_named_by_several_keys_is_judged_for_each_through_the_real_binary() {
    let node = TlsNode::new();
    // A key and its certificate in one PEM, the certificate expired: it
    // fails as the certificate it is named as, as it does in two files.
    node.cert("old.crt", 2000, 2001);
    let key = std::fs::read(node.path("old.crt.key")).unwrap();
    let cert = std::fs::read(node.path("old.crt")).unwrap();
    write_mode(&node.path("both.pem"), &[key, cert].concat(), 0o600);
    node.name_files(&[
        ("IMEX_SERVER_KEY", "both.pem"),
        ("IMEX_SERVER_CERT", "both.pem"),
        ("IMEX_SERVER_CERT_AUTH", "ca.crt"),
    ]);
    let lines = node.tls_lines();
    let both = node.path("both.pem").display().to_string();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].starts_with(&format!(
            "FAIL  imex-tls        {both} (IMEX_SERVER_CERT), certificate 1"
        )) && lines[0].contains("expired on 2001-01-01"),
        "{}",
        lines[0]
    );
    // A certificate also named as the client's key fails as a key.
    node.name_files(&[
        ("IMEX_SERVER_KEY", "server.crt.key"),
        ("IMEX_SERVER_CERT", "server.crt"),
        ("IMEX_SERVER_CERT_AUTH", "ca.crt"),
        ("IMEX_CLIENT_KEY", "ca.crt"),
        ("IMEX_CLIENT_CERT", "server.crt"),
    ]);
    let lines = node.tls_lines();
    let ca = node.path("ca.crt").display().to_string();
    assert!(
        lines.iter().any(|l| l.starts_with("FAIL")
            && l.contains(&format!(
                "{ca} (IMEX_CLIENT_KEY) holds no PEM private key (it holds: CERTIFICATE)"
            ))),
        "{lines:#?}"
    );
    assert!(lines.iter().all(|l| l.starts_with("FAIL")), "{lines:#?}");
}
