//! Authentication and encryption between the IMEX daemons (the `imex-tls`
//! check): opt-in with `IMEX_ENABLE_AUTH_ENCRYPTION=1`. In SSL_TLS mode
//! with files (`IMEX_AUTH_SOURCE=FILE`), every key, certificate and CA the
//! effective config names is judged ([`crate::tls_file`]); the server's
//! three must be set. Kerberos (GSS modes) and keys taken from the
//! daemon's environment (ENV_PATH, ENV_VAL) are named as not checkable.

use crate::check::Check;
use crate::daemon_cfg::{DaemonCfg, Effective};
use crate::tls_file::{self, Kind};
use std::path::Path;

const CHECK: &str = "imex-tls";

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
    let mut judged: Vec<String> = Vec::new();
    effective
        .differing(&KEYS)
        .into_iter()
        .flat_map(|cfg| judge_config(cfg, now, &mut judged))
        .collect()
}

fn judge_config(cfg: &DaemonCfg, now: i64, judged: &mut Vec<String>) -> Vec<Check> {
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
    found.extend(files(cfg, now, judged));
    found
}

/// A FAIL per file that is missing or bad; else one PASS.
fn files(cfg: &DaemonCfg, now: i64, judged: &mut Vec<String>) -> Vec<Check> {
    let path = cfg.path.display();
    let (mut fails, mut good, mut first) = (Vec::new(), 0, None::<(i64, String, String)>);
    for (key, kind, needed) in FILES {
        let file = cfg.value(key);
        if file.is_empty() {
            if needed {
                fails.push(Check::fail(
                    CHECK,
                    format!(
                        "{path}: IMEX_AUTH_ENCRYPTION_MODE=SSL_TLS needs {key}, which is not set"
                    ),
                    format!("set {key}=<a PEM file only root can read> in {path}"),
                ));
            }
            continue;
        }
        if judged.iter().any(|j| j == file) {
            continue;
        }
        judged.push(file.to_string());
        match tls_file::judge(key, Path::new(file), kind, now) {
            Ok(g) => {
                good += 1;
                if let Some((until, subject)) = g.first_expiry {
                    if first.as_ref().is_none_or(|(t, _, _)| until < *t) {
                        first = Some((until, subject, file.to_string()));
                    }
                }
            }
            Err(bad) => fails.push(Check::fail(CHECK, bad.found, bad.remedy)),
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
