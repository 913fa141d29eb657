use super::*;
use crate::imex::ctl::NodeStatus;

fn watch(max_restarts: u32) -> DomainWatch {
    let members = vec!["n1".into(), "n2".into(), "n3".into()];
    let state = WatchState {
        job_id: 42,
        ..WatchState::default()
    };
    DomainWatch::new("n1", members, max_restarts, state)
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
    // Peers reconnect after their back-off: DEGRADED meanwhile, no new event.
    let (events, _) = w.look(&running(
        status("DEGRADED", ALL, [true, false, false]),
        2000,
    ));
    assert_eq!(kinds(&events), ["member-lost", "member-lost"]);
    let (events, _) = w.look(&running(status("UP", ALL, ALL), 17000));
    assert_eq!(kinds(&events), ["member-back", "member-back", "domain-up"]);
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
fn a_peer_that_leaves_is_named_and_never_acted_on() {
    let mut w = watch(3);
    let (events, act) = w.look(&running(
        status("DEGRADED", [true, true, false], [true, true, false]),
        5,
    ));
    assert_eq!(act, Act::Nothing);
    assert_eq!(kinds(&events), ["member-lost", "domain-degraded"]);
    assert_eq!(events[0].detail, "n3 UNAVAILABLE");
    assert!(
        events[1].detail.starts_with("DEGRADED: n3 UNAVAILABLE"),
        "{}",
        events[1].detail
    );
    // Still gone: nothing new.
    let again = w.look(&running(
        status("DEGRADED", [true, true, false], [true, true, false]),
        6,
    ));
    assert!(again.0.is_empty());
    let (events, _) = w.look(&running(status("UP", ALL, ALL), 7));
    assert_eq!(kinds(&events), ["member-back", "domain-up"]);
    assert_eq!(events[0].detail, "n3");
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
    let mut w = DomainWatch::new("n1", vec!["n1".into()], 3, state);
    assert_eq!(w.look(&dead(1)), (vec![], Act::Nothing));
}
