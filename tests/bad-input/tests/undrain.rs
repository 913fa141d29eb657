//! `slurm-imex undrain` on what an admin may type: a hostlist whose nodes
//! are drained by different hands (each judged alone, by its own reason:
//! only ours are resumed), and node names that are no node at all (refused
//! in one line before Slurm is asked anything).

mod common;
use common::*;
use std::path::PathBuf;

/// A scratch site whose scontrol logs every call and answers `show node`
/// with one line per node it knows: n1 drained by us, n2 by an admin, n3
/// idle, printed in the order they are asked (as `scontrol show node
/// <hostlist> -o` does for a hostlist).
struct Site {
    dir: tempfile::TempDir,
}

const N1: &str = "NodeName=n1 Arch=x86_64 State=IDLE+DRAIN Partitions=imex \
                  Reason=imex-health: xid gpu0 1650924060001: XID 79 (job 7) [root@2026-11-22T02:10:00]";
const N2: &str = "NodeName=n2 Arch=x86_64 State=IDLE+DRAIN Partitions=imex \
                  Reason=admin: bad DIMM, do not resume [root@2026-11-22T02:11:00]";
const N3: &str = "NodeName=n3 Arch=x86_64 State=IDLE Partitions=imex";

impl Site {
    fn new() -> Site {
        let site = Site { dir: scratch() };
        let script = format!(
            "#!/bin/sh\necho \"$*\" >> {log}\n\
             [ \"$1\" = show ] || exit 0\n\
             case \"$3\" in\n\
               n1) echo '{N1}';;\n\
               n2) echo '{N2}';;\n\
               n3) echo '{N3}';;\n\
               'n[1-2]') echo '{N1}'; echo '{N2}';;\n\
               'n[1-3]') echo '{N1}'; echo '{N2}'; echo '{N3}';;\n\
               'n[1,4]') echo '{N1}'; echo 'Node n4 not found'; exit 1;;\n\
               'n[1,5]') echo '{N1}';;\n\
               'n[6-7]') echo 'slurm_load_node error: Unable to contact slurm controller' >&2; exit 1;;\n\
               *) echo \"Node $3 not found\"; exit 1;;\n\
             esac\n",
            log = site.path("calls").display()
        );
        write_mode(&site.path("scontrol"), script.as_bytes(), 0o755);
        let cfg = format!(
            "[node]\nstate_dir = \"{0}/state\"\n[slurm]\nscontrol = \"{0}/scontrol\"\n\
             config = \"none\"\ntopology = \"none\"\n[health]\nenabled = false\n",
            site.dir.path().display()
        );
        write_mode(&site.path("imex.toml"), cfg.as_bytes(), 0o644);
        site
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `slurm-imex undrain --node NODE` on another host (n9).
    fn undrain(&self, node: &str) -> Ran {
        let cfg = self.path("imex.toml");
        run(
            &bin("slurm-imex"),
            &[
                "--config",
                cfg.to_str().unwrap(),
                "undrain",
                &format!("--node={node}"),
            ],
            &[("SLURMD_NODENAME", os("n9"))],
        )
    }

    fn calls(&self) -> String {
        std::fs::read_to_string(self.path("calls")).unwrap_or_default()
    }
}

#[test]
fn a_hostlist_resumes_only_the_nodes_drained_by_us() {
    let site = Site::new();
    let r = site.undrain("n[1-2]");
    r.ended_without_panic("undrain n[1-2]");
    let calls = site.calls();
    assert!(
        !calls.contains("NodeName=n[1-2]") && !calls.contains("NodeName=n2 State=RESUME"),
        "the admin's drain of n2 was resumed: {calls}"
    );
    assert!(
        calls.contains("update NodeName=n1 State=RESUME"),
        "our drain of n1 was not resumed: {calls}"
    );
    assert!(r.stdout.contains("resumed n1"), "{}", r.stdout);
    assert!(
        r.stdout.contains("n2 left drained") && r.stdout.contains("bad DIMM"),
        "n2 must be named as left, with its reason: {}",
        r.stdout
    );
    // An admin's drain was left: exit 1, as for one node.
    assert_eq!(r.code, Some(1), "exit status; stdout: {}", r.stdout);
}

#[test]
fn one_node_keeps_its_one_line_and_exit_status() {
    let site = Site::new();
    let r = site.undrain("n1");
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.starts_with("resumed n1 (was: imex-health: xid"),
        "{}",
        r.stdout
    );
    let r = site.undrain("n2");
    assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("not ours"), "{}", r.stdout);
    assert!(!site.calls().contains("NodeName=n2 State=RESUME"));
    let r = site.undrain("n3");
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("n3 is not drained"), "{}", r.stdout);
}

