//! Fake `nvidia-imex-ctl` (test double of docs/imex.md §2). Talks to the
//! fake daemon's command service (TCP via `-c`/`-i`, or its unix socket via
//! `-u`) and prints the documented `-q`, `-N` and `-N -j` outputs with the
//! documented exit codes. As NVIDIA's cmdservice page says, only one of -i,
//! -u, -c may be given, and -N/-n need the config file: `-u PATH -q` works,
//! `-u PATH -N` is a usage error (rc 1). Through the config, a node file
//! that cannot be read fails every mode with rc 255.

use fake_imex::{DaemonCfg, DomainView, DEFAULT_CONFIG};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

const USAGE: &str = "Usage: nvidia-imex-ctl [-c <nvidia-imex config.cfg path>] <-n|-N|-q> [-j][-H]";

fn usage_exit() -> ! {
    println!("{USAGE}");
    std::process::exit(1);
}

/// Where the daemon's command service is (only one of -i, -u, -c).
#[derive(Debug, Clone)]
enum Target {
    /// `-c <config>`, or the default config: its IMEX_CMD_* keys.
    Config(Option<PathBuf>),
    /// `-i <ip> <port>`: a daemon's command port named directly.
    Tcp(SocketAddr),
    /// `-u <path>`: the daemon's IMEX_CMD_UNIX_DOMAIN_PATH.
    Unix(PathBuf),
}

/// What the command line asks for.
struct Request {
    target: Target,
    /// 'q' (-q), 'N' (-N once) or 'n' (-n, every second).
    mode: char,
    json: bool,
    names: bool,
}

fn parse_args() -> Request {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut targets, mut mode, mut json, mut names) = (Vec::new(), None, false, false);
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "-c" => {
                i += 1;
                let path = args.get(i).cloned().unwrap_or_else(|| usage_exit());
                targets.push(Target::Config(Some(PathBuf::from(path))));
            }
            "-i" => {
                let ip: IpAddr = args
                    .get(i + 1)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_else(|| usage_exit());
                let port: u16 = args
                    .get(i + 2)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_else(|| usage_exit());
                targets.push(Target::Tcp(SocketAddr::new(ip, port)));
                i += 2;
            }
            "-u" => {
                i += 1;
                let path = args.get(i).cloned().unwrap_or_else(|| usage_exit());
                targets.push(Target::Unix(PathBuf::from(path)));
            }
            "-t" => i += 1,
            "-q" => mode = Some('q'),
            "-N" => mode = Some('N'),
            "-n" => mode = Some('n'),
            "-j" => json = true,
            "-H" => names = true,
            _ => usage_exit(),
        }
        i += 1;
    }
    let Some(mode) = mode else { usage_exit() };
    // "only one of -i, -u, or -c can be specified"; none means the default -c.
    if targets.len() > 1 {
        usage_exit();
    }
    let target = targets.pop().unwrap_or(Target::Config(None));
    // -n and -N need the config file (default or via -c).
    if mode != 'q' && matches!(target, Target::Unix(_)) {
        usage_exit();
    }
    Request {
        target,
        mode,
        json,
        names,
    }
}

/// Where to ask: `-i`, `-u`, or the config's IMEX_CMD_* keys (always TCP,
/// on IMEX_CMD_BIND_INTERFACE_IP or loopback). Through the config, every
/// mode (-q too) first insists on a readable node file: "Failed to read
/// node configuration file …", rc 255 (docs/imex.md §2, under `-q`; DCGM
/// looks for that line in `-q` output as in `-N -j`'s).
fn command_target(req: &Request) -> Target {
    let Target::Config(config) = &req.target else {
        return req.target.clone();
    };
    let config = config
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
    let Ok(cfg) = DaemonCfg::read(&config) else {
        println!("Unable to open configuration file at {}", config.display());
        usage_exit();
    };
    let node_file = cfg.get("IMEX_NODE_CONFIG_FILE");
    if std::fs::read_to_string(&node_file).is_err() {
        println!("Failed to read node configuration file {node_file}");
        std::process::exit(255);
    }
    let bind = cfg.get("IMEX_CMD_BIND_INTERFACE_IP");
    let ip: IpAddr = bind.parse().unwrap_or(IpAddr::from([127, 0, 0, 1]));
    Target::Tcp(SocketAddr::new(
        ip,
        cfg.port("IMEX_CMD_PORT").unwrap_or(50005),
    ))
}

