//! The node's listening TCP sockets, as the kernel lists them in
//! /proc/net/tcp and /proc/net/tcp6 (state `0A`, LISTEN), so a check can
//! say on which addresses a port is open.
//!
//! Hand-parsed: a line is whitespace-separated fields of which we need
//! three (`local_address` as hex words and a hex port, `st`), a kernel ABI
//! unchanged since 2.6. The `procfs` crate parses the whole of /proc, reads
//! only the live one (tests need an injected file), and would bring its
//! own dependency tree for those three fields.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;

/// LISTEN in the `st` column (include/net/tcp_states.h: TCP_LISTEN = 10).
const LISTEN: &str = "0A";

/// Most bytes read of each file. The kernel lists every listening socket
/// before any other (tcp4_seq_start walks the listening hash first), so a
/// node with a huge connection table is read only as far as this, and its
/// listening sockets are all in that prefix.
pub const MAX_PROC_NET_BYTES: u64 = 8 << 20;

/// Where the kernel's socket tables are read from; injectable for tests.
#[derive(Debug, Clone)]
pub struct ProcNet {
    pub tcp: PathBuf,
    pub tcp6: PathBuf,
}

impl Default for ProcNet {
    fn default() -> Self {
        ProcNet {
            tcp: "/proc/net/tcp".into(),
            tcp6: "/proc/net/tcp6".into(),
        }
    }
}

/// The listening sockets found, and what could not be read (a missing
/// tcp6, as on a node without IPv6, is not an error).
#[derive(Debug, Default)]
pub struct Listeners {
    pub sockets: Vec<SocketAddr>,
    pub unread: Vec<String>,
}

impl Listeners {
    /// The addresses listening on `port`.
    pub fn on_port(&self, port: u16) -> Vec<SocketAddr> {
        let mut found: Vec<SocketAddr> = self
            .sockets
            .iter()
            .copied()
            .filter(|s| s.port() == port)
            .collect();
        found.sort();
        found.dedup();
        found
    }
}

/// Read both tables; lines that are not a listening socket are skipped.
pub fn read(proc_net: &ProcNet) -> Listeners {
    let mut found = Listeners::default();
    for path in [&proc_net.tcp, &proc_net.tcp6] {
        match read_prefix(path) {
            Ok(text) => found
                .sockets
                .extend(text.lines().filter_map(parse_listen_line)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && path == &proc_net.tcp6 => {}
            Err(e) => found.unread.push(format!("{}: {e}", path.display())),
        }
    }
    found
}

/// The first [`MAX_PROC_NET_BYTES`] of a regular file (proc's are), opened
/// without blocking so a FIFO put in a test's place cannot hang doctor.
fn read_prefix(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_PROC_NET_BYTES).read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// One line of /proc/net/tcp or tcp6: the local address when it is a
/// listening socket; None for the header, other states and garbage.
///
/// `   0: 0100007F:C355 00000000:0000 0A ...` is 127.0.0.1:50005.
pub fn parse_listen_line(line: &str) -> Option<SocketAddr> {
    let mut fields = line.split_whitespace();
    let _slot = fields.next().filter(|s| s.ends_with(':'))?;
    let local = fields.next()?;
    let _remote = fields.next()?;
    if fields.next()? != LISTEN {
        return None;
    }
    let (addr, port) = local.split_once(':')?;
    if port.len() != 4 || !port.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let port = u16::from_str_radix(port, 16).ok()?;
    Some(SocketAddr::new(parse_hex_addr(addr)?, port))
}

/// The kernel prints an address as 32-bit words in the machine's byte
/// order (`%08X` of each `__be32`): one word for IPv4, four for IPv6.
fn parse_hex_addr(hex: &str) -> Option<IpAddr> {
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let word = |i: usize| {
        hex.get(i * 8..i * 8 + 8)
            .and_then(|w| u32::from_str_radix(w, 16).ok())
            .map(u32::to_ne_bytes)
    };
    match hex.len() {
        8 => Some(IpAddr::V4(Ipv4Addr::from(word(0)?))),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            Some(IpAddr::V6(Ipv6Addr::from(bytes)))
        }
        _ => None,
    }
}

