use super::*;
use crate::imex::ctl::NodeStatus;

fn watch(max_restarts: u32) -> DomainWatch {
    let members = vec!["n1".into(), "n2".into(), "n3".into()];
    let state = WatchState {
        job_id: 42,
        ..WatchState::default()
    };
    DomainWatch::new("n1", members, max_restarts, state).unwrap()
}

/// A domain of three as n1 reports it: `ready[i]` each node's status,
/// `connected[i]` n1's connection to it.
fn status(domain: &str, ready: [bool; 3], connected: [bool; 3]) -> DomainStatus {
    let mut nodes = BTreeMap::new();
    for (i, is_ready) in ready.into_iter().enumerate() {
        let connections = if i == 0 {
            connected
                .iter()
                .enumerate()
                .map(|(p, up)| {
                    let word = if *up { "CONNECTED" } else { "NEVER_CONNECTED" };
                    (p, word.to_string())
                })
                .collect()
        } else {
            BTreeMap::new()
        };
        let word = if is_ready { "READY" } else { "UNAVAILABLE" };
        nodes.insert(
            i,
            NodeStatus {
                status: Some(word.into()),
                connections,
                ..NodeStatus::default()
            },
        );
    }
    DomainStatus {
        domain: domain.into(),
        nodes,
    }
}

fn running(s: DomainStatus, now_ms: i64) -> Look {
    Look {
        daemon: Liveness::Running,
        domain: Some(Ok(s)),
        now_ms,
    }
}

fn dead(now_ms: i64) -> Look {
    Look {
        daemon: Liveness::Exited("was killed by signal 9".into()),
        domain: None,
        now_ms,
    }
}

fn kinds(events: &[ImexEvent]) -> Vec<&'static str> {
    events.iter().map(|e| e.kind.as_str()).collect()
}

const ALL: [bool; 3] = [true, true, true];

#[test]
fn a_healthy_domain_says_nothing() {
    let mut w = watch(3);
    for t in 0..5 {
        let (events, act) = w.look(&running(status("UP", ALL, ALL), t));
        assert!(events.is_empty(), "{events:?}");
        assert_eq!(act, Act::Nothing);
    }
}

#[test]
fn a_dead_daemon_is_restarted_and_the_domain_up_again_is_recorded() {
    let mut w = watch(3);
    let (events, act) = w.look(&dead(1000));
    assert_eq!(kinds(&events), ["daemon-died"]);
    assert_eq!(events[0].detail, "was killed by signal 9");
    assert_eq!(act, Act::Restart);
    assert_eq!(w.state.restarting_since_ms, Some(1000));
    assert_eq!(w.restarted(1100).kind, ImexEventKind::DaemonRestarted);
    // The new instance has yet to reconnect: its peers are not called lost.
    for t in [2000, 4000, 6000] {
        let (events, _) = w.look(&running(status("DEGRADED", ALL, [true, false, false]), t));
        assert!(events.is_empty(), "{events:?}");
    }
    let (events, _) = w.look(&running(status("UP", ALL, ALL), 17000));
    assert_eq!(kinds(&events), ["domain-up"]);
    assert_eq!(w.state.restarting_since_ms, None);
    assert_eq!((w.state.deaths, w.state.restarts), (1, 1));
}

#[test]
fn deaths_past_the_bound_leave_the_daemon_down_with_a_drain_line() {
    let mut w = watch(2);
    for t in 0..2 {
        let (_, act) = w.look(&dead(t));
        assert_eq!(act, Act::Restart);
        w.restarted(t);
    }
    let (events, act) = w.look(&dead(9));
    assert_eq!(kinds(&events), ["daemon-died", "daemon-left-down"]);
    let Act::LeaveDown(line) = act else {
        panic!("{act:?}")
    };
    assert!(
        line.starts_with("nvidia-imex died 3 times while the job ran"),
        "{line}"
    );
    assert!(line.contains("restart bound 2"), "{line}");
    // Left down: later looks neither restart it nor say more.
    assert_eq!(w.look(&dead(10)), (vec![], Act::Nothing));
    assert!(!w.state.restarting(42));
}

#[test]
fn a_bound_of_zero_never_restarts() {
    let mut w = watch(0);
    let (_, act) = w.look(&dead(1));
    assert!(matches!(act, Act::LeaveDown(_)), "{act:?}");
}

