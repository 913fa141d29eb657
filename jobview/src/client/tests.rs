//! The client against a store served over TLS in-process (rustls, with a
//! CA and a certificate made by rcgen): trusted through the CA file or
//! not, credentials sent or refused, and a store that is down.

use super::*;
use crate::config::TestConfig as Config;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::PrivateKeyDer;
use std::io::Write as _;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

const ANSWER: &str = r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;

/// A CA's PEM and a server certificate for 127.0.0.1 it signed, with the
/// key; each CA of its own name.
fn ca_and_server_cert() -> (String, CertificateDer<'static>, PrivateKeyDer<'static>) {
    static CAS: AtomicUsize = AtomicUsize::new(0);
    named_ca_and_server_cert(&format!("test CA {}", CAS.fetch_add(1, Ordering::Relaxed)))
}

/// [`ca_and_server_cert`] from a CA named `name` (a new key whatever the name).
fn named_ca_and_server_cert(
    name: &str,
) -> (String, CertificateDer<'static>, PrivateKeyDer<'static>) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name.push(rcgen::DnType::CommonName, name);
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    let key = PrivateKeyDer::try_from(key.serialize_der()).unwrap();
    (ca_cert.pem(), cert.der().clone(), key)
}

/// A store on 127.0.0.1 over TLS: each request's head is recorded, and
/// answered 401 unless its Authorization is `wanted`. Its URL, the heads,
/// and the PEM of the CA that signed its certificate.
fn tls_store(wanted: &'static str) -> (String, Arc<Mutex<Vec<String>>>, String) {
    tls_store_of(wanted, ca_and_server_cert())
}

/// [`tls_store`] with this CA's PEM, certificate and key.
fn tls_store_of(
    wanted: &'static str,
    (ca_pem, cert, key): (String, CertificateDer<'static>, PrivateKeyDer<'static>),
) -> (String, Arc<Mutex<Vec<String>>>, String) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let heads = Arc::new(Mutex::new(Vec::new()));
    let log = heads.clone();
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let conn = rustls::ServerConnection::new(config.clone()).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            let Some(head) = read_head(&mut tls) else {
                continue; // the handshake failed: the client refused us
            };
            let ok = head
                .lines()
                .any(|l| l.eq_ignore_ascii_case(&format!("authorization: {wanted}")));
            log.lock().unwrap().push(head);
            let reply = if ok {
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{ANSWER}",
                    ANSWER.len()
                )
            } else {
                "HTTP/1.1 401 Unauthorized\r\nContent-Length: 13\r\nConnection: close\r\n\r\nUnauthorized\n".into()
            };
            let _ = tls.write_all(reply.as_bytes());
            let _ = tls.flush();
            tls.conn.send_close_notify();
            let _ = tls.flush();
        }
    });
    (url, heads, ca_pem)
}

/// A request's head (up to its blank line); None when the stream failed.
fn read_head(stream: &mut impl std::io::Read) -> Option<String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    Some(String::from_utf8_lossy(&got).into_owned())
}

/// A root-owned (the caller's) directory holding `files` with their modes,
/// and the config `toml` read as `<dir>/imex.toml` (`{dir}` replaced).
fn setup(files: &[(&str, &str, u32)], toml: &str) -> (tempfile::TempDir, Config) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    for (name, text, mode) in files {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(*mode)).unwrap();
    }
    let toml = toml.replace("{dir}", &dir.path().display().to_string());
    let cfg = Config::parse(&toml, &dir.path().join("imex.toml")).unwrap();
    (dir, cfg)
}

fn ask(client: &Client, url: &str) -> Result<String> {
    let r = client.post_form(
        url,
        &format!("{url}/api/v1/query"),
        Duration::from_secs(10),
        &[("query", "up")],
    )?;
    Ok(r.into_string().unwrap())
}

/// `[job]` for `url` trusted through `{dir}/ca.pem`, as user "imex" with
/// the password in `{dir}/pass`.
fn basic_auth_toml(url: &str) -> String {
    format!(
        "[job]\nprometheus_url = \"{url}\"\nprometheus_ca_file = \"{{dir}}/ca.pem\"\n\
         prometheus_user = \"imex\"\nprometheus_password_file = \"{{dir}}/pass\"\n"
    )
}

