//! Fake `nvidia-imex` (test double of docs/imex.md §1).
//! Reads config.cfg and the node file, identifies itself by a local IP, talks
//! to its peers over real TCP on SERVER_PORT, serves the ctl on
//! IMEX_CMD_PORT, logs in NVIDIA's format, and injects faults read from
//! `$FAKE_IMEX_FAULT_FILE` (default <run dir>/fake-fault):
//!   MODE=crash            abort at start (SIGABRT)
//!   MODE=exit EXIT_CODE=N exit N at start
//!   MODE=never-ready      stay INITIALIZING forever
//!   MODE=slow-start DELAY_MS=N   become READY after N ms
//!   MODE=unreachable      READY, but neither accepts nor makes peer connections
//!   MODE=version-mismatch report another driver version to peers

use fake_imex::{
    ctl_timestamp, log_timestamp, DaemonCfg, DomainView, NodeView, DEFAULT_CONFIG, FAKE_VERSION,
};
use nix::fcntl::{Flock, FlockArg};
use nix::sys::signal::{SigSet, Signal};
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
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

#[derive(Clone, Default)]
struct Peer {
    state: String,
    version: String,
    host_name: String,
    connections: BTreeMap<usize, String>,
    last_seen: Option<Instant>,
    times_connected: u32,
    map_mismatch: bool,
    version_mismatch: bool,
}

struct Shared {
    me: usize,
    addrs: Vec<String>,
    ips: Vec<IpAddr>,
    host_name: String,
    version: String,
    map_hash: u64,
    port: u16,
    state: Mutex<String>,
    peers: Mutex<BTreeMap<usize, Peer>>,
    up_recorded: std::sync::atomic::AtomicBool,
    log: Log,
}

const FRESH: Duration = Duration::from_millis(1500);

impl Shared {
    fn conn_word(&self, peer: usize, p: Option<&Peer>) -> String {
        if peer == self.me {
            return "CONNECTED".into();
        }
        match p {
            None => "NEVER_CONNECTED".into(),
            Some(p) if p.map_mismatch => "NODE_MAP_MISMATCH".into(),
            Some(p) if p.version_mismatch => "VERSION_MISMATCH".into(),
            Some(p) if p.last_seen.is_some_and(|t| t.elapsed() < FRESH) => "CONNECTED".into(),
            Some(p) if p.times_connected > 0 => "DISCONNECTED".into(),
            Some(_) => "NEVER_CONNECTED".into(),
        }
    }

    fn my_row(&self) -> BTreeMap<usize, String> {
        let peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        (0..self.addrs.len())
            .map(|i| (i, self.conn_word(i, peers.get(&i))))
            .collect()
    }

    fn hello(&self) -> String {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let row: Vec<String> = self
            .my_row()
            .iter()
            .map(|(i, s)| format!("{i}:{s}"))
            .collect();
        format!(
            "HELLO {} {} {} {:x} {} {}\n",
            self.me,
            state,
            self.version,
            self.map_hash,
            self.host_name,
            row.join(",")
        )
    }

