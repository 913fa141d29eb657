//! Fake `nvidia-imex` (test double of docs/imex.md §1).
//! Reads config.cfg and the node file, identifies itself by a local IP, talks
//! to its peers over real TCP on SERVER_PORT, serves the ctl on
//! IMEX_CMD_PORT (and, when IMEX_CMD_UNIX_DOMAIN_PATH is set, on that unix
//! socket too, mode 0600; both only with IMEX_CMD_ENABLED=1), logs in
//! NVIDIA's format, and injects faults.
//!
//! Restarts as the real daemon does (imex.md §1, "A restart is a new
//! instance"; NVIDIA's connections page):
//! - Every start is a new instance: a random id travels in its HELLO. A peer
//!   that sees a node's instance change, or loses a connection it had
//!   established, logs `Connection lost to node N: ip:port`, forgets what the
//!   old instance told it, and shows its own cell to that node DISCONNECTED.
//! - Connectivity cells are directional: this node's cell to a peer is
//!   CONNECTED only while its own outgoing connection to that peer works. The
//!   domain is UP when every cell of this node's row is CONNECTED and every
//!   node is READY.
//! - A lost connection is retried with NVIDIA's back-off, about 15 s, 31 s,
//!   62 s, then 125 s between attempts (every 125 s after that: the fake's
//!   choice, the reference names no longer step), each logged as
//!   `Attempting connection for target node N - host:port, attempt #K`. A
//!   node never connected is retried every 50 ms, so a new domain forms at
//!   once. So after a node's daemon is killed and started again, it connects
//!   out at once (its domain reads UP), while its peers read DEGRADED until
//!   their first back-off attempt succeeds (about 15 s after the loss).
//! - `<run dir>/persist.dat` holds the node map's key and the importer list,
//!   written (atomically) once READY and removed by a clean shutdown
//!   (SIGTERM, SIGINT, SIGQUIT). At start: absent, "does not exist.  Assuming
//!   no previous importers."; another map's key, discarded; the same key with
//!   importers and IMEX_WAIT_FOR_QUORUM=RECOVERY (the default), the daemon
//!   stays WAITING_FOR_RECOVERY until each of them has connected again;
//!   IMEX_WAIT_FOR_QUORUM=NONE skips the wait.
//!
//! Environment:
//!   FAKE_IMEX_RUN_DIR       run dir: lock, fault file, persist.dat,
//!                           fake-events (default /run/nvidia-imex)
//!   FAKE_IMEX_FAULT_FILE    the fault file (default <run dir>/fake-fault)
//!   FAKE_IMEX_LOCAL_IPS     comma list of the IPs taken as this host's
//!                           (default: the interfaces' addresses)
//!   FAKE_IMEX_PID_FILE      a pid file to write
//!   FAKE_IMEX_RECONNECT_MS  the first back-off step after a lost connection
//!                           (default 15000); the later ones scale with it
//!                           (15:31:62:125), so tests can shorten them all
//!
//! Fault file keys (KEY=VALUE lines, read at start):
//!   MODE=crash            abort at start (SIGABRT)
//!   MODE=exit EXIT_CODE=N exit N at start
//!   MODE=never-ready      stay INITIALIZING forever
//!   MODE=slow-start DELAY_MS=N   become READY after N ms
//!   MODE=unreachable      READY, but neither accepts nor makes peer connections
//!   MODE=version-mismatch report another driver version to peers
//!   IMPORTERS=1,3 | all   the importers persist.dat lists (node ids, or
//!                         every peer connected when it is written); default
//!                         none, so a restart is READY at once

use fake_imex::{
    ctl_timestamp, log_timestamp, DaemonCfg, DomainView, NodeView, DEFAULT_CONFIG, FAKE_VERSION,
};
use nix::fcntl::{Flock, FlockArg};
use nix::sys::signal::{SigSet, Signal};
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Log {
    out: Mutex<Box<dyn Write + Send>>,
}

impl Log {
    fn line(&self, level: &str, msg: &str) {
        let tid = nix::unistd::gettid();
        let mut o = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(o, "{} [{level}] [tid {tid}] {msg}", log_timestamp());
        let _ = o.flush();
    }
    fn info(&self, msg: &str) {
        self.line("INFO", msg)
    }
    fn error(&self, msg: &str) {
        self.line("ERROR", msg)
    }
}

/// This node's own outgoing connection to a peer.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
enum Link {
    /// Never established: tried every 50 ms.
    #[default]
    Never,
    /// Established; `last_ok` is the latest exchange that worked.
    Up { last_ok: Instant },
    /// Established once, then lost: attempt #`attempt` is due at `due`.
    Lost { attempt: u32, due: Instant },
}

#[derive(Clone, Default)]
struct Peer {
    state: String,
    version: String,
    host_name: String,
    connections: BTreeMap<usize, String>,
    /// The instance id of its latest HELLO.
    instance: Option<String>,
    /// Any compatible HELLO from it since this daemon started.
    heard: bool,
    link: Link,
    times_connected: u32,
    map_mismatch: bool,
    version_mismatch: bool,
}

impl Peer {
    /// What the old instance told us is gone with it.
    fn forget(&mut self) {
        self.state.clear();
        self.version.clear();
        self.host_name.clear();
        self.connections.clear();
    }
}

/// One peer's HELLO: `HELLO <id> <instance> <state> <version> <map key>
/// <host name or -> <id:CELL,...>`.
#[derive(Debug, Clone, PartialEq)]
struct Hello {
    id: usize,
    instance: String,
    state: String,
    version: String,
    map_hash: u64,
    host_name: String,
    connections: BTreeMap<usize, String>,
}

impl Hello {
    fn parse(line: &str) -> Option<Hello> {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 7 || f[0] != "HELLO" {
            return None;
        }
        Some(Hello {
            id: f[1].parse().ok()?,
            instance: f[2].to_string(),
            state: f[3].to_string(),
            version: f[4].to_string(),
            map_hash: u64::from_str_radix(f[5], 16).ok()?,
            host_name: if f[6] == "-" {
                String::new()
            } else {
                f[6].to_string()
            },
            connections: f
                .get(7)
                .map(|r| {
                    r.split(',')
                        .filter_map(|c| c.split_once(':'))
                        .filter_map(|(i, s)| Some((i.parse().ok()?, s.to_string())))
                        .collect()
                })
                .unwrap_or_default(),
        })
    }
}

