//! One HTTP/1.1 exchange on a connection: the request read whole (its head,
//! then its body by `Content-Length` or chunked), its form decoded as Go's
//! net/http decodes it for Prometheus, and the response written back.

use std::io::{BufRead, BufReader, Read, Write};

/// Most bytes of a request's head (Go's `http.DefaultMaxHeaderBytes`).
const HEAD_MAX: usize = 1 << 20;
/// Most bytes of a request's body (Go's limit on a form body, 10 MB).
const BODY_MAX: usize = 10 << 20;

/// A request as the fake read it.
#[derive(Clone, Debug)]
pub struct Request {
    /// `GET`, `POST`, …
    pub method: String,
    /// The request target's path, without its query string.
    pub path: String,
    /// Its headers in order, each name lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body's bytes (chunked ones joined).
    pub body: Vec<u8>,
    /// The form: a POST's url-encoded body first, then the URL's query
    /// string (Go's `Request.Form`, which Prometheus reads).
    params: Vec<(String, String)>,
}

impl Request {
    /// The first value of parameter `name` (Go's `FormValue`).
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The PromQL asked (`query`), empty when none was.
    pub fn query(&self) -> &str {
        self.param("query").unwrap_or_default()
    }

    /// The value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether its form came in a POST body (`application/x-www-form-urlencoded`),
    /// as a query too long for a URL must.
    pub fn is_form_post(&self) -> bool {
        self.method == "POST" && self.form_content_type()
    }

    fn form_content_type(&self) -> bool {
        self.header("content-type").is_some_and(|t| {
            t.split(';').next().is_some_and(|m| {
                m.trim()
                    .eq_ignore_ascii_case("application/x-www-form-urlencoded")
            })
        })
    }
}

/// Why no request was read.
pub(crate) enum Unread {
    /// The peer went (or a TLS handshake failed) before a whole request.
    Closed,
    /// A request the server answers without reading further (too large,
    /// not HTTP).
    Refused(Response),
}

/// The request on `stream`.
pub(crate) fn read(stream: &mut impl Read) -> Result<Request, Unread> {
    let mut reader = BufReader::new(stream);
    let mut head = Vec::new();
    loop {
        let mut line = Vec::new();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return Err(Unread::Closed),
            Ok(_) => {}
        }
        if line == b"\r\n" || line == b"\n" {
            break;
        }
        head.push(String::from_utf8_lossy(&line).trim_end().to_string());
        if head.iter().map(String::len).sum::<usize>() > HEAD_MAX {
            return Err(Unread::Refused(Response::text(
                431,
                "431 Request Header Fields Too Large",
            )));
        }
    }
    let bad = || Unread::Refused(Response::text(400, "400 Bad Request"));
    let mut request_line = head.first().ok_or_else(bad)?.split(' ');
    let (Some(method), Some(target), Some(version)) = (
        request_line.next(),
        request_line.next(),
        request_line.next(),
    ) else {
        return Err(bad());
    };
    if !version.starts_with("HTTP/1.") {
        return Err(bad());
    }
    let headers: Vec<(String, String)> = head[1..]
        .iter()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let (path, url_query) = target.split_once('?').unwrap_or((target, ""));
    let mut req = Request {
        method: method.to_string(),
        path: path.to_string(),
        headers,
        body: Vec::new(),
        params: Vec::new(),
    };
    req.body = read_body(&mut reader, &req)?;
    if matches!(method, "POST" | "PUT" | "PATCH") && req.form_content_type() {
        req.params
            .extend(url::form_urlencoded::parse(&req.body).into_owned());
    }
    req.params
        .extend(url::form_urlencoded::parse(url_query.as_bytes()).into_owned());
    Ok(req)
}

/// The body of `req`, by its `Transfer-Encoding: chunked` or `Content-Length`.
fn read_body(reader: &mut impl BufRead, req: &Request) -> Result<Vec<u8>, Unread> {
    let too_large = || Unread::Refused(Response::text(413, "413 Request Entity Too Large"));
    let chunked = req
        .header("transfer-encoding")
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"));
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            if reader.read_line(&mut size).map_err(|_| Unread::Closed)? == 0 {
                return Err(Unread::Closed);
            }
            let hex = size.split(';').next().unwrap_or_default().trim();
            let n = usize::from_str_radix(hex, 16)
                .map_err(|_| Unread::Refused(Response::text(400, "400 Bad Request")))?;
            if n == 0 {
                // The last chunk: the trailer's lines, read and dropped, to
                // its blank line.
                loop {
                    let mut line = Vec::new();
                    match reader.read_until(b'\n', &mut line) {
                        Ok(0) | Err(_) => return Err(Unread::Closed),
                        Ok(_) if line == b"\r\n" || line == b"\n" => return Ok(body),
                        Ok(_) => {}
                    }
                }
            }
            if body.len() + n > BODY_MAX {
                return Err(too_large());
            }
            let mut chunk = vec![0; n + 2];
            reader.read_exact(&mut chunk).map_err(|_| Unread::Closed)?;
            body.extend_from_slice(&chunk[..n]);
        }
    }
    let length: usize = match req.header("content-length") {
        None => 0,
        Some(n) => n
            .parse()
            .map_err(|_| Unread::Refused(Response::text(400, "400 Bad Request")))?,
    };
    if length > BODY_MAX {
        return Err(too_large());
    }
    body.resize(length, 0);
    reader.read_exact(&mut body).map_err(|_| Unread::Closed)?;
    Ok(body)
}

/// A response: status, headers, body; always `Connection: close`.
pub(crate) struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    /// `body` as `content_type`.
    pub(crate) fn new(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status,
            headers: vec![("Content-Type".into(), content_type.into())],
            body: body.into(),
        }
    }

    /// Plain text, as Go's `http.Error` writes it.
    pub(crate) fn text(status: u16, body: &str) -> Response {
        let body = if body.ends_with('\n') {
            body.to_string()
        } else {
            format!("{body}\n")
        };
        Self::new(status, "text/plain; charset=utf-8", body)
    }

    /// JSON, as Prometheus's API writes it.
    pub(crate) fn json(status: u16, body: impl Into<Vec<u8>>) -> Response {
        Self::new(status, "application/json", body)
    }

    pub(crate) fn header(mut self, name: &str, value: &str) -> Response {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub(crate) fn write_to(&self, out: &mut impl Write) -> std::io::Result<()> {
        let mut head = format!("HTTP/1.1 {} {}\r\n", self.status, reason(self.status));
        for (k, v) in &self.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str(&format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n",
            self.body.len()
        ));
        out.write_all(head.as_bytes())?;
        out.write_all(&self.body)
    }
}

/// The reason phrase Go's net/http writes for `status`.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        413 => "Request Entity Too Large",
        414 => "Request URI Too Long",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "status code",
    }
}
