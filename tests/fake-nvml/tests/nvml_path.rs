//! The production NVML path (nvml-wrapper dlopen of `[gpu] nvml_library`,
//! the health gate, the prolog/epilog GPU flow and the job database) run
//! against this fake libnvidia-ml.so.1 with 8 GPUs.

use slurm_imex_core::hook::Hook;
use slurm_imex_core::slurm::env::JobEnv;
use slurm_imex_gpu::health::gate::{self, GateRequest};
use slurm_imex_gpu::health::{Severity, Verdict};
use slurm_imex_hooks::gpu_job::{self, GpuOutcome};
use slurm_imex_jobdb::query::HistoryFilter;
use slurm_imex_jobdb::JobDb;
use slurm_imex_settings::Config;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// FAKE_NVML_SCENARIO is per process: tests take turns.
static SERIAL: Mutex<()> = Mutex::new(());

/// The fake library cargo built for this test: beside the test binary in
/// target/<profile>/deps (a `cargo test` build), or one level up (after a
/// plain `cargo build`).
fn fake_library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    [
        deps.join("libnvidia_ml.so"),
        deps.parent().unwrap().join("libnvidia_ml.so"),
    ]
    .into_iter()
    .find(|p| p.exists())
    .expect("libnvidia_ml.so not built: run cargo build -p fake-nvml")
}

/// One GPU of the scenario; `extra` lines override the healthy defaults
/// (`key = value`) and may end with sub-tables such as `[[gpu.process]]`.
fn gpu(i: u32, extra: &str) -> String {
    let mut keys: Vec<(String, String)> = vec![
        ("uuid".into(), format!("\"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd\"")),
        ("serial".into(), format!("\"165092406000{i}\"")),
        ("pci_bus_id".into(), format!("\"00000000:{:02X}:00.0\"", 0x1a + i)),
        ("energy_mj".into(), (1_000_000 * (i as u64 + 1)).to_string()),
        ("power_mw".into(), "500000".into()),
        ("remap_correctable".into(), "0".into()),
        ("nvlinks".into(), "18".into()),
        ("pcie_replays".into(), "3".into()),
        ("accounting".into(), "true".into()),
        (
            "fabric".into(),
            "{ state = \"completed\", clique_id = 7, cluster_uuid = \"dc6e40c4-d722-4357-9ba6-5291dd461278\" }".into(),
        ),
    ];
    let (overrides, tables) = match extra.find("[[") {
        Some(at) => extra.split_at(at),
        None => (extra, ""),
    };
    for line in overrides.lines().filter(|l| l.contains('=')) {
        let (k, v) = line.split_once('=').unwrap();
        let (k, v) = (k.trim().to_string(), v.trim().to_string());
        match keys.iter_mut().find(|(key, _)| *key == k) {
            Some(slot) => slot.1 = v,
            None => keys.push((k, v)),
        }
    }
    let body: String = keys.iter().map(|(k, v)| format!("{k} = {v}\n")).collect();
    format!("[[gpu]]\n{body}{tables}\n")
}

struct Node {
    dir: tempfile::TempDir,
    cfg: Config,
}

impl Node {
    fn new(gpus: &[String]) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let p = |n: &str| dir.path().join(n);
        std::fs::write(
            p("nvml.toml"),
            format!("driver_version = \"580.95.05\"\n{}", gpus.concat()),
        )
        .unwrap();
        std::env::set_var("FAKE_NVML_SCENARIO", p("nvml.toml"));
        std::fs::write(p("kmsg"), "6,1,100,-;Linux version 6.1\n").unwrap();
        std::fs::create_dir(p("pci")).unwrap();
        for i in 0..gpus.len() {
            let d = p(&format!("pci/0000:{:02x}:00.0", 0x1a + i));
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("vendor"), "0x10de\n").unwrap();
            std::fs::write(d.join("class"), "0x030200\n").unwrap();
        }
        let toml = format!(
            "[node]\nstate_dir = \"{}\"\n[gpu]\nnvml_library = \"{}\"\nkmsg = \"{}\"\n\
             [health]\npci_devices = \"{}\"\nexpected_gpus = {}\n[database]\npath = \"{}\"\n",
            p("state").display(),
            fake_library().display(),
            p("kmsg").display(),
            p("pci").display(),
            gpus.len(),
            p("db/jobs.db").display()
        );
        let cfg = Config::parse(&toml, Path::new("test.toml")).unwrap();
        Node { dir, cfg }
    }

    fn path(&self, n: &str) -> PathBuf {
        self.dir.path().join(n)
    }

    fn set_gpus(&self, gpus: &[String]) {
        std::fs::write(
            self.path("nvml.toml"),
            format!("driver_version = \"580.95.05\"\n{}", gpus.concat()),
        )
        .unwrap();
    }

    fn kmsg(&self, line: &str) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(self.path("kmsg"))
            .unwrap();
        writeln!(f, "{line}").unwrap();
    }

    fn job(&self, id: u32, gpus: Option<Vec<u32>>) -> JobEnv {
        JobEnv {
            job_id: id,
            node_name: "n1".into(),
            node_list: "n1".into(),
            uid: Some(1001),
            user: Some("alice".into()),
            imex_requested: false,
            gpus,
        }
    }
}

fn eight(extra: impl Fn(u32) -> String) -> Vec<String> {
    (0..8).map(|i| gpu(i, &extra(i))).collect()
}

fn check(cfg: &Config) -> gate::GateResult {
    gate::run(
        cfg,
        &GateRequest {
            hook: Hook::Prolog,
            gpus: None,
            xid_after: &Default::default(),
            fabric_seen: None,
        },
    )
}

#[test]
fn healthy_eight_gpus_read_through_the_production_path() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(&eight(|_| String::new()));
    let r = check(&node.cfg);
    assert!(r.findings.is_empty(), "{:?}", r.findings);
    assert_eq!(r.snapshots.len(), 8);
    let s = &r.snapshots[3];
    assert_eq!(s.serial, "1650924060003");
    assert_eq!(s.pci, "0000:1d:00");
    assert_eq!(
        s.fabric.value().unwrap().cluster_uuid,
        "dc6e40c4-d722-4357-9ba6-5291dd461278"
    );
    assert_eq!(s.fabric.value().unwrap().health_summary, "HEALTHY");
    assert_eq!(s.nvlink.value().unwrap().len(), 18);
    assert_eq!(s.recovery_action.value(), Some(&0));
    assert!(*s.energy_mj.value().unwrap() >= 4_000_000);
    assert_eq!(r.driver.as_deref(), Some("580.95.05"));
    assert!(r.elapsed < Duration::from_secs(3), "{:?}", r.elapsed);
}

