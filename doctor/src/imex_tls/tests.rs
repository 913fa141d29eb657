use super::*;
use crate::check::Status;
use rcgen::{date_time_ymd, CertificateParams, KeyPair};
use slurm_imex_domain::imex::daemon_config::{DaemonConfigFile, Origin};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// Seconds since the epoch at midnight UTC of a day.
fn day(y: i32, m: u8, d: u8) -> i64 {
    date_time_ymd(y, m, d).unix_timestamp()
}

/// A node's TLS files in a private directory: a key and a certificate
/// valid through 2030, each written at the given mode.
struct Tls {
    dir: tempfile::TempDir,
}

impl Tls {
    fn new() -> Tls {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let tls = Tls { dir };
        tls.cert("server.crt", (2030, 1, 1), (2030, 12, 31));
        tls.cert("ca.crt", (2029, 1, 1), (2031, 12, 31));
        tls.cert("client.crt", (2030, 1, 1), (2030, 12, 31));
        tls
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn write(&self, name: &str, text: &[u8], mode: u32) -> PathBuf {
        let p = self.path(name);
        let _ = std::fs::remove_file(&p);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    /// A self-signed certificate valid from one day to another, and its
    /// key as `<name>.key`.
    fn cert(&self, name: &str, from: (i32, u8, u8), until: (i32, u8, u8)) -> PathBuf {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["n1".to_string()]).unwrap();
        params.not_before = date_time_ymd(from.0, from.1, from.2);
        params.not_after = date_time_ymd(until.0, until.1, until.2);
        let cert = params.self_signed(&key).unwrap();
        self.write(
            &format!("{name}.key"),
            key.serialize_pem().as_bytes(),
            0o600,
        );
        self.write(name, cert.pem().as_bytes(), 0o640)
    }

    /// A config turning SSL_TLS on with these files, plus `extra` lines.
    fn config(&self, extra: &str) -> Effective {
        let p = |n: &str| self.path(n).display().to_string();
        let text = format!(
            "IMEX_ENABLE_AUTH_ENCRYPTION=1\nIMEX_AUTH_ENCRYPTION_MODE=SSL_TLS\nIMEX_AUTH_SOURCE=FILE\n\
             IMEX_SERVER_KEY={}\nIMEX_SERVER_CERT={}\nIMEX_SERVER_CERT_AUTH={}\n\
             IMEX_CLIENT_KEY={}\nIMEX_CLIENT_CERT={}\nIMEX_CLIENT_CERT_AUTH={}\n{extra}",
            p("server.crt.key"),
            p("server.crt"),
            p("ca.crt"),
            p("client.crt.key"),
            p("client.crt"),
            p("ca.crt"),
        );
        effective(&text)
    }
}

fn effective(text: &str) -> Effective {
    Effective {
        base: DaemonCfg {
            path: "/etc/nvidia-imex/config.cfg".into(),
            file: DaemonConfigFile::parse(text),
            origin: Origin::Base,
        },
        running: None,
        running_refused: None,
    }
}

/// A config turning SSL_TLS on with each key naming the file given (a
/// name in the TLS directory), none for the keys left out.
fn naming(tls: &Tls, keys: &[(&str, &str)]) -> String {
    let mut text =
        "IMEX_ENABLE_AUTH_ENCRYPTION=1\nIMEX_AUTH_ENCRYPTION_MODE=SSL_TLS\nIMEX_AUTH_SOURCE=FILE\n"
            .to_string();
    for (key, name) in keys {
        text.push_str(&format!("{key}={}\n", tls.path(name).display()));
    }
    text
}

/// The one line, asserting there is one.
fn one(found: Vec<Check>) -> Check {
    assert_eq!(found.len(), 1, "{found:#?}");
    found.into_iter().next().unwrap()
}

const MID_2030: (i32, u8, u8) = (2030, 6, 1);

fn mid_2030() -> i64 {
    day(MID_2030.0, MID_2030.1, MID_2030.2)
}

#[test]
fn good_files_pass_naming_the_first_to_expire() {
    let tls = Tls::new();
    let f = one(check(&tls.config(""), mid_2030()));
    assert_eq!(f.verdict, Status::Pass, "{}", f.line());
    assert!(
        f.found.contains("5 files"),
        "the CA is judged once: {}",
        f.line()
    );
    assert!(
        f.found
            .contains("first to expire: CN=rcgen self signed cert"),
        "{}",
        f.line()
    );
    assert!(f.found.contains("2030-12-31"), "{}", f.line());
}

#[test]
fn an_expired_certificate_fails_naming_the_file_and_sigusr1() {
    let tls = Tls::new();
    let found = check(&tls.config(""), day(2031, 1, 2));
    assert_eq!(found.len(), 2, "the server's and the client's: {found:#?}");
    let f = &found[0];
    assert_eq!(f.verdict, Status::Fail, "{}", f.line());
    let server = tls.path("server.crt").display().to_string();
    assert!(
        f.found.contains(&server) && f.found.contains("expired on 2030-12-31"),
        "{}",
        f.line()
    );
    assert!(
        f.remedy.contains("systemctl kill -s USR1 nvidia-imex"),
        "{}",
        f.line()
    );
    let found = check(&tls.config(""), day(2029, 12, 1));
    assert!(
        found[0].found.contains("not valid before 2030-01-01"),
        "{}",
        found[0].line()
    );
}

#[test]
fn a_certificate_expiring_within_30_days_fails() {
    let tls = Tls::new();
    let found = check(&tls.config(""), day(2030, 12, 21));
    assert_eq!(found.len(), 2, "{found:#?}");
    let f = &found[0];
    assert_eq!(f.verdict, Status::Fail, "{}", f.line());
    assert!(
        f.found
            .contains("expires on 2030-12-31T00:00:00Z, in 10 days"),
        "{}",
        f.line()
    );
    let f = one(check(&tls.config(""), day(2030, 11, 30)));
    assert_eq!(f.verdict, Status::Pass, "31 days left: {}", f.line());
}

#[test]
fn modes_keys_root_alone_certificates_closed_to_others() {
    let tls = Tls::new();
    let key = tls.path("server.crt.key");
    for (mode, says) in [
        (0o644, "open to its group or others"),
        (0o640, "open to its group or others"),
        (0o604, "open to its group or others"),
    ] {
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)).unwrap();
        let f = one(check(&tls.config(""), mid_2030()));
        assert_eq!(f.verdict, Status::Fail, "{mode:o}: {}", f.line());
        assert!(
            f.found.contains(says) && f.found.contains(&key.display().to_string()),
            "{}",
            f.line()
        );
        assert!(
            f.remedy.contains(&format!("chmod 0600 {}", key.display())),
            "{}",
            f.line()
        );
    }
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o400)).unwrap();
    let cert = tls.path("server.crt");
    std::fs::set_permissions(&cert, std::fs::Permissions::from_mode(0o644)).unwrap();
    let f = one(check(&tls.config(""), mid_2030()));
    assert!(
        f.found.contains("open to others (mode 0644)"),
        "{}",
        f.line()
    );
    std::fs::set_permissions(&cert, std::fs::Permissions::from_mode(0o660)).unwrap();
    let f = one(check(&tls.config(""), mid_2030()));
    assert!(
        f.found.contains("writable by group or others"),
        "{}",
        f.line()
    );
    std::fs::set_permissions(&cert, std::fs::Permissions::from_mode(0o440)).unwrap();
    assert_eq!(
        one(check(&tls.config(""), mid_2030())).verdict,
        Status::Pass
    );
}

