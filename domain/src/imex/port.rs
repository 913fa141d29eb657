//! The per-job `SERVER_PORT` of the IMEX daemon (contract formula), and
//! whether the kernel may hand that port out as an ephemeral port (then any
//! outgoing connection on the node can take it from the daemon).

/// `port_base + job_id mod port_span`; if that is the daemon's own command
/// port, take the next port in the span, wrapping. Every node computes the
/// same value without talking to the others. The config guarantees that
/// `port_base + port_span - 1 <= 65535`.
pub fn server_port(job_id: u32, port_base: u16, port_span: u16, cmd_port: Option<u16>) -> u16 {
    let span = port_span as u32;
    let offset = job_id % span;
    let port = port_base as u32 + offset;
    if span > 1 && cmd_port.is_some_and(|c| c as u32 == port) {
        return (port_base as u32 + (offset + 1) % span) as u16;
    }
    port as u16
}

/// Ports `text` lists, as in /proc/sys/net/ipv4/ip_local_reserved_ports
/// (`"33792-50175,60000"`). Hand-parsed: a two-rule kernel format.
fn in_port_list(text: &str, port: u16) -> bool {
    text.trim()
        .split(',')
        .filter(|s| !s.is_empty())
        .any(|item| {
            let (lo, hi) = item.split_once('-').unwrap_or((item, item));
            match (lo.trim().parse::<u16>(), hi.trim().parse::<u16>()) {
                (Ok(lo), Ok(hi)) => (lo..=hi).contains(&port),
                _ => false,
            }
        })
}

/// The ephemeral range of `ip_local_port_range` ("32768\t60999").
fn ephemeral_bounds(port_range: &str) -> Option<(u16, u16)> {
    let mut bounds = port_range
        .split_whitespace()
        .filter_map(|p| p.parse::<u16>().ok());
    Some((bounds.next()?, bounds.next()?))
}

/// The ports of `lo..=hi` that lie in the ephemeral range and are not
/// reserved: any outgoing connection can take them.
pub fn exposed_ports(lo: u16, hi: u16, port_range: &str, reserved: &str) -> Vec<u16> {
    let Some((elo, ehi)) = ephemeral_bounds(port_range) else {
        return Vec::new();
    };
    (lo.max(elo)..=hi.min(ehi))
        .filter(|&p| !in_port_list(reserved, p))
        .collect()
}

/// A warning when `port` lies in the ephemeral range (`ip_local_port_range`,
/// "32768\t60999") and is not in `ip_local_reserved_ports`.
pub fn ephemeral_conflict(port: u16, port_range: &str, reserved: &str) -> Option<String> {
    let (lo, hi) = ephemeral_bounds(port_range)?;
    exposed_ports(port, port, port_range, reserved).first()?;
    Some(format!(
        "IMEX SERVER_PORT {port} lies in the ephemeral port range {lo}-{hi} and is not reserved, so any \
         outgoing connection can take it: reserve the span with sysctl net.ipv4.ip_local_reserved_ports \
         (conf-examples/sysctl.d/90-slurm-imex.conf)"
    ))
}

/// This node's network namespace's `ip_local_port_range` and
/// `ip_local_reserved_ports` (empty when unreadable).
pub fn port_sysctls() -> (String, String) {
    let read =
        |f: &str| std::fs::read_to_string(format!("/proc/sys/net/ipv4/{f}")).unwrap_or_default();
    (read("ip_local_port_range"), read("ip_local_reserved_ports"))
}

/// `ephemeral_conflict` for this node's network namespace.
pub fn check_ephemeral(port: u16) -> Option<String> {
    let (range, reserved) = port_sysctls();
    ephemeral_conflict(port, &range, &reserved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposed_ports_of_a_span() {
        let range = "32768\t60999\n";
        assert_eq!(exposed_ports(33792, 50175, range, "33792-50175").len(), 0);
        assert_eq!(exposed_ports(33792, 50175, range, "").len(), 16384);
        assert_eq!(
            exposed_ports(33792, 33800, range, "33792-33795,33797"),
            vec![33796, 33798, 33799, 33800]
        );
        assert_eq!(exposed_ports(61000, 61010, range, ""), Vec::<u16>::new());
        assert_eq!(exposed_ports(1, 2, "garbage", ""), Vec::<u16>::new());
    }

    #[test]
    fn formula_matches_nvidia_sample_prolog() {
        // NVIDIA's sample: SERVER_PORT=$((SLURM_JOB_ID % 16384 + 33792))
        for job in [0u32, 1, 16383, 16384, 99999, u32::MAX] {
            assert_eq!(
                server_port(job, 33792, 16384, Some(50005)) as u32,
                job % 16384 + 33792
            );
        }
    }

    #[test]
    fn ephemeral_range_and_reservations() {
        assert!(ephemeral_conflict(37944, "32768\t60999\n", "\n")
            .unwrap()
            .contains("ip_local_reserved_ports"));
        assert_eq!(
            ephemeral_conflict(37944, "32768\t60999\n", "33792-50175\n"),
            None
        );
        assert_eq!(
            ephemeral_conflict(37944, "32768\t60999\n", "1000,37944\n"),
            None
        );
        assert!(ephemeral_conflict(37944, "32768\t60999", "37945-40000").is_some());
        assert_eq!(ephemeral_conflict(30000, "32768\t60999", ""), None);
        assert_eq!(ephemeral_conflict(30000, "garbage", ""), None);
    }

    #[test]
    fn skips_the_command_port_and_wraps() {
        // 50005 = 33792 + 16213
        assert_eq!(server_port(16213, 33792, 16384, Some(50005)), 50006);
        assert_eq!(server_port(16213, 33792, 16384, None), 50005);
        // the last port of the span wraps to the first
        assert_eq!(server_port(9, 1000, 10, Some(1009)), 1000);
        // a span of one cannot move
        assert_eq!(server_port(3, 1000, 1, Some(1000)), 1000);
    }
}