#[test]
fn drain_findings_name_check_gpu_and_serial() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(&eight(|i| {
        if i == 3 {
            "remap_pending = true".into()
        } else {
            String::new()
        }
    }));
    let r = check(&node.cfg);
    let drains: Vec<String> = r
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Drain)
        .map(|f| f.reason())
        .collect();
    assert_eq!(
        drains,
        ["imex-health: row_remap gpu3 1650924060003: row remap pending: GPU reset needed"]
    );

    node.set_gpus(&eight(|i| match i {
        1 => "recovery_action = 4".into(),
        2 => "nvlinks_down = [5]".into(),
        4 => "fabric = { state = \"in_progress\" }".into(),
        5 => "lost = true".into(),
        6 => "ecc_volatile_dbe = 2".into(),
        _ => String::new(),
    }));
    let r = check(&node.cfg);
    let checks: Vec<(String, Option<u32>)> = r
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Drain)
        .map(|f| (f.check.clone(), f.gpu.as_ref().map(|g| g.index)))
        .collect();
    for want in [
        ("recovery_action", 1),
        ("nvlink", 2),
        ("fabric", 4),
        ("ecc_dbe", 6),
    ] {
        assert!(
            checks.contains(&(want.0.to_string(), Some(want.1))),
            "{want:?} not in {checks:?}"
        );
    }
    // The lost GPU: NVML cannot open it, and the count no longer matches.
    assert!(
        checks.iter().any(|(c, g)| c == "gpu_lost" && *g == Some(5)),
        "{checks:?}"
    );
}

#[test]
fn a_hanging_call_is_cut_off_at_its_budget_and_named() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(&eight(|i| {
        if i == 2 {
            "hang_in = \"fabric\"\nhang_ms = 6000".into()
        } else {
            String::new()
        }
    }));
    let r = check(&node.cfg);
    assert!(
        r.elapsed < Duration::from_secs(4),
        "gate took {:?}",
        r.elapsed
    );
    let f = r
        .findings
        .iter()
        .find(|f| f.check == "fabric")
        .expect("fabric finding");
    assert_eq!(f.severity, Severity::Drain);
    assert_eq!(f.gpu.as_ref().unwrap().index, 2);
    assert!(f.detail.contains("timed out"), "{}", f.detail);
    assert_eq!(r.snapshots.len(), 7);
}

#[test]
fn nvml_that_cannot_start_is_a_drain_and_a_bad_scenario_is_reported() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(&eight(|_| String::new()));
    std::fs::write(node.path("nvml.toml"), "init_error = 9\n").unwrap();
    let r = check(&node.cfg);
    assert_eq!(r.findings.len(), 1);
    assert_eq!(r.findings[0].check, "nvml_init");
    std::fs::write(node.path("nvml.toml"), "[[gpu]]\nuuid = 5\n").unwrap();
    assert_eq!(check(&node.cfg).findings[0].check, "nvml_init");
    // No library and no NVIDIA GPU on the PCI bus: not a GPU node.
    let mut cfg = node.cfg.clone();
    cfg.gpu.nvml_library = node.path("missing.so");
    cfg.health.pci_devices = node.path("empty");
    std::fs::create_dir(node.path("empty")).unwrap();
    assert!(check(&cfg).no_gpus);
    cfg.health.pci_devices = node.path("pci");
    let r = check(&cfg);
    assert!(!r.no_gpus);
    assert!(
        r.findings[0].detail.contains("missing.so"),
        "{:?}",
        r.findings
    );
}

#[test]
fn prolog_and_epilog_record_stats_xids_and_verdicts() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(&eight(|_| String::new()));
    // An XID from before the job is judged once, by the prolog.
    node.kmsg("4,2,200,-;NVRM: Xid (PCI:0000:1b:00): 13, pid=1, name=old, Graphics Exception");
    let job = node.job(77, Some(vec![0, 1]));
    match gpu_job::prolog(&job, &node.cfg) {
        GpuOutcome::Done {
            verdict,
            drain_reason,
            warnings,
            clique,
            restore_imex,
        } => {
            assert_eq!((verdict, drain_reason), (Verdict::Warn, None));
            assert!(restore_imex.is_empty());
            assert!(warnings[0].contains("XID 13"), "{warnings:?}");
            // The clique the domain side checks the rack map against.
            assert_eq!(
                clique.as_deref(),
                Some("dc6e40c4-d722-4357-9ba6-5291dd461278.7")
            );
        }
        o => panic!("{o:?}"),
    }
    std::thread::sleep(Duration::from_millis(300));
    // During the job: an application XID on gpu1, and gpu0 eats ECC.
    node.kmsg("4,3,300,-;NVRM: Xid (PCI:0000:1b:00): 31, pid=4242, name=python3, Ch 00000003, intr 10000000. MMU Fault");
    node.set_gpus(&eight(|i| if i == 0 { "ecc_volatile_sbe = 5\npcie_replays = 10\n[[gpu.process]]\npid = 4242\ngpu_util = 87\nmax_memory = 1073741824\ntime_ms = 300".into() } else { String::new() }));
    match gpu_job::epilog(&job, &node.cfg, None).0 {
        GpuOutcome::Done { verdict, .. } => assert_eq!(verdict, Verdict::Warn),
        o => panic!("{o:?}"),
    }
    let db = JobDb::open(&node.cfg.database.path, Duration::from_secs(5)).unwrap();
    let rows = db
        .history(&HistoryFilter {
            limit: 10,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].job_id, rows[0].gpus, rows[0].xids), (77, 2, 1));
    let shown = &db.show(77).unwrap()[0];
    let g0 = &shown.gpus[0].stats;
    assert_eq!(g0.serial, "1650924060000");
    assert_eq!(g0.ecc_sbe.value, Some(5));
    assert_eq!(g0.pcie_replays.value, Some(7));
    // Energy advanced while the job ran, and was not reset.
    assert!(
        g0.energy_mj.value.unwrap() > 0 && !g0.energy_mj.reset,
        "{:?}",
        g0.energy_mj
    );
    assert_eq!(g0.processes.len(), 1);
    assert_eq!(g0.processes[0].gpu_util, Some(87));
    let g1 = &shown.gpus[1].stats;
    assert_eq!(g1.xids.len(), 1);
    assert_eq!(
        (g1.xids[0].xid, g1.xids[0].bucket.as_str()),
        (31, "RESTART_APP")
    );
    assert_eq!(shown.prolog.as_ref().unwrap().verdict, Verdict::Warn);
    assert!(!node.path("state/gpu-jobs/77.json").exists());
}

