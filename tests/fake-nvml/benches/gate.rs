//! Health gate benchmark (issue #3): the gate on 8 GPUs of the fake NVML
//! (loaded by the production path), in wall time and as a share of the
//! whole prolog binary; plus the epilog binary (stats + fsynced DB write).
//! Needs `cargo build --release --workspace` first for the binaries.
//!
//! cargo bench -p fake-nvml --bench gate

use slurm_imex_core::hook::Hook;
use slurm_imex_gpu::health::gate::{self, GateRequest};
use slurm_imex_settings::Config;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const RUNS: usize = 50;

fn stats(mut v: Vec<Duration>) -> (f64, String) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let median = ms(v[v.len() / 2]);
    (
        median,
        format!(
            "median {median:.1} ms  p90 {:.1} ms  max {:.1} ms  (n={})",
            ms(v[v.len() * 9 / 10]),
            ms(v[v.len() - 1]),
            v.len()
        ),
    )
}

fn main() {
    let deps = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let release = deps.parent().unwrap().to_path_buf();
    let library = [
        deps.join("libnvidia_ml.so"),
        release.join("libnvidia_ml.so"),
    ]
    .into_iter()
    .find(|p| p.exists())
    .expect("libnvidia_ml.so not built: run cargo build --release -p fake-nvml");
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_node(dir.path(), &library);
    println!("slurm-imex health gate benchmark: 8 fake GPUs (fake libnvidia-ml.so.1 via nvml-wrapper), {RUNS} runs");
    let gate_median = bench_gate(&cfg);
    let prolog = release.join("slurm-imex-prolog");
    let epilog = release.join("slurm-imex-epilog");
    if !prolog.exists() || !epilog.exists() {
        println!("(prolog/epilog binaries not built: run cargo build --release --workspace for the prolog share)");
        return;
    }
    bench_binaries(dir.path(), &prolog, &epilog, gate_median);
}

/// A node of 8 healthy GPUs on the fake NVML (scenario, PCI tree, a kernel
/// log of 2000 unrelated records and one XID) and its config.
fn write_node(dir: &Path, library: &Path) -> Config {
    let p = |n: &str| dir.join(n);
    let mut scenario = String::from("driver_version = \"580.95.05\"\n");
    std::fs::create_dir(p("pci")).unwrap();
    for i in 0..8u32 {
        scenario.push_str(&format!(
            "[[gpu]]\nuuid = \"GPU-{i:08}\"\nserial = \"16509240600{i:02}\"\npci_bus_id = \"00000000:{:02X}:00.0\"\n\
             energy_mj = 1000\npower_mw = 700000\nremap_correctable = 0\nnvlinks = 18\naccounting = true\n\
             fabric = {{ state = \"completed\", clique_id = 1, cluster_uuid = \"dc6e40c4-d722-4357-9ba6-5291dd461278\" }}\n",
            0x1a + i
        ));
        let d = p(&format!("pci/0000:{:02x}:00.0", 0x1a + i));
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("vendor"), "0x10de\n").unwrap();
        std::fs::write(d.join("class"), "0x030200\n").unwrap();
    }
    std::fs::write(p("nvml.toml"), scenario).unwrap();
    std::env::set_var("FAKE_NVML_SCENARIO", p("nvml.toml"));
    let mut kmsg = String::new();
    for s in 1..=2000 {
        kmsg.push_str(&format!(
            "6,{s},{},-;usb 1-1: new high-speed USB device number {s}\n",
            s * 1000
        ));
    }
    kmsg.push_str(
        "4,2001,2001000,-;NVRM: Xid (PCI:0000:1b:00): 13, pid=7, name=a.out, Graphics Exception\n",
    );
    std::fs::write(p("kmsg"), kmsg).unwrap();
    let config = format!(
        "[node]\nstate_dir = \"{}\"\n[gpu]\nnvml_library = \"{}\"\nkmsg = \"{}\"\n[health]\npci_devices = \"{}\"\nexpected_gpus = 8\n\
         [database]\npath = \"{}\"\n",
        p("state").display(),
        library.display(),
        p("kmsg").display(),
        p("pci").display(),
        p("db/jobs.db").display()
    );
    std::fs::write(p("imex.toml"), &config).unwrap();
    Config::parse(&config, Path::new("imex.toml")).unwrap()
}

/// The gate alone, in process; returns its median (ms).
fn bench_gate(cfg: &Config) -> f64 {
    let mut gate_times = Vec::new();
    for _ in 0..RUNS {
        let r = gate::run(
            cfg,
            &GateRequest {
                hook: Hook::Prolog,
                gpus: None,
                xid_after: &Default::default(),
                fabric_seen: None,
            },
        );
        assert_eq!(r.snapshots.len(), 8);
        gate_times.push(r.elapsed);
    }
    let (gate_median, line) = stats(gate_times);
    println!("health gate (NVML init + 8 GPUs read + kmsg + checks):  {line}");
    gate_median
}

/// The prolog and epilog binaries, exec to exit, one job after another.
fn bench_binaries(dir: &Path, prolog: &PathBuf, epilog: &PathBuf, gate_median: f64) {
    let run = |bin: &PathBuf, job: usize| {
        let t = Instant::now();
        let out = Command::new(bin)
            .env_clear()
            .env("SLURM_IMEX_CONFIG", dir.join("imex.toml"))
            .env("FAKE_NVML_SCENARIO", dir.join("nvml.toml"))
            .env("SLURM_JOB_ID", (900_000 + job).to_string())
            .env("SLURMD_NODENAME", "bench1")
            .env("SLURM_JOB_USER", "bench")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        t.elapsed()
    };
    let mut pro = Vec::new();
    let mut epi = Vec::new();
    for job in 0..RUNS {
        pro.push(run(prolog, job));
        epi.push(run(epilog, job));
    }
    let (prolog_median, line) = stats(pro);
    println!("prolog binary, GPU job without --imex (exec to exit):  {line}");
    println!(
        "gate share of the prolog: {:.0} %",
        100.0 * gate_median / prolog_median
    );
    let (_, line) = stats(epi);
    println!("epilog binary, GPU job (gate + deltas + fsynced DB write): {line}");
}
