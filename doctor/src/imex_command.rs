//! The IMEX daemon's command service (`IMEX_CMD_*`, the `imex-command`
//! check): nvidia-imex-ctl's way in, which asks for no credentials, so it
//! must be reachable from this node only: on loopback, or on a unix socket
//! in a directory only root can enter. Judged on every config a daemon
//! runs or will be restarted on (the base config and the running copy,
//! [`crate::daemon_cfg`]) and on what listens now; a line at fault names
//! the file.

use crate::check::{Check, CheckName};
use crate::daemon_cfg::{DaemonCfg, Effective};
use crate::listening::{describe, is_loopback, Listeners};
use slurm_imex_core::trust::{self, Expect};
use slurm_imex_domain::imex::daemon_config::{Origin, DEFAULT_CMD_PORT};
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const CHECK: CheckName = CheckName::ImexCommand;

/// Where one config puts the command service.
struct Service<'a> {
    cfg: &'a DaemonCfg,
    enabled: bool,
    /// None: no TCP port (IMEX_CMD_PORT empty beside a unix socket path,
    /// as NVIDIA's config.cfg allows).
    port: Option<u16>,
    bind: &'a str,
    unix: Option<&'a str>,
}

fn service(cfg: &DaemonCfg) -> Result<Service<'_>, String> {
    let unix = Some(cfg.value("IMEX_CMD_UNIX_DOMAIN_PATH")).filter(|u| !u.is_empty());
    let port = if cfg.value("IMEX_CMD_PORT").is_empty() && unix.is_some() {
        None
    } else {
        Some(cfg.file.cmd_port(&cfg.path).map_err(|e| e.to_string())?)
    };
    Ok(Service {
        cfg,
        enabled: cfg.value("IMEX_CMD_ENABLED") == "1",
        port,
        bind: cfg.value("IMEX_CMD_BIND_INTERFACE_IP"),
        unix,
    })
}

/// Every key this check reads: the running copy is judged too when it
/// differs from the base config in any of them.
const KEYS: [&str; 4] = [
    "IMEX_CMD_ENABLED",
    "IMEX_CMD_PORT",
    "IMEX_CMD_BIND_INTERFACE_IP",
    "IMEX_CMD_UNIX_DOMAIN_PATH",
];

/// The `imex-command` lines: a FAIL per problem, naming the config at
/// fault, or one PASS (or WARN). Judged: the base config, from which every
/// daemon slurm-imex starts is rendered, and the running daemon's copy
/// (`[imex.daemon] job_config`), which the watcher restarts a dead daemon
/// on, when it differs in the command keys.
pub fn check(effective: &Effective, listeners: &Listeners) -> Vec<Check> {
    let mut fails = Vec::new();
    let mut services = Vec::new();
    for cfg in effective.differing(&KEYS) {
        match service(cfg) {
            Ok(s) => services.push(s),
            Err(e) => fails.push(Check::fail(CHECK, e, fix_in(cfg, "set IMEX_CMD_PORT"))),
        }
    }
    if fails.is_empty() && !services.iter().any(|s| s.enabled) {
        let path = effective.base.path.display();
        return vec![Check::pass(CHECK, format!("{path}: IMEX_CMD_ENABLED is not 1: no command service to expose (imex-config says what that costs)"))];
    }
    let mut ports: Vec<u16> = services.iter().filter_map(|s| s.port).collect();
    ports.sort_unstable();
    ports.dedup();
    let exposed: Vec<SocketAddr> = ports
        .into_iter()
        .flat_map(|p| listeners.on_port(p))
        .filter(|a| !is_loopback(a.ip()))
        .collect();
    let open: Vec<&Service> = services.iter().filter(|s| opens_to_network(s)).collect();
    if !exposed.is_empty() {
        // Its remedy names every config that would open it again.
        fails.insert(0, exposed_now(effective, &open, &exposed));
    } else {
        fails.extend(
            open.iter()
                .map(|s| Check::fail(CHECK, would_listen(s), set_loopback(s.cfg))),
        );
    }
    let mut sockets: Vec<&str> = Vec::new();
    for s in services.iter().filter(|s| s.enabled) {
        if s.port.is_none() {
            let named = s.cfg.named();
            fails.push(Check::fail(
                CHECK,
                format!("{named}: IMEX_CMD_PORT is empty: the command service is on the unix socket only, but the domain's status (nvidia-imex-ctl -N, which the prolog's gate and the watcher ask) goes through the config's port: -N cannot use the socket"),
                format!("{} (keep the socket for -q)", fix_in(s.cfg, "set IMEX_CMD_PORT=50005 and IMEX_CMD_BIND_INTERFACE_IP=127.0.0.1")),
            ));
        }
        // One directory, one line, whichever configs name it.
        if let Some(unix) = s.unix.filter(|u| !sockets.contains(u)) {
            sockets.push(unix);
            if let Err(fail) = unix_socket_dir(unix, s.cfg) {
                fails.push(fail);
            }
        }
    }
    if !fails.is_empty() {
        return fails;
    }
    vec![passed(&services, listeners)]
}