/// Whom persist.dat names as importers (fault key IMPORTERS).
#[derive(Clone, Debug, PartialEq)]
enum Importers {
    List(Vec<usize>),
    /// Every peer connected when the file is written.
    All,
}

struct Shared {
    me: usize,
    /// This start's instance id.
    instance: String,
    addrs: Vec<String>,
    ips: Vec<IpAddr>,
    host_name: String,
    version: String,
    map_hash: u64,
    port: u16,
    /// The first back-off step after a lost connection.
    reconnect: Duration,
    importers: Importers,
    persist_path: PathBuf,
    /// Held while persist.dat is written or removed.
    persist_lock: Mutex<()>,
    unix_path: Mutex<Option<PathBuf>>,
    state: Mutex<String>,
    peers: Mutex<BTreeMap<usize, Peer>>,
    up_recorded: std::sync::atomic::AtomicBool,
    log: Log,
}

/// An established connection whose exchanges keep failing without a
/// definite answer (timeouts) is lost after this long.
const LOST_AFTER: Duration = Duration::from_millis(3000);
/// How often each peer is tried (and an established connection checked).
const TICK: Duration = Duration::from_millis(50);

/// The wait before reconnect attempt #`attempt` to a node whose connection
/// was lost: about 15 s, 31 s, 62 s, 125 s (k8s-test-infra's observation,
/// imex.md §1), scaled by `first` (15 s by default), then 125 s each.
fn backoff(first: Duration, attempt: u32) -> Duration {
    const STEPS: [u32; 4] = [15, 31, 62, 125];
    let step = STEPS[(attempt.max(1) as usize - 1).min(STEPS.len() - 1)];
    first * step / 15
}

impl Shared {
    fn lock_peers(&self) -> std::sync::MutexGuard<'_, BTreeMap<usize, Peer>> {
        self.peers.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn local_state(&self) -> String {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set_state(&self, s: &str) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = s.into();
    }

    fn conn_word(&self, peer: usize, p: Option<&Peer>) -> String {
        if peer == self.me {
            return "CONNECTED".into();
        }
        match p {
            None => "NEVER_CONNECTED".into(),
            Some(p) if p.map_mismatch => "NODE_MAP_MISMATCH".into(),
            Some(p) if p.version_mismatch => "VERSION_MISMATCH".into(),
            Some(p) => match p.link {
                Link::Up { .. } => "CONNECTED".into(),
                Link::Lost { .. } => "DISCONNECTED".into(),
                Link::Never => "NEVER_CONNECTED".into(),
            },
        }
    }

    fn my_row(&self) -> BTreeMap<usize, String> {
        let peers = self.lock_peers();
        (0..self.addrs.len())
            .map(|i| (i, self.conn_word(i, peers.get(&i))))
            .collect()
    }

    fn hello(&self) -> String {
        let state = self.local_state();
        let row: Vec<String> = self
            .my_row()
            .iter()
            .map(|(i, s)| format!("{i}:{s}"))
            .collect();
        let host = if self.host_name.is_empty() || self.host_name.contains(char::is_whitespace) {
            "-"
        } else {
            &self.host_name
        };
        format!(
            "HELLO {} {} {} {} {:x} {} {}\n",
            self.me,
            self.instance,
            state,
            self.version,
            self.map_hash,
            host,
            row.join(",")
        )
    }

    /// A HELLO that names a node of this map other than this one.
    fn parse_hello(&self, line: &str) -> Option<Hello> {
        Hello::parse(line).filter(|h| h.id < self.addrs.len() && h.id != self.me)
    }

    /// The connection to `id` was lost (or its instance is gone): log it,
    /// forget the old instance's view, and start the back-off.
    fn lose(&self, id: usize, p: &mut Peer) {
        self.log.info(&format!(
            "Connection lost to node {id}: {}:{}",
            self.addrs[id], self.port
        ));
        record_event(&format!("lost {id}"));
        p.forget();
        p.link = Link::Lost {
            attempt: 1,
            due: Instant::now() + backoff(self.reconnect, 1),
        };
    }

    /// Record a peer's HELLO (either direction). Returns whether the peer is
    /// compatible (same map, same version) and whether its connection was
    /// just lost because a new instance answered.
    fn absorb(&self, peers: &mut BTreeMap<usize, Peer>, h: &Hello) -> (bool, bool) {
        let p = peers.entry(h.id).or_default();
        p.map_mismatch = h.map_hash != self.map_hash;
        p.version_mismatch = h.version != self.version;
        let mut lost = false;
        if p.instance.as_ref().is_some_and(|old| *old != h.instance) {
            record_event(&format!("instance {} {}", h.id, h.instance));
            if matches!(p.link, Link::Up { .. }) {
                self.lose(h.id, p);
                lost = true;
            } else {
                p.forget();
            }
        }
        p.instance = Some(h.instance.clone());
        p.state = h.state.clone();
        p.version = h.version.clone();
        p.host_name = h.host_name.clone();
        p.connections = h.connections.clone();
        let compatible = !p.map_mismatch && !p.version_mismatch;
        p.heard |= compatible;
        (compatible, lost)
    }

    /// A peer connected to us and said HELLO; our answer, if it is one.
    fn incoming(&self, line: &str) -> Option<String> {
        let h = self.parse_hello(line)?;
        let (_, lost) = self.absorb(&mut self.lock_peers(), &h);
        if lost {
            self.write_persist();
        }
        self.note_domain_up();
        Some(self.hello())
    }

