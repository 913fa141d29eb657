//! The config's one URL, `[job] prometheus_url`: checked when the file is
//! read, as every other key is, so `slurm-imex job` never finds it unusable
//! later. Plain http only (the job view's client is built without TLS):
//! `http://host[:port][/path]`, the server's base URL, which the API path
//! is appended to.

/// Why `url` is not a usable `http://host[:port][/path]`, and the fix, as
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
            "has no scheme: write \"http://{url}\" (only http:// is supported)"
        ));
    };
    match scheme {
        "http" => {}
        "https" => {
            return Some(
                "https is not supported (the client has no TLS): give Prometheus's own http:// \
                 address, or an https proxy's plain http:// side"
                    .into(),
            )
        }
        _ => {
            return Some(format!(
                "{scheme}:// is not supported: write \"http://host:9090\""
            ))
        }
    }
    if rest.contains(['?', '#']) {
        return Some(
            "has a query or a fragment: give the server's base URL, such as \"http://host:9090\" \
             (the API path is added to it)"
                .into(),
        );
    }
    let authority = rest.split('/').next().unwrap_or_default();
    host_port_problem(authority.rsplit('@').next().unwrap_or_default())
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
    fn plain_http_base_urls_pass() {
        for ok in [
            "",
            "http://prom:9090",
            "http://prom",
            "http://10.0.0.5:9090/",
            "http://[fd00::5]:9090",
            "http://gw/prometheus",
        ] {
            assert_eq!(problem(ok), None, "{ok}");
        }
    }

    #[test]
    fn each_unusable_url_says_what_and_the_fix() {
        for (bad, says) in [
            ("host:9090", "write \"http://host:9090\""),
            ("https://prom:9090", "https proxy's plain http:// side"),
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