#[test]
fn xid_79_during_the_job_makes_the_epilog_drain() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(&eight(|_| String::new()));
    let job = node.job(78, None);
    assert!(matches!(
        gpu_job::prolog(&job, &node.cfg),
        GpuOutcome::Done {
            verdict: Verdict::Pass,
            ..
        }
    ));
    node.kmsg("3,9,900,-;NVRM: Xid (PCI:0000:1f:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.");
    match gpu_job::epilog(&job, &node.cfg, None).0 {
        GpuOutcome::Done {
            verdict,
            drain_reason,
            ..
        } => {
            assert_eq!(verdict, Verdict::Drain);
            assert_eq!(
                drain_reason.as_deref(),
                Some("imex-health: xid gpu5 1650924060005: XID 79 (REBOOT) on 0000:1f:00: GPU has fallen off the bus.")
            );
        }
        o => panic!("{o:?}"),
    }
    // The next prolog does not judge the same XID again.
    assert!(matches!(
        gpu_job::prolog(&node.job(79, None), &node.cfg),
        GpuOutcome::Done {
            verdict: Verdict::Pass,
            ..
        }
    ));
}

#[test]
fn a_broken_database_never_fails_the_epilog() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(&eight(|_| String::new()));
    std::fs::create_dir_all(node.path("db")).unwrap();
    std::fs::write(node.path("db/jobs.db"), vec![7u8; 4096]).unwrap();
    let job = node.job(80, Some(vec![0]));
    gpu_job::prolog(&job, &node.cfg);
    assert!(matches!(
        gpu_job::epilog(&job, &node.cfg, None).0,
        GpuOutcome::Done {
            verdict: Verdict::Pass,
            ..
        }
    ));
    // The corrupt file was left as it was, for the admin to look at.
    assert_eq!(
        std::fs::read(node.path("db/jobs.db")).unwrap(),
        vec![7u8; 4096]
    );
}

#[test]
fn corrupt_start_snapshot_and_checkpoint_are_set_aside_and_noted() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(&eight(|_| String::new()));
    let job = node.job(81, Some(vec![0]));
    gpu_job::prolog(&job, &node.cfg);
    let snapshot = node.path("state/gpu-jobs/81.json");
    let checkpoint = node.path("state/xid-checkpoint.json");
    assert!(snapshot.exists() && checkpoint.exists());
    std::fs::write(&snapshot, "{\"job_id\": 81, \"start_ts\": \"tru").unwrap();
    std::fs::write(&checkpoint, [0xffu8, 0, 1, 2]).unwrap();
    match gpu_job::epilog(&job, &node.cfg, None).0 {
        GpuOutcome::Done { .. } => {}
        o => panic!("{o:?}"),
    }
    // Both moved aside for an admin to look at; new ones replace them.
    assert!(node.path("state/gpu-jobs/81.json.corrupt").exists());
    assert!(node.path("state/xid-checkpoint.json.corrupt").exists());
    assert!(checkpoint.exists(), "a fresh checkpoint was written");
    // The job is still recorded, saying what is not known.
    let db = JobDb::open(&node.cfg.database.path, Duration::from_secs(5)).unwrap();
    let shown = &db.show(81).unwrap()[0];
    let notes = &shown.epilog.as_ref().unwrap().reasons;
    assert!(
        notes
            .iter()
            .any(|r| r.starts_with("unknown: no usable start snapshot")),
        "{notes:?}"
    );
}

#[test]
fn a_node_without_nvidia_gpus_skips_the_gate_until_reboot() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(&eight(|_| String::new()));
    let mut cfg = node.cfg.clone();
    cfg.gpu.nvml_library = node.path("missing.so");
    cfg.health.pci_devices = node.path("empty");
    std::fs::create_dir(node.path("empty")).unwrap();
    let job = node.job(81, None);
    let skipped = GpuOutcome::Skipped("no NVIDIA GPU on this node");
    assert_eq!(gpu_job::prolog(&job, &cfg), skipped);
    let note = node.path("state/no-nvidia-gpu");
    assert!(note.exists(), "the first gate notes that there is no GPU");
    // With the note, no gate runs: even a bus that now lists GPUs and a
    // loadable NVML would need a reboot to appear, which clears the note.
    cfg.health.pci_devices = node.path("pci");
    cfg.gpu.nvml_library = node.cfg.gpu.nvml_library.clone();
    assert_eq!(gpu_job::prolog(&job, &cfg), skipped);
    assert_eq!(gpu_job::epilog(&job, &cfg, None), (skipped.clone(), None));
    std::fs::remove_file(&note).unwrap();
    assert!(matches!(
        gpu_job::prolog(&job, &cfg),
        GpuOutcome::Done { .. }
    ));
}

/// `slurm-imex check` (the HealthCheckProgram's gate) twice over a log.
fn xids_of_check(node: &Node) -> Vec<u32> {
    gate::check_now(&node.cfg)
        .unwrap()
        .xids
        .iter()
        .map(|x| x.xid)
        .collect()
}