    /// The outcome of one of our own connection attempts to `peer`
    /// (`attempt`: its number, when it was a back-off attempt).
    fn outgoing(&self, peer: usize, reply: std::io::Result<String>, attempt: Option<u32>) {
        let mut changed = false;
        {
            let mut peers = self.lock_peers();
            let answer = match reply {
                Ok(line) => match self.parse_hello(&line) {
                    Some(h) if h.id == peer => Ok(h),
                    _ => Err(false),
                },
                Err(e) => Err(definite_failure(&e)),
            };
            let ok = match &answer {
                Ok(h) => {
                    let (compatible, lost) = self.absorb(&mut peers, h);
                    changed |= lost;
                    // A new instance found by a routine check is a loss:
                    // reconnecting waits for the back-off.
                    compatible && !lost
                }
                Err(_) => false,
            };
            let p = peers.entry(peer).or_default();
            let now = Instant::now();
            match (ok, p.link) {
                (true, Link::Up { .. }) => p.link = Link::Up { last_ok: now },
                // Only the back-off's own attempt reconnects a lost node.
                (true, Link::Lost { .. }) if attempt.is_none() => {}
                (true, Link::Never | Link::Lost { .. }) => {
                    p.times_connected += 1;
                    p.link = Link::Up { last_ok: now };
                    self.log.info(&format!(
                        "Connection established to node {peer} with ip address {}. Number of times connected: {}",
                        self.addrs[peer], p.times_connected
                    ));
                    record_event(&format!("connected {peer}"));
                    changed = true;
                }
                (false, Link::Up { last_ok }) => {
                    if answer == Err(true) || last_ok.elapsed() > LOST_AFTER {
                        self.lose(peer, p);
                        changed = true;
                    }
                }
                (false, Link::Lost { .. }) => {
                    if let Some(k) = attempt {
                        p.link = Link::Lost {
                            attempt: k + 1,
                            due: now + backoff(self.reconnect, k + 1),
                        };
                    }
                }
                (false, Link::Never) => {}
            }
        }
        if changed {
            self.write_persist();
        }
        self.note_domain_up();
    }

    /// Record (once) the moment this daemon's own view first reads UP.
    fn note_domain_up(&self) {
        if self.view().domain == "UP"
            && !self
                .up_recorded
                .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            record_event("domain-up");
        }
    }

    /// The importers persist.dat names now.
    fn importer_ids(&self) -> Vec<usize> {
        match &self.importers {
            Importers::List(ids) => ids.clone(),
            Importers::All => self
                .lock_peers()
                .iter()
                .filter(|(_, p)| matches!(p.link, Link::Up { .. }))
                .map(|(i, _)| *i)
                .collect(),
        }
    }

    /// persist.dat, once READY: the node map's key, then one
    /// `Node #N: address` line per importer (none: the key alone).
    fn write_persist(&self) {
        let _g = self.persist_lock.lock().unwrap_or_else(|e| e.into_inner());
        if self.local_state() != "READY" {
            return;
        }
        let mut text = format!("{:x}\n", self.map_hash);
        for i in self.importer_ids() {
            text.push_str(&format!("Node #{i}: {}\n", self.addrs[i]));
        }
        let tmp = self
            .persist_path
            .with_extension(format!("dat.tmp{}", std::process::id()));
        let written =
            std::fs::write(&tmp, text).and_then(|_| std::fs::rename(&tmp, &self.persist_path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            self.log.error(&format!(
                "Failed to write persistence file {}: {e}",
                self.persist_path.display()
            ));
        }
    }

    /// A clean shutdown: no recovery is owed, so persist.dat goes, and so
    /// does the command socket.
    fn shut_down(&self) -> ! {
        self.set_state("SHUTTING_DOWN");
        let _g = self.persist_lock.lock().unwrap_or_else(|e| e.into_inner());
        let _ = std::fs::remove_file(&self.persist_path);
        if let Some(p) = self
            .unix_path
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            let _ = std::fs::remove_file(p);
        }
        std::process::exit(0);
    }

    fn view(&self) -> DomainView {
        let local_state = self.local_state();
        let my_row = self.my_row();
        let peers = self.lock_peers().clone();
        let mut nodes = BTreeMap::new();
        for (i, addr) in self.addrs.iter().enumerate() {
            let v = if i == self.me {
                NodeView {
                    host: addr.clone(),
                    host_name: self.host_name.clone(),
                    status: if local_state == "READY" {
                        "READY".into()
                    } else {
                        "UNAVAILABLE".into()
                    },
                    version: self.version.clone(),
                    connections: my_row.clone(),
                }
            } else {
                let p = peers.get(&i);
                let up = my_row.get(&i).map(String::as_str) == Some("CONNECTED");
                match p {
                    Some(p) if up => NodeView {
                        host: addr.clone(),
                        host_name: p.host_name.clone(),
                        status: if p.state == "READY" {
                            "READY".into()
                        } else {
                            "UNAVAILABLE".into()
                        },
                        version: p.version.clone(),
                        connections: p.connections.clone(),
                    },
                    _ => NodeView {
                        host: addr.clone(),
                        host_name: String::new(),
                        status: "UNAVAILABLE".into(),
                        version: String::new(),
                        connections: (0..self.addrs.len())
                            .map(|j| (j, "INVALID".to_string()))
                            .collect(),
                    },
                }
            };
            nodes.insert(i, v);
        }
        let all_ready = nodes.values().all(|n| n.status == "READY");
        let all_connected = my_row.values().all(|s| s == "CONNECTED");
        let domain = if local_state != "READY" {
            "DOWN"
        } else if all_ready && all_connected {
            "UP"
        } else {
            "DEGRADED"
        };
        DomainView {
            local_state,
            domain: domain.into(),
            timestamp: ctl_timestamp(),
            nodes,
        }
    }
}

/// A failure that says the peer's daemon is gone (nothing listens, or it
/// dropped the connection), not merely slow.
fn definite_failure(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionReset | ConnectionAborted | BrokenPipe
    )
}

/// Millisecond-stamped events for benchmarks (`<run dir>/fake-events`):
/// the real log has only second resolution.
fn record_event(what: &str) {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    if let Ok(mut f) = OpenOptions::new()
        .create(true)
        .append(true)
        .open(format!("{}/fake-events", run_dir()))
    {
        let _ = writeln!(f, "{ms} {what}");
    }
}

fn fault_settings() -> BTreeMap<String, String> {
    let path = std::env::var("FAKE_IMEX_FAULT_FILE")
        .unwrap_or_else(|_| format!("{}/fake-fault", run_dir()));
    DaemonCfg::read(Path::new(&path))
        .map(|c| c.values)
        .unwrap_or_default()
}

/// The daemon's runtime directory (lock, fault file): /run/nvidia-imex, or
/// `$FAKE_IMEX_RUN_DIR` so tests on one host can run isolated daemons.
fn run_dir() -> String {
    std::env::var("FAKE_IMEX_RUN_DIR").unwrap_or_else(|_| "/run/nvidia-imex".into())
}

