//! Bad values in the environment Slurm gives the prolog and epilog: job
//! ids, node names, hostlists, uids, users and GPU lists, including
//! non-UTF-8 and huge ones. Bad job metadata is one line naming the
//! variable; a bad hostlist for an `--imex` job is the job's failure (the
//! prolog exits 0, the record says why, bounded), never a node drain. And
//! what a killed prolog or epilog leaves on the node for the next epilog.

mod common;
use common::*;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

struct Node {
    dir: tempfile::TempDir,
}

impl Node {
    fn new() -> Node {
        let dir = scratch();
        let p = |n: &str| dir.path().join(n);
        write_mode(
            &p("devices"),
            b"Character devices:\n234 nvidia-caps-imex-channels\n",
            0o644,
        );
        write_mode(
            &p("imex.toml"),
            format!(
                "[node]\nstate_dir = \"{}\"\n[imex]\nproc_devices = \"{}\"\n[imex.daemon]\nmanager = \"process\"\n\
                 base_config = \"{}\"\nnodes_config = \"{}\"\njob_config = \"{}\"\n\
                 [slurm]\nconfig = \"none\"\ntopology = \"none\"\n[health]\nenabled = false\n\
                 [metrics]\ntextfile_dir = \"{}\"\n",
                p("state").display(),
                p("devices").display(),
                p("config.cfg").display(),
                p("nodes_config.cfg").display(),
                p("state/job.cfg").display(),
                p("textfile").display()
            )
            .as_bytes(),
            0o644,
        );
        std::fs::create_dir(p("textfile")).unwrap();
        Node { dir }
    }

    fn env(&self, pairs: &[(&str, OsString)]) -> Vec<(&'static str, OsString)> {
        let mut env: Vec<(&'static str, OsString)> = vec![
            (
                "SLURM_IMEX_CONFIG",
                self.dir.path().join("imex.toml").into_os_string(),
            ),
            ("SLURM_JOB_ID", os("7")),
            ("SLURMD_NODENAME", os("n1")),
            ("SLURM_JOB_NODELIST", os("n1")),
        ];
        for (k, v) in pairs {
            let k: &'static str = Box::leak(k.to_string().into_boxed_str());
            env.retain(|(name, _)| *name != k);
            if !v.is_empty() || k == "SLURM_JOB_ID" || k == "SLURMD_NODENAME" {
                env.push((k, v.clone()));
            }
        }
        env
    }

    /// The prolog of an `--imex` job on `list`: its environment and run.
    fn imex_prolog(&self, job: u32, list: &str) -> (Vec<(&'static str, OsString)>, Ran) {
        let env = self.env(&[
            ("SLURM_JOB_ID", os(&job.to_string())),
            ("SLURM_JOB_NODELIST", os(list)),
            ("SPANK_IMEX", os("1")),
        ]);
        let r = run(&bin("slurm-imex-prolog"), &[], &env);
        (env, r)
    }

    fn record(&self, job: u32) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("state/jobs/{job}.json")))
            .unwrap_or_default()
    }
}

