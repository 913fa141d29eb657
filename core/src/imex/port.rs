//! The per-job `SERVER_PORT` of the IMEX daemon (contract formula).

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

#[cfg(test)]
mod tests {
    use super::*;

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
