//! Authentication and encryption between the IMEX daemons (the `imex-tls`
//! check): opt-in with `IMEX_ENABLE_AUTH_ENCRYPTION=1`. In SSL_TLS mode
//! with files (`IMEX_AUTH_SOURCE=FILE`), every key, certificate and CA the
//! effective config names is judged ([`crate::tls_file`]) for that key's
//! role, even where several keys name one file (read once); the server's
//! three must be set. Kerberos (GSS modes) and keys taken from the
//! daemon's environment (ENV_PATH, ENV_VAL) are named as not checkable.

use crate::check::{Check, CheckName};
use crate::daemon_cfg::{DaemonCfg, Effective};
use crate::tls_file::{self, Kind};
use std::path::Path;

const CHECK: CheckName = CheckName::ImexTls;

/// The credential keys, what each holds, and whether SSL_TLS needs it.
const FILES: [(&str, Kind, bool); 6] = [
    ("IMEX_SERVER_KEY", Kind::Key, true),
    ("IMEX_SERVER_CERT", Kind::Cert, true),
    ("IMEX_SERVER_CERT_AUTH", Kind::Cert, true),
    ("IMEX_CLIENT_KEY", Kind::Key, false),
    ("IMEX_CLIENT_CERT", Kind::Cert, false),
    ("IMEX_CLIENT_CERT_AUTH", Kind::Cert, false),
];

/// Every key this check reads: the running copy is judged too when it
/// differs from the base config in any of them.
const KEYS: [&str; 9] = [
    "IMEX_ENABLE_AUTH_ENCRYPTION",
    "IMEX_AUTH_ENCRYPTION_MODE",
    "IMEX_AUTH_SOURCE",
    "IMEX_SERVER_KEY",
    "IMEX_SERVER_CERT",
    "IMEX_SERVER_CERT_AUTH",
    "IMEX_CLIENT_KEY",
    "IMEX_CLIENT_CERT",
    "IMEX_CLIENT_CERT_AUTH",
];

/// The `imex-tls` lines at `now` (seconds since the epoch): one PASS or
/// WARN per config judged, or a FAIL per problem found.
pub fn check(effective: &Effective, now: i64) -> Vec<Check> {
    let mut seen = Seen::default();
    effective
        .differing(&KEYS)
        .into_iter()
        .flat_map(|cfg| judge_config(cfg, now, &mut seen))
        .collect()
}

/// What one run has judged already: each file under each key that names
/// it (a file is judged again for a key that names it anew, never twice for
/// the same one), and the bytes of each file read.
#[derive(Default)]
struct Seen {
    judged: Vec<(String, &'static str)>,
    cache: tls_file::Cache,
}

fn judge_config(cfg: &DaemonCfg, now: i64, seen: &mut Seen) -> Vec<Check> {
    let path = cfg.path.display();
    if cfg.value("IMEX_ENABLE_AUTH_ENCRYPTION") != "1" {
        return vec![Check::pass(CHECK, format!("{path}: IMEX_ENABLE_AUTH_ENCRYPTION is not 1: the daemons neither authenticate nor encrypt what they send each other (opt-in: docs/guide.md, \"Authentication and encryption between the daemons\")"))];
    }
    match cfg.value("IMEX_AUTH_ENCRYPTION_MODE") {
        "SSL_TLS" => {}
        mode @ ("GSS_AUTH_ENCRYPT" | "GSS_AUTH_ONLY") => {
            return vec![Check::warn(CHECK,
                format!("{path}: IMEX_AUTH_ENCRYPTION_MODE={mode} (Kerberos): doctor cannot check the host's keytab or tickets"),
                "check the host principal with `klist -k` on this node; the daemon's log names a GSSAPI failure")];
        }
        mode => {
            return vec![Check::fail(CHECK,
                format!("{path}: IMEX_ENABLE_AUTH_ENCRYPTION=1 with IMEX_AUTH_ENCRYPTION_MODE={mode:?}: the daemon refuses to start on an empty or unknown mode"),
                format!("set IMEX_AUTH_ENCRYPTION_MODE=SSL_TLS (or a GSS mode) in {path}"))];
        }
    }
    let mut found = Vec::new();
    match cfg.value("IMEX_AUTH_SOURCE") {
        "FILE" => {}
        source @ ("ENV_PATH" | "ENV_VAL") => {
            return vec![Check::warn(CHECK,
                format!("{path}: IMEX_AUTH_SOURCE={source}: the keys and certificates come from the daemon's environment, which doctor cannot see"),
                "check the variables the unit sets (systemctl show nvidia-imex -p Environment): files root's alone, certificates not near expiry")];
        }
        "" => found.push(Check::fail(CHECK,
            format!("{path}: IMEX_AUTH_ENCRYPTION_MODE=SSL_TLS with IMEX_AUTH_SOURCE empty: NVIDIA's config.cfg says the daemon then refuses to start (the files were judged as FILE)"),
            format!("set IMEX_AUTH_SOURCE=FILE in {path}"))),
        source => {
            return vec![Check::fail(CHECK,
                format!("{path}: IMEX_AUTH_SOURCE={source:?} is none of FILE, ENV_PATH, ENV_VAL: the daemon refuses to start"),
                format!("set IMEX_AUTH_SOURCE=FILE in {path}"))];
        }
    }
    found.extend(files(cfg, now, seen));
    found
}

/// One line's subject, in the order of [`FILES`].
enum Entry<'a> {
    /// A key SSL_TLS needs, not set.
    Unset(&'static str),
    /// A file, and the keys naming it.
    File(&'a str, Vec<(&'static str, Kind)>),
}