fn append(node: &Node, text: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(node.path("kmsg"))
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

const XID_79_AS_101: &str = "3,101,101000,-;NVRM: Xid (PCI:0000:1a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n SUBSYSTEM=pci\n DEVICE=+pci:0000:1a:00.0\n";

#[test]
fn continuation_lines_do_not_hide_the_next_xid() {
    // Issue 24's reproduction: 100 kmsg records, each followed by two
    // continuation lines; a first check; XID 79 appended as record 101.
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(&eight(|_| String::new()));
    let mut log = String::new();
    for seq in 1..=100u64 {
        log.push_str(&format!(
            "6,{seq},{},-;pci 0000:1a:00.0: BAR {seq}\n SUBSYSTEM=pci\n DEVICE=+pci:0000:1a:00.0\n",
            seq * 1000
        ));
    }
    std::fs::write(node.path("kmsg"), log).unwrap();
    assert!(xids_of_check(&node).is_empty());
    let checkpoint = std::fs::read_to_string(node.path("state/xid-checkpoint.json")).unwrap();
    assert!(
        checkpoint.contains("\"0000:1a:00\":100") && checkpoint.contains("kernel"),
        "{checkpoint}"
    );
    append(&node, XID_79_AS_101);
    assert_eq!(
        xids_of_check(&node),
        vec![79],
        "the second check missed XID 79"
    );
    // Reported once.
    assert!(xids_of_check(&node).is_empty());
}

#[test]
fn no_record_after_a_checkpoint_is_missed_in_the_real_h100_log() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(&eight(|_| String::new()));
    let h100 = include_str!("../../data/samples/kmsg-h100-records.txt");
    std::fs::write(node.path("kmsg"), h100).unwrap();
    assert!(xids_of_check(&node).is_empty());
    // Every record the kernel writes next, XID or not, with its
    // continuation lines, one check after another.
    for (seq, xid) in [(358u64, 0u32), (359, 13), (360, 0), (361, 119), (362, 79)] {
        let record = if xid == 0 {
            format!("6,{seq},{seq}000,-;pci 0000:1b:00.0: enabling device\n SUBSYSTEM=pci\n DEVICE=+pci:0000:1b:00.0\n")
        } else {
            format!("4,{seq},{seq}000,c;NVRM: Xid (PCI:0000:1b:00): {xid}, pid='<unknown>', name=<unknown>, event\n SUBSYSTEM=pci\n DEVICE=+pci:0000:1b:00.0\n")
        };
        append(&node, &record);
        let want: Vec<u32> = if xid == 0 { vec![] } else { vec![xid] };
        assert_eq!(xids_of_check(&node), want, "record {seq}");
    }
}

#[test]
fn a_log_cleared_behind_the_checkpoint_is_judged_again() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(&eight(|_| String::new()));
    let h100 = include_str!("../../data/samples/kmsg-h100-records.txt");
    std::fs::write(node.path("kmsg"), h100).unwrap();
    assert!(xids_of_check(&node).is_empty());
    // The log now starts over (another numbering, or cleared): an XID
    // numbered below the checkpoint is still reported.
    std::fs::write(node.path("kmsg"), XID_79_AS_101).unwrap();
    assert_eq!(xids_of_check(&node), vec![79]);
    // A plain log (dmesg output) after a kernel-numbered checkpoint.
    std::fs::write(
        node.path("kmsg"),
        "[  5.1] NVRM: Xid (PCI:0000:1a:00): 13, pid=5, name=a.out, Graphics Exception\n",
    )
    .unwrap();
    assert_eq!(xids_of_check(&node), vec![13]);
}

/// Run the fake CUDA program on GPU `gpu` of `node` for `seconds`.
fn gpu_program(node: &Node, gpu: u32, util: u32, memory_mib: u64, seconds: f64) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fake-gpu-job"))
        .args(["--gpu", &gpu.to_string(), "--util", &util.to_string()])
        .args(["--mem-util", "30", "--memory-mib", &memory_mib.to_string()])
        .args(["--seconds", &seconds.to_string()])
        .env("FAKE_NVML_SCENARIO", node.path("nvml.toml"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn the_prolog_turns_accounting_on_and_the_epilog_records_each_gpus_use() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Accounting off, as after every boot (the H100 capture).
    let node = Node::new(&eight(|_| "accounting = false".into()));
    // A program that ran before the job (accounting off then): not counted.
    gpu_program(&node, 0, 99, 4096, 0.05);
    let job = node.job(90, Some(vec![0, 1, 2]));
    assert!(matches!(
        gpu_job::prolog(&job, &node.cfg),
        GpuOutcome::Done {
            verdict: Verdict::Pass,
            ..
        }
    ));
    // The mode stays on for later clients (persistence mode is on).
    let on = gate::check_now(&node.cfg).unwrap();
    assert_eq!(
        on.snapshots[0].accounting_mode,
        slurm_imex_gpu::nvml::Reading::Value(true)
    );
    assert_eq!(
        on.snapshots[5].accounting_mode,
        slurm_imex_gpu::nvml::Reading::Value(false)
    );
    // The job: 0.6 s at 80 % then 0.2 s at 20 % on gpu0, 0.3 s at 50 % on gpu2.
    gpu_program(&node, 0, 80, 2048, 0.6);
    gpu_program(&node, 0, 20, 512, 0.2);
    gpu_program(&node, 2, 50, 1024, 0.3);
    gpu_job::epilog(&job, &node.cfg, None);
    let db = JobDb::open(&node.cfg.database.path, Duration::from_secs(5)).unwrap();
    let shown = &db.show(90).unwrap()[0];
    let usage = |i: usize| shown.gpus[i].stats.usage.expect("usage known");
    let g0 = usage(0);
    assert_eq!(g0.processes, 2, "{g0:?}");
    let util = g0.gpu_util_pct.unwrap();
    // Time-weighted: (0.6 x 80 + 0.2 x 20) / 0.8 = 65 %, within the
    // programs' start-up jitter.
    assert!((50.0..=75.0).contains(&util), "{util}");
    assert!((500..=900).contains(&g0.busy_ms), "{g0:?}");
    assert_eq!(shown.gpus[0].stats.max_memory_bytes, Some(2048 << 20));
    // Held, never used: zero, and said so.
    assert_eq!(usage(1).processes, 0);
    assert_eq!(usage(1).busy_ms, 0);
    assert_eq!(usage(2).processes, 1);
    assert_eq!(shown.gpus[2].stats.max_memory_bytes, Some(1024 << 20));
    let h = &db
        .history(&HistoryFilter {
            limit: 1,
            ..Default::default()
        })
        .unwrap()[0];
    assert_eq!(h.idle_gpus, Some(1));
    assert_eq!(h.peak_memory_bytes, Some(2048 << 20));
}

#[test]
fn without_persistence_mode_the_driver_forgets_accounting_and_usage_is_unknown() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(&eight(|_| "accounting = false\npersistence = false".into()));
    let job = node.job(91, Some(vec![0]));
    gpu_job::prolog(&job, &node.cfg);
    gpu_program(&node, 0, 80, 2048, 0.1);
    gpu_job::epilog(&job, &node.cfg, None);
    let db = JobDb::open(&node.cfg.database.path, Duration::from_secs(5)).unwrap();
    let shown = &db.show(91).unwrap()[0];
    // Not zero: not known.
    assert_eq!(shown.gpus[0].stats.usage, None);
}