#[test]
fn a_file_not_roots_fails_when_run_as_root() {
    if !nix_is_root() {
        return; // as a user, the user's own files are trusted (core::trust)
    }
    let tls = Tls::new();
    let key = tls.path("client.crt.key");
    std::os::unix::fs::chown(&key, Some(65534), None).unwrap();
    let f = one(check(&tls.config(""), mid_2030()));
    assert!(
        f.found.contains("owned by uid 65534") && f.remedy.contains("chown root:root"),
        "{}",
        f.line()
    );
}

fn nix_is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn missing_server_files_and_bad_contents_each_fail_naming_the_file() {
    let tls = Tls::new();
    let bare = effective(
        "IMEX_ENABLE_AUTH_ENCRYPTION=1\nIMEX_AUTH_ENCRYPTION_MODE=SSL_TLS\nIMEX_AUTH_SOURCE=FILE\n",
    );
    let found = check(&bare, mid_2030());
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found
        .iter()
        .all(|f| f.verdict == Status::Fail && f.remedy.contains("/etc/nvidia-imex/config.cfg")));
    assert!(
        found[0].found.contains("needs IMEX_SERVER_KEY"),
        "{}",
        found[0].line()
    );
    let cert_pem = std::fs::read(tls.path("ca.crt")).unwrap();
    for (body, says) in [
        (
            cert_pem.clone(),
            "holds no PEM private key (it holds: CERTIFICATE)",
        ),
        (b"\x7fELF\x00\x01\xff\xfe garbage".to_vec(), "no PEM block"),
        (
            b"-----BEGIN PRIVATE KEY-----\nMIIB\n".to_vec(),
            "a broken PEM block (incomplete PEM)",
        ),
        (
            b"-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----\n".to_vec(),
            "base64",
        ),
        (
            b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".to_vec(),
            "no PEM private key",
        ),
    ] {
        tls.write("server.crt.key", &body, 0o600);
        let f = one(check(&tls.config(""), mid_2030()));
        assert_eq!(f.verdict, Status::Fail);
        assert!(
            f.found.contains(says) && f.found.contains("server.crt.key"),
            "{says}: {}",
            f.line()
        );
    }
    tls.write(
        "server.crt.key",
        b"-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n",
        0o600,
    );
    tls.write(
        "server.crt",
        b"-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n",
        0o640,
    );
    let found = check(&tls.config(""), mid_2030());
    assert!(
        found.iter().any(|f| f
            .found
            .contains("server.crt (IMEX_SERVER_CERT), certificate 1: not X.509")),
        "{found:#?}"
    );
}

