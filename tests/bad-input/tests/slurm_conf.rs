//! slurm.conf as the prolog and `doctor` read it, on the files slurmctld
//! reads differently from a naive parser (octal and hex numbers, quotes,
//! `Include` after a tab) and the ranges it refuses: the prolog of a
//! rack-wide `--imex` job and `doctor` give slurmctld's answer, or one line
//! naming what slurmctld refuses. The same files went through Debian's
//! slurmctld 22.05 (the table in this report).

mod common;
use common::*;
use std::path::PathBuf;

const A: &str = "dc6e40c4-d722-4357-9ba6-5291dd461278.1";

struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    /// A rack-wide node (`[imex] domain = "rack"`, slurm-imex's channels)
    /// whose slurm.conf is `slurm_conf`, plus `include` beside it.
    fn new(slurm_conf: &str, include: Option<(&str, &str)>) -> Site {
        let site = Site { dir: scratch() };
        write_mode(&site.path("slurm.conf"), slurm_conf.as_bytes(), 0o644);
        if let Some((name, text)) = include {
            write_mode(&site.path(name), text.as_bytes(), 0o644);
        }
        write_mode(
            &site.path("proc-devices"),
            b"Character devices:\n507 nvidia-caps-imex-channels\n",
            0o644,
        );
        let map = format!("[[rack]]\nname = \"r1\"\nclique = \"{A}\"\nnodes = \"n[1-2]\"\n");
        write_mode(&site.path("imex-racks.toml"), map.as_bytes(), 0o644);
        let cfg = format!(
            "[node]\nstate_dir = \"{0}/state\"\n[imex]\ndomain = \"rack\"\nchannels = \"plugin\"\n\
             proc_devices = \"{0}/proc-devices\"\nrack_map = \"{0}/imex-racks.toml\"\n\
             [slurm]\nconfig = \"{0}/slurm.conf\"\ntopology = \"none\"\nscontrol = \"/bin/false\"\n\
             [health]\nenabled = false\n",
            site.dir.path().display()
        );
        write_mode(&site.path("imex.toml"), cfg.as_bytes(), 0o644);
        site
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn env(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        vec![(
            "SLURM_IMEX_CONFIG",
            os(self.path("imex.toml").to_str().unwrap()),
        )]
    }

    fn prolog(&self) -> Ran {
        let mut env = self.env();
        env.extend([
            ("SLURM_JOB_ID", os("100")),
            ("SLURMD_NODENAME", os("n1")),
            ("SLURM_JOB_NODELIST", os("n[1-2]")),
            ("SPANK_IMEX", os("1")),
        ]);
        run(&bin("slurm-imex-prolog"), &[], &env)
    }

    /// doctor's `rack-channels` line; when the file cannot be read at all
    /// (and, here, no controller answers), its `slurm` line says why.
    fn doctor_line(&self) -> String {
        let ran = run(&bin("slurm-imex"), &["doctor", "--cluster"], &self.env());
        ran.ended_without_panic("doctor");
        let check = |name: &str| {
            ran.stdout
                .lines()
                .find(|l| l.split_whitespace().nth(1) == Some(name))
                .map(str::to_string)
        };
        check("rack-channels")
            .or_else(|| check("slurm").filter(|l| l.starts_with("FAIL")))
            .unwrap_or_else(|| panic!("no rack-channels line: {}", ran.stdout))
    }
}

/// slurm.conf's text, a file it includes (name, text), what doctor says.
type Case = (
    &'static str,
    Option<(&'static str, &'static str)>,
    &'static str,
);

/// Ranges slurmctld runs with (each checked against `scontrol show config`
/// of Debian's slurmctld 22.05 on the same text): doctor PASSes with them,
/// the prolog goes past the range check.
#[test]
fn numbers_quotes_and_includes_read_as_slurmctld_reads_them() {
    let cases: [Case; 5] = [
        ("FirstJobId=010\nMaxJobId=0x7ff\n", None, "job ids 8..2047"),
        ("MaxJobId=03777\n", None, "job ids 1..2047"),
        ("MaxJobId=\"2047\"\n", None, "job ids 1..2047"),
        (
            "Include\tids.conf\n",
            Some(("ids.conf", "maxjobid = 2047\n")),
            "job ids 1..2047",
        ),
        ("MaxJobId=20\\\n47 # 2047\n", None, "job ids 1..2047"),
    ];
    for (text, include, want) in cases {
        let site = Site::new(text, include);
        let line = site.doctor_line();
        assert!(line.starts_with("PASS"), "{text:?}: {line}");
        assert!(line.contains(want), "{text:?}: {want:?} not in {line}");
        let ran = site.prolog();
        ran.ended_without_panic(text);
        assert!(
            !ran.stderr.contains("FirstJobId"),
            "{text:?}: {}",
            ran.stderr
        );
    }
}

