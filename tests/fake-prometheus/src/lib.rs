//! A fake Prometheus for the tests (a test double, never shipped): its
//! query API on 127.0.0.1, as the real server speaks it
//! (<https://prometheus.io/docs/prometheus/latest/querying/api/>), so the
//! job view is tested against the protocol and not against what one test
//! happened to write.
//!
//! - `GET` and `POST` (a form body, `application/x-www-form-urlencoded`) of
//!   `/api/v1/query` (`query`, `time`) and `/api/v1/query_range` (`query`,
//!   `start`, `end`, `step`), their parameters checked and refused as
//!   Prometheus refuses them (400 `bad_data`); any other path 404, any
//!   other method 405 ([`api`]);
//! - the answer is the test's: a [`Reply`] per [`Request`], rendered in the
//!   API's envelope (`status`, `data` with `resultType` and `result`,
//!   `errorType` and `error`, `warnings`) and shapes (vector, matrix,
//!   scalar, string), each timestamp the evaluation time, and an error
//!   with its type's status code ([`reply`]);
//! - `https://` with a certificate for 127.0.0.1 signed by a [`TestCa`]
//!   ([`tls`]);
//! - basic auth (as Prometheus's web config checks it) or a bearer token
//!   (as a proxy in front of it does): a request without them is
//!   `401 Unauthorized`;
//! - what a scrape of the text exposition format keeps, as the samples
//!   to answer with ([`scrape`]);
//! - faults: an answer after a delay ([`Builder::delay`]), a 401, a port
//!   where nothing listens ([`refused_url`]), and anything at all in place
//!   of the API's JSON ([`Reply::raw`]).
//!
//! Every request read is kept, in order ([`FakePrometheus::requests`]).
//! The server stops when its [`FakePrometheus`] is dropped. Setting it up
//! panics on failure (it is test code); serving never does.

pub mod api;
pub mod exposition;
pub mod reply;
pub mod request;
pub mod tls;

pub use exposition::scrape;
pub use reply::{ErrorType, Reply, Sample, Series};
pub use request::Request;
pub use tls::TestCa;

use std::io::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the test answers each query with.
type Answer = dyn Fn(&Request) -> Reply + Send + Sync;

/// A Prometheus on 127.0.0.1, serving until dropped.
pub struct FakePrometheus {
    url: String,
    addr: SocketAddr,
    log: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
}

/// How a [`FakePrometheus`] answers: what, how late, to whom, over what.
pub struct Builder {
    answer: Arc<Answer>,
    delay: Duration,
    auth: Option<Auth>,
    tls: Option<Arc<rustls::ServerConfig>>,
}

/// The credential a request must carry.
#[derive(Clone)]
enum Auth {
    Basic { user: String, password: String },
    Bearer(String),
}

impl FakePrometheus {
    /// A server to set up: by default plain http, no credentials, no delay,
    /// and every query answered with an empty vector.
    pub fn builder() -> Builder {
        Builder {
            answer: Arc::new(|_: &Request| Reply::empty()),
            delay: Duration::ZERO,
            auth: None,
            tls: None,
        }
    }

    /// A plain-http server answering every query with `reply`.
    pub fn answering(reply: Reply) -> FakePrometheus {
        Self::builder().reply(reply).start()
    }

    /// Its base URL (`http://127.0.0.1:PORT`, or `https://`), which the API
    /// paths are appended to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Every request read so far, in the order they came.
    pub fn requests(&self) -> Vec<Request> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The `query` parameter of every request so far.
    pub fn queries(&self) -> Vec<String> {
        self.requests()
            .iter()
            .map(|r| r.query().to_string())
            .collect()
    }
}