#[test]
fn accounting_leave_keeps_the_admins_setting() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut node = Node::new(&eight(|_| "accounting = false".into()));
    node.cfg.gpu.accounting = slurm_imex_gpu::config::Accounting::Leave;
    let job = node.job(92, Some(vec![0]));
    gpu_job::prolog(&job, &node.cfg);
    let after = gate::check_now(&node.cfg).unwrap();
    assert_eq!(
        after.snapshots[0].accounting_mode,
        slurm_imex_gpu::nvml::Reading::Value(false)
    );
    assert_eq!(after.snapshots[0].accounting_set, None);
}

#[test]
fn the_production_path_reads_what_nvidia_smi_showed_on_the_h100() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let capture = include_str!("../../data/samples/nvidia-smi-q-h100.txt");
    let blocks: Vec<&str> = capture.split("\n----\n").collect();
    let gpu =
        nvidia_ml::nvidia_smi::scenario_gpu(&format!("{}\n{}", blocks[0], blocks[1])).unwrap();
    let node = Node::new(&[gpu]);
    // The epilog's read: it alone takes each accounted process's stats.
    let gate = gate::run(
        &node.cfg,
        &GateRequest {
            hook: Hook::Epilog,
            gpus: None,
            xid_after: &Default::default(),
            fabric_seen: None,
        },
    );
    let g = &gate.snapshots[0];
    use slurm_imex_gpu::nvml::Reading;
    assert_eq!(g.serial, "1650000000001");
    assert_eq!(g.pci, "0000:00:06");
    assert_eq!(g.name, "NVIDIA H100 80GB HBM3");
    assert_eq!(g.accounting_mode, Reading::Value(true));
    assert_eq!(g.persistence, Reading::Value(true));
    assert_eq!(g.ecc_enabled, Reading::Value(true));
    assert_eq!(g.mig_enabled, Reading::Value(false));
    // --query-accounted-apps: "00000000:00:06.0, 420, 78 %, 4 %, 746 MiB, 6882 ms"
    let csv = blocks[2].lines().last().unwrap();
    let fields: Vec<&str> = csv.split(", ").collect();
    let n = |i: usize| {
        fields[i]
            .split_whitespace()
            .next()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    let Reading::Value(accounted) = &g.accounting else {
        panic!("{:?}", g.accounting)
    };
    let p = accounted[0];
    assert_eq!(
        (
            p.pid as u64,
            p.gpu_util.map(u64::from),
            p.mem_util.map(u64::from)
        ),
        (n(1), Some(n(2)), Some(n(3)))
    );
    assert_eq!((p.max_memory_bytes, p.time_ms), (Some(n(4) << 20), n(5)));
    assert!(!p.running);
    // Nothing a health check would flag.
    assert!(gate.findings.is_empty(), "{:?}", gate.findings);
    // The prolog's and check's reads take the pids alone: no per-process
    // call for a buffer of up to 4,000 processes on every job.
    let check = gate::check_now(&node.cfg).unwrap();
    let Reading::Value(pids) = &check.snapshots[0].accounting else {
        panic!("{:?}", check.snapshots[0].accounting)
    };
    assert_eq!(pids[0].pid, 420);
    assert_eq!((pids[0].gpu_util, pids[0].max_memory_bytes), (None, None));
}

#[test]
fn the_fake_reports_a_reused_pid_once_as_the_process_that_ended_last() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // pid 7 twice: the first ended at 1 s + 500 ms, the second at 5 s + 4 s.
    let tables = "[[gpu.process]]\npid = 7\ngpu_util = 99\ntime_ms = 500\nstart_us = 1000000\n\
                  [[gpu.process]]\npid = 7\ngpu_util = 60\ntime_ms = 4000\nstart_us = 5000000\n";
    let node = Node::new(&[gpu(0, tables)]);
    let gate = gate::run(
        &node.cfg,
        &GateRequest {
            hook: Hook::Epilog,
            gpus: None,
            xid_after: &Default::default(),
            fabric_seen: None,
        },
    );
    use slurm_imex_gpu::nvml::Reading;
    let Reading::Value(accounted) = &gate.snapshots[0].accounting else {
        panic!("{:?}", gate.snapshots[0].accounting)
    };
    let seen: Vec<(u32, Option<u32>, u64)> = accounted
        .iter()
        .map(|p| (p.pid, p.gpu_util, p.start_us))
        .collect();
    assert_eq!(seen, [(7, Some(60), 5_000_000)]);
}

const IMEX_NOTIFY: &str = "NVRM: _fabricNotifyEvent: Unable to notify ImexSessionApi";
const POST_RX: [&str; 2] = [
    "NVRM: knvlinkUpdatePostRxDetectLinkMask_IMPL: Failed to update Rx Detect Link mask!",
    "NVRM: knvlinkDiscoverPostRxDetLinks_GH100: Getting peer0's postRxDetLinkMask failed!",
];

/// `lines` as /dev/kmsg records from sequence number `first` on.
fn records(first: u64, lines: &[&str]) -> String {
    lines
        .iter()
        .zip(first..)
        .map(|(line, seq)| format!("3,{seq},{seq}000,-;{line}\n"))
        .collect()
}