/// (variable, value, what the one line must say)
fn metadata_cases() -> Vec<(&'static str, OsString, Vec<&'static str>)> {
    vec![
        ("SLURM_JOB_ID", os(""), vec!["SLURM_JOB_ID is not set"]),
        (
            "SLURM_JOB_ID",
            os("abc"),
            vec!["SLURM_JOB_ID=\"abc\" is not a job id"],
        ),
        ("SLURM_JOB_ID", os("-1"), vec!["SLURM_JOB_ID=\"-1\""]),
        ("SLURM_JOB_ID", os("0"), vec!["SLURM_JOB_ID=\"0\""]),
        (
            "SLURM_JOB_ID",
            os("99999999999"),
            vec!["SLURM_JOB_ID=\"99999999999\""],
        ),
        (
            "SLURM_JOB_ID",
            os("12\n34"),
            vec!["SLURM_JOB_ID=\"12\\n34\""],
        ),
        (
            "SLURM_JOB_ID",
            OsString::from_vec(vec![b'1', 0xff, b'2']),
            vec!["SLURM_JOB_ID", "not valid UTF-8"],
        ),
        (
            "SLURM_JOB_ID",
            os(&"9".repeat(100_000)),
            vec!["SLURM_JOB_ID", "more bytes"],
        ),
        (
            "SLURMD_NODENAME",
            os(""),
            vec!["SLURMD_NODENAME is not set"],
        ),
        (
            "SLURMD_NODENAME",
            os("n 1"),
            vec!["SLURMD_NODENAME=\"n 1\" is not a host name"],
        ),
        (
            "SLURMD_NODENAME",
            os("n1\n"),
            vec!["SLURMD_NODENAME", "not a host name"],
        ),
        (
            "SLURMD_NODENAME",
            os("n[1-2]"),
            vec!["SLURMD_NODENAME", "not a host name"],
        ),
        (
            "SLURMD_NODENAME",
            os("../etc"),
            vec!["SLURMD_NODENAME", "not a host name"],
        ),
        (
            "SLURMD_NODENAME",
            OsString::from_vec(vec![b'n', 0xc3]),
            vec!["SLURMD_NODENAME", "not valid UTF-8"],
        ),
        (
            "SLURM_JOB_UID",
            os("root"),
            vec!["SLURM_JOB_UID=\"root\" is not a uid"],
        ),
        ("SLURM_JOB_UID", os("-5"), vec!["SLURM_JOB_UID"]),
        ("SLURM_JOB_UID", os("4294967296"), vec!["SLURM_JOB_UID"]),
        (
            "SLURM_JOB_USER",
            os("al\u{7}ice"),
            vec!["SLURM_JOB_USER", "not a user name"],
        ),
        (
            "SLURM_JOB_USER",
            os(&"u".repeat(5000)),
            vec!["SLURM_JOB_USER", "not a user name"],
        ),
        (
            "SLURM_JOB_GPUS",
            os("a"),
            vec!["SLURM_JOB_GPUS", "is not a GPU index"],
        ),
        (
            "SLURM_JOB_GPUS",
            os("0-99999"),
            vec!["SLURM_JOB_GPUS", "bad range"],
        ),
        (
            "SLURM_JOB_GPUS",
            os("5-1"),
            vec!["SLURM_JOB_GPUS", "bad range"],
        ),
        ("SLURM_JOB_GPUS", os("-1"), vec!["SLURM_JOB_GPUS"]),
        (
            "SLURM_JOB_GPUS",
            os(&"0,".repeat(2000)),
            vec!["SLURM_JOB_GPUS", "more than 1024 GPUs"],
        ),
        (
            "SLURM_JOB_GPUS",
            os("4294967296"),
            vec!["SLURM_JOB_GPUS", "not a GPU index"],
        ),
    ]
}

#[test]
fn bad_job_metadata_is_one_line_naming_the_variable() {
    let node = Node::new();
    let cases = metadata_cases();
    for (var, value, needles) in &cases {
        for program in ["slurm-imex-prolog", "slurm-imex-epilog"] {
            let r = run(&bin(program), &[], &node.env(&[(var, value.clone())]));
            r.one_line_error(1, needles, &format!("{program} {var}={value:?}"));
        }
    }
    eprintln!(
        "bad-input: {} environment cases (prolog and epilog each)",
        cases.len()
    );
}

/// (SLURM_JOB_NODELIST, what the job's failure must say)
const HOSTLIST_CASES: &[(&str, &[&str])] = &[
    (
        "n[1-2] x",
        &["SLURM_JOB_NODELIST", "character 7", "whitespace"],
    ),
    (
        "n1,\tn2",
        &["SLURM_JOB_NODELIST", "character 4", "whitespace"],
    ),
    (
        "n1,n\u{1b}[2J",
        &["SLURM_JOB_NODELIST", "character 5", "control character"],
    ),
    ("n1;rm -rf /", &["SLURM_JOB_NODELIST", "character 3", "';'"]),
    ("n1,$(id)", &["SLURM_JOB_NODELIST", "'$'"]),
    ("n[1-", &["SLURM_JOB_NODELIST", "never closed"]),
    ("n1]", &["SLURM_JOB_NODELIST", "']' without '['"]),
    ("n[[1]]", &["SLURM_JOB_NODELIST", "nested"]),
    ("n[2-1]", &["SLURM_JOB_NODELIST"]),
    ("n[a-b]", &["SLURM_JOB_NODELIST"]),
    ("n[]", &["SLURM_JOB_NODELIST"]),
    ("n1,,n2", &["SLURM_JOB_NODELIST", "empty host name"]),
    ("n[1-99999999999999999999]", &["SLURM_JOB_NODELIST"]),
    (
        "n[1-100000]",
        &["SLURM_JOB_NODELIST", "more than 4096 hosts"],
    ),
    (
        "n[1-100][1-100][1-100]",
        &["SLURM_JOB_NODELIST", "more than 4096 hosts"],
    ),
    ("x[1-2]", &["this node (n1) is not in the job's node list"]),
];