#[test]
fn not_a_regular_file_or_a_relative_path_fails() {
    let tls = Tls::new();
    let key = tls.path("server.crt.key");
    std::fs::remove_file(&key).unwrap();
    std::fs::create_dir(&key).unwrap();
    let f = one(check(&tls.config(""), mid_2030()));
    assert!(
        f.found.contains("is a directory, not a regular file"),
        "{}",
        f.line()
    );
    std::fs::remove_dir(&key).unwrap();
    nix_mkfifo(&key);
    let f = one(check(&tls.config(""), mid_2030()));
    assert!(f.found.contains("a FIFO"), "{}", f.line());
    std::fs::remove_file(&key).unwrap();
    let f = one(check(&tls.config(""), mid_2030()));
    assert!(f.found.contains("does not exist"), "{}", f.line());
    let rel = effective("IMEX_ENABLE_AUTH_ENCRYPTION=1\nIMEX_AUTH_ENCRYPTION_MODE=SSL_TLS\nIMEX_AUTH_SOURCE=FILE\nIMEX_SERVER_KEY=k.pem\n");
    let found = check(&rel, mid_2030());
    assert!(
        found[0]
            .found
            .contains("IMEX_SERVER_KEY=k.pem is not an absolute path"),
        "{found:#?}"
    );
}

fn nix_mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: c is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

#[test]
fn off_gss_env_and_bad_modes() {
    let f = one(check(&effective("IMEX_ENABLE_AUTH_ENCRYPTION=0\n"), 0));
    assert_eq!(f.verdict, Status::Pass, "{}", f.line());
    assert_eq!(one(check(&effective(""), 0)).verdict, Status::Pass);
    let on = "IMEX_ENABLE_AUTH_ENCRYPTION=1\n";
    for (extra, verdict, says) in [
        (
            "IMEX_AUTH_ENCRYPTION_MODE=GSS_AUTH_ENCRYPT\n",
            Status::Warn,
            "cannot check",
        ),
        (
            "IMEX_AUTH_ENCRYPTION_MODE=GSS_AUTH_ONLY\n",
            Status::Warn,
            "cannot check",
        ),
        (
            "IMEX_AUTH_ENCRYPTION_MODE=SSL_TLS\nIMEX_AUTH_SOURCE=ENV_PATH\n",
            Status::Warn,
            "cannot see",
        ),
        (
            "IMEX_AUTH_ENCRYPTION_MODE=SSL_TLS\nIMEX_AUTH_SOURCE=ENV_VAL\n",
            Status::Warn,
            "cannot see",
        ),
        (
            "IMEX_AUTH_ENCRYPTION_MODE=SSL_TLS\nIMEX_AUTH_SOURCE=DISK\n",
            Status::Fail,
            "none of FILE",
        ),
        ("", Status::Fail, "IMEX_AUTH_ENCRYPTION_MODE=\"\""),
        (
            "IMEX_AUTH_ENCRYPTION_MODE=TLS\n",
            Status::Fail,
            "unknown mode",
        ),
    ] {
        let f = one(check(&effective(&format!("{on}{extra}")), 0));
        assert_eq!(f.verdict, verdict, "{extra}: {}", f.line());
        assert!(f.found.contains(says), "{}", f.line());
    }
}