impl Drop for FakePrometheus {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

impl Builder {
    /// Answer each request with what `answer` makes of it.
    pub fn answer(mut self, answer: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Self {
        self.answer = Arc::new(answer);
        self
    }

    /// Answer every request with `reply`.
    pub fn reply(self, reply: Reply) -> Self {
        self.answer(move |_| reply.clone())
    }

    /// Answer each request `delay` after it was read (a slow server; a
    /// delay past the client's timeout is one that never answers).
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Answer only requests carrying basic auth for `user` and `password`
    /// (Prometheus's `web.config.file` `basic_auth_users`); any other is
    /// `401 Unauthorized`.
    pub fn basic_auth(mut self, user: &str, password: &str) -> Self {
        self.auth = Some(Auth::Basic {
            user: user.into(),
            password: password.into(),
        });
        self
    }

    /// Answer only requests carrying `Authorization: Bearer <token>` (a
    /// proxy in front of Prometheus); any other is `401 Unauthorized`.
    pub fn bearer_token(mut self, token: &str) -> Self {
        self.auth = Some(Auth::Bearer(token.into()));
        self
    }

    /// Serve `https://`, with a certificate for 127.0.0.1 signed by `ca`.
    pub fn tls(mut self, ca: &TestCa) -> Self {
        self.tls = Some(ca.server_config());
        self
    }

    /// Start serving on a free port of 127.0.0.1.
    pub fn start(self) -> FakePrometheus {
        let listener = TcpListener::bind("127.0.0.1:0").expect("fake-prometheus: bind 127.0.0.1");
        let addr = listener
            .local_addr()
            .expect("fake-prometheus: local address");
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let server = Server {
            answer: self.answer,
            delay: self.delay,
            auth: self.auth,
            tls: self.tls,
            log: log.clone(),
        };
        let stopped = stop.clone();
        std::thread::spawn(move || {
            let server = Arc::new(server);
            for conn in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let server = server.clone();
                std::thread::spawn(move || server.serve(conn));
            }
        });
        FakePrometheus {
            url: format!("{scheme}://{addr}"),
            addr,
            log,
            stop,
        }
    }
}

/// A `scheme://127.0.0.1:PORT` URL where nothing listens (a store that is
/// down: connection refused).
pub fn refused_url(scheme: &str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("fake-prometheus: bind 127.0.0.1");
    let addr = listener
        .local_addr()
        .expect("fake-prometheus: local address");
    drop(listener);
    format!("{scheme}://{addr}")
}

/// What one server's connections share.
struct Server {
    answer: Arc<Answer>,
    delay: Duration,
    auth: Option<Auth>,
    tls: Option<Arc<rustls::ServerConfig>>,
    log: Arc<Mutex<Vec<Request>>>,
}

impl Server {
    /// One connection: one request and its answer (`Connection: close`).
    fn serve(&self, tcp: TcpStream) {
        let _ = tcp.set_read_timeout(Some(Duration::from_secs(30)));
        match &self.tls {
            None => self.exchange(tcp),
            Some(config) => {
                let Ok(conn) = rustls::ServerConnection::new(config.clone()) else {
                    return;
                };
                let mut stream = rustls::StreamOwned::new(conn, tcp);
                self.exchange(&mut stream);
                stream.conn.send_close_notify();
                let _ = stream.flush();
            }
        }
    }

    /// Read a request, answer it. A connection that fails before a whole
    /// request (a TLS handshake the client refused) is dropped unanswered
    /// and unrecorded.
    fn exchange(&self, mut stream: impl std::io::Read + std::io::Write) {
        let response = match request::read(&mut stream) {
            Ok(req) => {
                if let Ok(mut log) = self.log.lock() {
                    log.push(req.clone());
                }
                std::thread::sleep(self.delay);
                if self.authorized(&req) {
                    api::respond(&req, &*self.answer)
                } else {
                    self.unauthorized()
                }
            }
            Err(request::Unread::Closed) => return,
            Err(request::Unread::Refused(response)) => response,
        };
        let _ = response.write_to(&mut stream);
        let _ = stream.flush();
    }

    /// Whether `req` carries the credential this server wants, if any.
    fn authorized(&self, req: &Request) -> bool {
        let Some(auth) = &self.auth else {
            return true;
        };
        let Some((scheme, value)) = req.header("authorization").and_then(|h| h.split_once(' '))
        else {
            return false;
        };
        match auth {
            Auth::Basic { user, password } => {
                use base64::Engine as _;
                scheme.eq_ignore_ascii_case("basic")
                    && base64::engine::general_purpose::STANDARD
                        .decode(value.trim())
                        .is_ok_and(|pair| pair == format!("{user}:{password}").as_bytes())
            }
            Auth::Bearer(token) => scheme.eq_ignore_ascii_case("bearer") && value.trim() == token,
        }
    }

    /// 401 as Prometheus's web config (exporter-toolkit) answers it.
    fn unauthorized(&self) -> request::Response {
        let challenge = match self.auth {
            Some(Auth::Bearer(_)) => "Bearer",
            _ => "Basic",
        };
        request::Response::text(401, "Unauthorized\n").header("WWW-Authenticate", challenge)
    }
}