/// What `slurm-imex check` reports: each finding as its reason.
fn check_reasons(node: &Node) -> Vec<String> {
    let gate = gate::check_now(&node.cfg).unwrap();
    gate.findings.iter().map(|f| f.reason()).collect()
}

#[test]
fn driver_lines_beyond_xids_are_judged_once_and_a_flood_is_one_finding() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(&eight(|_| String::new()));
    let mut log = records(2, &[IMEX_NOTIFY; 10_000]);
    log.push_str(&records(10_002, &POST_RX));
    // gpu5 off the bus without an XID; gpu2 with its XID 79 too; gpu6 in
    // the three-line message, one /dev/kmsg record with \x0a for newlines.
    log.push_str(&records(
        10_004,
        &[
            "NVRM: GPU 0000:1f:00.0: GPU has fallen off the bus.",
            "NVRM: Xid (PCI:0000:1c:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
            "NVRM: GPU 0000:1c:00.0: GPU has fallen off the bus.",
            "NVRM: The NVIDIA GPU 0000:20:00.0\\x0aNVRM: (PCI ID: 10de:2941) installed in this system has\\x0aNVRM: fallen off the bus and is not responding to commands.",
        ],
    ));
    append(&node, &log);
    let t = std::time::Instant::now();
    let reasons = check_reasons(&node);
    let fallen = "1 line since the last check: a GPU has fallen off the bus and no XID 79 \
                  names it; reboot the node; reseat or RMA the GPU if it recurs; newest:";
    assert_eq!(
        reasons,
        [
            "imex-health: xid gpu2 1650924060002: XID 79 (REBOOT) on 0000:1c:00: GPU has fallen off the bus.".to_string(),
            format!(
                "imex-health: nvlink_post_rx_detect: 2 lines since the last check: the driver \
                 failed to update an NVLink post-RX-detection link mask; reboot the node (gpud \
                 recommends a system reboot); newest: {}",
                POST_RX[1]
            ),
            format!("imex-health: fallen_off_bus gpu5 1650924060005: {fallen} NVRM: GPU 0000:1f:00.0: GPU has fallen off the bus."),
            format!(
                "imex-health: fallen_off_bus gpu6 1650924060006: {fallen} NVRM: The NVIDIA GPU \
                 0000:20:00.0 … fallen off the bus and is not responding to commands"
            ),
            format!(
                "imex-health: imex_notify: 10000 lines since the last check: the driver dropped \
                 IMEX fabric events: no IMEX daemon had registered for them; expected while no \
                 nvidia-imex runs (an idle node of per-job domains); during an --imex job or with \
                 a rack-wide daemon, look at the node's nvidia-imex; newest: {IMEX_NOTIFY}"
            ),
        ]
    );
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    // Judged once: the next check finds nothing; a new line is one line.
    assert!(check_reasons(&node).is_empty());
    append(&node, &records(10_008, &[IMEX_NOTIFY]));
    let reasons = check_reasons(&node);
    assert_eq!(reasons.len(), 1);
    assert!(
        reasons[0].starts_with("imex-health: imex_notify: 1 line since the last check: "),
        "{reasons:?}"
    );
}

#[test]
fn the_epilog_names_the_driver_lines_logged_during_the_job() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(&eight(|_| String::new()));
    // Before the job: judged by the prolog, a warning only.
    append(&node, &records(2, &[IMEX_NOTIFY; 2]));
    let job = node.job(90, Some(vec![0, 1]));
    match gpu_job::prolog(&job, &node.cfg) {
        GpuOutcome::Done {
            verdict, warnings, ..
        } => {
            assert_eq!(verdict, Verdict::Warn);
            assert!(
                warnings[0].starts_with("imex-health: imex_notify: 2 lines"),
                "{warnings:?}"
            );
        }
        o => panic!("{o:?}"),
    }
    // During the job: three more, and the NVLink post-RX-detect failure.
    append(&node, &records(4, &[IMEX_NOTIFY; 3]));
    append(&node, &records(7, &POST_RX));
    match gpu_job::epilog(&job, &node.cfg, None).0 {
        GpuOutcome::Done {
            verdict,
            drain_reason,
            warnings,
            ..
        } => {
            assert_eq!(verdict, Verdict::Drain);
            assert!(
                drain_reason.as_deref().is_some_and(|r| r.starts_with(
                    "imex-health: nvlink_post_rx_detect: 2 lines since the last check: "
                )),
                "{drain_reason:?}"
            );
            assert!(
                warnings[0].starts_with("imex-health: imex_notify: 3 lines"),
                "{warnings:?}"
            );
        }
        o => panic!("{o:?}"),
    }
    // The job's row says both, as `slurm-imex show` prints it.
    let db = JobDb::open(&node.cfg.database.path, Duration::from_secs(5)).unwrap();
    let shown = &db.show(90).unwrap()[0];
    let reasons = &shown.epilog.as_ref().unwrap().reasons;
    assert!(
        reasons[0].starts_with("imex-health: nvlink_post_rx_detect: 2 lines"),
        "{reasons:?}"
    );
    assert!(
        reasons[1].starts_with("imex-health: imex_notify: 3 lines"),
        "{reasons:?}"
    );
    // The next job's prolog judges none of them again.
    assert!(matches!(
        gpu_job::prolog(&node.job(91, None), &node.cfg),
        GpuOutcome::Done {
            verdict: Verdict::Pass,
            ..
        }
    ));
}