#[test]
fn one_death_is_counted_once_until_a_restart_is_tried() {
    let mut w = watch(3);
    assert_eq!(w.look(&dead(1)).1, Act::Restart);
    assert_eq!(w.look(&dead(2)), (vec![], Act::Nothing));
    w.restart_failed();
    let (events, act) = w.look(&dead(3));
    assert_eq!((kinds(&events), act), (vec!["daemon-died"], Act::Restart));
    assert_eq!(w.state.deaths, 2);
}

#[test]
fn a_peer_that_leaves_is_named_once_two_looks_agree_and_never_acted_on() {
    let mut w = watch(3);
    let gone = || status("DEGRADED", [true, true, false], [true, true, false]);
    let (events, act) = w.look(&running(gone(), 5));
    assert_eq!(
        (events, act),
        (vec![], Act::Nothing),
        "one look is not a loss"
    );
    let (events, _) = w.look(&running(gone(), 6));
    assert_eq!(kinds(&events), ["member-lost", "domain-degraded"]);
    assert_eq!(events[0].detail, "n3 UNAVAILABLE");
    assert!(
        events[1].detail.starts_with("DEGRADED: n3 UNAVAILABLE"),
        "{}",
        events[1].detail
    );
    // Still gone: nothing new.
    assert!(w.look(&running(gone(), 7)).0.is_empty());
    let (events, _) = w.look(&running(status("UP", ALL, ALL), 8));
    assert_eq!(kinds(&events), ["member-back", "domain-up"]);
    assert_eq!(events[0].detail, "n3");
}

#[test]
fn a_peer_gone_for_one_look_is_no_event() {
    let mut w = watch(3);
    let gone = status("DEGRADED", [true, true, false], [true, true, false]);
    assert!(w.look(&running(gone, 1)).0.is_empty());
    assert!(w.look(&running(status("UP", ALL, ALL), 2)).0.is_empty());
}

#[test]
fn the_last_look_records_recoveries_only() {
    let mut w = watch(3);
    let gone = || status("DEGRADED", [true, true, false], [true, true, false]);
    w.look(&running(gone(), 1));
    // The job ended: a peer whose epilog stopped its daemon is no loss.
    assert!(w.last_look(&running(gone(), 2)).is_empty());
    let mut back = watch(3);
    back.look(&running(gone(), 1));
    back.look(&running(gone(), 2));
    let events = back.last_look(&running(status("UP", ALL, ALL), 3));
    assert_eq!(kinds(&events), ["member-back", "domain-up"]);
    // A dead daemon at the end is not restarted, nor recorded.
    assert!(back.last_look(&dead(4)).is_empty());
}

#[test]
fn a_node_outside_the_record_is_refused() {
    let state = WatchState {
        job_id: 42,
        ..WatchState::default()
    };
    let e = DomainWatch::new("n9", vec!["n1".into()], 3, state)
        .err()
        .unwrap();
    assert!(
        e.contains("n9 is not among the domain's nodes in job 42's record"),
        "{e}"
    );
}

#[test]
fn one_unanswered_ask_is_not_an_interruption_two_are() {
    let mut w = watch(3);
    let unanswered = |t| Look {
        daemon: Liveness::Running,
        domain: Some(Err("nvidia-imex-ctl timed out".into())),
        now_ms: t,
    };
    assert!(w.look(&unanswered(1)).0.is_empty());
    assert!(w.look(&running(status("UP", ALL, ALL), 2)).0.is_empty());
    assert!(w.look(&unanswered(3)).0.is_empty());
    let (events, _) = w.look(&unanswered(4));
    assert_eq!(kinds(&events), ["domain-degraded"]);
    assert_eq!(events[0].detail, "nvidia-imex-ctl timed out");
}

#[test]
fn a_watch_resumed_after_the_bound_stays_quiet() {
    let state = WatchState {
        job_id: 42,
        deaths: 4,
        left_down: Some("nvidia-imex died 4 times".into()),
        ..WatchState::default()
    };
    let mut w = DomainWatch::new("n1", vec!["n1".into()], 3, state).unwrap();
    assert_eq!(w.look(&dead(1)), (vec![], Act::Nothing));
}
