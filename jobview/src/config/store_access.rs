//! How the job view reaches its metrics store beyond the URL: the CA that
//! signs an `https://` store's certificate (`[job] prometheus_ca_file`,
//! else the system's CA store) and its credentials, basic auth
//! (`prometheus_user` with `prometheus_password_file`) or a bearer token
//! (`prometheus_bearer_token_file`). Their shape is checked when the file
//! is read, as every key is; the files themselves are held to the trust
//! boundary and read only when the store is asked ([`crate::secret`]), so
//! a node that never asks (a prolog) never fails for them.

use super::JobViewConfig;
use std::path::Path;

/// The keys here, each of which a later line may name with its place.
pub const KEYS: [&str; 4] = [
    "job.prometheus_ca_file",
    "job.prometheus_user",
    "job.prometheus_password_file",
    "job.prometheus_bearer_token_file",
];

/// Those of [`KEYS`] that `job` sets: the only ones a later line may
/// name, so the only ones whose places are worth noting at load.
pub fn keys_set(job: &JobViewConfig) -> Vec<&'static str> {
    let set = [
        job.prometheus_ca_file.is_some(),
        !job.prometheus_user.is_empty(),
        job.prometheus_password_file.is_some(),
        job.prometheus_bearer_token_file.is_some(),
    ];
    KEYS.into_iter()
        .zip(set)
        .filter_map(|(key, set)| set.then_some(key))
        .collect()
}

/// The first key of `job` that is unusable as set: the key, its value as
/// the file wrote it, and why with the fix.
pub fn problem(job: &JobViewConfig) -> Option<(&'static str, String, String)> {
    let url = job.prometheus_url.as_str();
    let files = [
        ("job.prometheus_ca_file", &job.prometheus_ca_file),
        (
            "job.prometheus_password_file",
            &job.prometheus_password_file,
        ),
        (
            "job.prometheus_bearer_token_file",
            &job.prometheus_bearer_token_file,
        ),
    ];
    for (key, file) in files {
        if let Some(p) = file.as_deref().filter(|p| !p.is_absolute()) {
            return Some((key, shown(p), "must be an absolute path".into()));
        }
    }
    pairing_problem(job).or_else(|| scheme_problem(job, url))
}

/// Basic auth needs both its keys and a user name without ':'; it and a
/// bearer token exclude each other.
fn pairing_problem(job: &JobViewConfig) -> Option<(&'static str, String, String)> {
    let user = job.prometheus_user.as_str();
    let shown_user = format!(
        "{:?}",
        slurm_imex_core::text::cap(user, slurm_imex_core::text::PIECE_MAX)
    );
    if user.contains(':') || user.chars().any(char::is_control) {
        return Some((
            "job.prometheus_user",
            shown_user,
            "holds a ':' or a control character, which basic auth cannot carry: use the user \
             name the store's web config lists"
                .into(),
        ));
    }
    match (&job.prometheus_password_file, user.is_empty()) {
        (Some(p), true) => {
            return Some((
                "job.prometheus_password_file",
                shown(p),
                "needs [job] prometheus_user, the user name it is the password of".into(),
            ))
        }
        (None, false) => {
            return Some((
                "job.prometheus_user",
                shown_user,
                "needs [job] prometheus_password_file, a root-only file holding the password"
                    .into(),
            ))
        }
        _ => {}
    }
    let token = job.prometheus_bearer_token_file.as_deref()?;
    (!user.is_empty()).then(|| {
        (
            "job.prometheus_bearer_token_file",
            shown(token),
            "and [job] prometheus_user are both set: keep one, a bearer token or basic auth".into(),
        )
    })
}

