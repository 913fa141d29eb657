//! Fake `nvidia-imex-ctl` (test double of docs/imex.md §2). Talks to the fake daemon's command port and prints the
//! documented `-q`, `-N` and `-N -j` outputs with the documented exit codes.

use fake_imex::{DaemonCfg, DomainView, DEFAULT_CONFIG};
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

const USAGE: &str = "Usage: nvidia-imex-ctl [-c <nvidia-imex config.cfg path>] <-n|-N|-q> [-j][-H]";

fn usage_exit() -> ! {
    println!("{USAGE}");
    std::process::exit(1);
}

/// What the command line asks for.
struct Request {
    config: Option<PathBuf>,
    /// `-i <ip> <port>`: a daemon's command port named directly.
    target: Option<SocketAddr>,
    /// 'q' (-q), 'N' (-N once) or 'n' (-n, every second).
    mode: char,
    json: bool,
    names: bool,
}

fn parse_args() -> Request {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut config, mut target, mut mode, mut json, mut names) = (None, None, None, false, false);
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "-c" => {
                i += 1;
                config = Some(PathBuf::from(
                    args.get(i).cloned().unwrap_or_else(|| usage_exit()),
                ));
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
                target = Some(SocketAddr::new(ip, port));
                i += 2;
            }
            "-u" => i += 1, // unix socket: not offered by the fake daemon
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
    Request {
        config,
        target,
        mode,
        json,
        names,
    }
}

/// The daemon's command port: `-i`, or the config's IMEX_CMD_* keys. As the
/// real ctl, -N/-n first insist on a readable node file.
fn command_address(req: &Request) -> SocketAddr {
    let config = req
        .config
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
    let cfg = match DaemonCfg::read(&config) {
        Ok(c) => c,
        Err(_) if req.target.is_some() => DaemonCfg::default(),
        Err(_) => {
            println!("Unable to open configuration file at {}", config.display());
            usage_exit();
        }
    };
    if req.mode != 'q' && req.target.is_none() {
        let node_file = cfg.get("IMEX_NODE_CONFIG_FILE");
        if std::fs::read_to_string(&node_file).is_err() {
            println!("Failed to read node configuration file {node_file}");
            std::process::exit(255);
        }
    }
    req.target.unwrap_or_else(|| {
        let bind = cfg.get("IMEX_CMD_BIND_INTERFACE_IP");
        let ip: IpAddr = bind.parse().unwrap_or(IpAddr::from([127, 0, 0, 1]));
        SocketAddr::new(ip, cfg.port("IMEX_CMD_PORT").unwrap_or(50005))
    })
}

fn main() {
    let req = parse_args();
    let addr = command_address(&req);
    loop {
        let request = if req.mode == 'q' { "QUERY" } else { "STATUS" };
        let answer = ask(addr, request).unwrap_or_else(|e| connect_failed(addr, e));
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
fn connect_failed(addr: SocketAddr, e: std::io::Error) -> ! {
    let family = if addr.is_ipv4() { "ipv4" } else { "ipv6" };
    let why = if e.kind() == std::io::ErrorKind::ConnectionRefused {
        "Connection refused".to_string()
    } else {
        e.to_string()
    };
    println!(
        "Query Status returned error code: 14 - failed to connect to all addresses; \
         last error: UNKNOWN: {family}:{addr}: {why}"
    );
    std::process::exit(1);
}

fn ask(addr: SocketAddr, request: &str) -> std::io::Result<String> {
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    (&stream).write_all(format!("{request}\n").as_bytes())?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
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