fn main() {
    let req = parse_args();
    let target = command_target(&req);
    loop {
        let request = if req.mode == 'q' { "QUERY" } else { "STATUS" };
        let answer = ask(&target, request).unwrap_or_else(|e| connect_failed(&target, e));
        if req.mode == 'q' {
            println!("{}", answer.trim());
            return;
        }
        let Ok(view) = serde_json::from_str::<DomainView>(&answer) else {
            println!("Query Status returned error code: 13 - malformed reply");
            std::process::exit(1);
        };
        if req.json {
            println!("{}", render_json(&view, req.names));
        } else {
            print!("{}", render_text(&view, req.names));
        }
        if req.mode != 'n' {
            return;
        }
        let _ = std::io::stdout().flush();
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The gRPC error the real ctl prints when no daemon answers, exit 1.
fn connect_failed(target: &Target, e: std::io::Error) -> ! {
    let address = match target {
        Target::Tcp(addr) if addr.is_ipv4() => format!("ipv4:{addr}"),
        Target::Tcp(addr) => format!("ipv6:{addr}"),
        Target::Unix(path) => format!("unix:{}", path.display()),
        Target::Config(_) => "unknown".into(),
    };
    let why = match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "Connection refused".to_string(),
        std::io::ErrorKind::NotFound => "No such file or directory".to_string(),
        std::io::ErrorKind::PermissionDenied => "Permission denied".to_string(),
        _ => e.to_string(),
    };
    println!(
        "Query Status returned error code: 14 - failed to connect to all addresses; \
         last error: UNKNOWN: {address}: {why}"
    );
    std::process::exit(1);
}

fn ask(target: &Target, request: &str) -> std::io::Result<String> {
    match target {
        Target::Unix(path) => {
            let stream = UnixStream::connect(path)?;
            stream.set_read_timeout(Some(Duration::from_secs(5)))?;
            exchange(&stream, request)
        }
        Target::Tcp(addr) => {
            let stream = TcpStream::connect_timeout(addr, Duration::from_secs(2))?;
            stream.set_read_timeout(Some(Duration::from_secs(5)))?;
            exchange(&stream, request)
        }
        Target::Config(_) => Err(std::io::ErrorKind::InvalidInput.into()),
    }
}

/// One request line, one answer line. The daemon closes first (we read to
/// its EOF), so the closed connection's TIME_WAIT stays on the daemon's
/// port and never holds an ephemeral port that a test's daemon then binds
/// (the per-job SERVER_PORTs lie in that range).
fn exchange<S: Read + Write + Copy>(stream: S, request: &str) -> std::io::Result<String> {
    let mut out = stream;
    out.write_all(format!("{request}\n").as_bytes())?;
    let mut line = String::new();
    let mut reader = BufReader::new(stream);
    reader.read_line(&mut line)?;
    let _ = reader.read_to_end(&mut Vec::new());
    Ok(line)
}

/// The `-N -j` shape of docs/imex.md §2.
fn render_json(view: &DomainView, names: bool) -> String {
    let mut nodes = serde_json::Map::new();
    for (i, n) in &view.nodes {
        let mut conns = serde_json::Map::new();
        for (j, s) in &n.connections {
            let host = view
                .nodes
                .get(j)
                .map(|p| p.host.clone())
                .unwrap_or_default();
            conns.insert(
                j.to_string(),
                serde_json::json!({"host": host, "status": s, "changed": true}),
            );
        }
        let mut node = serde_json::json!({
            "status": n.status, "host": n.host, "version": n.version, "changed": true,
            "connections": conns,
        });
        if names {
            node["hostName"] = serde_json::Value::String(n.host_name.clone());
        }
        nodes.insert(i.to_string(), node);
    }
    serde_json::json!({"nodes": nodes, "timestamp": view.timestamp, "status": view.domain})
        .to_string()
}

fn cell(status: &str) -> &'static str {
    match status {
        "CONNECTED" => "C",
        "NEVER_CONNECTED" => "N",
        "RECOVERING" => "R",
        "DISCONNECTED" => "D",
        "AUTHENTICATING" => "A",
        "VERSION_MISMATCH" => "!V!",
        "NODE_MAP_MISMATCH" => "!M!",
        _ => "I",
    }
}

/// The `-N` text layout of the 570.172+ drivers (AWS-published sample).
fn render_text(view: &DomainView, names: bool) -> String {
    let mut s = String::from(
        "Connectivity Table Legend:\n\
         I - Invalid - Node wasn't reachable, no connection status available\n\
         N - Never Connected\n\
         R - Recovering - Connection was lost, but clean up has not yet been triggered.\n\
         D - Disconnected - Connection was lost, and clean up has been triggreed.\n\
         A - Authenticating - If GSSAPI enabled, client has initiated mutual authentication.\n\
         !V! - Version mismatch, communication disabled.\n\
         !M! - Node map mismatch, communication disabled.\n\
         C - Connected - Ready for operation\n\n",
    );
    s.push_str(&format!("{}\nNodes:\n", view.timestamp));
    for (i, n) in &view.nodes {
        let host = if names && !n.host_name.is_empty() {
            format!("{} ({})", n.host, n.host_name)
        } else {
            n.host.clone()
        };
        s.push_str(&format!(
            "{:<10}- {:<15} - {:<20} - Version: {}\n",
            format!("Node #{i}"),
            host,
            n.status,
            n.version
        ));
    }
    let cols: Vec<String> = view.nodes.keys().map(|i| format!("{i:<4}")).collect();
    s.push_str(&format!(
        "\n Nodes From\\To  {}\n",
        cols.concat().trim_end()
    ));
    for (i, n) in &view.nodes {
        let cells: Vec<String> = view
            .nodes
            .keys()
            .map(|j| {
                format!(
                    "{:<4}",
                    cell(n.connections.get(j).map(String::as_str).unwrap_or(""))
                )
            })
            .collect();
        s.push_str(&format!("{i:8}        {}\n", cells.concat().trim_end()));
    }
    s.push_str(&format!("\nDomain State: {}\n", view.domain));
    s
}