/// An enabled TCP command port bound beyond loopback (or to every interface).
fn opens_to_network(s: &Service) -> bool {
    s.enabled && s.port.is_some() && !bind_is_loopback(s.bind)
}

fn bind_is_loopback(bind: &str) -> bool {
    bind.parse::<IpAddr>().is_ok_and(is_loopback)
}

/// `what` in the config at fault; for the running copy, why it matters and
/// that the base config is where the next daemon's comes from.
fn fix_in(cfg: &DaemonCfg, what: &str) -> String {
    let path = cfg.path.display();
    match cfg.origin {
        Origin::Base => format!("{what} in {path}"),
        Origin::Running => format!(
            "{what} in {path} too: the watcher restarts a dead daemon on this copy until the next --imex prolog renders it anew from the base config, which must say the same"
        ),
    }
}

fn set_loopback(cfg: &DaemonCfg) -> String {
    format!(
        "{} (or use IMEX_CMD_UNIX_DOMAIN_PATH in a root-only directory); the daemon reads it at its next start",
        fix_in(cfg, "set IMEX_CMD_BIND_INTERFACE_IP=127.0.0.1")
    )
}

/// Something listens on the command port beyond loopback now; `open`: the
/// configs judged that would open it again.
fn exposed_now(effective: &Effective, open: &[&Service], exposed: &[SocketAddr]) -> Check {
    let on: Vec<String> = exposed.iter().map(|a| describe(*a)).collect();
    let found = format!(
        "the IMEX command port listens on {}: anyone who reaches this node can use the daemon's unauthenticated command service",
        on.join(", ")
    );
    let remedy = if open.is_empty() {
        let judged = effective.differing(&KEYS);
        let files: Vec<String> = judged
            .iter()
            .map(|c| c.path.display().to_string())
            .collect();
        let keeps = if files.len() == 1 { "keeps" } else { "keep" };
        format!(
            "{} already {keeps} it off the network: the daemon listening now started before that; it takes effect at its next start (the next --imex job; a rack-wide domain's daemon: restart it when no job uses IMEX)",
            files.join(" and ")
        )
    } else {
        let fixes: Vec<String> = open
            .iter()
            .map(|s| fix_in(s.cfg, "set IMEX_CMD_BIND_INTERFACE_IP=127.0.0.1"))
            .collect();
        format!(
            "{} (or use IMEX_CMD_UNIX_DOMAIN_PATH in a root-only directory); the daemon reads it at its next start",
            fixes.join("; and ")
        )
    };
    Check::fail(CHECK, found, remedy)
}

