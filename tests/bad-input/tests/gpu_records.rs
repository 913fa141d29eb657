//! Bad GPU records: hostile or broken text in the kernel log, NVML values
//! outside their physical range, a reused pid, and state files (the XID
//! checkpoint) that root did not write or that belong to another boot. The
//! real prolog, epilog and `slurm-imex` run on a node of one GPU played by
//! the fake NVML (tests/fake-nvml), with the kernel log a plain file
//! (`[gpu] kmsg`) and an `scontrol` that only writes down what it is asked.

mod common;
use common::*;
use std::path::{Path, PathBuf};

/// The boot id the fake node reports unless a test changes it.
const BOOT_A: &str = "0b2f6c1e-1d7e-4c41-9d3a-6f0c2a9b7a11\n";

/// One node with one GPU (PCI 0000:1a:00) and everything a hook reads.
struct GpuNode {
    dir: tempfile::TempDir,
}

impl GpuNode {
    /// `gpu` lines are added to the GPU's scenario table (after its
    /// identity), e.g. `[[gpu.process]]` tables.
    fn new(gpu: &str) -> GpuNode {
        let node = GpuNode { dir: scratch() };
        node.set_gpu(gpu);
        write_mode(&node.path("kmsg"), b"[    1.0] Linux version 6.1\n", 0o644);
        write_mode(&node.path("boot_id"), BOOT_A.as_bytes(), 0o644);
        let dev = node.path("pci/0000:1a:00.0");
        std::fs::create_dir_all(&dev).unwrap();
        write_mode(&dev.join("vendor"), b"0x10de\n", 0o644);
        write_mode(&dev.join("class"), b"0x030200\n", 0o644);
        let scontrol = format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\n",
            node.path("scontrol.log").display()
        );
        write_mode(&node.path("scontrol"), scontrol.as_bytes(), 0o755);
        node.write_config();
        node
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn set_gpu(&self, extra: &str) {
        let scenario = format!(
            "[[gpu]]\nuuid = \"GPU-00000001-aaaa-bbbb-cccc-dddddddddddd\"\nserial = \"1650924060001\"\n\
             pci_bus_id = \"00000000:1A:00.0\"\naccounting = true\n\
             fabric = {{ state = \"completed\", clique_id = 7, cluster_uuid = \"dc6e40c4-d722-4357-9ba6-5291dd461278\" }}\n\
             {extra}\n"
        );
        write_mode(&self.path("nvml.toml"), scenario.as_bytes(), 0o644);
    }

    fn write_config(&self) {
        let p = |n: &str| self.path(n).display().to_string();
        let text = format!(
            "[node]\nstate_dir = \"{}\"\n[gpu]\nnvml_library = \"{}\"\nkmsg = \"{}\"\nboot_id = \"{}\"\n\
             [health]\npci_devices = \"{}\"\nexpected_gpus = 1\nset_drain_reason = true\n[database]\npath = \"{}\"\n\
             [slurm]\nconfig = \"none\"\ntopology = \"none\"\nscontrol = \"{}\"\n",
            p("state"),
            fake_nvml().display(),
            p("kmsg"),
            p("boot_id"),
            p("pci"),
            p("db/jobs.db"),
            p("scontrol"),
        );
        write_mode(&self.path("imex.toml"), text.as_bytes(), 0o644);
    }

    fn env(&self, job: u32) -> Vec<(&'static str, std::ffi::OsString)> {
        vec![
            ("SLURM_IMEX_CONFIG", self.path("imex.toml").into_os_string()),
            (
                "FAKE_NVML_SCENARIO",
                self.path("nvml.toml").into_os_string(),
            ),
            ("SLURM_JOB_ID", os(&job.to_string())),
            ("SLURMD_NODENAME", os("n1")),
            ("SLURM_JOB_NODELIST", os("n1")),
            ("SLURM_JOB_USER", os("alice")),
            ("SLURM_JOB_UID", os("1000")),
        ]
    }