#[test]
fn every_published_driver_line_sample_runs_through_the_gate() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(&eight(|_| String::new()));
    let samples = include_str!("../../data/samples/kmsg-signatures.txt");
    std::fs::write(node.path("kmsg"), samples).unwrap();
    let gate = gate::check_now(&node.cfg).unwrap();
    let found: Vec<(&str, &str)> = gate
        .findings
        .iter()
        .map(|f| (f.check.as_str(), f.detail.split(" since").next().unwrap()))
        .collect();
    let fallen = |pci: &str| {
        format!("1 line since the last check: a GPU has fallen off the bus and no XID 79 names it; reboot the node; reseat or RMA the GPU if it recurs; newest: NVRM: GPU {pci}.0: GPU has fallen off the bus.")
    };
    // The XID 79 of 0000:01:00 stands for both its fallen-off-the-bus
    // lines; 0000:29:00, 0000:18:00 and 0000:b3:00 have none.
    assert_eq!(
        found,
        [
            (
                "xid",
                "XID 79 (REBOOT) on 0000:01:00: GPU has fallen off the bus."
            ),
            ("nvlink_post_rx_detect", "10 lines"),
            ("fallen_off_bus", "1 line"),
            ("fallen_off_bus", "2 lines"),
            ("fallen_off_bus", "2 lines"),
            ("imex_notify", "1 line"),
        ]
    );
    assert_eq!(gate.findings[2].detail, fallen("0000:29:00"));
    assert!(
        gate.findings.iter().all(|f| f.gpu.is_none()),
        "no GPU of this node is named"
    );
    assert!(check_reasons(&node).is_empty(), "judged once");
}

impl Node {
    /// The scenario's GPUs under another driver version.
    fn set_driver(&self, driver: &str, gpus: &[String]) {
        std::fs::write(
            self.path("nvml.toml"),
            format!("driver_version = \"{driver}\"\n{}", gpus.concat()),
        )
        .unwrap();
    }

    /// The node's config with `[health] fabric_wait` set.
    fn waiting_for_fabric(mut self, wait: &str) -> Node {
        self.cfg.health.fabric_wait = slurm_imex_core::config::HumanDuration(humantime_like(wait));
        self
    }
}

/// "2s" or "500ms" as a Duration (the test's own shorthand).
fn humantime_like(text: &str) -> Duration {
    match text.strip_suffix("ms") {
        Some(ms) => Duration::from_millis(ms.parse().unwrap()),
        None => Duration::from_secs(text.strip_suffix('s').unwrap().parse().unwrap()),
    }
}

const FABRIC: &str = "{ state = \"completed\", clique_id = 7, cluster_uuid = \"dc6e40c4-d722-4357-9ba6-5291dd461278\" }";

#[test]
fn a_driver_615_gpu_names_every_recovery_action_and_reports_typed_cliques() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(&eight(|_| String::new()));
    let actions = [5u64, 6, 7, 8, 0, 0, 0, 0];
    let gpus: Vec<String> = (0..8)
        .map(|i| {
            let fabric = FABRIC.replace(
                " }",
                ", cliques = [{ kind = 0, id = 7 }, { kind = 1, id = 40 }, { kind = 2, id = 9 }] }",
            );
            gpu(
                i,
                &format!(
                    "recovery_action = {}\nfabric = {fabric}",
                    actions[i as usize]
                ),
            )
        })
        .collect();
    node.set_driver("615.20.01", &gpus);
    let gate = gate::check_now(&node.cfg).unwrap();
    let named: Vec<(u32, Severity, &str)> = gate
        .findings
        .iter()
        .filter(|f| f.check == "recovery_action")
        .map(|f| (f.gpu.as_ref().unwrap().index, f.severity, f.detail.as_str()))
        .collect();
    assert_eq!(named.len(), 4, "{named:?}");
    assert_eq!((named[0].0, named[0].1), (0, Severity::Warn));
    assert!(named[0]
        .2
        .starts_with("driver asks for recovery action RECOVER_IMEX_DOMAIN (5)"));
    let drains: Vec<&str> = named[1..].iter().map(|n| n.2).collect();
    assert_eq!(
        drains,
        [
            "driver asks for recovery action BUS_RESET (6): reset the GPU's PCIe bus (or reboot the node)",
            "driver asks for recovery action SYSTEM_REBOOT (7): reboot the system",
            "driver asks for recovery action 8, unknown to this slurm-imex: see the driver's documentation for this value, or reboot the node",
        ]
    );
    assert!(named[1..].iter().all(|n| n.1 == Severity::Drain));
    // v4's typed cliques, and the unicast-pointer one as the clique.
    let fabric = gate.snapshots[0].fabric.value().unwrap();
    let kinds: Vec<(&str, u32)> = fabric
        .cliques
        .iter()
        .map(|c| (c.kind.as_str(), c.id))
        .collect();
    assert_eq!(
        kinds,
        [
            ("UNICAST_POINTER", 7),
            ("MULTICAST_POINTER", 40),
            ("UNICAST_LOGICAL_ENDPOINT", 9)
        ]
    );
    assert_eq!(fabric.clique_id, 7);
    // Only RECOVER_IMEX_DOMAIN on an idle node: a warning, never a drain.
    let only_5: Vec<String> = (0..8)
        .map(|i| gpu(i, if i == 0 { "recovery_action = 5" } else { "" }))
        .collect();
    node.set_driver("615.20.01", &only_5);
    let gate = gate::check_now(&node.cfg).unwrap();
    assert!(
        gate.findings.iter().all(|f| f.severity == Severity::Warn),
        "{:?}",
        gate.findings
    );
}

#[test]
fn an_older_driver_has_no_v4_and_its_clique_comes_from_v3() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(&eight(|_| String::new()));
    let gate = gate::check_now(&node.cfg).unwrap();
    let fabric = gate.snapshots[0].fabric.value().unwrap();
    assert!(fabric.cliques.is_empty());
    assert_eq!(fabric.clique_id, 7);
}

#[test]
fn the_prolog_waits_for_a_fabric_probe_that_completes_and_drains_one_that_does_not() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let probe = |after: &str| {
        eight(|i| {
            if i == 3 {
                format!(
                    "fabric = {}",
                    FABRIC.replace(
                        "\"completed\"",
                        &format!("\"in_progress\", completes_after_s = {after}")
                    )
                )
            } else {
                String::new()
            }
        })
    };
    // Completes 2 s in: the prolog waited, and passes.
    let node = Node::new(&probe("2.0")).waiting_for_fabric("10s");
    let started = std::time::Instant::now();
    let outcome = gpu_job::prolog(&node.job(91, None), &node.cfg);
    let took = started.elapsed();
    assert!(
        matches!(
            outcome,
            GpuOutcome::Done {
                verdict: Verdict::Pass,
                ..
            }
        ),
        "{outcome:?}"
    );
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_secs(8),
        "{took:?}"
    );
    // Never within the wait: a drain naming the bound.
    let node = Node::new(&probe("600.0")).waiting_for_fabric("1s");
    let GpuOutcome::Done {
        verdict,
        drain_reason,
        ..
    } = gpu_job::prolog(&node.job(92, None), &node.cfg)
    else {
        panic!("skipped");
    };
    assert_eq!(verdict, Verdict::Drain);
    let reason = drain_reason.unwrap();
    assert!(
        reason.starts_with("imex-health: fabric gpu3 1650924060003: fabric state IN_PROGRESS"),
        "{reason}"
    );
    assert!(
        reason.ends_with("past [health] fabric_wait = 1s"),
        "{reason}"
    );
}