#[test]
fn an_empty_source_fails_and_the_files_are_judged_as_files() {
    let tls = Tls::new();
    let e = tls.config("IMEX_AUTH_SOURCE=\n");
    let found = check(&e, mid_2030());
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found[0].remedy.contains("set IMEX_AUTH_SOURCE=FILE"),
        "{}",
        found[0].line()
    );
    assert_eq!(found[1].verdict, Status::Pass);
}

#[test]
fn a_running_copy_with_other_files_is_judged_too() {
    let tls = Tls::new();
    let mut e = effective("IMEX_ENABLE_AUTH_ENCRYPTION=0\n");
    e.running = Some(DaemonCfg {
        path: "/run/slurm-imex/nvidia-imex.cfg".into(),
        file: tls.config("").base.file,
        origin: Origin::Running,
    });
    let found = check(&e, day(2031, 6, 1));
    assert_eq!(found[0].verdict, Status::Pass);
    assert!(
        found[1..].iter().all(|f| f.verdict == Status::Fail),
        "{found:#?}"
    );
    assert!(found[1].found.contains("expired"), "{found:#?}");
}

#[test]
fn one_file_named_as_key_and_certificate_is_judged_as_both() {
    let tls = Tls::new();
    // A key and its certificate in one PEM, the certificate expiring
    // tomorrow: judged as the certificate it is named as, as two files are.
    tls.cert("soon.crt", (2030, 1, 1), (2030, 6, 2));
    let key = std::fs::read(tls.path("soon.crt.key")).unwrap();
    let cert = std::fs::read(tls.path("soon.crt")).unwrap();
    tls.write("both.pem", &[key, cert].concat(), 0o600);
    let server = |key: &str, cert: &str| {
        effective(&naming(
            &tls,
            &[
                ("IMEX_SERVER_KEY", key),
                ("IMEX_SERVER_CERT", cert),
                ("IMEX_SERVER_CERT_AUTH", "ca.crt"),
            ],
        ))
    };
    let both = tls.path("both.pem").display().to_string();
    for (e, file, case) in [
        (server("both.pem", "both.pem"), both.as_str(), "one file"),
        (
            server("soon.crt.key", "soon.crt"),
            &*tls.path("soon.crt").display().to_string(),
            "two files",
        ),
    ] {
        let f = one(check(&e, mid_2030()));
        assert_eq!(f.verdict, Status::Fail, "{case}: {}", f.line());
        assert!(
            f.found
                .starts_with(&format!("{file} (IMEX_SERVER_CERT), certificate 1"))
                && f.found
                    .contains("expires on 2030-06-02T00:00:00Z, in 1 days"),
            "{case}: {}",
            f.line()
        );
    }
    // Valid for long: one file, both roles passed.
    tls.write(
        "both.pem",
        &[
            std::fs::read(tls.path("server.crt.key")).unwrap(),
            std::fs::read(tls.path("server.crt")).unwrap(),
        ]
        .concat(),
        0o600,
    );
    let f = one(check(&server("both.pem", "both.pem"), mid_2030()));
    assert_eq!(f.verdict, Status::Pass, "{}", f.line());
    assert!(f.found.contains("2 files"), "{}", f.line());
    // A key and its certificate in one file: closed to the group, as a key.
    std::fs::set_permissions(tls.path("both.pem"), std::fs::Permissions::from_mode(0o640)).unwrap();
    let f = one(check(&server("both.pem", "both.pem"), mid_2030()));
    assert!(
        f.found
            .contains("(IMEX_SERVER_KEY, IMEX_SERVER_CERT) is open to its group or others")
            && f.remedy == format!("chmod 0600 {both}"),
        "{}",
        f.line()
    );
}