#[test]
fn basic_auth_over_tls_trusted_through_the_ca_file() {
    // imex:pw, base64.
    let (url, heads, ca) = tls_store("Basic aW1leDpwdw==");
    let toml = basic_auth_toml(&url);
    let (_d, cfg) = setup(&[("ca.pem", &ca, 0o644), ("pass", "pw\n", 0o600)], &toml);
    let client = Client::from_config(&cfg).unwrap();
    assert_eq!(ask(&client, &url).unwrap(), ANSWER);
    assert!(!format!("{client:?}").contains("aW1leDpwdw"), "{client:?}");
    assert_eq!(heads.lock().unwrap().len(), 1);
}

#[test]
fn a_wrong_password_is_one_line_naming_the_keys() {
    let (url, _, ca) = tls_store("Basic aW1leDpwdw==");
    let toml = basic_auth_toml(&url);
    let (d, cfg) = setup(&[("ca.pem", &ca, 0o644), ("pass", "wrong\n", 0o600)], &toml);
    let line = ask(&Client::from_config(&cfg).unwrap(), &url)
        .unwrap_err()
        .to_string();
    assert_eq!(
        line,
        format!(
            "Prometheus at {url}: 401 Unauthorized: check [job] prometheus_user (\"imex\") and the \
             password in prometheus_password_file {}/pass",
            d.path().display()
        )
    );
    assert!(!line.contains("wrong"), "the password is never shown");
    // No credentials at all: the line says which keys to set.
    let toml =
        format!("[job]\nprometheus_url = \"{url}\"\nprometheus_ca_file = \"{{dir}}/ca.pem\"\n");
    let (_d, cfg) = setup(&[("ca.pem", &ca, 0o644)], &toml);
    let line = ask(&Client::from_config(&cfg).unwrap(), &url).unwrap_err();
    assert_eq!(
        line.to_string(),
        format!("Prometheus at {url}: 401 Unauthorized: {NO_CREDENTIALS}")
    );
}

#[test]
fn a_bearer_token_is_sent_from_its_file() {
    let (url, heads, ca) = tls_store("Bearer tok.en-1");
    let toml = format!(
        "[job]\nprometheus_url = \"{url}\"\nprometheus_ca_file = \"{{dir}}/ca.pem\"\n\
         prometheus_bearer_token_file = \"{{dir}}/token\"\n"
    );
    let (_d, cfg) = setup(
        &[("ca.pem", &ca, 0o644), ("token", "tok.en-1\n", 0o400)],
        &toml,
    );
    assert_eq!(
        ask(&Client::from_config(&cfg).unwrap(), &url).unwrap(),
        ANSWER
    );
    let head = heads.lock().unwrap()[0].clone();
    assert!(
        head.contains("authorization: Bearer tok.en-1")
            || head.contains("Authorization: Bearer tok.en-1"),
        "{head}"
    );
}

#[test]
fn an_untrusted_certificate_is_one_line_naming_the_fix() {
    let (url, heads, _) = tls_store("none");
    let (other_ca, _, _) = ca_and_server_cert();
    let toml =
        format!("[job]\nprometheus_url = \"{url}\"\nprometheus_ca_file = \"{{dir}}/ca.pem\"\n");
    let (d, cfg) = setup(&[("ca.pem", &other_ca, 0o644)], &toml);
    let line = ask(&Client::from_config(&cfg).unwrap(), &url)
        .unwrap_err()
        .to_string();
    assert_eq!(
        line,
        format!(
            "Prometheus at {url}: certificate not trusted (unknown issuer): [job] \
             prometheus_ca_file {}/ca.pem did not sign it: give the CA that did",
            d.path().display()
        )
    );
    // The system's store does not know a private CA either.
    let (_d, cfg) = setup(&[], &format!("[job]\nprometheus_url = \"{url}\"\n"));
    match Client::from_config(&cfg) {
        Ok(client) => assert_eq!(
            ask(&client, &url).unwrap_err().to_string(),
            format!(
                "Prometheus at {url}: certificate not trusted (unknown issuer): set [job] \
                 prometheus_ca_file to the CA that signed it"
            )
        ),
        Err(e) => assert!(e.to_string().contains("install the ca-certificates"), "{e}"),
    }
    assert!(heads.lock().unwrap().is_empty(), "no request crossed");
}