#[test]
fn a_hostlist_judges_each_node_and_says_what_it_did_to_each() {
    let site = Site::new();
    let r = site.undrain("n[1-3]");
    r.ended_without_panic("undrain n[1-3]");
    assert_eq!(r.code, Some(1), "n2 was left: {}{}", r.stdout, r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "one line per node: {}", r.stdout);
    assert!(
        lines[0].starts_with("resumed n1 (was: imex-health:"),
        "{}",
        r.stdout
    );
    assert!(
        lines[1].starts_with("n2 left drained: its reason is not ours"),
        "{}",
        r.stdout
    );
    assert_eq!(lines[2], "n3 is not drained");
    let calls = site.calls();
    let resumed: Vec<&str> = calls.lines().filter(|l| l.contains("RESUME")).collect();
    assert_eq!(resumed, ["update NodeName=n1 State=RESUME"]);
}

#[test]
fn a_node_slurm_does_not_know_is_named_and_the_others_are_still_judged() {
    let site = Site::new();
    // Slurm prints "Node n4 not found" in n4's place and exits 1; n5 it
    // leaves out with exit 0: each is named in one line, n1 is resumed.
    for (hostlist, missing) in [("n[1,4]", "n4"), ("n[1,5]", "n5")] {
        let r = site.undrain(hostlist);
        r.ended_without_panic(hostlist);
        assert!(r.stdout.contains("resumed n1"), "{hostlist}: {}", r.stdout);
        let lines: Vec<&str> = r.stderr.lines().collect();
        assert!(
            lines.len() == 1 && lines[0].contains(&format!("{missing} left as it is")),
            "{hostlist}: {missing} must be named in one line: {}",
            r.stderr
        );
        assert_eq!(r.code, Some(2), "{hostlist}: {missing} could not be judged");
        assert!(
            !site.calls().contains(&format!("NodeName={missing}")),
            "{}",
            site.calls()
        );
    }
    // Slurm cannot be reached: one line, nothing changed.
    let r = site.undrain("n[6-7]");
    r.one_line_error(
        2,
        &["scontrol show node n[6-7] failed", "Unable to contact"],
        "n[6-7]",
    );
    let calls = site.calls();
    assert!(
        !calls
            .lines()
            .any(|c| c.contains("update") && c.contains("n6")),
        "{calls}"
    );
}

#[test]
fn a_name_that_is_no_node_is_refused_before_slurm_is_asked() {
    let site = Site::new();
    for (node, needle) in [
        ("", "empty"),
        ("   ", "whitespace"),
        ("\t", "whitespace"),
        ("n 1", "whitespace"),
        ("n[1-", "never closed"),
        ("n1;reboot", "';'"),
        ("n1,", "empty host name"),
        ("-n1", "-n1"),
    ] {
        let r = site.undrain(node);
        r.one_line_error(2, &["--node", needle], &format!("undrain --node {node:?}"));
        assert!(
            site.calls().is_empty(),
            "undrain --node {node:?} asked Slurm: {}",
            site.calls()
        );
        // The health check takes one node's name, checked the same way.
        let cfg = site.path("imex.toml");
        let r = run(
            &bin("slurm-imex"),
            &[
                "--config",
                cfg.to_str().unwrap(),
                "check",
                "--undrain",
                &format!("--node={node}"),
            ],
            &[],
        );
        r.one_line_error(
            2,
            &["--node", "node name"],
            &format!("check --node {node:?}"),
        );
        assert!(
            site.calls().is_empty(),
            "check asked Slurm: {}",
            site.calls()
        );
    }
}