fn local_ips() -> Vec<IpAddr> {
    if let Ok(list) = std::env::var("FAKE_IMEX_LOCAL_IPS") {
        return list
            .split(',')
            .filter_map(|s| s.trim().parse().ok())
            .collect();
    }
    nix::ifaddrs::getifaddrs()
        .map(|it| {
            it.filter_map(|ifa| {
                let a = ifa.address?;
                if let Some(v4) = a.as_sockaddr_in() {
                    Some(IpAddr::V4(v4.ip()))
                } else {
                    a.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
                }
            })
            .collect()
        })
        .unwrap_or_default()
}

fn interface_of(ip: &IpAddr) -> String {
    nix::ifaddrs::getifaddrs()
        .ok()
        .and_then(|mut it| {
            it.find(|ifa| {
                ifa.address.as_ref().is_some_and(|a| {
                    a.as_sockaddr_in().map(|v| IpAddr::V4(v.ip())) == Some(*ip)
                        || a.as_sockaddr_in6().map(|v| IpAddr::V6(v.ip())) == Some(*ip)
                })
            })
            .map(|ifa| ifa.interface_name)
        })
        .unwrap_or_else(|| "unknown".into())
}

fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    })
}

/// A fresh instance id: 64 random bits (the clock and pid if
/// /dev/urandom cannot be read).
fn new_instance_id() -> String {
    let mut b = [0u8; 8];
    let random = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_ok();
    let id = if random {
        u64::from_le_bytes(b)
    } else {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        fnv(&format!("{}.{}", now.as_nanos(), std::process::id()))
    };
    format!("{id:016x}")
}

/// The fault file's IMPORTERS: `all`, or a comma list of node ids of this
/// map (others ignored).
fn parse_importers(value: Option<&String>, me: usize, n: usize) -> Importers {
    match value.map(|v| v.trim()) {
        Some("all") => Importers::All,
        Some(list) => Importers::List(
            list.split(',')
                .filter_map(|s| s.trim().parse::<usize>().ok())
                .filter(|&i| i < n && i != me)
                .collect(),
        ),
        None => Importers::List(Vec::new()),
    }
}

/// persist.dat as a previous instance left it: the importers this start
/// must wait for (none when absent, discarded, empty, or with
/// IMEX_WAIT_FOR_QUORUM=NONE), logged as the daemon does.
fn read_persist(
    path: &Path,
    map_hash: u64,
    me: usize,
    n: usize,
    quorum: &str,
    log: &Log,
) -> Vec<usize> {
    let shown = path.display();
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            log.info(&format!(
                "nvidia-imex persistence file {shown} does not exist.  Assuming no previous importers."
            ));
            return Vec::new();
        }
        Err(_) => String::new(),
    };
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let key = lines.next().and_then(|k| u64::from_str_radix(k, 16).ok());
    if key != Some(map_hash) {
        log.info(&format!(
            "nvidia-imex persistence file {shown} does not match the current node configuration; discarding it."
        ));
        let _ = std::fs::remove_file(path);
        return Vec::new();
    }
    let importers: Vec<usize> = lines
        .filter_map(|l| {
            l.strip_prefix("Node #")?
                .split(':')
                .next()?
                .trim()
                .parse()
                .ok()
        })
        .filter(|&i| i < n && i != me)
        .collect();
    if importers.is_empty() {
        log.info(&format!(
            "nvidia-imex persistence file {shown} lists no previous importers."
        ));
        return importers;
    }
    let ids: Vec<String> = importers.iter().map(usize::to_string).collect();
    if quorum.eq_ignore_ascii_case("NONE") {
        log.info(&format!(
            "nvidia-imex persistence file {shown} lists previous importers (nodes {}); IMEX_WAIT_FOR_QUORUM=NONE, not waiting for them.",
            ids.join(", ")
        ));
        return Vec::new();
    }
    log.info(&format!(
        "nvidia-imex persistence file {shown} lists previous importers (nodes {}); waiting for them to reconnect.",
        ids.join(", ")
    ));
    importers
}

fn main() {
    let (config, port_override) = parse_args();
    let cfg = match DaemonCfg::read(&config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "Unable to open configuration file at {} ({e})",
                config.display()
            );
            std::process::exit(1);
        }
    };
    let log = open_log(&cfg);
    let faults = fault_settings();
    let mode = faults.get("MODE").cloned().unwrap_or_default();
    let version = if mode == "version-mismatch" {
        "570.00".to_string()
    } else {
        FAKE_VERSION.to_string()
    };
    let port = port_override.or(cfg.port("SERVER_PORT")).unwrap_or(50000);
    log_banner(&log, &cfg, &version, port);
    inject_start_fault(&log, &mode, &faults);
    let (addrs, ips) = read_nodes(&cfg, &log);
    let (me, my_ip) = identify_self(&ips, &cfg.get("IMEX_NODE_CONFIG_FILE"), &log);
    let _lock = take_node_lock(&log);
    let map_hash = fnv(&addrs.join("\n"));
    let persist_path = PathBuf::from(format!("{}/persist.dat", run_dir()));
    let recovery = read_persist(
        &persist_path,
        map_hash,
        me,
        addrs.len(),
        &cfg.get("IMEX_WAIT_FOR_QUORUM"),
        &log,
    );
    daemonize_if_asked(&cfg, &log);
    if cfg.get("DAEMONIZE") != "1" {
        write_pid_file(std::process::id());
    }
    let signals = block_signals();
    let instance = new_instance_id();
    record_event(&format!("instance {me} {instance}"));
    let shared = Arc::new(Shared {
        me,
        instance,
        host_name: nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default(),
        map_hash,
        importers: parse_importers(faults.get("IMPORTERS"), me, addrs.len()),
        addrs,
        ips: ips
            .iter()
            .map(|ip| ip.unwrap_or(IpAddr::from([0, 0, 0, 0])))
            .collect(),
        version,
        port,
        reconnect: Duration::from_millis(
            std::env::var("FAKE_IMEX_RECONNECT_MS")
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(15000),
        ),
        persist_path,
        persist_lock: Mutex::new(()),
        unix_path: Mutex::new(None),
        state: Mutex::new("INITIALIZING".into()),
        peers: Mutex::new(BTreeMap::new()),
        up_recorded: std::sync::atomic::AtomicBool::new(false),
        log,
    });
    let n_peers = shared.addrs.len() - 1;
    shared.log.info(&format!(
        "Creating gRPC channels to all peers (nPeers = {n_peers})."
    ));
    shared.log.info("IMEX_WAIT_FOR_QUORUM != FULL, continuing initialization without waiting for connections to all nodes.");
    start_command_service(&cfg, &shared);
    if mode != "unreachable" {
        start_peer_service(&shared, my_ip);
    }
    schedule_ready(&shared, &mode, &faults, recovery);
    wait_for_signals(&signals, &shared)
}

