//! The config's one URL, `[job] prometheus_url`: checked when the file is
//! read, as every other key is, so `slurm-imex job` never finds it unusable
//! later: `http://` or `https://host[:port][/path]`, the server's base
//! URL, which the API path is appended to.

/// Whether `url` is an `https://` one (its TLS settings apply).
pub fn is_https(url: &str) -> bool {
    url.starts_with("https://")
}

/// `url` as it may be shown: any `user:password@` before the host cut out.
pub fn without_credentials(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((_, host)) => format!("{scheme}://…@{host}{path}"),
        None => url.to_string(),
    }
}

/// Why `url` is not a usable `http(s)://host[:port][/path]`, and the fix, as
/// the end of a line that starts with the key and its value; None when it
/// is one, or empty (no server).
pub fn problem(url: &str) -> Option<String> {
    if url.is_empty() {
        return None;
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some(
            "holds a space or a control character: write it as \"http://host:9090\"".into(),
        );
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Some(format!(
            "has no scheme: write \"http://{url}\" or \"https://{url}\""
        ));
    };
    if !matches!(scheme, "http" | "https") {
        return Some(format!(
            "{scheme}:// is not supported: write \"http://host:9090\" or \"https://host:9090\""
        ));
    }
    if rest.split('/').next().unwrap_or_default().contains('@') {
        return Some(
            "holds credentials: give them as [job] prometheus_user and prometheus_password_file \
             (a root-only file), never in the URL"
                .into(),
        );
    }
    if rest.contains(['?', '#']) {
        return Some(
            "has a query or a fragment: give the server's base URL, such as \"http://host:9090\" \
             (the API path is added to it)"
                .into(),
        );
    }
    host_port_problem(rest.split('/').next().unwrap_or_default())
}

/// What is wrong with `host[:port]` (`[v6]:port` too), if anything.
fn host_port_problem(host_port: &str) -> Option<String> {
    let (host, port) = match host_port.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((host, "")) => (host, None),
            Some((host, tail)) => (host, Some(tail.strip_prefix(':').unwrap_or(tail))),
            None => return Some("has an IPv6 address without its closing \"]\"".into()),
        },
        None => match host_port.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        },
    };
    if host.is_empty() {
        return Some("names no host: write \"http://host:9090\"".into());
    }
    match port.map(|p| p.parse::<u16>()) {
        Some(Ok(0)) | Some(Err(_)) => Some(format!(
            "has port \"{}\", which is not a port: use 1 to 65535 (Prometheus listens on 9090)",
            port.unwrap_or_default()
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_and_https_base_urls_pass() {
        for ok in [
            "",
            "http://prom:9090",
            "http://prom",
            "http://10.0.0.5:9090/",
            "http://[fd00::5]:9090",
            "http://gw/prometheus",
            "https://prom.example:9090",
            "https://vm/select/0/prometheus",
        ] {
            assert_eq!(problem(ok), None, "{ok}");
        }
    }

    #[test]
    fn each_unusable_url_says_what_and_the_fix() {
        for (bad, says) in [
            ("host:9090", "write \"http://host:9090\""),
            ("https://u:pw@prom:9090", "never in the URL"),
            ("ftp://prom", "ftp:// is not supported"),
            ("http://", "names no host"),
            ("http://:9090", "names no host"),
            ("http://prom:99999", "not a port"),
            ("http://prom:0", "not a port"),
            ("http://prom:x", "not a port"),
            ("http://[fd00::5", "closing"),
            ("http://prom:9090/?q=1", "base URL"),
            ("http://prom 9090", "space"),
        ] {
            let why = problem(bad).unwrap_or_else(|| panic!("{bad} passed"));
            assert!(why.contains(says), "{bad}: {why}");
        }
    }
}
