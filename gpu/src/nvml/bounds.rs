//! The physical range of every NVML value that has one. A value outside it
//! (an accounting record with `gpu_util = 250`, a `mem_util` of
//! 4294967294, a temperature of four billion degrees: a driver bug, a
//! sentinel NVML did not document, a corrupted buffer) is unknown: it is
//! read as `None` (or a failed reading naming the value), shown as
//! unknown, and never stored as a number, so no mean, sum or alert is
//! computed from it.

use super::snapshot::{PcieWidth, ProcessAccounting, Reading};

/// Utilization, % of a sample period: 0 to 100.
pub const PERCENT_MAX: u32 = 100;
/// A GPU die's temperature, °C: GPUs shut down near 100 °C; past 150 °C no
/// sensor reading is real.
pub const TEMPERATURE_MAX_C: u32 = 150;
/// PCIe link width: x1 to x32 (the widest the PCIe specification defines).
pub const PCIE_WIDTH_MAX: u32 = 32;
/// A GPU's memory: 16 TiB, far above any GPU's (a GB300 has 288 GB).
pub const MEMORY_MAX_BYTES: u64 = 16 << 40;
/// How far in the future a process's start may be (clock skew), µs.
const START_SLACK_US: u64 = 60_000_000;

/// `value` when it is at most `max`, else unknown.
pub fn at_most<T: PartialOrd>(value: Option<T>, max: T) -> Option<T> {
    value.filter(|v| *v <= max)
}

/// A reading kept when `in_range`, else a failed reading saying why.
pub fn reading<T: std::fmt::Debug>(
    r: Reading<T>,
    what: &str,
    in_range: impl Fn(&T) -> bool,
) -> Reading<T> {
    match r {
        Reading::Value(v) if !in_range(&v) => Reading::Failed(format!(
            "NVML reported {what} {v:?}, outside its physical range"
        )),
        other => other,
    }
}

/// A temperature reading, bounded.
pub fn temperature(r: Reading<u32>) -> Reading<u32> {
    reading(r, "temperature (°C)", |t| *t <= TEMPERATURE_MAX_C)
}

/// A PCIe link width reading, bounded (the current width at most the maximum).
pub fn pcie_width(r: Reading<PcieWidth>) -> Reading<PcieWidth> {
    reading(r, "PCIe link width", |w| {
        (1..=PCIE_WIDTH_MAX).contains(&w.max) && w.current <= w.max
    })
}

/// One accounting record with every value outside its range made unknown:
/// utilizations past 100 %, a peak memory past any GPU's, a start in the
/// future (`now_us`; 0 is NVML's "not reported").
pub fn process(p: ProcessAccounting, now_us: u64) -> ProcessAccounting {
    ProcessAccounting {
        gpu_util: at_most(p.gpu_util, PERCENT_MAX),
        mem_util: at_most(p.mem_util, PERCENT_MAX),
        max_memory_bytes: at_most(p.max_memory_bytes, MEMORY_MAX_BYTES),
        start_us: if p.start_us > now_us.saturating_add(START_SLACK_US) {
            0
        } else {
            p.start_us
        },
        ..p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utilization_past_100_and_sentinels_are_unknown() {
        let p = ProcessAccounting {
            pid: 7,
            gpu_util: Some(250),
            mem_util: Some(4_294_967_294),
            max_memory_bytes: Some(u64::MAX - 1),
            time_ms: 10,
            start_us: 5,
            running: false,
        };
        let b = process(p, 1_000);
        assert_eq!(
            (b.gpu_util, b.mem_util, b.max_memory_bytes),
            (None, None, None)
        );
        assert_eq!((b.pid, b.time_ms, b.start_us), (7, 10, 5));
        let ok = ProcessAccounting {
            gpu_util: Some(100),
            mem_util: Some(0),
            max_memory_bytes: Some(80 << 30),
            ..p
        };
        assert_eq!(process(ok, 1_000), ok);
        // A start far in the future is not reported, not a number.
        assert_eq!(
            process(
                ProcessAccounting {
                    start_us: u64::MAX,
                    ..ok
                },
                1_000
            )
            .start_us,
            0
        );
    }

    #[test]
    fn readings_outside_their_range_fail_naming_the_value() {
        assert_eq!(temperature(Reading::Value(45)), Reading::Value(45));
        let hot = temperature(Reading::Value(4_294_967_294));
        assert!(hot.failure().unwrap().contains("4294967294"), "{hot:?}");
        assert_eq!(temperature(Reading::NotSupported), Reading::NotSupported);
        let w = |current, max| pcie_width(Reading::Value(PcieWidth { current, max }));
        assert!(w(16, 16).value().is_some());
        assert!(w(17, 16).failure().is_some());
        assert!(w(0, 0).failure().is_some());
        assert!(w(4, 4_294_967_295).failure().is_some());
    }
}
