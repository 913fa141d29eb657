//! The IMEX daemon's command service (`IMEX_CMD_*`, the `imex-command`
//! check): nvidia-imex-ctl's way in, which asks for no credentials, so it
//! must be reachable from this node only: on loopback, or on a unix socket
//! in a directory only root can enter. Judged on the effective daemon
//! config and on what listens now.

use crate::check::Check;
use crate::daemon_cfg::{DaemonCfg, Effective};
use crate::listening::{describe, is_loopback, Listeners};
use slurm_imex_core::trust::{self, Expect};
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const CHECK: &str = "imex-command";

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

/// The `imex-command` line.
pub fn check(effective: &Effective, listeners: &Listeners) -> Check {
    let base = match service(&effective.base) {
        Ok(s) => s,
        Err(e) => {
            let path = effective.base.path.display();
            return Check::fail(CHECK, e, format!("set IMEX_CMD_PORT in {path}"));
        }
    };
    let running = effective.running.as_ref().and_then(|r| service(r).ok());
    let services: Vec<&Service> = std::iter::once(&base).chain(running.as_ref()).collect();
    if !services.iter().any(|s| s.enabled) {
        return Check::pass(CHECK, format!("{}: IMEX_CMD_ENABLED is not 1: no command service to expose (imex-config says what that costs)", base.cfg.path.display()));
    }
    if base.enabled && base.port.is_none() {
        let path = base.cfg.path.display();
        return Check::fail(
            CHECK,
            format!("{path}: IMEX_CMD_PORT is empty: the command service is on the unix socket only, but the domain's status (nvidia-imex-ctl -N, which the prolog's gate and the watcher ask) goes through the config's port: -N cannot use the socket"),
            format!("set IMEX_CMD_PORT=50005 and IMEX_CMD_BIND_INTERFACE_IP=127.0.0.1 in {path} (keep the socket for -q)"),
        );
    }
    let mut ports: Vec<u16> = services.iter().filter_map(|s| s.port).collect();
    ports.sort_unstable();
    ports.dedup();
    let exposed: Vec<SocketAddr> = ports
        .into_iter()
        .flat_map(|p| listeners.on_port(p))
        .filter(|a| !is_loopback(a.ip()))
        .collect();
    if !exposed.is_empty() {
        return exposed_now(&base, &exposed);
    }
    if let (true, Some(port)) = (base.enabled, base.port) {
        if !bind_is_loopback(base.bind) {
            return Check::fail(CHECK, would_listen(&base, port), set_loopback(base.cfg));
        }
    }
    if let Some(unix) = base.unix.filter(|_| base.enabled) {
        if let Err(fail) = unix_socket_dir(unix, base.cfg) {
            return fail;
        }
    }
    passed(&base, listeners)
}

fn bind_is_loopback(bind: &str) -> bool {
    bind.parse::<IpAddr>().is_ok_and(is_loopback)
}

fn set_loopback(cfg: &DaemonCfg) -> String {
    format!(
        "set IMEX_CMD_BIND_INTERFACE_IP=127.0.0.1 in {} (or use IMEX_CMD_UNIX_DOMAIN_PATH in a root-only directory); the daemon reads it at its next start",
        cfg.path.display()
    )
}

/// Something listens on the command port beyond loopback now.
fn exposed_now(base: &Service, exposed: &[SocketAddr]) -> Check {
    let on: Vec<String> = exposed.iter().map(|a| describe(*a)).collect();
    let found = format!(
        "the IMEX command port listens on {}: anyone who reaches this node can use the daemon's unauthenticated command service",
        on.join(", ")
    );
    let remedy = if base.port.is_none() || bind_is_loopback(base.bind) {
        format!(
            "{} already keeps it off the network: the daemon listening now started before that; it takes effect at its next start (the next --imex job; a rack-wide domain's daemon: restart it when no job uses IMEX)",
            base.cfg.path.display()
        )
    } else {
        set_loopback(base.cfg)
    };
    Check::fail(CHECK, found, remedy)
}

/// The config leaves the next daemon's command port open to the network.
fn would_listen(base: &Service, port: u16) -> String {
    let path = base.cfg.path.display();
    let what = match base.bind.parse::<IpAddr>() {
        _ if base.bind.is_empty() => " is empty, which is every interface".to_string(),
        Ok(ip) if ip.is_unspecified() => format!("={ip}, which is every interface"),
        Ok(ip) => format!("={ip}, not a loopback address"),
        Err(_) => format!("={} is not an IP address", base.bind),
    };
    format!("{path}: IMEX_CMD_BIND_INTERFACE_IP{what}: the daemon's unauthenticated command service (port {port}) would be open to the network")
}

/// The unix socket's directory: root's, and closed to others.
fn unix_socket_dir(socket: &str, cfg: &DaemonCfg) -> Result<(), Check> {
    let path = Path::new(socket);
    let dir = path.parent().filter(|_| path.is_absolute()).ok_or_else(|| {
        Check::fail(CHECK,
            format!("{}: IMEX_CMD_UNIX_DOMAIN_PATH={socket} is not an absolute path", cfg.path.display()),
            "give the socket's full path, in a directory only root can enter (e.g. /run/nvidia-imex-cmd/imex.sock, directory mode 0700)")
    })?;
    let remedy = || {
        format!(
            "mkdir -p {0}; chown root:root {0}; chmod 0700 {0} (and a tmpfiles.d line when it is under /run)",
            dir.display()
        )
    };
    trust::check(dir, Expect::Dir, "IMEX_CMD_UNIX_DOMAIN_PATH's directory")
        .map_err(|e| Check::fail(CHECK, e.to_string(), remedy()))?;
    let mode = std::fs::metadata(dir)
        .map(|m| m.permissions().mode())
        .map_err(|e| Check::fail(CHECK, format!("{}: {e}", dir.display()), remedy()))?;
    if mode & 0o007 != 0 {
        return Err(Check::fail(CHECK,
            format!("{} (IMEX_CMD_UNIX_DOMAIN_PATH's directory) is open to others (mode {:04o}): they can reach the unauthenticated command socket whenever its own mode lets them", dir.display(), mode & 0o7777),
            format!("chmod o-rwx {}", dir.display())));
    }
    Ok(())
}

/// PASS naming where the service listens (or will).
fn passed(base: &Service, listeners: &Listeners) -> Check {
    let path = base.cfg.path.display();
    let mut found = match base.port {
        Some(port) => {
            let now: Vec<String> = listeners
                .on_port(port)
                .iter()
                .map(|a| a.to_string())
                .collect();
            if now.is_empty() {
                format!(
                    "{path}: IMEX_CMD_BIND_INTERFACE_IP={}, port {port} (nothing listens now)",
                    base.bind
                )
            } else {
                format!("the command service listens on {} only ({path}: IMEX_CMD_BIND_INTERFACE_IP={})", now.join(", "), base.bind)
            }
        }
        None => format!("{path}: no command port (IMEX_CMD_PORT is empty)"),
    };
    if let Some(unix) = base.unix {
        found.push_str(&format!(
            "; unix socket {unix}, in a directory only root can enter"
        ));
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

#[cfg(test)]
mod tests;
