//! One TLS credential file the IMEX daemon loads (`IMEX_SERVER_KEY`,
//! `IMEX_SERVER_CERT`, `IMEX_SERVER_CERT_AUTH` and the client's three): a
//! regular file only root can change, closed to others (a key: to its
//! group too), holding PEM: a private key, or X.509 certificates that are
//! valid now and for the next 30 days. One file may be named by several
//! keys (a key and its certificate in one PEM): it is read once and judged
//! for what each of them needs.

use slurm_imex_core::fsutil::read_bounded;
use slurm_imex_core::timespec::format_ts;
use slurm_imex_core::trust::{self, Expect};
use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
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

/// The bytes of every file read in one run, by path: a file several keys
/// name is read once, then judged for each key's role.
#[derive(Debug, Default)]
pub struct Cache {
    read: HashMap<PathBuf, Result<Vec<u8>, String>>,
}

impl Cache {
    fn bytes(&mut self, path: &Path) -> &Result<Vec<u8>, String> {
        self.read
            .entry(path.to_path_buf())
            .or_insert_with(|| read_bounded(path, MAX_PEM_BYTES).map_err(|e| e.to_string()))
    }
}

/// The keys naming one file, as a line names them: `IMEX_SERVER_KEY`, or
/// `IMEX_SERVER_KEY, IMEX_SERVER_CERT`.
fn label(roles: &[(&str, Kind)]) -> String {
    roles.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ")
}

/// Judge the file at `path`, which each of `roles` (a key, and what that
/// key needs) names, at `now` (seconds since the epoch). What the file
/// itself must be is judged once: an absolute path, a regular file root's
/// alone to change, closed to others as its most private role needs (a key:
/// to its group too), PEM. Then its contents are judged for every role: a
/// key must hold a private key, a certificate or CA X.509 certificates
/// valid now and for [`EXPIRY_MARGIN_S`] more, however many other keys
/// name the same file. Err: a line per problem.
pub fn judge(
    path: &Path,
    roles: &[(&str, Kind)],
    now: i64,
    cache: &mut Cache,
) -> Result<Good, Vec<Bad>> {
    let named = label(roles);
    let kinds: Vec<Kind> = [Kind::Key, Kind::Cert]
        .into_iter()
        .filter(|k| roles.iter().any(|(_, r)| r == k))
        .collect();
    if !path.is_absolute() {
        let named_as = match roles {
            [(key, _)] => format!("{key}={}", path.display()),
            _ => format!("{} ({named})", path.display()),
        };
        return Err(vec![bad(
            format!("{named_as} is not an absolute path"),
            format!("give {named} the file's full path"),
        )]);
    }
    let strictest = kinds.first().copied().unwrap_or(Kind::Cert);
    trust::check(path, Expect::File, &named).map_err(|e| {
        vec![bad(
            e.to_string(),
            format!(
                "chown root:root {}; {}",
                path.display(),
                mode_fix(path, strictest)
            ),
        )]
    })?;
    let mut bads = Vec::new();
    if let Err(b) = closed(&named, path, strictest) {
        bads.push(b);
    }
    let bytes = match cache.bytes(path) {
        Ok(bytes) => bytes,
        Err(e) => {
            bads.push(bad(format!("{named}: {e}"), write_pem(path, &kinds)));
            return Err(bads);
        }
    };
    let blocks = match pem_blocks(bytes) {
        Ok(blocks) => blocks,
        Err(why) => {
            bads.push(bad(
                format!("{} ({named}): {why}", path.display()),
                write_pem(path, &kinds),
            ));
            return Err(bads);
        }
    };
    let mut good = Good { first_expiry: None };
    for kind in kinds {
        let of_kind: Vec<(&str, Kind)> =
            roles.iter().copied().filter(|(_, k)| *k == kind).collect();
        let keys = label(&of_kind);
        let judged = match kind {
            Kind::Key => private_key(&keys, path, &blocks),
            Kind::Cert => certificates(&keys, path, &blocks, now),
        };
        match judged {
            Ok(g) => good.first_expiry = good.first_expiry.or(g.first_expiry),
            Err(b) => bads.push(b),
        }
    }
    if bads.is_empty() {
        Ok(good)
    } else {
        Err(bads)
    }
}

fn mode_fix(path: &Path, kind: Kind) -> String {
    match kind {
        Kind::Key => format!("chmod 0600 {}", path.display()),
        Kind::Cert => format!("chmod 0640 {}", path.display()),
    }
}

/// Closed to others: a key also to its group.
fn closed(named: &str, path: &Path, kind: Kind) -> Result<(), Bad> {
    let fix = mode_fix(path, kind);
    let mode = std::fs::metadata(path)
        .map(|m| m.permissions().mode() & 0o7777)
        .map_err(|e| bad(format!("{named} {}: {e}", path.display()), fix.clone()))?;
    let (shut, who, why) = match kind {
        Kind::Key => (
            0o046,
            "its group or others",
            ": a private key must be root's alone",
        ),
        Kind::Cert => (0o006, "others", ""),
    };
    if mode & shut != 0 {
        return Err(bad(
            format!(
                "{} ({named}) is open to {who} (mode {mode:04o}){why}",
                path.display()
            ),
            fix,
        ));
    }
    Ok(())
}

fn write_pem(path: &Path, kinds: &[Kind]) -> String {
    let what: Vec<&str> = kinds
        .iter()
        .map(|k| match k {
            Kind::Key => "the PEM private key (-----BEGIN PRIVATE KEY-----)",
            Kind::Cert => "the PEM certificate(s) (-----BEGIN CERTIFICATE-----)",
        })
        .collect();
    format!("put {} at {}", what.join(" and "), path.display())
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
        write_pem(path, &[Kind::Key]),
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
                write_pem(path, &[Kind::Cert]),
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
            write_pem(path, &[Kind::Cert]),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_named_by_several_keys_is_read_once() {
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = d.path().join("k.pem");
        std::fs::write(
            &path,
            b"-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut cache = Cache::default();
        let first = judge(&path, &[("IMEX_SERVER_CERT", Kind::Cert)], 0, &mut cache).unwrap_err();
        assert!(first[0].found.contains("not X.509"), "{first:?}");
        // Changed on disk since: the bytes read first are judged again.
        std::fs::write(&path, b"nothing").unwrap();
        let again = judge(&path, &[("IMEX_CLIENT_KEY", Kind::Key)], 0, &mut cache).unwrap_err();
        assert!(
            again[0]
                .found
                .contains("(IMEX_CLIENT_KEY) holds no PEM private key (it holds: CERTIFICATE)"),
            "{again:?}"
        );
        assert_eq!(cache.read.len(), 1);
    }
}