    /// `slurm-imex-prolog` or `slurm-imex-epilog` of job `job`.
    fn hook(&self, which: &str, job: u32) -> Ran {
        let ran = run(&bin(&format!("slurm-imex-{which}")), &[], &self.env(job));
        ran.ended_without_panic(which);
        ran
    }

    fn cli(&self, args: &[&str]) -> Ran {
        let ran = run(&bin("slurm-imex"), args, &self.env(1));
        ran.ended_without_panic(&format!("slurm-imex {args:?}"));
        ran
    }

    fn set_kmsg(&self, bytes: &[u8]) {
        write_mode(&self.path("kmsg"), bytes, 0o644);
    }

    fn append_kmsg(&self, bytes: &[u8]) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(self.path("kmsg"))
            .unwrap();
        f.write_all(bytes).unwrap();
    }

    /// What the hooks asked of `scontrol`, one call a line.
    fn scontrol_calls(&self) -> String {
        std::fs::read_to_string(self.path("scontrol.log")).unwrap_or_default()
    }
}

/// No character a terminal, a log line or an argument cannot carry.
fn assert_printable(text: &str, case: &str) {
    let bad: Vec<char> = text
        .chars()
        .filter(|c| c.is_control() && *c != '\n')
        .collect();
    assert!(
        bad.is_empty(),
        "{case}: control characters {bad:?} in: {text:?}"
    );
}

const XID79: &str =
    "NVRM: Xid (PCI:0000:1a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen";

#[test]
fn control_bytes_in_a_plain_file_kernel_log_never_reach_a_line_a_reason_or_a_record() {
    let node = GpuNode::new("");
    // A NUL in the message: the prolog's line shows it escaped, as
    // /dev/kmsg itself would, and the node is drained with that reason.
    node.set_kmsg(format!("[   2.0] {XID79}\0 off the bus.\n").as_bytes());
    let prolog = node.hook("prolog", 7);
    assert_ne!(prolog.code, Some(0), "an XID 79 must fail the prolog");
    assert_printable(&prolog.stderr, "prolog line");
    assert!(
        prolog.stderr.contains("GPU has fallen\\x00 off the bus."),
        "{}",
        prolog.stderr
    );
    let calls = node.scontrol_calls();
    assert!(
        calls.contains("update NodeName=n1 State=DRAIN Reason=imex-health: xid gpu0")
            && calls.contains("GPU has fallen\\x00 off the bus."),
        "the node must be drained, with the reason made printable; scontrol was asked: {calls:?}"
    );
    // During a job: an escape sequence in a warning XID's process name, a
    // carriage return and a C1 control in its message; the job's record and
    // `show` hold them escaped (or, being whitespace, as a space).
    let node = GpuNode::new("");
    assert_eq!(node.hook("prolog", 8).code, Some(0));
    node.append_kmsg(
        "[   3.0] NVRM: Xid (PCI:0000:1a:00): 13, pid=42, name=a\u{1b}[2Jout, Graphics\rException\u{85}\n"
            .as_bytes(),
    );
    let epilog = node.hook("epilog", 8);
    assert_printable(&epilog.stderr, "epilog line");
    let show = node.cli(&["show", "8"]);
    assert_eq!(show.code, Some(0), "{}", show.stderr);
    assert_printable(&show.stdout, "slurm-imex show");
    assert!(
        show.stdout
            .contains("pid 42 a\\x1b[2Jout: Graphics Exception"),
        "{}",
        show.stdout
    );
}

fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// One ended process of the job in the accounting buffer.
fn process(pid: u32, gpu_util: u64, mem_util: u64, start_us: u64, time_ms: u64) -> String {
    format!(
        "[[gpu.process]]\npid = {pid}\ngpu_util = {gpu_util}\nmem_util = {mem_util}\n\
         max_memory = 1073741824\ntime_ms = {time_ms}\nstart_us = {start_us}\n"
    )
}