/// Credentials and a CA file only go with an `https://` store: over plain
/// http a password would cross the network readable, and a CA file would
/// check nothing.
fn scheme_problem(job: &JobViewConfig, url: &str) -> Option<(&'static str, String, String)> {
    if super::http_url::is_https(url) {
        return None;
    }
    let need = if url.is_empty() {
        "but [job] prometheus_url is not set: set it to the store's https:// address, or remove this key".to_string()
    } else {
        format!(
            "but [job] prometheus_url is {:?}, plain http: write its https:// address (a {} must \
             never cross the network readable), or remove this key",
            slurm_imex_core::text::cap(url, slurm_imex_core::text::PIECE_MAX),
            "credential"
        )
    };
    if let Some(p) = &job.prometheus_ca_file {
        return Some(("job.prometheus_ca_file", shown(p), need));
    }
    if !job.prometheus_user.is_empty() {
        let user = format!("{:?}", job.prometheus_user);
        return Some(("job.prometheus_user", user, need));
    }
    let token = job.prometheus_bearer_token_file.as_deref()?;
    Some(("job.prometheus_bearer_token_file", shown(token), need))
}

/// A path as the config file writes it.
fn shown(p: &Path) -> String {
    format!(
        "{:?}",
        slurm_imex_core::text::cap(&p.display().to_string(), slurm_imex_core::text::PIECE_MAX)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(url: &str) -> JobViewConfig {
        JobViewConfig {
            prometheus_url: url.into(),
            ..JobViewConfig::default()
        }
    }

    #[test]
    fn https_with_a_ca_and_either_credential_passes() {
        let mut j = job("https://prom:9090");
        j.prometheus_ca_file = Some("/etc/slurm/prom-ca.pem".into());
        j.prometheus_user = "imex".into();
        j.prometheus_password_file = Some("/etc/slurm/prom.pass".into());
        assert_eq!(problem(&j), None);
        j.prometheus_user.clear();
        j.prometheus_password_file = None;
        j.prometheus_bearer_token_file = Some("/etc/slurm/prom.token".into());
        assert_eq!(problem(&j), None);
        assert_eq!(problem(&job("http://prom:9090")), None);
        assert_eq!(problem(&job("")), None);
    }

    #[test]
    fn each_unusable_setting_names_its_key_and_the_fix() {
        let https = || job("https://prom:9090");
        let mut cases: Vec<(JobViewConfig, &str, &str)> = Vec::new();
        let mut j = https();
        j.prometheus_ca_file = Some("ca.pem".into());
        cases.push((j, "job.prometheus_ca_file", "absolute path"));
        let mut j = https();
        j.prometheus_password_file = Some("/etc/slurm/p".into());
        cases.push((
            j,
            "job.prometheus_password_file",
            "needs [job] prometheus_user",
        ));
        let mut j = https();
        j.prometheus_user = "imex".into();
        cases.push((
            j,
            "job.prometheus_user",
            "needs [job] prometheus_password_file",
        ));
        let mut j = https();
        j.prometheus_user = "a:b".into();
        j.prometheus_password_file = Some("/etc/slurm/p".into());
        cases.push((j, "job.prometheus_user", "':'"));
        let mut j = https();
        j.prometheus_user = "imex".into();
        j.prometheus_password_file = Some("/etc/slurm/p".into());
        j.prometheus_bearer_token_file = Some("/etc/slurm/t".into());
        cases.push((j, "job.prometheus_bearer_token_file", "keep one"));
        let mut j = job("http://prom:9090");
        j.prometheus_bearer_token_file = Some("/etc/slurm/t".into());
        cases.push((j, "job.prometheus_bearer_token_file", "plain http"));
        let mut j = job("http://prom:9090");
        j.prometheus_ca_file = Some("/etc/slurm/ca.pem".into());
        cases.push((j, "job.prometheus_ca_file", "write its https:// address"));
        let mut j = job("");
        j.prometheus_user = "imex".into();
        j.prometheus_password_file = Some("/etc/slurm/p".into());
        cases.push((j, "job.prometheus_user", "prometheus_url is not set"));
        for (j, key, says) in cases {
            let (k, _, why) = problem(&j).unwrap_or_else(|| panic!("{key} passed"));
            assert_eq!(k, key, "{why}");
            assert!(why.contains(says), "{key}: {why}");
        }
    }
}
