// A benchmark harness, never shipped: a failed setup may panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Kernel-log read benchmark (issue 43): one read of a 16 MiB kernel log
//! (`xid::log::MAX_LOG_BYTES`, the most a gate keeps) holding a flood of
//! 10,000 identical driver lines, against the same log without the flood:
//! the read and parse (XIDs and every signature, `xid::signature`), then
//! the judging of what it found. A report, not a timed test.
//!
//! cargo bench -p slurm-imex-gpu --bench kmsg

use slurm_imex_gpu::health::checks::{check_signatures, LogLines};
use slurm_imex_gpu::xid::checkpoint::Checkpoint;
use slurm_imex_gpu::xid::log::{self, parse_log, MAX_LOG_BYTES};
use std::time::{Duration, Instant};

const RUNS: usize = 15;
const FLOOD: u64 = 10_000;

/// A kernel-numbered log of `bytes`: ordinary records with continuation
/// lines, a few XIDs, and (`flood`) 10,000 `Unable to notify
/// ImexSessionApi` records in one burst in its middle.
fn log_of(bytes: usize, flood: bool) -> String {
    let mut log = String::with_capacity(bytes + 256);
    let mut seq = 0u64;
    let mut record = |log: &mut String, message: &str| {
        seq += 1;
        log.push_str(&format!("6,{seq},{seq}000,-;{message}\n"));
        seq
    };
    let mut flooded = !flood;
    while log.len() < bytes {
        if !flooded && log.len() >= bytes / 2 {
            for _ in 0..FLOOD {
                record(
                    &mut log,
                    "NVRM: _fabricNotifyEvent: Unable to notify ImexSessionApi",
                );
            }
            flooded = true;
        }
        let bar = "pci 0000:1a:00.0: BAR 0 [mem 0x2000000000-0x2003ffffff 64bit pref]: assigned";
        let seq = record(&mut log, bar);
        log.push_str(" SUBSYSTEM=pci\n DEVICE=+pci:0000:1a:00.0\n");
        if seq % 5_000 == 0 {
            record(
                &mut log,
                "NVRM: Xid (PCI:0000:1b:00): 13, pid=7, name=a.out, Graphics Exception",
            );
        }
    }
    log
}

fn summary(mut v: Vec<Duration>) -> String {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "median {:.2} ms  p90 {:.2} ms  max {:.2} ms  (n={})",
        ms(v[v.len() / 2]),
        ms(v[v.len() * 9 / 10]),
        ms(v[v.len() - 1]),
        v.len()
    )
}

fn time<T>(f: impl Fn() -> T) -> (T, String) {
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..RUNS {
        let t = Instant::now();
        last = Some(f());
        times.push(t.elapsed());
    }
    (last.expect("RUNS > 0"), summary(times))
}

fn main() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    println!(
        "slurm-imex kernel-log read: {} MiB of /dev/kmsg records, {RUNS} runs each",
        MAX_LOG_BYTES >> 20
    );
    for flood in [false, true] {
        let text = log_of(MAX_LOG_BYTES - 4096, flood);
        let path = dir.path().join(if flood { "flood" } else { "plain" });
        std::fs::write(&path, &text).expect("the log written");
        let what = if flood {
            "with a 10,000-line flood"
        } else {
            "without a flood     "
        };
        let (read, line) = time(|| log::read(&path).expect("the log read"));
        println!("read + parse, {what}: {line}");
        let (_, line) = time(|| parse_log(&text));
        println!("parse alone,  {what}: {line}");
        let lines: usize = read.signatures.iter().map(|s| s.seqs.len()).sum();
        let judged = Checkpoint::default();
        let keep = |_: &str| true;
        let log_lines = LogLines {
            judged: &judged,
            xids: &read.events,
            keep: &keep,
        };
        let (findings, line) = time(|| check_signatures(&read.signatures, &log_lines, &[]));
        println!("judging it,   {what}: {line}");
        println!(
            "  {} records, {} XIDs, {lines} signature lines -> {} finding(s): {}",
            read.position.last,
            read.events.len(),
            findings.len(),
            findings
                .iter()
                .map(|f| f.detail.split(':').next().unwrap_or_default().to_string())
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
}