/// The config leaves the next daemon's command port open to the network.
fn would_listen(s: &Service) -> String {
    let named = s.cfg.named();
    let port = s.port.unwrap_or(DEFAULT_CMD_PORT);
    let what = match s.bind.parse::<IpAddr>() {
        _ if s.bind.is_empty() => " is empty, which is every interface".to_string(),
        Ok(ip) if ip.is_unspecified() => format!("={ip}, which is every interface"),
        Ok(ip) => format!("={ip}, not a loopback address"),
        Err(_) => format!("={} is not an IP address", s.bind),
    };
    let when = match s.cfg.origin {
        Origin::Base => "would be open to the network",
        Origin::Running => {
            "would be open to the network when the watcher restarts the daemon on it"
        }
    };
    format!("{named}: IMEX_CMD_BIND_INTERFACE_IP{what}: the daemon's unauthenticated command service (port {port}) {when}")
}

/// The unix socket's directory: root's, and closed to others.
fn unix_socket_dir(socket: &str, cfg: &DaemonCfg) -> Result<(), Check> {
    let named = cfg.named();
    let path = Path::new(socket);
    let dir = path.parent().filter(|_| path.is_absolute()).ok_or_else(|| {
        Check::fail(CHECK,
            format!("{named}: IMEX_CMD_UNIX_DOMAIN_PATH={socket} is not an absolute path"),
            "give the socket's full path, in a directory only root can enter (e.g. /run/nvidia-imex-cmd/imex.sock, directory mode 0700)")
    })?;
    let remedy = || {
        format!(
            "mkdir -p {0}; chown root:root {0}; chmod 0700 {0} (and a tmpfiles.d line when it is under /run)",
            dir.display()
        )
    };
    trust::check(dir, Expect::Dir, "IMEX_CMD_UNIX_DOMAIN_PATH's directory")
        .map_err(|e| Check::fail(CHECK, format!("{named}: {e}"), remedy()))?;
    let mode = std::fs::metadata(dir)
        .map(|m| m.permissions().mode())
        .map_err(|e| Check::fail(CHECK, format!("{named}: {}: {e}", dir.display()), remedy()))?;
    if mode & 0o007 != 0 {
        return Err(Check::fail(CHECK,
            format!("{named}: {} (IMEX_CMD_UNIX_DOMAIN_PATH's directory) is open to others (mode {:04o}): they can reach the unauthenticated command socket whenever its own mode lets them", dir.display(), mode & 0o7777),
            format!("chmod o-rwx {}", dir.display())));
    }
    Ok(())
}

/// PASS naming where the service listens (or will), for each config judged.
fn passed(services: &[Service], listeners: &Listeners) -> Check {
    let mut found = String::new();
    for s in services {
        if !found.is_empty() {
            found.push_str("; ");
        }
        found.push_str(&where_it_listens(s, listeners));
    }
    if listeners.unread.is_empty() {
        return Check::pass(CHECK, found);
    }
    Check::warn(
        CHECK,
        format!(
            "{found}; but what listens could not be read ({})",
            listeners.unread.join("; ")
        ),
        "mount /proc; only the config was judged",
    )
}

fn where_it_listens(s: &Service, listeners: &Listeners) -> String {
    let named = s.cfg.named();
    if !s.enabled {
        return format!("{named}: IMEX_CMD_ENABLED is not 1");
    }
    let mut found = match s.port {
        Some(port) => {
            let now: Vec<String> = listeners
                .on_port(port)
                .iter()
                .map(|a| a.to_string())
                .collect();
            if now.is_empty() {
                format!(
                    "{named}: IMEX_CMD_BIND_INTERFACE_IP={}, port {port} (nothing listens now)",
                    s.bind
                )
            } else {
                format!(
                    "the command service listens on {} only ({named}: IMEX_CMD_BIND_INTERFACE_IP={})",
                    now.join(", "),
                    s.bind
                )
            }
        }
        None => format!("{named}: no command port (IMEX_CMD_PORT is empty)"),
    };
    if let Some(unix) = s.unix {
        found.push_str(&format!(
            "; unix socket {unix}, in a directory only root can enter"
        ));
    }
    found
}

#[cfg(test)]
mod tests;