/// Ranges slurmctld refuses to start with: doctor FAILs naming the refusal
/// (it used to PASS an inverted range), and a rack-wide job fails with the
/// same one line (not advice to set a MaxJobId that cannot work).
#[test]
fn ranges_slurmctld_refuses_are_named_as_such() {
    let cases = [
        (
            "FirstJobId=5000\nMaxJobId=2047\n",
            "FirstJobId 5000 is above MaxJobId 2047",
        ),
        ("FirstJobId=0\nMaxJobId=2047\n", "FirstJobId is 0"),
        ("MaxJobId=08\n", "MaxJobId value (08) is not a valid number"),
        (
            "MaxJobId=2047 FirstJobId=1\n",
            "\"FirstJobId=1\" follows MaxJobId=2047",
        ),
    ];
    for (text, want) in cases {
        let site = Site::new(text, None);
        let line = site.doctor_line();
        assert!(line.starts_with("FAIL"), "{text:?}: {line}");
        assert!(line.contains(want), "{text:?}: {want:?} not in {line}");
        assert!(line.contains("slurmctld refuses"), "{line}");
        let ran = site.prolog();
        ran.ended_without_panic(text);
        let lines: Vec<&str> = ran
            .stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect();
        assert_eq!(lines.len(), 1, "{text:?}: {}", ran.stderr);
        assert!(
            lines[0].contains(want),
            "{text:?}: {want:?} not in {}",
            lines[0]
        );
        assert!(!lines[0].contains("set MaxJobId="), "{}", lines[0]);
    }
}

#[test]
fn an_include_fan_out_is_bounded_in_files_read_and_time() {
    // Each of 5 levels includes the next 4 times: 1,365 reads unbounded.
    let site = Site::new("Include l1.conf\n", None);
    for level in 1..5 {
        let text = format!("Include l{}.conf\n", level + 1).repeat(4);
        write_mode(
            &site.path(&format!("l{level}.conf")),
            text.as_bytes(),
            0o644,
        );
    }
    write_mode(&site.path("l5.conf"), b"MaxJobId=2047\n", 0o644);
    let started = std::time::Instant::now();
    let line = site.doctor_line();
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let ran = site.prolog();
    ran.ended_without_panic("fan-out");
    assert!(
        ran.stderr
            .contains("more than 64 files read through Include"),
        "{}",
        ran.stderr
    );
    assert!(line.starts_with("FAIL"), "{line}");
    assert!(
        line.contains("more than 64 files read through Include"),
        "{line}"
    );
}

/// "The last one wins" at any count: a key given more often than any bound
/// slurm-imex keeps still gives its last value (a MaxJobId past the 64th
/// was dropped, and another job id range read than slurmctld's).
#[test]
fn the_last_value_wins_however_often_a_key_is_given() {
    let mut text = String::new();
    for i in 0..200 {
        text.push_str(&format!("MaxJobId={}\n", 100_000 + i));
    }
    text.push_str("MaxJobId=2047\n");
    let site = Site::new(&text, None);
    let line = site.doctor_line();
    assert!(line.starts_with("PASS"), "{line}");
    assert!(line.contains("job ids 1..2047"), "{line}");
    let ran = site.prolog();
    ran.ended_without_panic("200 MaxJobId lines");
    assert!(!ran.stderr.contains("MaxJobId"), "{}", ran.stderr);
}

/// Prolog= and Epilog= are lists in Slurm (every value runs): past the
/// bound on values kept, the file is refused in one line naming the key,
/// never read with some of its programs missing.
#[test]
fn a_list_longer_than_the_bound_is_refused_in_one_line() {
    let text = "Prolog=/usr/sbin/x\n".repeat(5000);
    let site = Site::new(&text, None);
    let line = site.doctor_line();
    assert!(line.starts_with("FAIL"), "{line}");
    assert!(
        line.contains("Prolog") && line.contains("slurm.conf:"),
        "{line}"
    );
    let ran = site.prolog();
    ran.one_line_error(0, &["Prolog", "slurm.conf:"], "5000 Prolog lines");
}