#[test]
fn a_ca_of_the_same_name_but_another_key_is_not_trusted_either() {
    // A CA file of the store CA's name made anew (a rotated CA): the
    // certificate's signature does not verify.
    let (url, heads, _) = tls_store_of("none", named_ca_and_server_cert("site CA"));
    let (impostor, _, _) = named_ca_and_server_cert("site CA");
    let toml =
        format!("[job]\nprometheus_url = \"{url}\"\nprometheus_ca_file = \"{{dir}}/ca.pem\"\n");
    let (_d, cfg) = setup(&[("ca.pem", &impostor, 0o644)], &toml);
    let line = ask(&Client::from_config(&cfg).unwrap(), &url)
        .unwrap_err()
        .to_string();
    assert!(
        line.contains(": certificate not trusted (not signed by the CA of that name"),
        "{line}"
    );
    assert!(
        line.ends_with("did not sign it: give the CA that did"),
        "{line}"
    );
    assert!(heads.lock().unwrap().is_empty(), "no request crossed");
}

#[test]
fn a_store_that_is_down_is_one_line() {
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://{}", closed.local_addr().unwrap());
    drop(closed);
    let (_d, cfg) = setup(&[], &format!("[job]\nprometheus_url = \"{url}\"\n"));
    if let Ok(client) = Client::from_config(&cfg) {
        assert_eq!(
            ask(&client, &url).unwrap_err().to_string(),
            format!("Prometheus at {url}: connection refused: is it running, and listening on that port?")
        );
    }
    let plain = url.replacen("https", "http", 1);
    assert_eq!(
        ask(&Client::default(), &plain).unwrap_err().to_string(),
        format!(
            "Prometheus at {plain}: connection refused: is it running, and listening on that port?"
        )
    );
}

#[test]
fn an_unusable_secret_or_ca_file_is_the_configs_line() {
    let head = "[job]\nprometheus_url = \"https://prom:9090\"\n";
    let pass =
        format!("{head}prometheus_user = \"imex\"\nprometheus_password_file = \"{{dir}}/pass\"\n");
    for (text, mode, says) in [
        (
            "pw\n",
            0o644,
            "readable by group or others (mode 0644): chmod go-r",
        ),
        ("pw\n", 0o620, "writable by group or others"),
        ("\n", 0o600, "is empty"),
        ("pw\nmore\n", 0o600, "more than one line"),
    ] {
        let (d, cfg) = setup(&[("pass", text, mode)], &pass);
        let e = Client::from_config(&cfg).unwrap_err();
        let line = e.to_string();
        let start = format!(
            "bad config {}/imex.toml:4: [job] prometheus_password_file = \"{}/pass\" ",
            d.path().display(),
            d.path().display()
        );
        assert!(line.starts_with(&start), "{start}\n{line}");
        assert!(line.contains(says), "{line}");
        assert!(!line.contains("more\n") && !line.contains('\n'), "{line}");
        assert_eq!(e.kind(), slurm_imex_core::error::Kind::Invalid);
    }
    let (d, cfg) = setup(&[], &pass);
    let line = Client::from_config(&cfg).unwrap_err().to_string();
    assert!(
        line.contains(&format!("{}/pass", d.path().display())) && line.contains("does not exist"),
        "{line}"
    );
    let ca = format!("{head}prometheus_ca_file = \"{{dir}}/ca.pem\"\n");
    for (text, mode, says) in [
        ("not pem", 0o644, "holds no certificate"),
        ("x", 0o666, "is not trusted"),
    ] {
        let (_d, cfg) = setup(&[("ca.pem", text, mode)], &ca);
        let line = Client::from_config(&cfg).unwrap_err().to_string();
        assert!(
            line.contains("imex.toml:3: [job] prometheus_ca_file = "),
            "{line}"
        );
        assert!(line.contains(says), "{line}");
    }
}
