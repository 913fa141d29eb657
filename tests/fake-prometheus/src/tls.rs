//! The fake's `https://`: a test CA made in-process (rcgen), whose PEM a
//! test gives the client as `[job] prometheus_ca_file`, and the server
//! certificate for 127.0.0.1 it signs, served by rustls with ring's crypto.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A certificate authority of the tests' own.
pub struct TestCa {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Default for TestCa {
    fn default() -> Self {
        Self::new()
    }
}

impl TestCa {
    /// A CA of a name no other CA of this process has.
    pub fn new() -> TestCa {
        static CAS: AtomicUsize = AtomicUsize::new(0);
        Self::named(&format!(
            "fake-prometheus test CA {}",
            CAS.fetch_add(1, Ordering::Relaxed)
        ))
    }

    /// A CA named `name`, with a key of its own whatever the name (two CAs
    /// of one name: a CA rotated, or an impostor).
    pub fn named(name: &str) -> TestCa {
        let key = KeyPair::generate().expect("fake-prometheus: CA key");
        let mut params =
            CertificateParams::new(Vec::<String>::new()).expect("fake-prometheus: CA params");
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = params
            .self_signed(&key)
            .expect("fake-prometheus: CA certificate");
        TestCa {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// The CA's certificate, PEM.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// A rustls server config presenting a certificate for 127.0.0.1 this
    /// CA signed.
    pub(crate) fn server_config(&self) -> Arc<rustls::ServerConfig> {
        let key = KeyPair::generate().expect("fake-prometheus: server key");
        let params = CertificateParams::new(vec!["127.0.0.1".to_string()])
            .expect("fake-prometheus: server params");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("fake-prometheus: server certificate");
        let key = PrivateKeyDer::try_from(key.serialize_der()).expect("fake-prometheus: key DER");
        let chain: Vec<CertificateDer<'static>> = vec![cert.der().clone()];
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("fake-prometheus: TLS versions")
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("fake-prometheus: server certificate and key");
        Arc::new(config)
    }
}