    /// Record a peer's HELLO; returns false if it is not a well-formed one.
    fn absorb(&self, line: &str) -> bool {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || f[0] != "HELLO" {
            return false;
        }
        let Ok(id) = f[1].parse::<usize>() else {
            return false;
        };
        if id >= self.addrs.len() || id == self.me {
            return false;
        }
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let p = peers.entry(id).or_default();
        p.map_mismatch = u64::from_str_radix(f[4], 16).ok() != Some(self.map_hash);
        p.version_mismatch = f[3] != self.version;
        let fresh = p.last_seen.is_some_and(|t| t.elapsed() < FRESH);
        if !fresh && !p.map_mismatch && !p.version_mismatch {
            p.times_connected += 1;
            self.log.info(&format!(
                "Connection established to node {id} with ip address {}. Number of times connected: {}",
                self.addrs[id], p.times_connected
            ));
            record_event(&format!("connected {id}"));
        }
        p.state = f[2].to_string();
        p.version = f[3].to_string();
        p.host_name = f[5].to_string();
        p.connections = f
            .get(6)
            .map(|r| {
                r.split(',')
                    .filter_map(|c| c.split_once(':'))
                    .filter_map(|(i, s)| Some((i.parse().ok()?, s.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        p.last_seen = Some(Instant::now());
        drop(peers);
        self.note_domain_up();
        true
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

    fn view(&self) -> DomainView {
        let local_state = self.state.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let my_row = self.my_row();
        let peers = self.peers.lock().unwrap_or_else(|e| e.into_inner()).clone();
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
    log.info("nvidia-imex persistence file /var/run/nvidia-imex/persist.dat does not exist.  Assuming no previous importers.");
    daemonize_if_asked(&cfg, &log);
    if cfg.get("DAEMONIZE") != "1" {
        write_pid_file(std::process::id());
    }
    let signals = block_signals();
    let shared = Arc::new(Shared {
        me,
        host_name: nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default(),
        map_hash: fnv(&addrs.join("\n")),
        addrs,
        ips: ips
            .iter()
            .map(|ip| ip.unwrap_or(IpAddr::from([0, 0, 0, 0])))
            .collect(),
        version,
        port,
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
    schedule_ready(&shared, &mode, &faults);
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

/// The ctl's port (IMEX_CMD_PORT on IMEX_CMD_BIND_INTERFACE_IP), if enabled.
fn start_command_service(cfg: &DaemonCfg, shared: &Arc<Shared>) {
    if cfg.get("IMEX_CMD_ENABLED") != "1" {
        return;
    }
    let bind = cfg.get("IMEX_CMD_BIND_INTERFACE_IP");
    let bind: IpAddr = bind.parse().unwrap_or(IpAddr::from([0, 0, 0, 0]));
    let cmd_port = cfg.port("IMEX_CMD_PORT").unwrap_or(50005);
    match TcpListener::bind(SocketAddr::new(bind, cmd_port)) {
        Ok(l) => {
            let s = shared.clone();
            std::thread::spawn(move || serve_commands(l, s));
        }
        Err(e) => {
            shared.log.error(&format!(
                "Failed to start command service on port {cmd_port}: {e}"
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

/// READY after 50 ms (MODE=slow-start: DELAY_MS), never with MODE=never-ready.
fn schedule_ready(shared: &Arc<Shared>, mode: &str, faults: &BTreeMap<String, String>) {
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
        *s.state.lock().unwrap_or_else(|e| e.into_inner()) = "READY".into();
        record_event("ready");
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
                *shared.state.lock().unwrap_or_else(|e| e.into_inner()) = "SHUTTING_DOWN".into();
                std::process::exit(0);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

fn serve_commands(listener: TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming().flatten() {
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        let mut reader = BufReader::new(&stream);
        let mut line = String::new();
        if reader.read_line(&mut line).is_err() {
            continue;
        }
        let answer = match line.trim() {
            "QUERY" => format!(
                "{}\n",
                shared.state.lock().unwrap_or_else(|e| e.into_inner())
            ),
            "STATUS" => serde_json::to_string(&shared.view()).unwrap_or_default() + "\n",
            _ => "ERROR unknown request\n".into(),
        };
        let _ = (&stream).write_all(answer.as_bytes());
    }
}

fn serve_peers(listener: TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming().flatten() {
        let s = shared.clone();
        std::thread::spawn(move || {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let mut line = String::new();
            if BufReader::new(&stream).read_line(&mut line).is_ok() && s.absorb(&line) {
                let _ = (&stream).write_all(s.hello().as_bytes());
            }
        });
    }
}

fn connect_peers(shared: Arc<Shared>) {
    let mut lost_logged = BTreeMap::new();
    loop {
        for peer in 0..shared.addrs.len() {
            if peer == shared.me {
                continue;
            }
            let addr = SocketAddr::new(shared.ips[peer], shared.port);
            let ok = TcpStream::connect_timeout(&addr, Duration::from_millis(300))
                .and_then(|stream| {
                    stream.set_read_timeout(Some(Duration::from_millis(800)))?;
                    (&stream).write_all(shared.hello().as_bytes())?;
                    let mut line = String::new();
                    BufReader::new(&stream).read_line(&mut line)?;
                    Ok(shared.absorb(&line))
                })
                .unwrap_or(false);
            let was_connected = shared
                .peers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&peer)
                .is_some_and(|p| p.times_connected > 0);
            if !ok && was_connected && !lost_logged.get(&peer).copied().unwrap_or(false) {
                shared.log.info(&format!(
                    "Connection lost to node {peer}: {}:{}",
                    shared.addrs[peer], shared.port
                ));
                lost_logged.insert(peer, true);
            } else if ok {
                lost_logged.insert(peer, false);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