/// A key, and the name of the file it names.
type Named<'a> = (&'a str, &'a str);

#[test]
fn a_file_named_for_another_role_fails_for_that_role() {
    let tls = Tls::new();
    let crt = tls.path("client.crt").display().to_string();
    let key = tls.path("client.crt.key").display().to_string();
    let ca = tls.path("ca.crt").display().to_string();
    let server = [
        ("IMEX_SERVER_KEY", "server.crt.key"),
        ("IMEX_SERVER_CERT", "server.crt"),
        ("IMEX_SERVER_CERT_AUTH", "ca.crt"),
    ];
    // (the client's keys, the line each wrong role gives)
    let cases: [(&[Named], &[String]); 4] = [
        // A certificate also named as the client's key.
        (
            &[
                ("IMEX_CLIENT_KEY", "client.crt"),
                ("IMEX_CLIENT_CERT", "client.crt"),
            ],
            &[format!(
                "{crt} (IMEX_CLIENT_KEY) holds no PEM private key (it holds: CERTIFICATE)"
            )],
        ),
        // The server's certificate named as the client's key too.
        (
            &[("IMEX_CLIENT_KEY", "server.crt")],
            &[format!(
                "{} (IMEX_CLIENT_KEY) holds no PEM private key",
                tls.path("server.crt").display()
            )],
        ),
        // A key named as a certificate, and as a CA.
        (
            &[
                ("IMEX_CLIENT_KEY", "client.crt.key"),
                ("IMEX_CLIENT_CERT", "client.crt.key"),
                ("IMEX_CLIENT_CERT_AUTH", "client.crt.key"),
            ],
            &[format!(
                "{key} (IMEX_CLIENT_CERT, IMEX_CLIENT_CERT_AUTH) holds no PEM certificate"
            )],
        ),
        // The CA named as the client's key.
        (
            &[
                ("IMEX_CLIENT_KEY", "ca.crt"),
                ("IMEX_CLIENT_CERT", "client.crt"),
            ],
            &[format!("{ca} (IMEX_CLIENT_KEY) holds no PEM private key")],
        ),
    ];
    for (client, want) in cases {
        let keys: Vec<(&str, &str)> = server.iter().chain(client).copied().collect();
        let found = check(&effective(&naming(&tls, &keys)), mid_2030());
        for w in want {
            assert!(
                found
                    .iter()
                    .any(|f| f.verdict == Status::Fail && f.found.starts_with(w.as_str())),
                "{client:?}: want {w:?}: {found:#?}"
            );
        }
        assert!(
            found.iter().all(|f| f.verdict == Status::Fail),
            "{client:?}: {found:#?}"
        );
    }
}

#[test]
fn a_role_the_running_copy_adds_to_a_file_is_judged() {
    let tls = Tls::new();
    let mut e = tls.config("");
    // The running copy names the server's certificate as the client's key.
    let mut text = String::new();
    for (key, name) in [
        ("IMEX_SERVER_KEY", "server.crt.key"),
        ("IMEX_SERVER_CERT", "server.crt"),
        ("IMEX_SERVER_CERT_AUTH", "ca.crt"),
        ("IMEX_CLIENT_KEY", "server.crt"),
        ("IMEX_CLIENT_CERT", "client.crt"),
        ("IMEX_CLIENT_CERT_AUTH", "ca.crt"),
    ] {
        text.push_str(&format!("{key}={}\n", tls.path(name).display()));
    }
    e.running = Some(DaemonCfg {
        path: "/run/slurm-imex/nvidia-imex.cfg".into(),
        file: DaemonConfigFile::parse(&format!(
            "IMEX_ENABLE_AUTH_ENCRYPTION=1\nIMEX_AUTH_ENCRYPTION_MODE=SSL_TLS\nIMEX_AUTH_SOURCE=FILE\n{text}"
        )),
        origin: Origin::Running,
    });
    let found = check(&e, mid_2030());
    assert_eq!(found[0].verdict, Status::Pass, "{found:#?}");
    assert!(
        found[1..].iter().any(|f| f.verdict == Status::Fail
            && f.found
                .contains("server.crt (IMEX_CLIENT_KEY) holds no PEM private key")),
        "{found:#?}"
    );
}
