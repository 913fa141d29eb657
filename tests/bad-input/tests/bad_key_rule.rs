//! The rule for a bad key in imex.toml (docs/install.md, "A bad key in
//! imex.toml"), one test per section, each with an unknown name and a value
//! outside its type or range, through the real programs on a node of one
//! GPU played by the fake NVML, with an `scontrol` that keeps the node's
//! state as Slurm would:
//!
//! - `slurm-imex doctor` FAILs `config` naming `file:line: [section] key`,
//!   and `slurm-imex config` (what installing runs) exits 2 with that line;
//! - the plugin's read (core's `Config::load`, which spank_imex.so calls at
//!   `sbatch --imex` and in every step) refuses it exactly when the key is
//!   the plugin's: `[node]`, `[imex]`'s channel keys, `[slurm]` (a name
//!   unknown to `[imex]` is not: the plugin reads only its own keys);
//! - the prolog fails with that line and the node's standing keeps
//!   `imex-health: config: <the line>`;
//! - Slurm having drained the node ("Prolog error"), `check --drain` shows
//!   our reason (one read, one update), and a second run asks nothing more;
//! - once the file is fixed, `check --drain --undrain` resumes the node.
//!
//! A bad `[node]` leaves the standing in the default state directory
//! (`/run/slurm-imex`): as root those runs are in a private mount namespace
//! whose `/run/slurm-imex` is the site's own directory; without root that
//! case checks the lines only.

mod common;
use common::*;
use std::path::{Path, PathBuf};

/// One bad line in a section: the key written, its value, and whether the
/// plugin reads (and so refuses) it.
struct Bad {
    section: &'static str,
    key: &'static str,
    value: &'static str,
    plugins: bool,
}

/// A node's whole config, good, by section: where every program keeps
/// its files in the site, and a healthy GPU.
fn good_config(site: &Site) -> Vec<(&'static str, Vec<(&'static str, String)>)> {
    let q = |name: &str| format!("\"{}\"", site.path(name).display());
    vec![
        ("node", vec![("state_dir", q("state"))]),
        (
            "slurm",
            vec![
                ("config", "\"none\"".into()),
                ("topology", "\"none\"".into()),
                ("scontrol", q("bin/scontrol")),
            ],
        ),
        (
            "gpu",
            vec![
                ("nvml_library", format!("\"{}\"", fake_nvml().display())),
                ("kmsg", q("kmsg")),
                ("boot_id", q("boot_id")),
            ],
        ),
        (
            "health",
            vec![("pci_devices", q("pci")), ("expected_gpus", "1".into())],
        ),
        ("database", vec![("path", q("db/jobs.db"))]),
        ("metrics", vec![("textfile_dir", "\"none\"".into())]),
    ]
}

/// `config` as TOML with `bad` in its section (in place of the key's good
/// value where the good file writes one), and the line `bad` is on.
fn render(
    mut config: Vec<(&'static str, Vec<(&'static str, String)>)>,
    bad: Option<&Bad>,
) -> (String, usize) {
    if let Some(b) = bad {
        if !config.iter().any(|(s, _)| *s == b.section) {
            config.push((b.section, Vec::new()));
        }
        let (_, keys) = config.iter_mut().find(|(s, _)| *s == b.section).unwrap();
        keys.retain(|(k, _)| *k != b.key);
        keys.push((b.key, b.value.to_string()));
    }
    let mut text = String::new();
    let mut line = 0;
    for (section, keys) in &config {
        text.push_str(&format!("[{section}]\n"));
        for (key, value) in keys {
            text.push_str(&format!("{key} = {value}\n"));
            if bad.is_some_and(|b| b.section == *section && b.key == *key) {
                line = text.lines().count();
            }
        }
    }
    (text, line)
}