#[test]
fn nvml_values_outside_their_physical_range_are_unknown_never_numbers() {
    let node = GpuNode::new("");
    assert_eq!(node.hook("prolog", 9).code, Some(0));
    let started = now_us();
    node.set_gpu(&format!(
        "temperature = 4294967294\n{}",
        process(4242, 250, 4_294_967_294, started, 2000)
    ));
    let epilog = node.hook("epilog", 9);
    assert_eq!(epilog.code, Some(0), "{}", epilog.stderr);
    let show = node.cli(&["show", "9"]);
    assert_eq!(show.code, Some(0), "{}", show.stderr);
    for impossible in ["250", "4294967294"] {
        assert!(
            !show.stdout.contains(impossible),
            "{impossible} shown as a number: {}",
            show.stdout
        );
    }
    assert!(
        show.stdout
            .contains("process gpu0 pid 4242: util -% mem util -%"),
        "{}",
        show.stdout
    );
    let json = node.cli(&["--json", "show", "9"]);
    for impossible in ["250", "4294967294"] {
        assert!(!json.stdout.contains(impossible), "{}", json.stdout);
    }
    let db = rusqlite::Connection::open(node.path("db/jobs.db")).unwrap();
    let stored: (Option<i64>, Option<i64>) = db
        .query_row(
            "SELECT gpu_util, mem_util FROM processes WHERE pid = 4242",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(stored, (None, None), "stored as numbers");
}

/// A kernel log of plain lines with an XID 79 on line 3 of 6.
fn log_with_xid79_on_line_3() -> String {
    let mut log = String::from("[   1.0] Linux version 6.1\n[   1.1] pci 0000:1a:00.0: BAR 0\n");
    log.push_str(&format!("[   2.0] {XID79} off the bus.\n"));
    for t in 3..6 {
        log.push_str(&format!("[   {t}.0] eth0: link up\n"));
    }
    log
}

/// Makes a state file (the path) another user's, somehow.
type MakeForeign = fn(&GpuNode, &Path);

#[test]
fn a_checkpoint_root_did_not_write_is_set_aside_and_the_log_judged_from_its_start() {
    if !is_root() {
        eprintln!("skipped: needs root to give a file to another user");
        return;
    }
    // (case, how the checkpoint comes to be another user's)
    let cases: [(&str, MakeForeign); 3] = [
        ("owned by another user", |_, cp| {
            nix::unistd::chown(cp, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
        }),
        ("writable by others", |_, cp| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(cp, std::fs::Permissions::from_mode(0o666)).unwrap();
        }),
        ("a symlink to another user's file", |node, cp| {
            let foreign = node.path("foreign.json");
            std::fs::rename(cp, &foreign).unwrap();
            nix::unistd::chown(&foreign, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
            std::os::unix::fs::symlink(&foreign, cp).unwrap();
        }),
    ];
    for (case, make_foreign) in cases {
        let node = GpuNode::new("");
        assert_eq!(node.hook("prolog", 10).code, Some(0), "{case}");
        // Someone else's checkpoint says the log is judged up to line 6.
        let cp = node.path("state/xid-checkpoint.json");
        write_mode(
            &cp,
            br#"{"numbering":"lines","judged":{"0000:1a:00":6}}"#,
            0o644,
        );
        make_foreign(&node, &cp);
        node.set_kmsg(log_with_xid79_on_line_3().as_bytes());
        let prolog = node.hook("prolog", 11);
        assert_ne!(
            prolog.code,
            Some(0),
            "{case}: the XID 79 was hidden by the checkpoint: {}",
            prolog.stderr
        );
        assert!(
            prolog.stderr.contains("XID 79 (REBOOT)")
                && prolog.stderr.contains("xid-checkpoint.json")
                && prolog.stderr.contains("set aside"),
            "{case}: {}",
            prolog.stderr
        );
        assert!(
            node.path("state/xid-checkpoint.json.untrusted").exists(),
            "{case}"
        );
    }
}

/// A kernel log of `n` records numbered by the kernel, with an XID 79 as
/// record `xid_at` when given.
fn kernel_log(n: u64, xid_at: Option<u64>) -> String {
    (1..=n)
        .map(|seq| match xid_at {
            Some(at) if at == seq => format!("3,{seq},{seq}000,-;{XID79} off the bus.\n"),
            _ => format!("6,{seq},{seq}000,-;eth0: link up\n SUBSYSTEM=net\n"),
        })
        .collect()
}

#[test]
fn a_new_boot_is_judged_from_its_start_whatever_the_old_checkpoint_says() {
    let node = GpuNode::new("");
    node.set_kmsg(kernel_log(50, None).as_bytes());
    assert_eq!(node.hook("prolog", 12).code, Some(0));
    // The state directory is persistent and the node reboots: the new boot's
    // log has already passed record 50 at the first read, with an XID 79 as
    // record 30.
    write_mode(
        &node.path("boot_id"),
        b"5d4c3b2a-0000-4000-8000-0123456789ab\n",
        0o644,
    );
    node.set_kmsg(kernel_log(60, Some(30)).as_bytes());
    let prolog = node.hook("prolog", 13);
    assert_ne!(
        prolog.code,
        Some(0),
        "the new boot's XID 79 was taken as judged: {}",
        prolog.stderr
    );
    assert!(
        prolog.stderr.contains("XID 79 (REBOOT)"),
        "{}",
        prolog.stderr
    );
    // In the same boot the checkpoint holds: the XID is reported once.
    let again = node.hook("prolog", 14);
    assert_eq!(again.code, Some(0), "{}", again.stderr);
}

#[test]
fn a_reused_pid_is_counted_once_as_the_jobs_own_process() {
    let node = GpuNode::new("");
    assert_eq!(node.hook("prolog", 15).code, Some(0));
    let now = now_us();
    // pid 77 ran (and ended) before the prolog; the kernel gave pid 77 to
    // the job's own process, which ended last.
    node.set_gpu(&format!(
        "{}{}",
        process(77, 90, 10, now - 60_000_000, 1000),
        process(77, 40, 20, now, 3000)
    ));
    let epilog = node.hook("epilog", 15);
    assert_eq!(epilog.code, Some(0), "{}", epilog.stderr);
    let show = node.cli(&["show", "15"]);
    assert_eq!(show.code, Some(0), "{}", show.stderr);
    let lines: Vec<&str> = show
        .stdout
        .lines()
        .filter(|l| l.contains("process gpu0 pid 77"))
        .collect();
    assert_eq!(
        lines,
        ["  process gpu0 pid 77: util 40% mem util 20% max memory 1024 MiB, 3000 ms"],
        "{}",
        show.stdout
    );
    let row = show
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("0 "))
        .unwrap_or_default();
    let cols: Vec<&str> = row.split_whitespace().collect();
    // GPU SERIAL PCI ENERGY_KJ PROCS GPU_UTIL% MEM_UTIL% PEAK_MEM_GIB BUSY_S
    assert_eq!(
        cols.get(4..9),
        Some(&["1", "40", "20", "1.0", "1.2"][..]),
        "{row}"
    );
}

#[test]
fn the_newest_records_of_a_kernel_log_past_the_read_cap_are_judged() {
    let node = GpuNode::new("");
    // More than 16 MiB of records with continuation lines, the XID 79 last.
    let mut log = String::with_capacity(18 << 20);
    let mut seq = 0u64;
    while log.len() < 17 << 20 {
        seq += 1;
        log.push_str(&format!(
            "6,{seq},{seq}000,-;pci 0000:1a:00.0: BAR {seq}\n SUBSYSTEM=pci\n DEVICE=+pci:0000:1a:00.0\n"
        ));
    }
    log.push_str(&format!("3,{},1,-;{XID79} off the bus.\n", seq + 1));
    node.set_kmsg(log.as_bytes());
    let prolog = node.hook("prolog", 16);
    assert_ne!(
        prolog.code,
        Some(0),
        "the XID 79 past the read cap was never judged: {}",
        prolog.stderr
    );
    assert!(
        prolog.stderr.contains("XID 79 (REBOOT)"),
        "{}",
        prolog.stderr
    );
    // Judged once: the next read starts after it.
    node.append_kmsg(format!("6,{},2,-;eth0: link up\n", seq + 2).as_bytes());
    let next = node.hook("prolog", 17);
    assert_eq!(next.code, Some(0), "{}", next.stderr);
}
