//! One TLS credential file the IMEX daemon loads (`IMEX_SERVER_KEY`,
//! `IMEX_SERVER_CERT`, `IMEX_SERVER_CERT_AUTH` and the client's three): a
//! regular file only root can change, closed to others (a key: to its
//! group too), holding PEM: a private key, or X.509 certificates that are
//! valid now and for the next 30 days.

use slurm_imex_core::fsutil::read_bounded;
use slurm_imex_core::timespec::format_ts;
use slurm_imex_core::trust::{self, Expect};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use x509_parser::pem::Pem;

/// Most bytes read of one file (a CA bundle of every public root is ~220 KiB).
pub const MAX_PEM_BYTES: u64 = 1 << 20;

/// Most PEM blocks looked at in one file.
const MAX_BLOCKS: usize = 1024;

/// A certificate expiring sooner than this fails: renewing takes time.
pub const EXPIRY_MARGIN_S: i64 = 30 * 86400;

/// The PEM labels of a private key (RFC 7468, and OpenSSL's older ones).
const KEY_LABELS: [&str; 4] = [
    "PRIVATE KEY",
    "RSA PRIVATE KEY",
    "EC PRIVATE KEY",
    "ENCRYPTED PRIVATE KEY",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Key,
    Cert,
}

/// A file that passed; for certificates, the one that expires first
/// (`notAfter`, subject).
#[derive(Debug)]
pub struct Good {
    pub first_expiry: Option<(i64, String)>,
}

/// A file that failed: what was found, and the fix.
#[derive(Debug)]
pub struct Bad {
    pub found: String,
    pub remedy: String,
}

fn bad(found: impl Into<String>, remedy: impl Into<String>) -> Bad {
    Bad {
        found: found.into(),
        remedy: remedy.into(),
    }
}

/// Judge the file `key` names, at `now` (seconds since the epoch).
pub fn judge(key: &str, path: &Path, kind: Kind, now: i64) -> Result<Good, Bad> {
    if !path.is_absolute() {
        return Err(bad(
            format!("{key}={} is not an absolute path", path.display()),
            format!("give {key} the file's full path"),
        ));
    }
    private(key, path, kind)?;
    let bytes = read_bounded(path, MAX_PEM_BYTES)
        .map_err(|e| bad(format!("{key}: {e}"), write_pem(path, kind)))?;
    let blocks = pem_blocks(&bytes).map_err(|why| {
        bad(
            format!("{} ({key}): {why}", path.display()),
            write_pem(path, kind),
        )
    })?;
    match kind {
        Kind::Key => private_key(key, path, &blocks),
        Kind::Cert => certificates(key, path, &blocks, now),
    }
}

/// A regular file root's alone to change (every directory above too), and
/// closed to others: a key also to its group.
fn private(key: &str, path: &Path, kind: Kind) -> Result<(), Bad> {
    let mode_fix = match kind {
        Kind::Key => format!("chmod 0600 {}", path.display()),
        Kind::Cert => format!("chmod 0640 {}", path.display()),
    };
    trust::check(path, Expect::File, key).map_err(|e| {
        bad(
            e.to_string(),
            format!("chown root:root {}; {mode_fix}", path.display()),
        )
    })?;
    let mode = std::fs::metadata(path)
        .map(|m| m.permissions().mode() & 0o7777)
        .map_err(|e| bad(format!("{key} {}: {e}", path.display()), mode_fix.clone()))?;
    let (closed, who, why) = match kind {
        Kind::Key => (
            0o046,
            "its group or others",
            ": a private key must be root's alone",
        ),
        Kind::Cert => (0o006, "others", ""),
    };
    if mode & closed != 0 {
        return Err(bad(
            format!(
                "{} ({key}) is open to {who} (mode {mode:04o}){why}",
                path.display()
            ),
            mode_fix,
        ));
    }
    Ok(())
}

fn write_pem(path: &Path, kind: Kind) -> String {
    let what = match kind {
        Kind::Key => "the PEM private key (-----BEGIN PRIVATE KEY-----)",
        Kind::Cert => "the PEM certificate(s) (-----BEGIN CERTIFICATE-----)",
    };
    format!("put {what} at {}", path.display())
}

/// Every PEM block, or why the file is not PEM.
fn pem_blocks(bytes: &[u8]) -> Result<Vec<Pem>, String> {
    let mut blocks = Vec::new();
    for block in Pem::iter_from_buffer(bytes).take(MAX_BLOCKS) {
        blocks.push(block.map_err(|e| format!("a broken PEM block ({e})"))?);
    }
    if blocks.is_empty() {
        return Err("no PEM block (-----BEGIN ...-----) in it".into());
    }
    Ok(blocks)
}

fn private_key(key: &str, path: &Path, blocks: &[Pem]) -> Result<Good, Bad> {
    // A key's DER is a SEQUENCE (PKCS#8, PKCS#1, SEC1 alike).
    let is_key =
        |b: &Pem| KEY_LABELS.contains(&b.label.as_str()) && b.contents.first() == Some(&0x30);
    if blocks.iter().any(is_key) {
        return Ok(Good { first_expiry: None });
    }
    let labels: Vec<&str> = blocks.iter().map(|b| b.label.as_str()).collect();
    Err(bad(
        format!(
            "{} ({key}) holds no PEM private key (it holds: {})",
            path.display(),
            labels.join(", ")
        ),
        write_pem(path, Kind::Key),
    ))
}

fn certificates(key: &str, path: &Path, blocks: &[Pem], now: i64) -> Result<Good, Bad> {
    let mut first: Option<(i64, String)> = None;
    let certs = blocks.iter().filter(|b| b.label == "CERTIFICATE");
    for (i, block) in certs.enumerate() {
        let where_ = format!("{} ({key}), certificate {}", path.display(), i + 1);
        let cert = block.parse_x509().map_err(|e| {
            bad(
                format!("{where_}: not X.509 ({e})"),
                write_pem(path, Kind::Cert),
            )
        })?;
        let subject = cert.subject().to_string();
        let (from, until) = (
            cert.validity().not_before.timestamp(),
            cert.validity().not_after.timestamp(),
        );
        dates(&format!("{where_} ({subject})"), path, from, until, now)?;
        if first.as_ref().is_none_or(|(t, _)| until < *t) {
            first = Some((until, subject));
        }
    }
    match first {
        Some(_) => Ok(Good {
            first_expiry: first,
        }),
        None => Err(bad(
            format!("{} ({key}) holds no PEM certificate", path.display()),
            write_pem(path, Kind::Cert),
        )),
    }
}

/// Valid now, and for [`EXPIRY_MARGIN_S`] more.
fn dates(what: &str, path: &Path, from: i64, until: i64, now: i64) -> Result<(), Bad> {
    let renew = format!(
        "put a renewed certificate at {}; a running daemon reloads it on SIGUSR1 (systemctl kill -s USR1 nvidia-imex), never restart it for this",
        path.display()
    );
    if now < from {
        return Err(bad(
            format!("{what} is not valid before {}", format_ts(from)),
            renew,
        ));
    }
    if until <= now {
        return Err(bad(
            format!("{what} expired on {}", format_ts(until)),
            renew,
        ));
    }
    if until - now < EXPIRY_MARGIN_S {
        let days = (until - now) / 86400;
        return Err(bad(
            format!("{what} expires on {}, in {days} days", format_ts(until)),
            renew,
        ));
    }
    Ok(())
}
