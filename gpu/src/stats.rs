//! Per-job GPU statistics: the difference between the prolog's and the
//! epilog's snapshot of each GPU, with counter resets detected (energy and
//! volatile ECC restart at driver load) and unsupported counters left
//! unknown rather than zero; and the job's use of each GPU from NVML's
//! accounting buffer (`GpuUsage`: its processes, their time-weighted mean
//! utilization and busy time; peak memory is `max_memory_bytes`).

use crate::nvml::bounds;
use crate::nvml::snapshot::{GpuSnapshot, LinkState, ProcessAccounting, Reading};
use crate::xid::XidEvent;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A counter's change over the job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delta {
    /// None when either end was not readable / not supported.
    pub value: Option<u64>,
    /// The counter went backwards (driver reload): `value` counts only
    /// since the reset, a lower bound.
    pub reset: bool,
}

pub fn delta(start: Option<u64>, end: Option<u64>) -> Delta {
    match (start, end) {
        (Some(s), Some(e)) if e >= s => Delta {
            value: Some(e - s),
            reset: false,
        },
        (Some(_), Some(e)) => Delta {
            value: Some(e),
            reset: true,
        },
        _ => Delta::default(),
    }
}

fn read<T: Copy>(r: &Reading<T>) -> Option<T> {
    r.value().copied()
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuJobStats {
    pub index: u32,
    pub uuid: String,
    pub serial: String,
    pub pci: String,
    pub name: String,
    pub energy_mj: Delta,
    pub ecc_sbe: Delta,
    pub ecc_dbe: Delta,
    pub retired_pages: Delta,
    pub remapped_correctable: Delta,
    pub remapped_uncorrectable: Delta,
    pub remap_pending_end: Option<bool>,
    pub remap_failure_end: Option<bool>,
    /// The recovery action the driver asked for at the job's end (NVML
    /// field 230, from the epilog's snapshot; named by
    /// `slurm_imex_core::recovery_action`): None when it was not read (a
    /// driver without the field, a record from before slurm-imex kept it).
    #[serde(default)]
    pub recovery_action_end: Option<u64>,
    pub pcie_replays: Delta,
    /// Throttle (violation) time per reason over the job, ns.
    pub throttle_ns: BTreeMap<String, u64>,
    /// NVLink error counters over the job, summed over links.
    pub nvlink_errors: BTreeMap<String, u64>,
    /// Processes that ran during the job (accounting mode only).
    pub processes: Vec<ProcessAccounting>,
    pub max_memory_bytes: Option<u64>,
    /// How the job used the GPU; None when accounting mode was off (or
    /// the prolog left no start snapshot), so it is not known.
    #[serde(default)]
    pub usage: Option<GpuUsage>,
    pub xids: Vec<XidEvent>,
}

/// How a job used one GPU, from the accounting stats of the processes that
/// ran on it during the job. A GPU the job held but never used has
/// `processes == 0` (jobstats' "0% utilization").
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuUsage {
    pub processes: u32,
    /// Mean GPU utilization (% of time a kernel ran), weighted by each
    /// process's time on the GPU; None with no process, or none reported.
    pub gpu_util_pct: Option<f64>,
    /// The same for memory utilization (% of time memory was read/written).
    pub mem_util_pct: Option<f64>,
    /// Time a kernel of the job's processes ran, ms: the sum over processes
    /// of utilization x time (overlapping processes add up).
    pub busy_ms: u64,
    /// Sum of the processes' times on the GPU, ms.
    pub process_ms: u64,
}

impl GpuUsage {
    /// From the job's processes, their values held to their physical range
    /// (`nvml::bounds`; a value outside it is unknown); `now_us` ends those
    /// still running (NVML reports their time as 0 until they end).
    pub fn of(processes: &[ProcessAccounting], now_us: u64) -> GpuUsage {
        let processes: Vec<ProcessAccounting> = processes
            .iter()
            .map(|p| bounds::process(*p, now_us))
            .collect();
        let processes = processes.as_slice();
        let duration_ms = |p: &ProcessAccounting| {
            if p.time_ms > 0 || p.start_us == 0 {
                p.time_ms
            } else {
                now_us.saturating_sub(p.start_us) / 1000
            }
        };
        let weighted = |util: fn(&ProcessAccounting) -> Option<u32>| {
            let known: Vec<(f64, f64)> = processes
                .iter()
                .filter_map(|p| Some((util(p)? as f64, duration_ms(p) as f64)))
                .collect();
            let total: f64 = known.iter().map(|(_, t)| t).sum();
            match (known.is_empty(), total > 0.0) {
                (true, _) => None,
                (false, true) => Some(known.iter().map(|(u, t)| u * t).sum::<f64>() / total),
                (false, false) => {
                    Some(known.iter().map(|(u, _)| u).sum::<f64>() / known.len() as f64)
                }
            }
        };
        // A process whose utilization is unknown adds no busy time: then
        // `busy_ms` is a lower bound. Saturating: no NVML value may panic.
        let busy_ms = processes
            .iter()
            .map(|p| duration_ms(p).saturating_mul(u64::from(p.gpu_util.unwrap_or(0))) / 100)
            .fold(0u64, u64::saturating_add);
        GpuUsage {
            processes: processes.len() as u32,
            gpu_util_pct: weighted(|p| p.gpu_util),
            mem_util_pct: weighted(|p| p.mem_util),
            busy_ms,
            process_ms: processes
                .iter()
                .map(duration_ms)
                .fold(0u64, u64::saturating_add),
        }
    }
}

/// Stats of one GPU between two snapshots; `start` is None when the prolog
/// left no snapshot (then only end-of-job state is known).
pub fn gpu_job_stats(
    start: Option<&GpuSnapshot>,
    end: &GpuSnapshot,
    xids: &[XidEvent],
) -> GpuJobStats {
    let s = |f: &dyn Fn(&GpuSnapshot) -> Option<u64>| start.and_then(f);
    let ecc = |f: fn(&crate::nvml::snapshot::EccCounts) -> u64| {
        move |g: &GpuSnapshot| g.ecc.value().map(f)
    };
    let sbe = ecc(|e| e.volatile_sbe);
    let dbe = ecc(|e| e.volatile_dbe);
    let pages = |g: &GpuSnapshot| g.retired_pages.value().map(|p| p.sbe + p.dbe);
    let corr = |g: &GpuSnapshot| g.remapped_rows.value().map(|r| r.correctable);
    let unc = |g: &GpuSnapshot| g.remapped_rows.value().map(|r| r.uncorrectable);
    let processes = job_processes(start, end);
    let usage = match (start, &end.accounting) {
        (Some(_), Reading::Value(_)) => Some(GpuUsage::of(&processes, end.taken_at_ms * 1000)),
        _ => None,
    };
    GpuJobStats {
        index: end.index,
        uuid: end.uuid.clone(),
        serial: end.serial.clone(),
        pci: end.pci.clone(),
        name: end.name.clone(),
        energy_mj: delta(s(&|g| read(&g.energy_mj)), read(&end.energy_mj)),
        ecc_sbe: delta(s(&sbe), sbe(end)),
        ecc_dbe: delta(s(&dbe), dbe(end)),
        retired_pages: delta(s(&pages), pages(end)),
        remapped_correctable: delta(s(&corr), corr(end)),
        remapped_uncorrectable: delta(s(&unc), unc(end)),
        remap_pending_end: end.remapped_rows.value().map(|r| r.pending),
        remap_failure_end: end.remapped_rows.value().map(|r| r.failure),
        recovery_action_end: read(&end.recovery_action),
        pcie_replays: delta(s(&|g| read(&g.pcie_replays)), read(&end.pcie_replays)),
        throttle_ns: throttle_deltas(start, end),
        nvlink_errors: nvlink_error_deltas(start, end),
        max_memory_bytes: processes.iter().filter_map(|p| p.max_memory_bytes).max(),
        processes,
        usage,
        xids: xids.iter().filter(|x| x.pci == end.pci).cloned().collect(),
    }
}

/// NVML's "low utilization" violation: the time the clocks were lowered
/// because the GPU had nothing to run. Kept per reason, but it is idling,
/// not throttling: a total of throttled time leaves it out, as
/// `nvidia-smi -q`'s "Clocks Event Reasons Counters" do (seen on an H200:
/// 3.2 s of it in a 3 s job that ran nothing).
pub const IDLE_REASON: &str = "low_utilization";

/// Whether a throttle reason's time counts as throttled (all but idle).
pub fn counts_as_throttled(reason: &str) -> bool {
    reason != IDLE_REASON
}

/// Time throttled during the job, per reason (ns).
fn throttle_deltas(start: Option<&GpuSnapshot>, end: &GpuSnapshot) -> BTreeMap<String, u64> {
    let mut throttle_ns = BTreeMap::new();
    let Some(start) = start else {
        return throttle_ns;
    };
    for (reason, end_ns) in &end.violation_ns {
        let begin_ns = start.violation_ns.get(reason).copied();
        if let Some(d) = delta(begin_ns, Some(*end_ns)).value {
            throttle_ns.insert(reason.clone(), d);
        }
    }
    throttle_ns
}

/// NVLink error counters during the job, summed over the GPU's links.
fn nvlink_error_deltas(start: Option<&GpuSnapshot>, end: &GpuSnapshot) -> BTreeMap<String, u64> {
    let mut nvlink_errors = BTreeMap::new();
    let (Some(Reading::Value(before)), Reading::Value(after)) =
        (start.map(|s| &s.nvlink), &end.nvlink)
    else {
        return nvlink_errors;
    };
    type Counter = fn(&LinkState) -> u64;
    let sum = |links: &[LinkState], counter: Counter| links.iter().map(counter).sum::<u64>();
    let counters: [(&str, Counter); 4] = [
        ("crc_flit", |l| l.crc_flit),
        ("crc_data", |l| l.crc_data),
        ("replay", |l| l.replay),
        ("recovery", |l| l.recovery),
    ];
    for (name, counter) in counters {
        if let Some(d) = delta(Some(sum(before, counter)), Some(sum(after, counter))).value {
            nvlink_errors.insert(name.to_string(), d);
        }
    }
    nvlink_errors
}

/// The job's processes in the accounting buffer at the end: those that
/// started after the prolog's snapshot, and, for a process whose start NVML
/// does not report, those the start snapshot did not list. (A pid is not
/// enough where it can: the kernel reuses pids, and the buffer keeps ended
/// processes of earlier jobs.) Each pid counts once, as NVML reports it: on
/// a pid collision only the latest process (the one that ended last).
fn job_processes(start: Option<&GpuSnapshot>, end: &GpuSnapshot) -> Vec<ProcessAccounting> {
    let Some(ended) = end.accounting.value() else {
        return Vec::new();
    };
    let Some(start) = start else {
        return Vec::new(); // the job's start is not known: neither are its processes
    };
    let began_us = start.taken_at_ms.saturating_mul(1000);
    let before: Vec<u32> = start
        .accounting
        .value()
        .map(|a| a.iter().map(|p| p.pid).collect())
        .unwrap_or_default();
    let now_us = end.taken_at_ms.saturating_mul(1000);
    latest_per_pid(ended)
        .into_iter()
        .map(|p| bounds::process(p, now_us))
        .filter(|p| match p.start_us {
            0 => !before.contains(&p.pid),
            started => started >= began_us,
        })
        .collect()
}

/// One record per pid, in first-listed order: the one that ended last (a
/// running process is the latest), as NVML reports a pid used twice.
fn latest_per_pid(listed: &[ProcessAccounting]) -> Vec<ProcessAccounting> {
    let ended_at = |p: &ProcessAccounting| match p.running {
        true => u64::MAX,
        false => p.start_us.saturating_add(p.time_ms.saturating_mul(1000)),
    };
    let mut out: Vec<ProcessAccounting> = Vec::new();
    for p in listed {
        match out.iter_mut().find(|q| q.pid == p.pid) {
            Some(q) if ended_at(p) >= ended_at(q) => *q = *p,
            Some(_) => {}
            None => out.push(*p),
        }
    }
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn idle_clocks_are_not_throttling() {
        assert!(!counts_as_throttled(IDLE_REASON));
        for reason in [
            "power",
            "thermal",
            "sync_boost",
            "board_limit",
            "reliability",
        ] {
            assert!(counts_as_throttled(reason), "{reason}");
        }
    }

    use super::*;
    use crate::nvml::snapshot::*;

    fn snap(energy: Reading<u64>, dbe: u64, replays: u64) -> GpuSnapshot {
        GpuSnapshot {
            index: 0,
            uuid: "GPU-a".into(),
            serial: "s".into(),
            pci: "0000:1a:00".into(),
            energy_mj: energy,
            ecc: Reading::Value(EccCounts {
                volatile_dbe: dbe,
                volatile_sbe: 3,
                ..Default::default()
            }),
            pcie_replays: Reading::Value(replays),
            violation_ns: [("power".to_string(), 1_000u64)].into(),
            ..Default::default()
        }
    }

    #[test]
    fn counter_deltas_and_resets() {
        assert_eq!(
            delta(Some(10), Some(15)),
            Delta {
                value: Some(5),
                reset: false
            }
        );
        assert_eq!(
            delta(Some(10), Some(4)),
            Delta {
                value: Some(4),
                reset: true
            }
        );
        assert_eq!(delta(None, Some(4)), Delta::default());
        assert_eq!(delta(Some(4), None), Delta::default());
        assert_eq!(delta(Some(0), Some(0)).value, Some(0));
    }

    #[test]
    fn job_stats_between_snapshots() {
        let a = snap(Reading::Value(1_000_000), 0, 5);
        let mut b = snap(Reading::Value(1_750_000), 2, 9);
        b.violation_ns.insert("power".into(), 4_000);
        b.violation_ns.insert("thermal".into(), 50); // not in start: unknown, not counted
        let st = gpu_job_stats(Some(&a), &b, &[]);
        assert_eq!(
            st.energy_mj,
            Delta {
                value: Some(750_000),
                reset: false
            }
        );
        assert_eq!(st.ecc_dbe.value, Some(2));
        assert_eq!(st.ecc_sbe.value, Some(0));
        assert_eq!(st.pcie_replays.value, Some(4));
        assert_eq!(st.throttle_ns, [("power".to_string(), 3_000u64)].into());
    }

    #[test]
    fn energy_reset_and_missing_fields() {
        let a = snap(Reading::Value(9_000_000), 0, 0);
        let b = snap(Reading::Value(200), 0, 0);
        assert_eq!(
            gpu_job_stats(Some(&a), &b, &[]).energy_mj,
            Delta {
                value: Some(200),
                reset: true
            }
        );
        // NOT_SUPPORTED energy: unknown, never zero.
        let c = snap(Reading::NotSupported, 0, 0);
        assert_eq!(gpu_job_stats(Some(&a), &c, &[]).energy_mj.value, None);
        // No prolog snapshot: nothing to diff, end state still known.
        let mut d = snap(Reading::Value(5), 0, 0);
        d.remapped_rows = Reading::Value(RemappedRows {
            pending: true,
            ..Default::default()
        });
        let st = gpu_job_stats(None, &d, &[]);
        assert_eq!(st.energy_mj.value, None);
        assert_eq!(st.remap_pending_end, Some(true));
        assert_eq!(st.recovery_action_end, None, "not read: not known");
    }

    #[test]
    fn the_recovery_action_is_the_end_snapshots() {
        let mut a = snap(Reading::Value(0), 0, 0);
        let mut b = snap(Reading::Value(0), 0, 0);
        a.recovery_action = Reading::Value(0);
        b.recovery_action = Reading::Value(5);
        assert_eq!(
            gpu_job_stats(Some(&a), &b, &[]).recovery_action_end,
            Some(5)
        );
        // Cleared by the job's end: NONE, whatever the start read.
        let st = gpu_job_stats(Some(&b), &a, &[]);
        assert_eq!(st.recovery_action_end, Some(0));
        b.recovery_action = Reading::NotSupported;
        assert_eq!(gpu_job_stats(Some(&a), &b, &[]).recovery_action_end, None);
        // A record written before the field existed still reads.
        let mut old = serde_json::to_value(&st).unwrap();
        old.as_object_mut().unwrap().remove("recovery_action_end");
        let back: GpuJobStats = serde_json::from_value(old).unwrap();
        assert_eq!(back.recovery_action_end, None);
    }

    #[test]
    fn nvlink_processes_and_xids() {
        let mut a = snap(Reading::Value(0), 0, 0);
        let mut b = snap(Reading::Value(0), 0, 0);
        a.nvlink = Reading::Value(vec![
            LinkState {
                link: 0,
                active: true,
                crc_flit: 5,
                ..Default::default()
            },
            LinkState {
                link: 1,
                active: true,
                replay: 1,
                ..Default::default()
            },
        ]);
        b.nvlink = Reading::Value(vec![
            LinkState {
                link: 0,
                active: true,
                crc_flit: 9,
                ..Default::default()
            },
            LinkState {
                link: 1,
                active: true,
                replay: 4,
                ..Default::default()
            },
        ]);
        let old = ProcessAccounting {
            pid: 1,
            max_memory_bytes: Some(9),
            ..Default::default()
        };
        let new = ProcessAccounting {
            pid: 2,
            gpu_util: Some(80),
            max_memory_bytes: Some(1 << 30),
            time_ms: 500,
            ..Default::default()
        };
        a.accounting = Reading::Value(vec![old]);
        b.accounting = Reading::Value(vec![old, new]);
        let x = crate::xid::parse_line("NVRM: Xid (PCI:0000:1a:00): 13, pid=2, name=a, boom", 7)
            .unwrap();
        let other =
            crate::xid::parse_line("NVRM: Xid (PCI:0000:2a:00): 13, pid=2, name=a, boom", 8)
                .unwrap();
        let st = gpu_job_stats(Some(&a), &b, &[x.clone(), other]);
        assert_eq!(st.nvlink_errors["crc_flit"], 4);
        assert_eq!(st.nvlink_errors["replay"], 3);
        assert_eq!(st.processes, vec![new]);
        assert_eq!(st.max_memory_bytes, Some(1 << 30));
        assert_eq!(st.xids, vec![x]);
    }

    fn proc(pid: u32, util: u32, mem: u32, ms: u64, start_us: u64) -> ProcessAccounting {
        ProcessAccounting {
            pid,
            gpu_util: Some(util),
            mem_util: Some(mem),
            max_memory_bytes: Some(u64::from(pid) << 20),
            time_ms: ms,
            start_us,
            running: false,
        }
    }

    #[test]
    fn usage_is_time_weighted_over_the_jobs_processes() {
        // 1 s at 90 % and 3 s at 10 %: 30 % over the 4 s, 1.2 s busy.
        let u = GpuUsage::of(&[proc(1, 90, 40, 1000, 5), proc(2, 10, 0, 3000, 6)], 0);
        assert_eq!(u.processes, 2);
        assert!((u.gpu_util_pct.unwrap() - 30.0).abs() < 1e-9, "{u:?}");
        assert!((u.mem_util_pct.unwrap() - 10.0).abs() < 1e-9, "{u:?}");
        assert_eq!((u.busy_ms, u.process_ms), (1200, 4000));
        // A process still running reports time 0: its time runs to now.
        let mut running = proc(3, 50, 5, 0, 1_000_000);
        running.running = true;
        let u = GpuUsage::of(&[running], 3_000_000);
        assert_eq!((u.process_ms, u.busy_ms), (2000, 1000));
        // No process: the GPU was held but never used.
        let idle = GpuUsage::of(&[], 0);
        assert_eq!(
            (idle.processes, idle.gpu_util_pct, idle.busy_ms),
            (0, None, 0)
        );
    }

    #[test]
    fn utilization_outside_its_range_is_unknown_and_never_overflows() {
        // 250 % and 4294967294 %: unknown, not a mean of them.
        let u = GpuUsage::of(&[proc(1, 250, 4_294_967_294, 2000, 5)], 0);
        assert_eq!(
            (u.processes, u.gpu_util_pct, u.mem_util_pct),
            (1, None, None)
        );
        // Beside a process in range, only that one counts.
        let u = GpuUsage::of(&[proc(1, 250, 40, 2000, 5), proc(2, 50, 4000, 1000, 6)], 0);
        assert_eq!(u.gpu_util_pct, Some(50.0));
        assert_eq!(u.mem_util_pct, Some(40.0));
        assert_eq!(u.busy_ms, 500);
        // Times that would overflow a sum saturate, never panic.
        let u = GpuUsage::of(
            &[proc(1, 100, 0, u64::MAX, 5), proc(2, 100, 0, u64::MAX, 6)],
            0,
        );
        assert_eq!((u.process_ms, u.busy_ms), (u64::MAX, 2 * (u64::MAX / 100)));
    }

    #[test]
    fn the_jobs_processes_are_those_started_after_the_prolog() {
        let mut a = snap(Reading::Value(0), 0, 0);
        a.taken_at_ms = 10_000;
        // pid 7 ran in an earlier job; pid 7 again (reused) and pid 8 in this one.
        a.accounting = Reading::Value(vec![proc(7, 99, 9, 500, 9_000_000)]);
        let mut b = a.clone();
        b.taken_at_ms = 20_000;
        // As NVML reports it: on a pid collision only the latest process,
        // so the buffer shows pid 7 once, the job's.
        b.accounting = Reading::Value(vec![
            proc(7, 60, 20, 4000, 11_000_000),
            proc(8, 20, 5, 1000, 15_000_000),
        ]);
        let st = gpu_job_stats(Some(&a), &b, &[]);
        let pids: Vec<(u32, u64)> = st.processes.iter().map(|p| (p.pid, p.start_us)).collect();
        assert_eq!(pids, vec![(7, 11_000_000), (8, 15_000_000)]);
        // A reader that listed the pid twice (both records, or the latest
        // twice) still counts the job's process once.
        for twice in [
            vec![
                proc(7, 99, 9, 500, 9_000_000),
                proc(7, 60, 20, 4000, 11_000_000),
            ],
            vec![proc(7, 60, 20, 4000, 11_000_000); 2],
        ] {
            let mut c = b.clone();
            c.accounting = Reading::Value([twice, vec![proc(8, 20, 5, 1000, 15_000_000)]].concat());
            assert_eq!(gpu_job_stats(Some(&a), &c, &[]), st);
        }
        let usage = st.usage.unwrap();
        assert_eq!(usage.processes, 2);
        assert!(
            (usage.gpu_util_pct.unwrap() - 52.0).abs() < 1e-9,
            "{usage:?}"
        );
        assert_eq!(st.max_memory_bytes, Some(8 << 20));
        // Accounting off at the end: usage unknown, never zero.
        let mut off = b.clone();
        off.accounting = Reading::NotSupported;
        assert_eq!(gpu_job_stats(Some(&a), &off, &[]).usage, None);
        // No start snapshot: the job's processes cannot be told apart.
        assert_eq!(gpu_job_stats(None, &b, &[]).usage, None);
        // Accounting on, nothing ran: idle, and shown as such.
        let mut idle = b.clone();
        idle.accounting = Reading::Value(vec![proc(7, 99, 9, 500, 9_000_000)]);
        assert_eq!(
            gpu_job_stats(Some(&a), &idle, &[]).usage.unwrap().processes,
            0
        );
    }
}