#[test]
fn bad_hostlists_fail_the_imex_job_not_the_node() {
    let node = Node::new();
    for (i, (list, needles)) in HOSTLIST_CASES.iter().enumerate() {
        let job = 100 + i as u32;
        let (env, r) = node.imex_prolog(job, list);
        assert_eq!(
            r.code,
            Some(0),
            "{list:?}: a bad hostlist drained the node: {}",
            r.stderr
        );
        let rec = node.record(job);
        assert!(rec.contains("\"node_fault\": false"), "{list:?}: {rec}");
        for n in needles.iter() {
            assert!(
                rec.contains(&n.replace('"', "\\\"")),
                "{list:?}: {n:?} not in {rec}"
            );
        }
        assert!(
            !std::fs::read_to_string(node.dir.path().join("state/domain.owner"))
                .is_ok_and(|o| o.trim() == job.to_string()),
            "{list:?}: the node was claimed"
        );
        let e = run(&bin("slurm-imex-epilog"), &[], &env);
        assert_eq!(e.code, Some(0), "{list:?}: epilog: {}", e.stderr);
    }
    // A 5000-node job whose list is far longer than any message may be.
    let huge: Vec<String> = (1..=5000)
        .map(|i| format!("gb-r{}-{:03}", i / 18, i % 18))
        .collect();
    let (_, r) = node.imex_prolog(900, &huge.join(","));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let rec = node.record(900);
    assert!(
        rec.len() < 4096,
        "record of {} bytes for a 5000-node list",
        rec.len()
    );
    assert!(rec.contains("more bytes") || rec.contains("more)"), "{rec}");
    eprintln!("bad-input: {} hostlist cases", HOSTLIST_CASES.len() + 1);
}

#[test]
fn a_job_without_imex_is_never_failed_by_a_bad_hostlist() {
    let node = Node::new();
    let env = node.env(&[("SLURM_JOB_NODELIST", os("n[1-2] x"))]);
    for program in ["slurm-imex-prolog", "slurm-imex-epilog"] {
        let r = run(&bin(program), &[], &env);
        assert_eq!(r.code, Some(0), "{program}: {}", r.stderr);
    }
}

/// A prolog or epilog killed mid-write (Slurm's timeout, kill -9) leaves
/// `.<name>.tmp.<pid>.<hex>` behind. The next epilog, of any job, removes
/// those whose writer is gone from every directory it writes in, and
/// nothing else.
#[test]
fn the_next_epilog_removes_what_killed_writers_left_everywhere() {
    use std::os::unix::fs::PermissionsExt;
    let node = Node::new();
    let p = |n: &str| node.dir.path().join(n);
    // pid 999999999 is above any pid_max: that writer is gone.
    let dead = ".x.json.tmp.999999999.0123456789abcdef";
    let live = format!(".y.json.tmp.{}.0123456789abcdef", std::process::id());
    let dirs = [
        p("state"),
        p("state/jobs"),
        p("state/gpu-jobs"),
        p("textfile"),
        node.dir.path().to_path_buf(),
    ];
    for dir in &dirs {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        for name in [dead, live.as_str(), "keep.json"] {
            write_mode(&dir.join(name), b"{", 0o600);
        }
    }
    let r = run(&bin("slurm-imex-epilog"), &[], &node.env(&[]));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    for dir in &dirs {
        assert!(!dir.join(dead).exists(), "{}: orphan left", dir.display());
        assert!(
            dir.join(&live).exists(),
            "{}: a live writer's file went",
            dir.display()
        );
        assert!(
            dir.join("keep.json").exists(),
            "{}: not ours, yet gone",
            dir.display()
        );
    }
}
