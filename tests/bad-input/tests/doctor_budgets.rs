//! `slurm-imex doctor` on a node whose NVML hangs: each check has its own
//! budget. The real doctor runs on a node of two GPUs played by the fake
//! NVML (tests/fake-nvml) whose accounting calls hang far longer than the
//! gate's timeout; it answers within `[health] gate_timeout` plus a few
//! seconds, the checks that read NVML say FAIL naming the call that hung,
//! and every other check is reported as usual.

mod common;
use common::*;
use std::time::{Duration, Instant};

/// `[health] gate_timeout` of the node below.
const GATE_TIMEOUT: Duration = Duration::from_secs(3);

/// How long past the gate's timeout the whole run may take.
const GRACE: Duration = Duration::from_secs(4);

/// One GPU of the scenario, in clique 7 of the rack map's cluster, whose
/// accounting calls each sleep `hang_ms`.
fn gpu(i: u32, hang_ms: u64) -> String {
    format!(
        "[[gpu]]\nuuid = \"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd\"\nserial = \"165092406000{i}\"\n\
         pci_bus_id = \"00000000:{:02X}:00.0\"\naccounting = true\n\
         fabric = {{ state = \"completed\", clique_id = 7, cluster_uuid = \"dc6e40c4-d722-4357-9ba6-5291dd461278\" }}\n\
         hang_in = \"accounting\"\nhang_ms = {hang_ms}\n",
        0x1a + i
    )
}

/// Node n1 with two GPUs, a rack map naming its clique (so the topology
/// check compares it with the GPUs'), and no controller (Slurm's side is
/// read from a slurm.conf beside it). nvmlInit takes `init_delay_ms`.
fn node(hang_ms: u64, init_delay_ms: u64) -> tempfile::TempDir {
    let dir = scratch();
    let p = |n: &str| dir.path().join(n).display().to_string();
    let scenario = format!(
        "driver_version = \"580.95.05\"\ninit_delay_ms = {init_delay_ms}\n{}{}",
        gpu(0, hang_ms),
        gpu(1, hang_ms)
    );
    write_mode(&dir.path().join("nvml.toml"), scenario.as_bytes(), 0o644);
    let map = "[[rack]]\nname = \"r1\"\nclique = \"dc6e40c4-d722-4357-9ba6-5291dd461278.7\"\nnodes = \"n[1-2]\"\n";
    write_mode(&dir.path().join("imex-racks.toml"), map.as_bytes(), 0o644);
    write_mode(
        &dir.path().join("slurm.conf"),
        b"ClusterName=c\nPrologFlags=Alloc\n",
        0o644,
    );
    let config = format!(
        "[node]\nstate_dir = \"{}\"\n[imex]\nrack_map = \"{}\"\n[gpu]\nnvml_library = \"{}\"\n\
         [health]\nexpected_gpus = 2\ngate_timeout = \"{}s\"\n[database]\npath = \"{}\"\n\
         [slurm]\nconfig = \"{}\"\ntopology = \"none\"\nscontrol = \"/bin/false\"\n",
        p("state"),
        p("imex-racks.toml"),
        fake_nvml().display(),
        GATE_TIMEOUT.as_secs(),
        p("db/jobs.db"),
        p("slurm.conf"),
    );
    write_mode(&dir.path().join("imex.toml"), config.as_bytes(), 0o644);
    dir
}

/// `slurm-imex doctor` on `node` as n1, which must answer within the
/// gate's timeout plus a few seconds (killed after 20 s).
fn doctor(node: &tempfile::TempDir) -> Ran {
    let env = [
        (
            "SLURM_IMEX_CONFIG",
            node.path().join("imex.toml").into_os_string(),
        ),
        (
            "FAKE_NVML_SCENARIO",
            node.path().join("nvml.toml").into_os_string(),
        ),
        ("SLURMD_NODENAME", os("n1")),
    ];
    let started = Instant::now();
    let ran = run(&bin("slurm-imex"), &["doctor"], &env);
    let took = started.elapsed();
    ran.ended_without_panic("doctor");
    assert!(
        took < GATE_TIMEOUT + GRACE,
        "doctor took {took:?}, over gate_timeout {GATE_TIMEOUT:?} + {GRACE:?}:\n{}",
        ran.stdout
    );
    ran
}

/// The doctor's line for `check`.
fn line<'a>(stdout: &'a str, check: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(check))
        .unwrap_or_else(|| panic!("no {check} line in:\n{stdout}"))
}

/// Accounting calls that hang 30 s (the run is killed after 20 s): doctor
/// answers within the gate's timeout plus a few seconds; `nvml`,
/// `accounting` and `topology` FAIL naming the call that hung; the checks
/// that do not read NVML are reported as usual.
#[test]
fn hung_accounting_calls_fail_their_checks_and_the_rest_are_reported() {
    let dir = node(30_000, 0);
    let ran = doctor(&dir);
    for l in nvml_checks_fail_naming(&ran, "nvmlDeviceGetAccountingMode") {
        assert!(l.contains("gpu0"), "no GPU named: {l}");
    }
    assert_the_others_are_reported(&ran);
    assert!(
        !ran.stdout.contains("did not finish within"),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout.contains("doctor: "),
        "no summary line:\n{}",
        ran.stdout
    );
    assert_eq!(ran.code, Some(1), "a FAIL is exit 1:\n{}", ran.stdout);
}

/// nvmlInit itself hangs (a wedged driver): doctor answers within the
/// gate's timeout plus a few seconds, `nvml` and `accounting` FAIL naming
/// it, and the rest are reported.
#[test]
fn a_hung_nvml_init_is_named_and_the_rest_are_reported() {
    let dir = node(0, 30_000);
    let ran = doctor(&dir);
    nvml_checks_fail_naming(&ran, "nvmlInit_v2");
    assert_the_others_are_reported(&ran);
}

/// The lines of the checks that read NVML, each a FAIL naming `call`.
fn nvml_checks_fail_naming(ran: &Ran, call: &str) -> Vec<String> {
    ["nvml", "accounting", "topology"]
        .into_iter()
        .map(|check| {
            let l = line(&ran.stdout, check);
            assert!(l.starts_with("FAIL"), "{check}: {l}");
            assert!(l.contains(call), "{check}: {call} not named: {l}");
            l.to_string()
        })
        .collect()
}

/// The checks that do not read NVML are reported all the same.
fn assert_the_others_are_reported(ran: &Ran) {
    for check in [
        "slurm",
        "config",
        "channel-device",
        "database",
        "textfile-dir",
    ] {
        line(&ran.stdout, check);
    }
}

/// The same node with NVML answering: nothing about a hung call, and the
/// NVML checks PASS (the budgets cut off only what hangs).
#[test]
fn answering_nvml_passes_its_checks_within_the_budgets() {
    let dir = node(0, 0);
    let ran = doctor(&dir);
    for check in ["nvml", "accounting", "topology"] {
        let l = line(&ran.stdout, check);
        assert!(l.starts_with("PASS"), "{check}: {l}");
    }
    assert!(!ran.stdout.contains("hung"), "{}", ran.stdout);
}
