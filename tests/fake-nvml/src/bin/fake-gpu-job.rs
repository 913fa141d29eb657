//! `fake-gpu-job`: the stand-in for a CUDA program in tests. It "runs" on
//! one GPU of the fake NVML for a while at a given utilization and memory,
//! and the fake driver (`fake_nvml::driver`) accounts it as NVML would: in
//! the accounting buffer (when accounting mode was on at its start), and as
//! a running compute process until it ends.

use clap::Parser;
use nvidia_ml::driver::{now_us, Driver, Ran};
use nvidia_ml::scenario::Scenario;
use std::time::Duration;

#[derive(Parser)]
#[command(about = "Pretend to run a CUDA program on one fake GPU")]
struct Args {
    /// GPU index (default: the first of CUDA_VISIBLE_DEVICES, else 0).
    #[arg(long)]
    gpu: Option<usize>,
    /// GPU utilization over the program's life, %.
    #[arg(long, default_value_t = 80, value_parser = clap::value_parser!(u32).range(0..=100))]
    util: u32,
    /// Memory utilization over its life, %.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(0..=100))]
    mem_util: u32,
    /// Peak device memory, MiB.
    #[arg(long, default_value_t = 1024)]
    memory_mib: u64,
    /// How long it runs, seconds.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
}

fn visible_gpu() -> usize {
    std::env::var("CUDA_VISIBLE_DEVICES")
        .ok()
        .and_then(|v| v.split(',').next().and_then(|i| i.trim().parse().ok()))
        .unwrap_or(0)
}

fn main() {
    let args = Args::parse();
    let scenario = Scenario::load().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let index = args.gpu.unwrap_or_else(visible_gpu);
    let Some(gpu) = scenario.gpus.get(index) else {
        eprintln!(
            "fake-gpu-job: no GPU {index} (the scenario has {})",
            scenario.gpus.len()
        );
        std::process::exit(2)
    };
    let driver = Driver::of(&Scenario::path());
    let mut ran = Ran {
        pid: std::process::id(),
        start_us: now_us(),
        end_us: None,
        gpu_util: args.util,
        mem_util: args.mem_util,
        max_memory: args.memory_mib << 20,
    };
    let record = |ran: &Ran| {
        driver.record(&gpu.uuid, ran).unwrap_or_else(|e| {
            eprintln!("fake-gpu-job: cannot reach the fake driver: {e}");
            std::process::exit(2)
        })
    };
    record(&ran);
    std::thread::sleep(Duration::from_secs_f64(args.seconds.clamp(0.0, 3600.0)));
    ran.end_us = Some(now_us());
    record(&ran);
    println!(
        "fake-gpu-job: pid {} ran {:.1} s on gpu{index} ({}) at {}%",
        ran.pid, args.seconds, gpu.uuid, args.util
    );
}
