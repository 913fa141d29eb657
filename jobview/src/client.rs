//! The HTTP(S) client of the metrics store (Prometheus, or a store with its
//! query API: VictoriaMetrics, Thanos, Mimir): TLS verified against `[job]
//! prometheus_ca_file` or the system's CA store, basic auth or a bearer
//! token read from a root-only file, and each way a request fails said as
//! one line naming the cause and the key to fix. The secret is sent in a
//! header only; it is never shown, logged or put in a line.

use crate::config::http_url;
use crate::config::JobViewSections;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::text::{cap, PIECE_MAX};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Largest secret or CA file read (a JWT bearer token is a few KiB).
const FILE_MAX: u64 = 1 << 20;

/// The `Authorization` header's value. Never printed.
struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<secret>")
    }
}

/// A client for one store: its agent (with the TLS roots) and credential.
#[derive(Debug)]
pub struct Client {
    agent: ureq::Agent,
    authorization: Option<Secret>,
    /// What a 401 or 403 asks the admin to check.
    auth_hint: String,
    /// What an untrusted certificate asks the admin to do.
    trust_hint: String,
}

impl Default for Client {
    /// Plain http, no credentials (and https against the system's store).
    fn default() -> Self {
        Client {
            agent: ureq::AgentBuilder::new().build(),
            authorization: None,
            auth_hint: NO_CREDENTIALS.into(),
            trust_hint: "set [job] prometheus_ca_file to the CA that signed it".into(),
        }
    }
}

const NO_CREDENTIALS: &str = "it asks for credentials: set [job] prometheus_user and \
     prometheus_password_file, or prometheus_bearer_token_file, in imex.toml";

impl Client {
    /// The client `cfg`'s `[job]` keys describe: the CA file or the
    /// system's CA store for `https://`, and the credential, read now. A
    /// file that is unusable (untrusted, readable by others, empty) is the
    /// config's error, naming `file:line`, the key and the fix.
    pub fn from_config(cfg: &dyn JobViewSections) -> Result<Client> {
        let job = cfg.job();
        let mut client = Client::default();
        if http_url::is_https(&job.prometheus_url) {
            let roots = match &job.prometheus_ca_file {
                Some(ca) => ca_file_roots(cfg, ca)?,
                None => system_roots()?,
            };
            if let Some(ca) = &job.prometheus_ca_file {
                client.trust_hint = format!(
                    "[job] prometheus_ca_file {} did not sign it: give the CA that did",
                    ca.display()
                );
            }
            client.agent = ureq::AgentBuilder::new().tls_config(tls(roots)?).build();
        }
        if let Some(file) = &job.prometheus_password_file {
            let password = secret(cfg, "job.prometheus_password_file", file)?;
            let pair = format!("{}:{password}", job.prometheus_user);
            let encoded = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, pair);
            client.authorization = Some(Secret(format!("Basic {encoded}")));
            client.auth_hint = format!(
                "check [job] prometheus_user ({:?}) and the password in prometheus_password_file {}",
                cap(&job.prometheus_user, PIECE_MAX),
                file.display()
            );
        } else if let Some(file) = &job.prometheus_bearer_token_file {
            let token = secret(cfg, "job.prometheus_bearer_token_file", file)?;
            client.authorization = Some(Secret(format!("Bearer {token}")));
            client.auth_hint = format!(
                "check the token in [job] prometheus_bearer_token_file {}",
                file.display()
            );
        }
        Ok(client)
    }

    /// POST `form` to `url` within `timeout`: the response, whatever its
    /// status, except 401 and 403, which are the credential's error; a
    /// request that got no response is one line naming why.
    pub fn post_form(
        &self,
        base: &str,
        url: &str,
        timeout: Duration,
        form: &[(&str, &str)],
    ) -> Result<ureq::Response> {
        let mut request = self.agent.post(url).timeout(timeout);
        if let Some(Secret(value)) = &self.authorization {
            request = request.set("Authorization", value);
        }
        match request.send_form(form) {
            Ok(r) => Ok(r),
            Err(ureq::Error::Status(code @ (401 | 403), r)) => Err(Error::new(format!(
                "Prometheus at {base}: {code} {}: {}",
                cap(r.status_text(), PIECE_MAX),
                self.auth_hint
            ))),
            Err(ureq::Error::Status(_, r)) => Ok(r),
            Err(ureq::Error::Transport(t)) => Err(Error::new(format!(
                "Prometheus at {base}: {}",
                self.cause(&t)
            ))),
        }
    }

    /// Why no response came, and what to do: TLS, refused, name, else
    /// ureq's own words.
    fn cause(&self, t: &ureq::Transport) -> String {
        if let Some(tls) = rustls_error(t) {
            return tls_cause(tls, &self.trust_hint);
        }
        let io = io_error(t);
        match (t.kind(), io.map(std::io::Error::kind)) {
            (_, Some(std::io::ErrorKind::ConnectionRefused)) => {
                "connection refused: is it running, and listening on that port?".into()
            }
            (ureq::ErrorKind::Dns, _) => format!(
                "its host name does not resolve ({}): check [job] prometheus_url",
                cap(&t.to_string(), PIECE_MAX)
            ),
            _ => format!("did not answer: {}", cap(&t.to_string(), PIECE_MAX)),
        }
    }
}