#[test]
fn check_warns_on_a_first_probe_not_done_and_drains_one_that_stays_past_the_wait() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let gpus = eight(|i| {
        if i == 3 {
            format!(
                "fabric = {}",
                FABRIC.replace("\"completed\"", "\"in_progress\"")
            )
        } else {
            String::new()
        }
    });
    let node = Node::new(&gpus);
    let first = gate::check_now(&node.cfg).unwrap();
    let fabric: Vec<(Severity, &str)> = first
        .findings
        .iter()
        .filter(|f| f.check == "fabric")
        .map(|f| (f.severity, f.detail.as_str()))
        .collect();
    assert_eq!(fabric.len(), 1);
    assert_eq!(fabric[0].0, Severity::Warn, "a first look never drains");
    // The state says since when: make that 40 s ago, past the default 30 s.
    use slurm_imex_gpu::health::fabric_wait::FabricSeen;
    let state = slurm_imex_core::state::StateDir::of(&node.cfg);
    let mut seen = FabricSeen::load(&state);
    let uuid = "GPU-00000003-aaaa-bbbb-cccc-dddddddddddd";
    *seen.since.get_mut(uuid).unwrap() -= 40;
    seen.save(&state);
    let later = gate::check_now(&node.cfg).unwrap();
    let drain = later.findings.iter().find(|f| f.check == "fabric").unwrap();
    assert_eq!(drain.severity, Severity::Drain);
    assert!(
        drain.detail.contains("past [health] fabric_wait = 30s"),
        "{}",
        drain.detail
    );
    // Completed: forgotten, and no finding.
    node.set_gpus(&eight(|_| String::new()));
    let done = gate::check_now(&node.cfg).unwrap();
    assert!(done.findings.iter().all(|f| f.check != "fabric"));
    assert!(FabricSeen::load(&state).since.is_empty());
}

#[test]
fn recover_imex_domain_read_again_clears_once_the_imex_daemon_was_ready() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(&eight(|_| String::new()));
    let events = node.path("fake-events");
    let gpus = eight(|i| {
        if i == 1 {
            format!(
                "recovery_action = 5\nrecovery_clears_on_imex_ready = \"{}\"",
                events.display()
            )
        } else {
            String::new()
        }
    });
    node.set_gpus(&gpus);
    let job = node.job(93, None);
    let GpuOutcome::Done {
        verdict,
        restore_imex,
        ..
    } = gpu_job::prolog(&job, &node.cfg)
    else {
        panic!("skipped");
    };
    assert_eq!(verdict, Verdict::Warn);
    let names: Vec<u32> = restore_imex.iter().map(|g| g.index).collect();
    assert_eq!(names, [1]);
    // No daemon came up yet: still asking, the drain names it.
    let still = gpu_job::reread_recovery(&node.cfg, &restore_imex).unwrap_err();
    assert_eq!(
        still,
        "imex-health: recovery_action gpu1 1650924060001: driver still asks for recovery action \
         RECOVER_IMEX_DOMAIN (5) after the job's fresh IMEX domain came UP: reset the GPU or \
         reboot the node"
    );
    // The node's IMEX daemon came up READY (the fake daemon's event line).
    std::thread::sleep(Duration::from_millis(20));
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    std::fs::write(&events, format!("{now_ms} ready\n")).unwrap();
    assert_eq!(gpu_job::reread_recovery(&node.cfg, &restore_imex), Ok(()));
}

#[test]
fn the_epilog_records_the_recovery_action_each_gpu_ended_with() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let node = Node::new(&eight(|_| String::new()));
    let job = node.job(92, Some(vec![0, 1, 2]));
    assert!(matches!(
        gpu_job::prolog(&job, &node.cfg),
        GpuOutcome::Done {
            verdict: Verdict::Pass,
            ..
        }
    ));
    // While the job ran, GPU 1's driver came to ask for its IMEX domain to
    // be restored, and GPU 2's for a PCIe bus reset (R615).
    node.set_gpus(&eight(|i| match i {
        1 => "recovery_action = 5".into(),
        2 => "recovery_action = 6".into(),
        _ => String::new(),
    }));
    gpu_job::epilog(&job, &node.cfg, None);
    let db = JobDb::open(&node.cfg.database.path, Duration::from_secs(5)).unwrap();
    let shown = &db.show(92).unwrap()[0];
    let ends: Vec<Option<u64>> = shown
        .gpus
        .iter()
        .map(|g| g.stats.recovery_action_end)
        .collect();
    assert_eq!(ends, [Some(0), Some(5), Some(6)]);
    // 5 is said after the job, 6 drains; each named in the GPU's reasons.
    let verdicts: Vec<Verdict> = shown.gpus.iter().map(|g| g.verdict).collect();
    assert_eq!(verdicts, [Verdict::Pass, Verdict::Warn, Verdict::Drain]);
    assert!(
        shown.gpus[2].reasons[0].contains("BUS_RESET (6)"),
        "{:?}",
        shown.gpus[2].reasons
    );
    // The board's value after its last job, for the metrics.
    let actions: Vec<(String, i64)> = db
        .board_counters()
        .unwrap()
        .into_iter()
        .map(|b| (b.serial, b.recovery_action))
        .collect();
    assert_eq!(
        actions,
        [
            ("1650924060000".to_string(), 0),
            ("1650924060001".to_string(), 5),
            ("1650924060002".to_string(), 6),
        ]
    );
}
