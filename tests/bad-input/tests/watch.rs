//! The domain watcher's own inputs: its arguments (the prolog passes them,
//! but the binary is on every node's disk), a job with no record, and what
//! the epilog reads of it from the state directory (`watch.pid`,
//! `watch.json`): a pid file naming another process is never signalled, a
//! huge or corrupt file is one line or nothing, never a hang or a panic.

mod common;
use common::*;

fn watch(args: &[&str], config: Option<&std::path::Path>) -> Ran {
    let env: Vec<(&str, std::ffi::OsString)> = config
        .map(|c| vec![("SLURM_IMEX_CONFIG", os(c.to_str().unwrap()))])
        .unwrap_or_default();
    run(&bin("slurm-imex-watch"), args, &env)
}

#[test]
fn bad_arguments_are_one_line_and_status_2() {
    let huge = "9".repeat(100_000);
    for args in [
        vec![],
        vec!["--job"],
        vec!["--job", "seven", "--node", "n1"],
        vec!["--job", "4294967296", "--node", "n1"],
        vec!["--job", "-1", "--node", "n1"],
        vec!["--job", &huge, "--node", "n1"],
        vec!["--job", "7"],
        vec!["--job", "7", "--node", "n1", "--extra"],
    ] {
        let ran = watch(&args, None);
        let case: Vec<String> = args.iter().map(|a| a.chars().take(20).collect()).collect();
        ran.one_line_error(2, &["slurm-imex-watch: "], &format!("{case:?}"));
    }
}

#[test]
fn a_job_without_a_record_is_one_line_and_status_1() {
    let node = ImexNode::new();
    let config = node.config("", "");
    let ran = watch(&["--job", "7", "--node", "n1"], Some(&config));
    ran.one_line_error(
        1,
        &["slurm-imex-watch on n1", "job 7 has no IMEX record on n1"],
        "no record",
    );
}

#[test]
fn the_epilog_never_signals_a_process_the_watch_pid_file_does_not_own() {
    let node = ImexNode::new();
    let config = node.config("", "[imex.daemon]\nmanager = \"process\"\n");
    std::fs::create_dir_all(node.path("state")).unwrap();
    let mut bystander = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = bystander.id();
    for text in [
        format!("{pid} 0\n"),           // the right pid, another start time
        format!("{pid}\n"),             // no start time
        "1 1\n".to_string(),            // init
        format!("{pid} 1 2 3\n"),       // trailing fields
        "x".repeat(100_000),            // huge
        "\u{0}\u{1b}[2J\n".to_string(), // control characters
    ] {
        write_mode(&node.path("state/watch.pid"), text.as_bytes(), 0o644);
        let ran = node.epilog(&config);
        ran.ended_without_panic("watch.pid");
        assert!(
            bystander.try_wait().unwrap().is_none(),
            "the epilog signalled pid {pid} for watch.pid {:?}",
            &text[..text.len().min(40)]
        );
    }
    let _ = bystander.kill();
    let _ = bystander.wait();
}

#[test]
fn a_corrupt_or_hostile_watch_state_drains_nothing_and_never_panics() {
    let node = ImexNode::new();
    let config = node.config("", "[imex.daemon]\nmanager = \"process\"\n");
    std::fs::create_dir_all(node.path("state")).unwrap();
    for text in [
        "{".to_string(),
        "{\"job_id\": 7, \"deaths\": 18446744073709551616}".to_string(),
        format!("{{\"job_id\": 8, \"left_down\": \"{}\"}}", "x".repeat(10)),
        "[]".to_string(),
        "\u{0}".repeat(1000),
    ] {
        write_mode(&node.path("state/watch.json"), text.as_bytes(), 0o644);
        let ran = node.epilog(&config);
        ran.ended_without_panic("watch.json");
        assert!(
            !ran.stderr.contains("left down"),
            "a watch state that is not job 7's, or not valid, drains nothing: {}",
            ran.stderr
        );
    }
}

/// What the watcher wrote as `left_down` is outside text to the epilog (a
/// state file on the node's disk): three lines, a NUL, escapes and a
/// megabyte there still make one printable, bounded line on the epilog's
/// stderr (slurmd's log, an admin's terminal), which drains the node.
#[test]
fn a_hostile_left_down_line_is_one_printable_bounded_line_on_the_epilogs_stderr() {
    let node = ImexNode::new();
    let config = node.config("", "[imex.daemon]\nmanager = \"process\"\n");
    std::fs::create_dir_all(node.path("state")).unwrap();
    let hostile = format!(
        "IMEX daemon died 4 times\nslurm-imex-epilog on n2: FORGED second line\r\
         \u{0}third\u{1b}[2J\u{1b}]0;title\u{7} {}",
        "x".repeat(1 << 20)
    );
    let state = serde_json::json!({"job_id": 7, "deaths": 4, "left_down": hostile});
    write_mode(
        &node.path("state/watch.json"),
        state.to_string().as_bytes(),
        0o644,
    );
    let ran = node.epilog(&config);
    ran.ended_without_panic("hostile left_down");
    assert_eq!(ran.code, Some(1), "the node is drained: {}", ran.stderr);
    let lines: Vec<&str> = ran.stderr.lines().collect();
    let left_down: Vec<&&str> = lines
        .iter()
        .filter(|l| l.contains("IMEX daemon died 4 times"))
        .collect();
    assert_eq!(left_down.len(), 1, "one line says it: {lines:?}");
    assert!(
        left_down[0].starts_with("slurm-imex-epilog on n1: ")
            && left_down[0].contains(
                "4 times\\x0aslurm-imex-epilog on n2: FORGED second line\\x0d\\x00third\\x1b[2J\\x1b]0;title\\x07 xxx"
            )
            && left_down[0].ends_with(" more bytes)"),
        "{}",
        left_down[0]
    );
    for l in &lines {
        assert!(!l.chars().any(char::is_control), "a control byte: {l:?}");
        assert!(l.len() <= 4096, "a line of {} bytes", l.len());
        assert!(
            !l.contains("FORGED") || l == left_down[0],
            "a forged line: {l}"
        );
    }
    assert!(ran.stderr.ends_with('\n') && !ran.stderr.contains('\r'));
}