/// Whether only this node can reach `ip`: 127.0.0.0/8, ::1, or an
/// IPv4-mapped loopback (::ffff:127.0.0.1). The unspecified addresses
/// (0.0.0.0, ::) are every interface.
pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// How an address reads in the report: `0.0.0.0 (every interface)`.
pub fn describe(addr: SocketAddr) -> String {
    if addr.ip().is_unspecified() {
        format!("{addr} (every interface)")
    } else {
        addr.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A word as the kernel prints it on this machine: the address's
    /// network-order bytes read as a native integer.
    fn word(bytes: [u8; 4]) -> String {
        format!("{:08X}", u32::from_ne_bytes(bytes))
    }

    fn line(local: &str, state: &str) -> String {
        format!("   3: {local} 00000000:0000 {state} 00000000:00000000 00:00000000 00000000     0        0 24601 1 0000000000000000 100 0 0 10 0")
    }

    #[test]
    fn ipv4_listening_lines_give_their_address_and_port() {
        let l = line(&format!("{}:C355", word([127, 0, 0, 1])), "0A");
        assert_eq!(
            parse_listen_line(&l),
            Some("127.0.0.1:50005".parse().unwrap())
        );
        let l = line(&format!("{}:C355", word([0, 0, 0, 0])), "0A");
        assert_eq!(
            parse_listen_line(&l),
            Some("0.0.0.0:50005".parse().unwrap())
        );
        let l = line(&format!("{}:C350", word([10, 1, 2, 3])), "0A");
        assert_eq!(
            parse_listen_line(&l),
            Some("10.1.2.3:50000".parse().unwrap())
        );
        // An established connection (01) is no listener.
        assert_eq!(
            parse_listen_line(&line(&format!("{}:C355", word([127, 0, 0, 1])), "01")),
            None
        );
    }

    #[test]
    fn the_kernels_own_little_endian_text_is_read_on_this_machine() {
        if cfg!(target_endian = "little") {
            let l = "   0: 0100007F:C355 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1";
            assert_eq!(
                parse_listen_line(l),
                Some("127.0.0.1:50005".parse().unwrap())
            );
        }
    }

    #[test]
    fn ipv6_unspecified_loopback_and_mapped_forms() {
        let any = "0".repeat(32);
        assert_eq!(
            parse_listen_line(&line(&format!("{any}:C355"), "0A")),
            Some("[::]:50005".parse().unwrap())
        );
        let one = format!(
            "{}{}{}{}",
            word([0; 4]),
            word([0; 4]),
            word([0; 4]),
            word([0, 0, 0, 1])
        );
        let got = parse_listen_line(&line(&format!("{one}:C355"), "0A")).unwrap();
        assert_eq!(got, "[::1]:50005".parse().unwrap());
        assert!(is_loopback(got.ip()));
        let mapped = |v4: [u8; 4]| {
            format!(
                "{}{}{}{}",
                word([0; 4]),
                word([0; 4]),
                word([0, 0, 0xff, 0xff]),
                word(v4)
            )
        };
        let got =
            parse_listen_line(&line(&format!("{}:C355", mapped([127, 0, 0, 1])), "0A")).unwrap();
        assert_eq!(got, "[::ffff:127.0.0.1]:50005".parse().unwrap());
        assert!(is_loopback(got.ip()));
        let got =
            parse_listen_line(&line(&format!("{}:C355", mapped([0, 0, 0, 0])), "0A")).unwrap();
        assert!(!is_loopback(got.ip()), "::ffff:0.0.0.0 is not loopback");
        let global = format!(
            "{}{}{}{}",
            word([0xfd, 0, 0, 0]),
            word([0; 4]),
            word([0; 4]),
            word([0, 0, 0, 2])
        );
        let got = parse_listen_line(&line(&format!("{global}:C355"), "0A")).unwrap();
        assert_eq!(got.ip(), "fd00::2".parse::<IpAddr>().unwrap());
        assert!(!is_loopback(got.ip()));
    }

    #[test]
    fn headers_and_garbage_are_skipped() {
        for bad in [
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode",
            "",
            "   0: 0100007F 00000000:0000 0A",
            "   0: 0100007F:C3 00000000:0000 0A",
            "   0: 0100007F:C35555 00000000:0000 0A",
            "   0: 0100007G:C355 00000000:0000 0A",
            "   0: 0100007F0:C355 00000000:0000 0A",
            "   0: +100007F:C355 00000000:0000 0A",
            "   0: 0100007F:+355 00000000:0000 0A",
            "   0: é100007F:C355 00000000:0000 0A",
            "   0: 0100007F:C355",
        ] {
            assert_eq!(parse_listen_line(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn files_are_read_missing_tcp6_is_fine_and_listeners_are_filtered_by_port() {
        let d = tempfile::tempdir().unwrap();
        let tcp = d.path().join("tcp");
        let text = format!(
            "  sl  local_address rem_address   st\n{}\n{}\n{}\n",
            line(&format!("{}:C355", word([127, 0, 0, 1])), "0A"),
            line(&format!("{}:C355", word([127, 0, 0, 1])), "0A"),
            line(&format!("{}:0016", word([0, 0, 0, 0])), "0A"),
        );
        std::fs::write(&tcp, text).unwrap();
        let net = ProcNet {
            tcp,
            tcp6: d.path().join("absent"),
        };
        let found = read(&net);
        assert!(found.unread.is_empty(), "{:?}", found.unread);
        assert_eq!(
            found.on_port(50005),
            vec!["127.0.0.1:50005".parse().unwrap()]
        );
        assert_eq!(found.on_port(22).len(), 1);
        let gone = ProcNet {
            tcp: d.path().join("nope"),
            tcp6: d.path().join("absent"),
        };
        assert_eq!(read(&gone).unread.len(), 1);
        let dir = ProcNet {
            tcp: d.path().to_path_buf(),
            tcp6: d.path().to_path_buf(),
        };
        assert_eq!(read(&dir).unread.len(), 2);
    }

    #[test]
    fn the_live_tables_read_without_error() {
        let found = read(&ProcNet::default());
        assert!(
            found.unread.iter().all(|u| !u.contains("/proc/net/tcp:")),
            "{:?}",
            found.unread
        );
    }
}