/// nvidia-imex's own options: -c/--config, -p/--port, --nogpu, -h.
fn parse_args() -> (PathBuf, Option<u16>) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut config = PathBuf::from(DEFAULT_CONFIG);
    let mut port_override = None;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "-c" | "--config" => {
                i += 1;
                config = args.get(i).map(PathBuf::from).unwrap_or(config);
            }
            "-p" | "--port" => {
                i += 1;
                port_override = args.get(i).and_then(|p| p.parse::<u16>().ok());
            }
            "--nogpu" => {}
            "-h" | "--help" => {
                println!("Usage: nvidia-imex [-c <config file>] [-p <port>] [--nogpu]");
                std::process::exit(0);
            }
            other => {
                eprintln!("Unknown option {other}");
                std::process::exit(1);
            }
        }
        i += 1;
    }
    (config, port_override)
}

/// LOG_FILE_NAME, or stderr when empty or unopenable, as the daemon does.
fn open_log(cfg: &DaemonCfg) -> Log {
    let log_name = cfg.get("LOG_FILE_NAME");
    let append = cfg.get("LOG_APPEND_TO_LOG") != "0";
    let opened = (!log_name.is_empty()).then(|| {
        OpenOptions::new()
            .create(true)
            .append(append)
            .write(true)
            .truncate(!append)
            .open(&log_name)
    });
    let out: Box<dyn Write + Send> = match opened {
        Some(Ok(f)) => Box::new(f),
        other => {
            if let Some(Err(e)) = other {
                eprintln!("WARNING: failed to open IMEX log file  errno = {e}");
            }
            eprintln!("INFO: using stderr for IMEX logging");
            Box::new(std::io::stderr())
        }
    };
    let log = Log {
        out: Mutex::new(out),
    };
    {
        let mut o = log.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(o, "IMEX Log initializing at: {}", ctl_timestamp());
    }
    log
}

/// The configuration lines the real daemon logs at start.
fn log_banner(log: &Log, cfg: &DaemonCfg, version: &str, port: u16) {
    log.info(&format!(
        "IMEX version {version} is running with the following configuration options"
    ));
    for (what, key, unit) in [
        ("Logging level", "LOG_LEVEL", ""),
        ("Logging file name/path", "LOG_FILE_NAME", ""),
        ("Append to log file", "LOG_APPEND_TO_LOG", ""),
        ("Max Log file size", "LOG_FILE_MAX_SIZE", " (MBs)"),
        ("Use Syslog file", "LOG_USE_SYSLOG", ""),
        (
            "IMEX Library communication bind interface",
            "BIND_INTERFACE_IP",
            "",
        ),
    ] {
        log.info(&format!("{what} = {}{unit}", cfg.get(key)));
    }
    log.info(&format!("IMEX library communication bind port = {port}"));
}

/// MODE=crash and MODE=exit end the daemon before it does anything.
fn inject_start_fault(log: &Log, mode: &str, faults: &BTreeMap<String, String>) {
    match mode {
        "crash" => {
            log.error("fake fault injection: crashing at start");
            std::process::abort();
        }
        "exit" => {
            let code = faults
                .get("EXIT_CODE")
                .and_then(|c| c.parse().ok())
                .unwrap_or(1);
            log.error(&format!("fake fault injection: exiting with status {code}"));
            std::process::exit(code);
        }
        _ => {}
    }
}

/// The node file: its line index is the node id. Each entry with the IP it
/// stands for (a host name is resolved; None when it cannot be).
fn read_nodes(cfg: &DaemonCfg, log: &Log) -> (Vec<String>, Vec<Option<IpAddr>>) {
    let node_file = cfg.get("IMEX_NODE_CONFIG_FILE");
    let text = std::fs::read_to_string(&node_file).unwrap_or_default();
    let addrs: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    if addrs.is_empty() {
        log.error(&format!(
            "Failed to read node configuration file {node_file}: no nodes configured"
        ));
        std::process::exit(1);
    }
    let resolve = |a: &String| match a.parse::<IpAddr>() {
        Ok(ip) => Some(ip),
        Err(_) => {
            log.info(&format!("Treating node config entry '{a}' as a host name."));
            (a.as_str(), 0)
                .to_socket_addrs()
                .ok()
                .and_then(|mut s| s.next())
                .map(|s| s.ip())
        }
    };
    let ips = addrs.iter().map(resolve).collect();
    (addrs, ips)
}

/// This node's id: the first entry that is one of its own IPs.
fn identify_self(ips: &[Option<IpAddr>], node_file: &str, log: &Log) -> (usize, IpAddr) {
    let mine = local_ips();
    let Some(me) = ips
        .iter()
        .position(|ip| ip.is_some_and(|ip| mine.contains(&ip)))
    else {
        log.error(&format!(
            "No matching network interface found for any IP addresses in the node configuration file {node_file}."
        ));
        std::process::exit(1);
    };
    let my_ip = ips[me].expect("matched");
    log.info(&format!(
        "Identified this node as ID {me}, using bind IP of '{my_ip}', and network interface of {}",
        interface_of(&my_ip)
    ));
    (me, my_ip)
}

/// One daemon per node, as the driver's IMEX session allows.
fn take_node_lock(log: &Log) -> Flock<std::fs::File> {
    let _ = std::fs::create_dir_all(run_dir());
    let lock_file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(format!("{}/fake-imex.lock", run_dir()));
    match lock_file.map(|f| Flock::lock(f, FlockArg::LockExclusiveNonblock)) {
        Ok(Ok(l)) => l,
        _ => {
            log.error(
                "Failed to allocate Imex session: NV_ERR_IN_USE (another nvidia-imex is running)",
            );
            std::process::exit(1);
        }
    }
}