/// The io::Error under a transport error, if any.
fn io_error(t: &ureq::Transport) -> Option<&std::io::Error> {
    let mut source = std::error::Error::source(t);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        source = e.source();
    }
    None
}

/// The TLS error under a transport error, if any (rustls's error travels
/// inside an io::Error, which `source` skips).
fn rustls_error(t: &ureq::Transport) -> Option<&rustls::Error> {
    io_error(t)?.get_ref()?.downcast_ref::<rustls::Error>()
}

/// A TLS failure as the admin fixes it.
fn tls_cause(e: &rustls::Error, trust_hint: &str) -> String {
    use rustls::CertificateError as C;
    match e {
        rustls::Error::InvalidCertificate(C::UnknownIssuer) => {
            format!("certificate not trusted (unknown issuer): {trust_hint}")
        }
        rustls::Error::InvalidCertificate(C::BadSignature) => format!(
            "certificate not trusted (not signed by the CA of that name it was checked \
             against): {trust_hint}"
        ),
        rustls::Error::InvalidCertificate(C::NotValidForName)
        | rustls::Error::InvalidCertificate(C::NotValidForNameContext { .. }) => {
            "certificate not valid for this host name: write the name it was issued for in \
             [job] prometheus_url"
                .into()
        }
        rustls::Error::InvalidCertificate(C::Expired | C::ExpiredContext { .. }) => {
            "certificate expired: renew the store's certificate".into()
        }
        rustls::Error::InvalidMessage(_) => {
            "TLS handshake failed (does it speak plain http there? then write http:// in \
             [job] prometheus_url)"
                .into()
        }
        other => format!(
            "TLS handshake failed: {}",
            cap(&other.to_string(), PIECE_MAX)
        ),
    }
}

/// The rustls config verifying against `roots`, with ring's crypto.
fn tls(roots: rustls::RootCertStore) -> Result<Arc<rustls::ClientConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::new(format!("cannot set up TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The certificates of `[job] prometheus_ca_file`, held to the trust
/// boundary (it decides which server is believed).
fn ca_file_roots(cfg: &dyn JobViewSections, ca: &Path) -> Result<rustls::RootCertStore> {
    let key = "job.prometheus_ca_file";
    let bad = |why: String| {
        Error::invalid(format!(
            "bad config {}: [job] prometheus_ca_file = {:?} {why}",
            cfg.core().place_of(key),
            ca.display().to_string()
        ))
    };
    slurm_imex_core::trust::check(ca, slurm_imex_core::trust::Expect::File, "it")
        .map_err(|e| bad(format!("is not trusted: {e}")))?;
    let pem = slurm_imex_core::fsutil::read_bounded(ca, FILE_MAX)
        .map_err(|e| bad(format!("is unreadable: {e}")))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| bad(format!("is not PEM: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| bad(format!("holds a certificate that is not a CA's: {e}")))?;
    }
    if roots.is_empty() {
        return Err(bad(
            "holds no certificate: give the PEM file of the CA (\"-----BEGIN CERTIFICATE-----\")"
                .into(),
        ));
    }
    Ok(roots)
}

/// The system's CA store (`SSL_CERT_FILE`, else the distribution's bundle).
fn system_roots() -> Result<rustls::RootCertStore> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(found.certs);
    if roots.is_empty() {
        let why = found
            .errors
            .first()
            .map(|e| format!(" ({})", cap(&e.to_string(), PIECE_MAX)))
            .unwrap_or_default();
        return Err(Error::invalid(format!(
            "the system's CA store holds no certificate{why}: install the ca-certificates \
             package, or set [job] prometheus_ca_file to the CA that signed the store's certificate"
        )));
    }
    Ok(roots)
}

/// The one-line secret in `file` (key `key`), held to the trust boundary
/// and readable by its owner alone; its trailing newline dropped.
fn secret(cfg: &dyn JobViewSections, key: &str, file: &Path) -> Result<String> {
    let label = key.replacen('.', "] ", 1);
    let bad = |why: String| {
        Error::invalid(format!(
            "bad config {}: [{label} = {:?} {why}",
            cfg.core().place_of(key),
            file.display().to_string()
        ))
    };
    slurm_imex_core::trust::check_secret(file, "it").map_err(|e| bad(e.to_string()))?;
    let bytes = slurm_imex_core::fsutil::read_bounded(file, FILE_MAX).map_err(|e| {
        let denied = e.to_string().contains("ermission denied");
        bad(if denied {
            format!("cannot be read by this user ({e}): a root-only secret; run as root")
        } else {
            format!("cannot be read: {e}")
        })
    })?;
    let text = String::from_utf8(bytes).map_err(|_| bad("is not UTF-8 text".into()))?;
    let value = text.strip_suffix('\n').unwrap_or(&text);
    let value = value.strip_suffix('\r').unwrap_or(value);
    if value.is_empty() {
        return Err(bad("is empty: write the secret on its one line".into()));
    }
    if value.chars().any(char::is_control) {
        return Err(bad(
            "holds more than one line or a control character: write the secret alone on one line"
                .into(),
        ));
    }
    Ok(value.to_string())
}

#[cfg(test)]
mod tests;
