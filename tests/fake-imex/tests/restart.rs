//! The fake nvidia-imex restarts as the real one does (docs/imex.md §1): a
//! new instance that its peers reconnect to only after their back-off,
//! persist.dat and WAITING_FOR_RECOVERY, and the command service on a unix
//! socket (`nvidia-imex-ctl -u`). Daemons on loopback addresses, each test
//! on its own ports (471xx, clear of 50000/50005 and of
//! domain_lifecycle.rs's 460xx), so the tests may run at once.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const DAEMON: &str = env!("CARGO_BIN_EXE_nvidia-imex");
const CTL: &str = env!("CARGO_BIN_EXE_nvidia-imex-ctl");

/// One node's fake daemon: its own config, node file and run dir.
struct Node {
    dir: PathBuf,
    ip: &'static str,
    reconnect_ms: u64,
    child: Option<Child>,
}

impl Node {
    fn new(
        root: &Path,
        ip: &'static str,
        nodes: &[&str],
        server_port: u16,
        cmd_port: u16,
        extra: &str,
    ) -> Node {
        let dir = root.join(ip);
        std::fs::create_dir_all(dir.join("run")).unwrap();
        let node = Node {
            dir,
            ip,
            reconnect_ms: 15000,
            child: None,
        };
        node.write_nodes(nodes);
        std::fs::write(
            node.cfg(),
            format!(
                "LOG_FILE_NAME={}\nDAEMONIZE=0\nSERVER_PORT={server_port}\nIMEX_CMD_ENABLED=1\n\
                 IMEX_CMD_PORT={cmd_port}\nIMEX_CMD_BIND_INTERFACE_IP={ip}\n\
                 IMEX_NODE_CONFIG_FILE={}\n{extra}",
                node.path("imex.log").display(),
                node.path("nodes_config.cfg").display()
            ),
        )
        .unwrap();
        node
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn cfg(&self) -> PathBuf {
        self.path("config.cfg")
    }

    fn write_nodes(&self, nodes: &[&str]) {
        std::fs::write(self.path("nodes_config.cfg"), nodes.join("\n") + "\n").unwrap();
    }

    fn start(&mut self) {
        assert!(self.child.is_none(), "{} already runs", self.ip);
        let child = Command::new(DAEMON)
            .args(["-c", self.cfg().to_str().unwrap()])
            .env("FAKE_IMEX_RUN_DIR", self.path("run"))
            .env("FAKE_IMEX_LOCAL_IPS", self.ip)
            .env("FAKE_IMEX_RECONNECT_MS", self.reconnect_ms.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    fn signal(&mut self, sig: nix::sys::signal::Signal) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
        child.wait().unwrap()
    }

    fn kill9(&mut self) {
        self.signal(nix::sys::signal::Signal::SIGKILL);
    }

    fn ctl(&self, args: &[&str]) -> (i32, String) {
        let out = Command::new(CTL).args(args).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    /// `-q`'s word ("" when the daemon does not answer).
    fn state(&self) -> String {
        match self.ctl(&["-c", self.cfg().to_str().unwrap(), "-q"]) {
            (0, out) => out.trim().to_string(),
            _ => String::new(),
        }
    }

    /// `-N -j`, parsed (Null when the daemon does not answer).
    fn status(&self) -> serde_json::Value {
        let (_, out) = self.ctl(&["-c", self.cfg().to_str().unwrap(), "-N", "-j"]);
        serde_json::from_str(&out).unwrap_or_default()
    }

    fn domain(&self) -> String {
        self.status()["status"].as_str().unwrap_or("").to_string()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.path("imex.log")).unwrap_or_default()
    }

    fn persist(&self) -> Option<String> {
        std::fs::read_to_string(self.path("run/persist.dat")).ok()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < limit, "not within {limit:?}: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

const A: &str = "127.0.0.1";
const B: &str = "127.0.0.2";

/// After B's daemon is SIGKILLed and started again, B connects out at once
/// (its view reads UP), while A reads DEGRADED, its cell to B DISCONNECTED,
/// until A's own back-off attempt (FAKE_IMEX_RECONNECT_MS) reconnects it.
#[test]
fn a_restarted_peer_is_reconnected_only_after_the_backoff() {
    const BACKOFF: u64 = 4000;
    let root = tempfile::tempdir().unwrap();
    let mut a = Node::new(root.path(), A, &[A, B], 47101, 47111, "");
    let mut b = Node::new(root.path(), B, &[A, B], 47101, 47112, "");
    a.reconnect_ms = BACKOFF;
    b.reconnect_ms = BACKOFF;
    a.start();
    b.start();
    let limit = Duration::from_secs(10);
    wait_for("A's domain UP", limit, || a.domain() == "UP");
    wait_for("B's domain UP", limit, || b.domain() == "UP");

    b.kill9();
    let killed = Instant::now();
    wait_for("A sees B gone", limit, || a.domain() == "DEGRADED");
    assert!(a
        .log()
        .contains(&format!("Connection lost to node 1: {B}:47101")));
    b.start();
    wait_for("B's new instance UP", limit, || b.domain() == "UP");
    let s = a.status();
    assert!(
        killed.elapsed() < Duration::from_millis(BACKOFF),
        "the restart took longer than the back-off; nothing to see"
    );
    assert_eq!(s["status"], "DEGRADED", "{s}");
    assert_eq!(
        s["nodes"]["0"]["connections"]["1"]["status"],
        "DISCONNECTED"
    );
    assert_eq!(s["nodes"]["1"]["status"], "UNAVAILABLE");
    // The new instance connected out at once: its first connection.
    assert!(
        b.log().contains(&format!(
            "Connection established to node 0 with ip address {A}. Number of times connected: 1"
        )),
        "{}",
        b.log()
    );
    // Its previous instance's persist.dat named no importers: READY at once.
    assert!(
        b.log().contains("lists no previous importers."),
        "{}",
        b.log()
    );

    wait_for("A's domain UP again", limit, || a.domain() == "UP");
    let back = killed.elapsed();
    assert!(
        back >= Duration::from_millis(BACKOFF - 300),
        "A reconnected after {back:?}, before its back-off"
    );
    let log = a.log();
    assert!(
        log.contains(&format!(
            "Attempting connection for target node 1 - {B}:47101, attempt #1"
        )),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "Connection established to node 1 with ip address {B}. Number of times connected: 2"
        )),
        "{log}"
    );
    assert_eq!(log.matches("Connection lost to node 1").count(), 1, "{log}");
    let events = std::fs::read_to_string(a.path("run/fake-events")).unwrap();
    assert!(events.contains(" lost 1\n"), "{events}");
    assert_eq!(events.matches(" instance 0 ").count(), 1, "{events}");
}

/// persist.dat: a killed daemon whose file names importers waits for them
/// (WAITING_FOR_RECOVERY) unless IMEX_WAIT_FOR_QUORUM=NONE; a clean
/// shutdown removes the file; another node map's file is discarded.
#[test]
fn persist_dat_makes_a_killed_daemon_wait_for_its_importers() {
    let root = tempfile::tempdir().unwrap();
    let mut a = Node::new(root.path(), A, &[A, B], 47102, 47121, "");
    let mut b = Node::new(root.path(), B, &[A, B], 47102, 47122, "");
    std::fs::write(a.path("run/fake-fault"), "IMPORTERS=1\n").unwrap();
    let limit = Duration::from_secs(10);
    a.start();
    b.start();
    wait_for("A's domain UP", limit, || a.domain() == "UP");
    wait_for("B's domain UP", limit, || b.domain() == "UP");
    assert!(a
        .log()
        .contains("/run/persist.dat does not exist.  Assuming no previous importers."));
    let key = b.persist().unwrap();
    assert_eq!(key.lines().count(), 1, "B has no importers: {key}");
    assert_eq!(a.persist().unwrap(), format!("{key}Node #1: {B}\n"));

    // Both killed; A comes back alone and waits for B.
    a.kill9();
    b.kill9();
    a.start();
    wait_for("A waiting for B", limit, || {
        a.state() == "WAITING_FOR_RECOVERY"
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(a.state(), "WAITING_FOR_RECOVERY");
    assert_eq!(a.domain(), "DOWN");
    assert!(
        a.log()
            .contains("lists previous importers (nodes 1); waiting for them to reconnect."),
        "{}",
        a.log()
    );
    b.start();
    wait_for("A READY once B is back", limit, || a.state() == "READY");
    wait_for("A's domain UP", limit, || a.domain() == "UP");

    // A clean shutdown leaves no recovery to wait for.
    let status = a.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(status.code(), Some(0));
    assert_eq!(a.persist(), None);
    b.kill9();
    a.start();
    wait_for("A READY without B", limit, || a.state() == "READY");
    assert_eq!(
        a.log()
            .matches("does not exist.  Assuming no previous importers.")
            .count(),
        2
    );

    // With IMEX_WAIT_FOR_QUORUM=NONE nobody is waited for.
    assert!(a.persist().unwrap().contains("Node #1:"));
    a.kill9();
    let cfg = std::fs::read_to_string(a.cfg()).unwrap();
    std::fs::write(a.cfg(), format!("{cfg}IMEX_WAIT_FOR_QUORUM=NONE\n")).unwrap();
    a.start();
    wait_for("A READY with NONE", limit, || a.state() == "READY");
    assert!(a.log().contains("IMEX_WAIT_FOR_QUORUM=NONE, not waiting"));

    // A file for another node map is discarded.
    a.kill9();
    std::fs::write(a.cfg(), cfg).unwrap();
    a.write_nodes(&[A, B, "127.0.0.9"]);
    a.start();
    wait_for("A READY with a new map", limit, || a.state() == "READY");
    assert!(a
        .log()
        .contains("does not match the current node configuration; discarding it."));
}

/// IMEX_CMD_UNIX_DOMAIN_PATH: the daemon serves the ctl there too (mode
/// 0600, a stale socket replaced, removed on a clean exit); `-u PATH -q`
/// works, `-u PATH -N`/`-n` are usage errors, `-c` keeps using TCP.
#[test]
fn the_command_service_on_a_unix_socket() {
    let root = tempfile::tempdir().unwrap();
    let sock = root.path().join("imex-cmd.sock");
    let sock_s = sock.to_str().unwrap().to_string();
    let mut a = Node::new(
        root.path(),
        A,
        &[A],
        47103,
        47131,
        &format!("IMEX_CMD_UNIX_DOMAIN_PATH={sock_s}\n"),
    );
    let refused = format!(
        "Query Status returned error code: 14 - failed to connect to all addresses; \
         last error: UNKNOWN: unix:{sock_s}: Connection refused\n"
    );
    // A socket nobody serves (a killed daemon's): refused.
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    assert_eq!(a.ctl(&["-u", &sock_s, "-q"]), (1, refused.clone()));

    a.start();
    wait_for("READY over the socket", Duration::from_secs(10), || {
        a.ctl(&["-u", &sock_s, "-q"]) == (0, "READY\n".into())
    });
    let meta = std::fs::symlink_metadata(&sock).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);

    // -N and -n need the config file; one of -i, -u, -c only.
    let cfg = a.cfg().to_str().unwrap().to_string();
    for args in [
        vec!["-u", &sock_s, "-N"],
        vec!["-u", &sock_s, "-N", "-j"],
        vec!["-u", &sock_s, "-n"],
        vec!["-u", &sock_s, "-c", &cfg, "-q"],
        vec!["-c", &cfg, "-i", A, "47131", "-q"],
    ] {
        let (rc, out) = a.ctl(&args);
        assert_eq!(rc, 1, "{args:?}");
        assert!(out.starts_with("Usage: nvidia-imex-ctl"), "{args:?}: {out}");
    }
    // -c still asks over TCP.
    assert_eq!(a.domain(), "UP");
    assert_eq!(a.ctl(&["-i", A, "47131", "-q"]), (0, "READY\n".into()));

    let status = a.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(status.code(), Some(0));
    assert!(!sock.exists(), "the socket outlived a clean exit");
    let (rc, out) = a.ctl(&["-u", &sock_s, "-q"]);
    assert_eq!(rc, 1);
    assert_eq!(
        out,
        format!(
            "Query Status returned error code: 14 - failed to connect to all addresses; \
             last error: UNKNOWN: unix:{sock_s}: No such file or directory\n"
        )
    );
}