fn daemonize_if_asked(cfg: &DaemonCfg, log: &Log) {
    if cfg.get("DAEMONIZE") != "1" {
        return;
    }
    // SAFETY: no threads exist yet; the child continues single-threaded.
    match unsafe { nix::unistd::fork() } {
        // The parent hands over the child's pid before it exits, so whoever
        // waited for the parent (systemd's Type=forking) finds the daemon.
        Ok(nix::unistd::ForkResult::Parent { child }) => {
            write_pid_file(child.as_raw() as u32);
            std::process::exit(0)
        }
        Ok(nix::unistd::ForkResult::Child) => {
            let _ = nix::unistd::setsid();
        }
        Err(e) => {
            log.error(&format!("fork failed: {e}"));
            std::process::exit(1);
        }
    }
}

/// `$FAKE_IMEX_PID_FILE`, when the stand-in unit asks for one.
fn write_pid_file(pid: u32) {
    if let Ok(pidfile) = std::env::var("FAKE_IMEX_PID_FILE") {
        let _ = std::fs::write(pidfile, format!("{pid}\n"));
    }
}

/// Signals are taken by one thread with sigwait; block them everywhere
/// first (before any thread starts, so every thread inherits the mask).
fn block_signals() -> SigSet {
    let mut signals = SigSet::empty();
    for s in [
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGQUIT,
        Signal::SIGHUP,
        Signal::SIGUSR1,
    ] {
        signals.add(s);
    }
    let _ = signals.thread_block();
    signals
}

/// The ctl's service, if enabled (IMEX_CMD_ENABLED=1): TCP on
/// IMEX_CMD_PORT/IMEX_CMD_BIND_INTERFACE_IP (empty: every interface), and
/// the same protocol on IMEX_CMD_UNIX_DOMAIN_PATH when that is set.
fn start_command_service(cfg: &DaemonCfg, shared: &Arc<Shared>) {
    if cfg.get("IMEX_CMD_ENABLED") != "1" {
        return;
    }
    let uds = cfg.get("IMEX_CMD_UNIX_DOMAIN_PATH");
    if !uds.is_empty() {
        let l = bind_unix(Path::new(&uds), shared);
        let s = shared.clone();
        std::thread::spawn(move || {
            for stream in l.incoming().flatten() {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                serve_command(&stream, &s);
            }
        });
    }
    let bind = cfg.get("IMEX_CMD_BIND_INTERFACE_IP");
    let bind: IpAddr = bind.parse().unwrap_or(IpAddr::from([0, 0, 0, 0]));
    let cmd_port = cfg.port("IMEX_CMD_PORT").unwrap_or(50005);
    match TcpListener::bind(SocketAddr::new(bind, cmd_port)) {
        Ok(l) => {
            let s = shared.clone();
            std::thread::spawn(move || {
                for stream in l.incoming().flatten() {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                    serve_command(&stream, &s);
                }
            });
        }
        Err(e) => {
            shared.log.error(&format!(
                "Failed to start command service on port {cmd_port}: {e}"
            ));
            std::process::exit(1);
        }
    }
}

/// The command socket, mode 0600, in place of a stale one left by a daemon
/// that was killed.
fn bind_unix(path: &Path, shared: &Shared) -> UnixListener {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
        let _ = std::fs::remove_file(path);
    }
    // SAFETY: umask only swaps the process's file mode mask; this runs
    // before any other thread is started, so no other file gets this mask.
    let old = unsafe { libc::umask(0o177) };
    let bound = UnixListener::bind(path);
    // SAFETY: as above; the previous mask is put back.
    unsafe { libc::umask(old) };
    match bound {
        Ok(l) => {
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
            *shared.unix_path.lock().unwrap_or_else(|e| e.into_inner()) = Some(path.into());
            l
        }
        Err(e) => {
            shared.log.error(&format!(
                "Failed to start command service on unix domain socket {}: {e}",
                path.display()
            ));
            std::process::exit(1);
        }
    }
}

/// Accept peers on SERVER_PORT and keep connecting to them.
fn start_peer_service(shared: &Arc<Shared>, my_ip: IpAddr) {
    let port = shared.port;
    match TcpListener::bind(SocketAddr::new(my_ip, port)) {
        Ok(l) => {
            let s = shared.clone();
            std::thread::spawn(move || serve_peers(l, s));
        }
        Err(e) => {
            shared.log.error(&format!(
                "Failed to bind IMEX server port {my_ip}:{port}: {e}"
            ));
            std::process::exit(1);
        }
    }
    let s = shared.clone();
    std::thread::spawn(move || connect_peers(s));
}

/// READY after 50 ms (MODE=slow-start: DELAY_MS), never with
/// MODE=never-ready; WAITING_FOR_RECOVERY before it while a previous
/// importer (`recovery`) has not connected again.
fn schedule_ready(
    shared: &Arc<Shared>,
    mode: &str,
    faults: &BTreeMap<String, String>,
    recovery: Vec<usize>,
) {
    let delay = match mode {
        "slow-start" => faults
            .get("DELAY_MS")
            .and_then(|d| d.parse().ok())
            .unwrap_or(3000),
        "never-ready" => return,
        _ => 50,
    };
    let s = shared.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(delay));
        s.log.info("GPU event successfully subscribed");
        if !recovery.is_empty() {
            s.set_state("WAITING_FOR_RECOVERY");
            record_event("waiting-for-recovery");
            while !recovery
                .iter()
                .all(|i| s.lock_peers().get(i).is_some_and(|p| p.heard))
            {
                std::thread::sleep(TICK);
            }
            s.log
                .info("All previous importers have reconnected; recovery is complete.");
        }
        s.set_state("READY");
        record_event("ready");
        s.write_persist();
        s.note_domain_up();
    });
}

