//! The config's one URL, `[job] prometheus_url`: checked when the file is
//! read, as every other key is, so `slurm-imex job` never finds it unusable
//! later: `http://` or `https://host[:port][/path]`, the server's base
//! URL, which the API path is appended to.
//!
//! The host, port and the rest are parsed by the `url` crate (the WHATWG
//! URL standard, the parser ureq sends the request with), so what passes
//! here is what the client will connect to. Three things are read from the
//! text as written, because the parser would normalize them away rather
//! than refuse them: the scheme (`HTTP://` and `http:host` are not taken
//! for `http://`), an `@` before the host (credentials, even empty ones,
//! refused without echoing them, also where the rest does not parse), and
//! a host left out (`http:///prom`, which the parser reads as `prom`).

use url::{ParseError, Url};

/// Whether `url` is an `https://` one (its TLS settings apply).
pub fn is_https(url: &str) -> bool {
    url.starts_with("https://")
}

/// `url` as written, in three: the scheme with its `://` (empty without
/// one), the authority (`[user:password@]host[:port]`, up to the first
/// `/`), and the rest.
fn parts(url: &str) -> (&str, &str, &str) {
    let (scheme, rest) = url.split_at(url.find("://").map_or(0, |i| i + 3));
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    (scheme, authority, path)
}

/// `url` as it may be shown: any `user:password@` before the host cut out
/// (read as written: this must hold for text that is no URL at all).
pub fn without_credentials(url: &str) -> String {
    let (scheme, authority, path) = parts(url);
    match authority.rsplit_once('@') {
        Some((_, host)) => format!("{scheme}…@{host}{path}"),
        None => url.to_string(),
    }
}

const CREDENTIALS: &str = "holds credentials: give them as [job] prometheus_user and \
     prometheus_password_file (a root-only file), never in the URL";

/// Why `url` is not a usable `http(s)://host[:port][/path]`, and the fix, as
/// the end of a line that starts with the key and its value; None when it
/// is one, or empty (no server).
pub fn problem(url: &str) -> Option<String> {
    if url.is_empty() {
        return None;
    }
    // The parser would strip or drop them silently.
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some(
            "holds a space or a control character: write it as \"http://host:9090\"".into(),
        );
    }
    let (scheme, authority, _) = parts(url);
    let Some(scheme) = scheme.strip_suffix("://") else {
        // Never echoing a `user:password@` in the fix.
        if authority.contains('@') {
            return Some(CREDENTIALS.into());
        }
        return Some(format!(
            "has no scheme: write \"http://{url}\" or \"https://{url}\""
        ));
    };
    if !matches!(scheme, "http" | "https") {
        return Some(format!(
            "{scheme}:// is not supported: write \"http://host:9090\" or \"https://host:9090\""
        ));
    }
    if authority.contains('@') {
        return Some(CREDENTIALS.into());
    }
    if authority.is_empty() {
        return Some(NO_HOST.into());
    }
    let parsed = match Url::parse(url) {
        Ok(parsed) => parsed,
        Err(e) => return Some(parse_problem(e, authority)),
    };
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Some(
            "has a query or a fragment: give the server's base URL, such as \"http://host:9090\" \
             (the API path is added to it)"
                .into(),
        );
    }
    // The parser takes port 0, and `host:` as the scheme's default port.
    if parsed.port() == Some(0) || authority.ends_with(':') {
        return Some(not_a_port(authority));
    }
    None
}

const NO_HOST: &str = "names no host: write \"http://host:9090\"";

/// What the parser's refusal `e` of a URL with this `authority` means, and
/// the fix.
fn parse_problem(e: ParseError, authority: &str) -> String {
    match e {
        ParseError::EmptyHost => NO_HOST.into(),
        ParseError::InvalidPort => not_a_port(authority),
        ParseError::InvalidIpv6Address if !authority.contains(']') => {
            "has an IPv6 address without its closing \"]\"".into()
        }
        // `[v6]x`: what follows the address is where its port would be.
        ParseError::InvalidIpv6Address
            if authority
                .rsplit_once(']')
                .is_some_and(|(_, tail)| !tail.is_empty() && !tail.starts_with(':')) =>
        {
            not_a_port(authority)
        }
        ParseError::InvalidIpv6Address => "has an IPv6 address that is not one: write it in \
             brackets, such as \"http://[fd00::5]:9090\""
            .into(),
        ParseError::InvalidIpv4Address => {
            "has an IPv4 address that is not one (four numbers of 0 to 255): check it".into()
        }
        ParseError::InvalidDomainCharacter | ParseError::IdnaError => {
            "has a host name that is not one (it holds a character no host name can): write the \
             server's name or address"
                .into()
        }
        other => format!("is not a URL ({other}): write it as \"http://host:9090\""),
    }
}

/// The refusal of the port in `authority`, naming it as written.
fn not_a_port(authority: &str) -> String {
    let port = match authority.rfind(']') {
        Some(i) => {
            let tail = &authority[i + 1..];
            tail.strip_prefix(':').unwrap_or(tail)
        }
        None => authority.split_once(':').map_or("", |(_, p)| p),
    };
    format!("has port \"{port}\", which is not a port: use 1 to 65535 (Prometheus listens on 9090)")
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
            // What the url crate reads as the same server, and so does ureq.
            "http://prom:080",
            "http://prøm.example:9090",
            "http://pr%6Fm:9090",
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
            ("http://prom\t:9090", "space"),
            ("http://prom:", "has port \"\""),
            ("http://prom:9090:1", "has port \"9090:1\""),
            ("http://[fd00::5]x", "has port \"x\""),
            ("HTTP://prom", "HTTP:// is not supported"),
            ("http:prom:9090", "has no scheme"),
            ("http:///prom", "names no host"),
            ("http://@prom", "never in the URL"),
            // Refused since the url crate parses them (ureq could not
            // have connected to any of them).
            ("http://prom:+80", "has port \"+80\""),
            ("http://pr^om:9090", "a character no host name can"),
            ("http://[zz::1]:9090", "IPv6 address that is not one"),
            ("http://10.0.0.300:9090", "IPv4 address that is not one"),
        ] {
            let why = problem(bad).unwrap_or_else(|| panic!("{bad} passed"));
            assert!(why.contains(says), "{bad}: {why}");
        }
    }

    #[test]
    fn credentials_are_never_echoed() {
        for (url, shown) in [
            ("https://u:pw@prom:9090/p", "https://…@prom:9090/p"),
            ("https://u:pw@prom:99999", "https://…@prom:99999"),
            ("u:pw@prom:9090", "…@prom:9090"),
            ("http://prom:9090/a@b", "http://prom:9090/a@b"),
        ] {
            assert_eq!(without_credentials(url), shown);
            if let Some(why) = problem(url) {
                assert!(!why.contains("pw"), "{url}: {why}");
            }
        }
        assert!(problem("u:pw@prom:9090").is_some_and(|why| why.contains("never in the URL")));
    }
}