/// A scratch node: its scontrol first in PATH, the fake NVML's GPU on the
/// PCI bus, the kernel log and boot id as files.
struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new() -> Site {
        let site = Site { dir: scratch() };
        std::fs::create_dir_all(site.path("bin")).unwrap();
        // Slurm as this node sees it: drained (with its reason) or idle.
        let scontrol = format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{calls}'\n\
             case \"$1 $3\" in\n\
               'show n1') if [ -f '{drained}' ]; then echo \"NodeName=n1 State=IDLE+DRAIN Reason=$(cat '{drained}') [root@now]\"; \
                          else echo 'NodeName=n1 State=IDLE'; fi;;\n\
               'update State=DRAIN') printf '%s\\n' \"${{4#Reason=}}\" > '{drained}';;\n\
               'update State=RESUME') rm -f '{drained}';;\n\
             esac\nexit 0\n",
            calls = site.path("calls").display(),
            drained = site.path("drained").display(),
        );
        write_mode(&site.path("bin/scontrol"), scontrol.as_bytes(), 0o755);
        let scenario = "[[gpu]]\nuuid = \"GPU-00000001-aaaa-bbbb-cccc-dddddddddddd\"\n\
                        serial = \"1650924060001\"\npci_bus_id = \"00000000:1A:00.0\"\naccounting = true\n\
                        fabric = { state = \"completed\", clique_id = 7, cluster_uuid = \"dc6e40c4-d722-4357-9ba6-5291dd461278\" }\n";
        write_mode(&site.path("nvml.toml"), scenario.as_bytes(), 0o644);
        write_mode(&site.path("kmsg"), b"[    1.0] Linux version 6.1\n", 0o644);
        write_mode(
            &site.path("boot_id"),
            b"0b2f6c1e-1d7e-4c41-9d3a-6f0c2a9b7a11\n",
            0o644,
        );
        let dev = site.path("pci/0000:1a:00.0");
        std::fs::create_dir_all(&dev).unwrap();
        write_mode(&dev.join("vendor"), b"0x10de\n", 0o644);
        write_mode(&dev.join("class"), b"0x030200\n", 0o644);
        std::fs::create_dir_all(site.path("default-state")).unwrap();
        site
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn config(&self) -> PathBuf {
        self.path("imex.toml")
    }

    /// Write the config with `bad` in it; the line it is on.
    fn write(&self, bad: Option<&Bad>) -> usize {
        let (text, line) = render(good_config(self), bad);
        write_mode(&self.config(), text.as_bytes(), 0o644);
        line
    }

    fn env(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        let path = format!(
            "{}:/usr/sbin:/usr/bin:/sbin:/bin",
            self.path("bin").display()
        );
        vec![
            ("PATH", os(&path)),
            ("SLURM_IMEX_CONFIG", self.config().into_os_string()),
            (
                "FAKE_NVML_SCENARIO",
                self.path("nvml.toml").into_os_string(),
            ),
            ("SLURM_JOB_ID", os("7")),
            ("SLURMD_NODENAME", os("n1")),
            ("SLURM_JOB_NODELIST", os("n1")),
        ]
    }

    /// `program args`, in a private mount namespace whose
    /// `/run/slurm-imex` (the default state directory) is the site's
    /// `default-state` when `private_run` (root only).
    fn run(&self, program: &Path, args: &[&str], private_run: bool) -> Ran {
        if !private_run {
            return run(program, args, &self.env());
        }
        let script = format!(
            "mount -t tmpfs tmpfs /run && mkdir /run/slurm-imex && \
             mount --bind '{}' /run/slurm-imex && exec \"$0\" \"$@\"",
            self.path("default-state").display()
        );
        let mut all = vec!["-m", "--propagation", "private", "sh", "-c", &script];
        let program = program.to_str().unwrap();
        all.push(program);
        all.extend_from_slice(args);
        run(Path::new("/usr/bin/unshare"), &all, &self.env())
    }

    /// The node's standing as the hooks kept it, in `dir` of the site.
    fn standing(&self, dir: &str) -> serde_json::Value {
        let text = std::fs::read_to_string(self.path(dir).join("node-metrics.json"))
            .unwrap_or_else(|e| panic!("no standing in {dir}: {e}"));
        serde_json::from_str(&text).unwrap()
    }

    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.path("calls"))
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }
}

/// One bad line's run: the site, the case's name, and `file:line: [section]
/// key`, which every line about it names.
struct Run {
    site: Site,
    case: String,
    at: String,
    /// A bad `[node]` leaves the standing in the default state directory.
    default_dir: bool,
}

/// The rule, for one bad line.
fn rule_holds(bad: Bad) {
    let site = Site::new();
    let line = site.write(Some(&bad));
    let at = format!(
        "{}:{line}: [{}] {}",
        site.config().display(),
        bad.section,
        bad.key
    );
    let r = Run {
        case: format!("[{}] {} = {}", bad.section, bad.key, bad.value),
        at,
        default_dir: bad.section == "node",
        site,
    };
    r.found_before_a_job_meets_it();
    r.the_plugin_refuses_exactly_its_own(bad.plugins);
    if r.default_dir && !is_root() {
        eprintln!(
            "{}: the standing in /run/slurm-imex is checked as root only",
            r.case
        );
        return;
    }
    let reason = r.the_prolog_fails_and_the_standing_keeps_our_reason();
    r.check_drains_once_with_it(&reason);
    r.the_fixed_file_lifts_it();
}