/// SIGHUP and SIGUSR1 are logged as the daemon does; any other ends it.
fn wait_for_signals(signals: &SigSet, shared: &Shared) -> ! {
    loop {
        match signals.wait() {
            Ok(Signal::SIGHUP) => shared
                .log
                .info("Received SIGHUP: dumping verbose log buffer"),
            Ok(Signal::SIGUSR1) => shared.log.info(
                "Received SIGUSR1: re-resolving node names and restarting outgoing connections",
            ),
            Ok(sig) => {
                shared.log.info(&format!("Received {sig:?}, shutting down"));
                shared.shut_down();
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// One ctl request (a line) and its answer, on either socket.
fn serve_command<S>(stream: S, shared: &Shared)
where
    S: Read + Write + Copy,
{
    let mut line = String::new();
    if BufReader::new(stream).read_line(&mut line).is_err() {
        return;
    }
    let answer = match line.trim() {
        "QUERY" => format!("{}\n", shared.local_state()),
        "STATUS" => serde_json::to_string(&shared.view()).unwrap_or_default() + "\n",
        _ => "ERROR unknown request\n".into(),
    };
    let mut out = stream;
    let _ = out.write_all(answer.as_bytes());
}

fn serve_peers(listener: TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming().flatten() {
        let s = shared.clone();
        std::thread::spawn(move || {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let mut line = String::new();
            if BufReader::new(&stream).read_line(&mut line).is_ok() {
                if let Some(answer) = s.incoming(&line) {
                    let _ = (&stream).write_all(answer.as_bytes());
                }
            }
        });
    }
}

/// One HELLO exchange over a fresh connection to `addr`. The peer closes
/// first (we read to its EOF), so the TIME_WAIT stays on its SERVER_PORT
/// rather than on one of our ephemeral ports, which a test may be about to
/// bind as another daemon's SERVER_PORT.
fn exchange(shared: &Shared, addr: SocketAddr) -> std::io::Result<String> {
    let stream = TcpStream::connect_timeout(&addr, Duration::from_millis(300))?;
    stream.set_read_timeout(Some(Duration::from_millis(800)))?;
    (&stream).write_all(shared.hello().as_bytes())?;
    let mut line = String::new();
    let mut reader = BufReader::new(&stream);
    reader.read_line(&mut line)?;
    let _ = reader.read_to_end(&mut Vec::new());
    Ok(line)
}

/// This node's outgoing connections, one peer after another, every tick
/// (as the fake always did): a peer is tried until its connection is
/// established, then checked; once lost, it is tried again only as its
/// back-off allows.
fn connect_peers(shared: Arc<Shared>) {
    loop {
        for peer in (0..shared.addrs.len()).filter(|&p| p != shared.me) {
            let link = shared.lock_peers().get(&peer).map(|p| p.link);
            let attempt = match link {
                Some(Link::Lost { due, .. }) if Instant::now() < due => continue,
                Some(Link::Lost { attempt, .. }) => {
                    shared.log.info(&format!(
                        "Attempting connection for target node {peer} - {}:{}, attempt #{attempt}",
                        shared.addrs[peer], shared.port
                    ));
                    Some(attempt)
                }
                _ => None,
            };
            let reply = exchange(&shared, SocketAddr::new(shared.ips[peer], shared.port));
            shared.outgoing(peer, reply, attempt);
        }
        std::thread::sleep(TICK);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log whose lines the test reads back.
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Buf {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
        }
    }

    /// Events go to a scratch run dir, never to /run/nvidia-imex.
    fn scratch_run_dir() -> PathBuf {
        static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
        let dir = DIR.get_or_init(|| tempfile::tempdir().unwrap());
        std::env::set_var("FAKE_IMEX_RUN_DIR", dir.path());
        dir.path().to_path_buf()
    }

    /// Node 0 of a three-node map, READY.
    fn node0(importers: Importers) -> (Shared, Buf) {
        let run = scratch_run_dir();
        let buf = Buf::default();
        let addrs: Vec<String> = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
            .map(String::from)
            .into();
        let shared = Shared {
            me: 0,
            instance: new_instance_id(),
            ips: addrs.iter().map(|a| a.parse().unwrap()).collect(),
            map_hash: fnv(&addrs.join("\n")),
            addrs,
            host_name: "n1".into(),
            version: FAKE_VERSION.into(),
            port: 50000,
            reconnect: Duration::from_millis(15000),
            importers,
            persist_path: run.join(format!("persist-{}.dat", new_instance_id())),
            persist_lock: Mutex::new(()),
            unix_path: Mutex::new(None),
            state: Mutex::new("READY".into()),
            peers: Mutex::new(BTreeMap::new()),
            up_recorded: std::sync::atomic::AtomicBool::new(false),
            log: Log {
                out: Mutex::new(Box::new(buf.clone())),
            },
        };
        (shared, buf)
    }

    fn hello_from(s: &Shared, id: usize, instance: &str) -> String {
        format!(
            "HELLO {id} {instance} READY {} {:x} n{} 0:CONNECTED,1:CONNECTED,2:CONNECTED\n",
            s.version,
            s.map_hash,
            id + 1
        )
    }

    fn link(s: &Shared, id: usize) -> Link {
        s.lock_peers()[&id].link
    }

    #[test]
    fn backoff_follows_nvidias_steps_and_scales_with_the_first() {
        let s = |ms: u64| Duration::from_millis(ms);
        let steps: Vec<Duration> = (1..=6).map(|k| backoff(s(15000), k)).collect();
        assert_eq!(
            steps,
            [
                s(15000),
                s(31000),
                s(62000),
                s(125000),
                s(125000),
                s(125000)
            ]
        );
        assert_eq!(backoff(s(1500), 1), s(1500));
        assert_eq!(backoff(s(1500), 2), s(3100));
    }

    #[test]
    fn hello_round_trips_with_its_instance() {
        let (s, _) = node0(Importers::List(vec![]));
        let h = Hello::parse(&s.hello()).unwrap();
        assert_eq!((h.id, h.instance.as_str()), (0, s.instance.as_str()));
        assert_eq!((h.state.as_str(), h.host_name.as_str()), ("READY", "n1"));
        assert_eq!(h.map_hash, s.map_hash);
        assert_eq!(h.connections[&1], "NEVER_CONNECTED");
        // The old format (no instance) is not a HELLO any more.
        assert_eq!(
            Hello::parse("HELLO 1 READY 580.95.05 abc n2 0:CONNECTED"),
            None
        );
        // Not a node of this map, or this node itself.
        assert!(s.parse_hello(&hello_from(&s, 0, "x")).is_none());
        assert!(s.parse_hello(&hello_from(&s, 3, "x")).is_none());
    }

    #[test]
    fn cells_are_directional_a_hello_in_is_not_a_connection_out() {
        let (s, _) = node0(Importers::List(vec![]));
        assert!(s.incoming(&hello_from(&s, 1, "aaaa")).is_some());
        assert_eq!(s.my_row()[&1], "NEVER_CONNECTED");
        assert_eq!(s.view().nodes[&1].status, "UNAVAILABLE");
        s.outgoing(1, Ok(hello_from(&s, 1, "aaaa")), None);
        assert_eq!(s.my_row()[&1], "CONNECTED");
        assert_eq!(s.view().nodes[&1].status, "READY");
        s.outgoing(2, Ok(hello_from(&s, 2, "bbbb")), None);
        assert_eq!(s.view().domain, "UP");
    }

    #[test]
    fn a_new_instance_is_a_lost_connection_until_our_own_backoff_attempt() {
        let (s, log) = node0(Importers::List(vec![]));
        s.outgoing(1, Ok(hello_from(&s, 1, "aaaa")), None);
        s.outgoing(2, Ok(hello_from(&s, 2, "bbbb")), None);
        assert_eq!(s.view().domain, "UP");
        // Node 1 restarted: its new instance connects to us.
        s.incoming(&hello_from(&s, 1, "cccc")).unwrap();
        assert!(
            log.text()
                .contains("Connection lost to node 1: 10.0.0.2:50000"),
            "{}",
            log.text()
        );
        assert_eq!(s.my_row()[&1], "DISCONNECTED");
        assert_eq!(s.view().domain, "DEGRADED");
        assert!(matches!(link(&s, 1), Link::Lost { attempt: 1, .. }));
        // Our routine checks do not reconnect it: only the back-off attempt.
        s.outgoing(1, Ok(hello_from(&s, 1, "cccc")), None);
        assert_eq!(s.my_row()[&1], "DISCONNECTED");
        s.outgoing(1, Ok(hello_from(&s, 1, "cccc")), Some(1));
        assert_eq!(s.my_row()[&1], "CONNECTED");
        assert_eq!(s.view().domain, "UP");
        let text = log.text();
        assert!(
            text.contains(
                "Connection established to node 1 with ip address 10.0.0.2. Number of times connected: 2"
            ),
            "{text}"
        );
        assert_eq!(text.matches("Connection lost").count(), 1, "{text}");
    }

    #[test]
    fn a_refused_check_loses_at_once_a_slow_one_only_after_a_while() {
        let (s, log) = node0(Importers::List(vec![]));
        s.outgoing(1, Ok(hello_from(&s, 1, "aaaa")), None);
        let timeout = || Err(std::io::Error::from(std::io::ErrorKind::WouldBlock));
        s.outgoing(1, timeout(), None);
        assert_eq!(s.my_row()[&1], "CONNECTED");
        s.outgoing(1, Err(std::io::ErrorKind::ConnectionRefused.into()), None);
        assert_eq!(s.my_row()[&1], "DISCONNECTED");
        assert!(log.text().contains("Connection lost to node 1"));
        // A failed back-off attempt moves on to the next, longer step.
        let Link::Lost { due: first, .. } = link(&s, 1) else {
            panic!()
        };
        s.outgoing(
            1,
            Err(std::io::ErrorKind::ConnectionRefused.into()),
            Some(1),
        );
        let Link::Lost { attempt, due } = link(&s, 1) else {
            panic!()
        };
        assert_eq!(attempt, 2);
        assert!(due > first + Duration::from_secs(15), "{due:?} {first:?}");
        // An instance that changes before we ever connected is no loss.
        s.incoming(&hello_from(&s, 2, "dddd")).unwrap();
        s.incoming(&hello_from(&s, 2, "eeee")).unwrap();
        assert_eq!(link(&s, 2), Link::Never);
        assert_eq!(log.text().matches("Connection lost").count(), 1);
    }

    #[test]
    fn persist_dat_lists_the_importers_once_ready() {
        let (s, _) = node0(Importers::List(vec![2]));
        s.write_persist();
        let text = std::fs::read_to_string(&s.persist_path).unwrap();
        assert_eq!(text, format!("{:x}\nNode #2: 10.0.0.3\n", s.map_hash));
        let (all, _) = node0(Importers::All);
        all.outgoing(1, Ok(hello_from(&all, 1, "aaaa")), None);
        let text = std::fs::read_to_string(&all.persist_path).unwrap();
        assert_eq!(text, format!("{:x}\nNode #1: 10.0.0.2\n", all.map_hash));
        // Not READY: nothing is written.
        let (waiting, _) = node0(Importers::All);
        waiting.set_state("WAITING_FOR_RECOVERY");
        waiting.write_persist();
        assert!(!waiting.persist_path.exists());
        for p in [&s.persist_path, &all.persist_path] {
            std::fs::remove_file(p).unwrap();
        }
    }

    #[test]
    fn persist_dat_read_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("persist.dat");
        let buf = Buf::default();
        let log = Log {
            out: Mutex::new(Box::new(buf.clone())),
        };
        let key = 0xabcdefu64;
        let read = |quorum: &str| read_persist(&path, key, 0, 3, quorum, &log);
        assert_eq!(read("RECOVERY"), Vec::<usize>::new());
        assert!(buf.text().contains(&format!(
            "nvidia-imex persistence file {} does not exist.  Assuming no previous importers.",
            path.display()
        )));
        std::fs::write(&path, "abcdef\nNode #1: 10.0.0.2\nNode #2: 10.0.0.3\n").unwrap();
        assert_eq!(read("RECOVERY"), [1, 2]);
        assert!(buf
            .text()
            .contains("(nodes 1, 2); waiting for them to reconnect."));
        assert_eq!(read("NONE"), Vec::<usize>::new());
        assert!(buf.text().contains("IMEX_WAIT_FOR_QUORUM=NONE"));
        std::fs::write(&path, "abcdef\n").unwrap();
        assert_eq!(read("RECOVERY"), Vec::<usize>::new());
        assert!(buf.text().contains("lists no previous importers."));
        // Another node map's file is discarded.
        std::fs::write(&path, "123\nNode #1: 10.0.0.2\n").unwrap();
        assert_eq!(read("RECOVERY"), Vec::<usize>::new());
        assert!(buf.text().contains("discarding it"));
        assert!(!path.exists());
    }

    #[test]
    fn importers_key() {
        assert_eq!(parse_importers(None, 0, 3), Importers::List(vec![]));
        let v = |s: &str| Some(s.to_string());
        assert_eq!(parse_importers(v("all").as_ref(), 0, 3), Importers::All);
        assert_eq!(
            parse_importers(v("0, 2,7,x").as_ref(), 0, 3),
            Importers::List(vec![2])
        );
    }
}