/// A FAIL per problem of a file (missing, or bad for a key that names it);
/// else one PASS.
fn files(cfg: &DaemonCfg, now: i64, seen: &mut Seen) -> Vec<Check> {
    let path = cfg.path.display();
    // In the order of FILES: a key not set, or a file with the keys
    // naming it (judged once, for each of them).
    let mut order: Vec<Entry> = Vec::new();
    for (key, kind, needed) in FILES {
        let file = cfg.value(key);
        if file.is_empty() {
            if needed {
                order.push(Entry::Unset(key));
            }
            continue;
        }
        if seen.judged.iter().any(|(f, k)| f == file && *k == key) {
            continue;
        }
        seen.judged.push((file.to_string(), key));
        let named = order.iter_mut().find_map(|o| match o {
            Entry::File(f, roles) if *f == file => Some(roles),
            _ => None,
        });
        match named {
            Some(roles) => roles.push((key, kind)),
            None => order.push(Entry::File(file, vec![(key, kind)])),
        }
    }
    let (mut fails, mut good, mut first) = (Vec::new(), 0, None::<(i64, String, String)>);
    for entry in order {
        let (file, roles) = match entry {
            Entry::File(file, roles) => (file, roles),
            Entry::Unset(key) => {
                fails.push(Check::fail(
                    CHECK,
                    format!(
                        "{path}: IMEX_AUTH_ENCRYPTION_MODE=SSL_TLS needs {key}, which is not set"
                    ),
                    format!("set {key}=<a PEM file only root can read> in {path}"),
                ));
                continue;
            }
        };
        match tls_file::judge(Path::new(file), &roles, now, &mut seen.cache) {
            Ok(g) => {
                good += 1;
                if let Some((until, subject)) = g.first_expiry {
                    if first.as_ref().is_none_or(|(t, _, _)| until < *t) {
                        first = Some((until, subject, file.to_string()));
                    }
                }
            }
            Err(bads) => fails.extend(
                bads.into_iter()
                    .map(|bad| Check::fail(CHECK, bad.found, bad.remedy)),
            ),
        }
    }
    if !fails.is_empty() {
        return fails;
    }
    let expiry = first
        .map(|(until, subject, file)| {
            format!(
                "; first to expire: {subject} in {file}, on {}",
                slurm_imex_core::timespec::format_ts(until)
            )
        })
        .unwrap_or_default();
    vec![Check::pass(
        CHECK,
        format!("{path}: SSL_TLS, {good} files root's, closed to others and in PEM{expiry}"),
    )]
}

#[cfg(test)]
mod tests;
