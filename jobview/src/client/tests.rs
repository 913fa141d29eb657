//! The client against a store served over TLS in-process (the tests' fake
//! Prometheus, with a test CA): trusted through the CA file or not,
//! credentials sent or refused, and a store that is down.

use super::*;
use crate::config::TestConfig as Config;
use fake_prometheus::{refused_url, FakePrometheus, TestCa};
use std::os::unix::fs::PermissionsExt;

/// What the store answers `up` with once the request is let in.
const ANSWER: &str = r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;

/// A store over TLS with a certificate `signer` signed, asked by a client
/// trusting `trusted` (`[job] prometheus_ca_file`): the store, the line the
/// ask failed with, and the config's directory.
fn ask_trusting(signer: &TestCa, trusted: &TestCa) -> (FakePrometheus, String, tempfile::TempDir) {
    let store = FakePrometheus::builder().tls(signer).start();
    let toml = format!(
        "[job]\nprometheus_url = \"{}\"\nprometheus_ca_file = \"{{dir}}/ca.pem\"\n",
        store.url()
    );
    let (dir, cfg) = setup(&[("ca.pem", trusted.pem(), 0o644)], &toml);
    let line = ask(&Client::from_config(&cfg).unwrap(), store.url())
        .unwrap_err()
        .to_string();
    (store, line, dir)
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

/// A store over TLS answering only basic auth as imex:pw, its CA, and the
/// config trusting that CA as user "imex" with `password` in `{dir}/pass`.
fn basic_auth(password: &str) -> (FakePrometheus, TestCa, tempfile::TempDir, Config) {
    let ca = TestCa::new();
    let store = FakePrometheus::builder()
        .tls(&ca)
        .basic_auth("imex", "pw")
        .start();
    let toml = format!(
        "[job]\nprometheus_url = \"{}\"\nprometheus_ca_file = \"{{dir}}/ca.pem\"\n\
         prometheus_user = \"imex\"\nprometheus_password_file = \"{{dir}}/pass\"\n",
        store.url()
    );
    let (dir, cfg) = setup(
        &[("ca.pem", ca.pem(), 0o644), ("pass", password, 0o600)],
        &toml,
    );
    (store, ca, dir, cfg)
}

#[test]
fn basic_auth_over_tls_trusted_through_the_ca_file() {
    let (store, _ca, _d, cfg) = basic_auth("pw\n");
    let url = store.url();
    let client = Client::from_config(&cfg).unwrap();
    assert_eq!(ask(&client, url).unwrap(), ANSWER);
    // imex:pw, base64.
    assert!(!format!("{client:?}").contains("aW1leDpwdw"), "{client:?}");
    let asked = store.requests();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].header("authorization"), Some("Basic aW1leDpwdw=="));
}

#[test]
fn a_wrong_password_is_one_line_naming_the_keys() {
    let (store, ca, d, cfg) = basic_auth("wrong\n");
    let url = store.url();
    let line = ask(&Client::from_config(&cfg).unwrap(), url)
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
    let (_d, cfg) = setup(&[("ca.pem", ca.pem(), 0o644)], &toml);
    let line = ask(&Client::from_config(&cfg).unwrap(), url).unwrap_err();
    assert_eq!(
        line.to_string(),
        format!("Prometheus at {url}: 401 Unauthorized: {NO_CREDENTIALS}")
    );
}

#[test]
fn a_bearer_token_is_sent_from_its_file() {
    let ca = TestCa::new();
    let store = FakePrometheus::builder()
        .tls(&ca)
        .bearer_token("tok.en-1")
        .start();
    let url = store.url();
    let toml = format!(
        "[job]\nprometheus_url = \"{url}\"\nprometheus_ca_file = \"{{dir}}/ca.pem\"\n\
         prometheus_bearer_token_file = \"{{dir}}/token\"\n"
    );
    let (_d, cfg) = setup(
        &[("ca.pem", ca.pem(), 0o644), ("token", "tok.en-1\n", 0o400)],
        &toml,
    );
    assert_eq!(
        ask(&Client::from_config(&cfg).unwrap(), url).unwrap(),
        ANSWER
    );
    let head = store.requests()[0].clone();
    assert_eq!(
        head.header("authorization"),
        Some("Bearer tok.en-1"),
        "{head:?}"
    );
}

#[test]
fn an_untrusted_certificate_is_one_line_naming_the_fix() {
    let (store, line, d) = ask_trusting(&TestCa::new(), &TestCa::new());
    let url = store.url();
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
            ask(&client, url).unwrap_err().to_string(),
            format!(
                "Prometheus at {url}: certificate not trusted (unknown issuer): set [job] \
                 prometheus_ca_file to the CA that signed it"
            )
        ),
        Err(e) => assert!(e.to_string().contains("install the ca-certificates"), "{e}"),
    }
    assert!(store.requests().is_empty(), "no request crossed");
}

#[test]
fn a_ca_of_the_same_name_but_another_key_is_not_trusted_either() {
    // A CA file of the store CA's name made anew (a rotated CA): the
    // certificate's signature does not verify.
    let (store, line, _d) = ask_trusting(&TestCa::named("site CA"), &TestCa::named("site CA"));
    assert!(
        line.contains(": certificate not trusted (not signed by the CA of that name"),
        "{line}"
    );
    assert!(
        line.ends_with("did not sign it: give the CA that did"),
        "{line}"
    );
    assert!(store.requests().is_empty(), "no request crossed");
}

#[test]
fn a_store_that_is_down_is_one_line() {
    let url = refused_url("https");
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