impl Run {
    /// doctor FAILs config naming file:line: key, and `slurm-imex config`
    /// (what installing runs) exits 2 with the line.
    fn found_before_a_job_meets_it(&self) {
        let (site, case) = (&self.site, &self.case);
        let doctor = run(&bin("slurm-imex"), &["doctor"], &site.env());
        doctor.ended_without_panic(&format!("doctor: {case}"));
        let config_line = doctor
            .stdout
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some("config"))
            .unwrap_or_else(|| panic!("{case}: no config line in:\n{}", doctor.stdout));
        assert!(
            config_line.starts_with("FAIL") && config_line.contains(&self.at),
            "{case}: doctor: {config_line}"
        );
        let loaded = run(&bin("slurm-imex"), &["config"], &site.env());
        loaded.one_line_error(2, &[&self.at], &format!("config: {case}"));
    }

    /// The plugin's read (core's `Config::load`, as spank_imex.so calls it)
    /// refuses the line exactly when it is one of the plugin's keys.
    fn the_plugin_refuses_exactly_its_own(&self, plugins: bool) {
        let case = &self.case;
        match (
            slurm_imex_core::config::Config::load(Some(&self.site.config())),
            plugins,
        ) {
            (Err(e), true) => assert!(e.to_string().contains(&self.at), "{case}: plugin: {e}"),
            (Ok(_), false) => {}
            (Err(e), false) => panic!("{case}: the plugin refused a key it does not read: {e}"),
            (Ok(_), true) => panic!("{case}: the plugin read its own bad key"),
        }
    }

    /// The prolog fails with the line; the standing keeps our reason,
    /// which is returned.
    fn the_prolog_fails_and_the_standing_keeps_our_reason(&self) -> String {
        let (site, case) = (&self.site, &self.case);
        let prolog = site.run(&bin("slurm-imex-prolog"), &[], self.default_dir);
        prolog.one_line_error(1, &["slurm-imex-prolog on n1: bad config", &self.at], case);
        let state = if self.default_dir {
            "default-state"
        } else {
            "state"
        };
        let reason = site.standing(state)["drained_for"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let ours = format!("imex-health: config: bad config {}", self.at);
        assert!(
            reason.starts_with(&ours),
            "{case}: standing's reason: {reason}"
        );
        reason
    }

    /// Slurm drained the node for the failed prolog: `check --drain` shows
    /// our reason (one update), and the next run asks for no other.
    fn check_drains_once_with_it(&self, reason: &str) {
        let (site, case) = (&self.site, &self.case);
        write_mode(&site.path("drained"), b"Prolog error\n", 0o644);
        let config = site.config();
        let check = [
            "--config",
            config.to_str().unwrap(),
            "check",
            "--drain",
            "--node",
            "n1",
        ];
        let first = site.run(&bin("slurm-imex"), &check, self.default_dir);
        first.one_line_error(2, &[&self.at], &format!("check: {case}"));
        let shown = format!("Slurm's reason is now: {reason}");
        assert!(
            first.stdout.contains(&shown),
            "{case}: check: {}",
            first.stdout
        );
        let drained = std::fs::read_to_string(site.path("drained")).unwrap();
        assert_eq!(drained.trim_end(), reason, "{case}: Slurm's reason");
        let updates = |calls: &[String]| calls.iter().filter(|c| c.starts_with("update")).count();
        assert_eq!(updates(&site.calls()), 1, "{case}: {:?}", site.calls());
        let again = site.run(&bin("slurm-imex"), &check, self.default_dir);
        again.one_line_error(2, &[&self.at], &format!("check again: {case}"));
        assert_eq!(
            updates(&site.calls()),
            1,
            "{case}: drained once: {:?}",
            site.calls()
        );
    }

    /// The fixed file deployed: the health check resumes the node.
    fn the_fixed_file_lifts_it(&self) {
        let (site, case) = (&self.site, &self.case);
        site.write(None);
        let config = site.config();
        let lift = [
            "--config",
            config.to_str().unwrap(),
            "check",
            "--drain",
            "--undrain",
            "--node",
            "n1",
        ];
        let lifted = site.run(&bin("slurm-imex"), &lift, self.default_dir);
        assert_eq!(
            lifted.code,
            Some(0),
            "{case}: lift: {}{}",
            lifted.stdout,
            lifted.stderr
        );
        assert!(
            site.calls()
                .iter()
                .any(|c| c == "update NodeName=n1 State=RESUME"),
            "{case}: not resumed: {:?}",
            site.calls()
        );
        assert!(!site.path("drained").exists(), "{case}: still drained");
    }
}

/// A bad line: its key, its value, and whether the plugin reads it.
type Line = (&'static str, &'static str, bool);

/// Each section's two bad lines: an unknown name, and a value outside its
/// type or range, with whether the plugin reads (so refuses) each. Two
/// rows for `[imex]`: a plugin key, an engine key. A name unknown to
/// `[imex]` may be an engine key's or a typo: the plugin, which reads its
/// own keys only, passes it; the programs refuse it.
const CASES: &[(&str, Line, Line)] = &[
    (
        "node",
        ("stat_dir", "\"/x\"", true),
        ("state_dir", "\"run/imex\"", true),
    ),
    (
        "imex",
        ("chanel_count", "8", false),
        ("channel_count", "1", true),
    ),
    (
        "imex",
        ("spna", "\"split\"", false),
        ("ready_timeout", "\"0s\"", false),
    ),
    (
        "imex.daemon",
        ("manger", "\"process\"", false),
        ("stop_timeout", "\"0s\"", false),
    ),
    (
        "imex.watch",
        ("intervall", "\"2s\"", false),
        ("interval", "\"0s\"", false),
    ),
    (
        "imex.addresses",
        ("sourse", "\"dns\"", false),
        ("source", "\"ldap\"", false),
    ),
    (
        "slurm",
        ("scontol", "\"scontrol\"", true),
        ("scontrol_timeout", "\"0s\"", true),
    ),
    (
        "gpu",
        ("nvml_libary", "\"x\"", false),
        ("accounting", "\"maybe\"", false),
    ),
    (
        "health",
        ("gate_timout", "\"10s\"", false),
        ("gate_timeout", "\"0s\"", false),
    ),
    (
        "database",
        ("pth", "\"/x\"", false),
        ("retention", "\"1s\"", false),
    ),
    (
        "metrics",
        ("job_seris", "1", false),
        ("job_series", "1000", false),
    ),
    (
        "job",
        ("prometheus_ur", "\"\"", false),
        ("query_timeout", "\"0s\"", false),
    ),
];

/// The rule for the `n`th row of [`CASES`] (its section named, for the
/// failure's sake).
fn row(n: usize, section: &str) {
    let (table, unknown, value) = CASES[n];
    assert_eq!(table, section, "CASES[{n}]");
    for (key, value, plugins) in [unknown, value] {
        rule_holds(Bad {
            section: table,
            key,
            value,
            plugins,
        });
    }
}

#[test]
fn a_bad_key_in_node() {
    row(0, "node");
}

#[test]
fn a_bad_key_in_imex_a_plugin_key() {
    row(1, "imex");
}

#[test]
fn a_bad_key_in_imex_an_engine_key() {
    row(2, "imex");
}

#[test]
fn a_bad_key_in_imex_daemon() {
    row(3, "imex.daemon");
}

#[test]
fn a_bad_key_in_imex_watch() {
    row(4, "imex.watch");
}

#[test]
fn a_bad_key_in_imex_addresses() {
    row(5, "imex.addresses");
}

#[test]
fn a_bad_key_in_slurm() {
    row(6, "slurm");
}

#[test]
fn a_bad_key_in_gpu() {
    row(7, "gpu");
}

#[test]
fn a_bad_key_in_health() {
    row(8, "health");
}

#[test]
fn a_bad_key_in_database() {
    row(9, "database");
}

#[test]
fn a_bad_key_in_metrics() {
    row(10, "metrics");
}

#[test]
fn a_bad_key_in_job() {
    row(11, "job");
}

/// [`CASES`] has a row for every section of the reference (the file's
/// tables; `[imex]` twice, its plugin keys and the engine's), each a key
/// that section reads for its bad value, and a test runs each row.
#[test]
fn every_section_has_its_case_and_its_test() {
    let sections = slurm_imex_settings::reference::sections();
    let cases: Vec<&str> = CASES.iter().map(|c| c.0).collect();
    let tables: Vec<&str> = sections.iter().map(|s| s.table).collect();
    assert_eq!(
        cases, tables,
        "CASES against settings::reference::sections()"
    );
    for (s, (_, _, (key, _, plugins))) in sections.iter().zip(CASES) {
        assert!(s.keys.iter().any(|k| k.name == *key), "[{}] {key}", s.table);
        let plugin_table = matches!(s.table, "node" | "slurm") || s.part == "the channel keys";
        assert_eq!(*plugins, plugin_table, "[{}] {key}: the plugin's?", s.table);
    }
    let this = include_str!("bad_key_rule.rs");
    for n in 0..CASES.len() {
        assert!(
            this.contains(&format!("    row({n}, ")),
            "no test runs CASES[{n}]"
        );
    }
}

/// The good file the cases start from loads, and the node passes: what
/// each case's last step (the lift) relies on.
#[test]
fn the_good_file_loads_and_the_node_passes() {
    let site = Site::new();
    site.write(None);
    let config = site.config();
    let ran = run(
        &bin("slurm-imex"),
        &[
            "--config",
            config.to_str().unwrap(),
            "check",
            "--node",
            "n1",
        ],
        &site.env(),
    );
    assert_eq!(ran.code, Some(0), "{}{}", ran.stdout, ran.stderr);
    let loaded = run(&bin("slurm-imex"), &["config"], &site.env());
    assert_eq!(loaded.code, Some(0), "{}", loaded.stderr);
    assert!(loaded.stdout.contains(": loads;"), "{}", loaded.stdout);
}
