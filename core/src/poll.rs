//! Waiting for something that has no event to wait on (a child to exit, a
//! daemon to be READY or gone, a process to die): the one polling loop of
//! slurm-imex. A [`Wait`] says what is waited for (the timeout's words),
//! until when (a limit from a start, which may be earlier than now: a
//! prolog's whole ready timeout), and how often ([`Backoff`]: a first
//! pause, kept for a steady phase, then doubled up to a most). It asks its
//! check first and then after each pause, never sleeps past the deadline,
//! and asks once more at the deadline's edge before giving up.

use std::fmt;
use std::time::{Duration, Instant};

/// How often a [`Wait`] asks: every `first` during `steady_for` from the
/// start, then twice as long after each ask, up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
    pub steady_for: Duration,
}

impl Backoff {
    /// From `first`, doubling after each ask up to `max`.
    pub const fn doubling(first: Duration, max: Duration) -> Backoff {
        Backoff {
            first,
            max,
            steady_for: Duration::ZERO,
        }
    }

    /// Every `every`.
    pub const fn every(every: Duration) -> Backoff {
        Backoff::doubling(every, every)
    }

    /// Keep `first` for `steady_for` from the start before doubling.
    pub const fn steady_for(self, steady_for: Duration) -> Backoff {
        Backoff { steady_for, ..self }
    }

    /// The pause after `pause`, `elapsed` into the wait.
    fn next(&self, pause: Duration, elapsed: Duration) -> Duration {
        if elapsed < self.steady_for {
            return pause;
        }
        pause.saturating_mul(2).min(self.max)
    }
}

/// A wait for something, with a deadline.
#[derive(Debug, Clone)]
pub struct Wait {
    what: String,
    started: Instant,
    limit: Duration,
    backoff: Backoff,
}

/// A [`Wait`] whose deadline passed: what was waited for, and how long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedOut {
    pub what: String,
    pub limit: Duration,
}

impl fmt::Display for TimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "gave up waiting for {} after {:?}",
            self.what, self.limit
        )
    }
}

impl From<TimedOut> for crate::error::Error {
    fn from(t: TimedOut) -> Self {
        crate::error::Error::timeout(t.to_string())
    }
}

impl Wait {
    /// Wait up to `limit` from now for `what` (words for the timeout:
    /// "nvidia-imex to exit"), asking as `backoff` says.
    pub fn new(what: impl Into<String>, limit: Duration, backoff: Backoff) -> Wait {
        Wait {
            what: what.into(),
            started: Instant::now(),
            limit,
            backoff,
        }
    }

    /// Count the limit from `started` instead of now.
    pub fn since(self, started: Instant) -> Wait {
        Wait { started, ..self }
    }

    /// Ask `check` until it answers Some (that answer), or the deadline
    /// passes with every answer None.
    pub fn until<T>(&self, mut check: impl FnMut() -> Option<T>) -> Result<T, TimedOut> {
        let deadline = self.started + self.limit;
        let mut pause = self.backoff.first;
        loop {
            if let Some(done) = check() {
                return Ok(done);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(TimedOut {
                    what: self.what.clone(),
                    limit: self.limit,
                });
            }
            std::thread::sleep(pause.min(deadline - now));
            pause = self.backoff.next(pause, self.started.elapsed());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn an_answer_at_the_first_ask_does_not_sleep() {
        let wait = Wait::new(
            "x",
            Duration::from_secs(60),
            Backoff::every(Duration::from_secs(60)),
        );
        let t = Instant::now();
        let mut asks = 0;
        assert_eq!(
            wait.until(|| {
                asks += 1;
                Some(7)
            }),
            Ok(7)
        );
        assert_eq!(asks, 1);
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn it_asks_until_answered() {
        let wait = Wait::new("x", Duration::from_secs(60), Backoff::every(MS));
        let mut asks = 0;
        let answer = wait.until(|| {
            asks += 1;
            (asks == 5).then_some("done")
        });
        assert_eq!(answer, Ok("done"));
        assert_eq!(asks, 5);
    }

    #[test]
    fn the_deadline_is_kept_and_never_slept_past() {
        // A pause far longer than the limit: the wait still ends at the
        // deadline, after asking once more there.
        let limit = Duration::from_millis(100);
        let wait = Wait::new("x", limit, Backoff::every(Duration::from_secs(30)));
        let t = Instant::now();
        let mut asks = 0;
        let answer: Result<(), _> = wait.until(|| {
            asks += 1;
            None
        });
        let took = t.elapsed();
        assert!(answer.is_err());
        assert!(took >= limit, "{took:?}");
        assert!(took < Duration::from_secs(10), "{took:?}");
        // Once at the start (unless this machine stalled past the
        // deadline before it) and once at the deadline.
        assert!((1..=2).contains(&asks), "{asks}");
    }

    #[test]
    fn a_wait_since_an_earlier_start_has_only_what_is_left() {
        let started = Instant::now() - Duration::from_secs(2);
        let wait = Wait::new(
            "x",
            Duration::from_secs(1),
            Backoff::every(Duration::from_secs(30)),
        )
        .since(started);
        let mut asks = 0;
        let answer: Result<(), _> = wait.until(|| {
            asks += 1;
            None
        });
        assert!(answer.is_err());
        assert_eq!(asks, 1, "asked once, then out of time");
    }

    #[test]
    fn backoff_doubles_up_to_its_most() {
        let b = Backoff::doubling(2 * MS, 50 * MS);
        let mut pause = b.first;
        let mut seen = Vec::new();
        for _ in 0..8 {
            pause = b.next(pause, Duration::from_secs(1));
            seen.push(pause.as_millis());
        }
        assert_eq!(seen, [4, 8, 16, 32, 50, 50, 50, 50]);
        assert_eq!(
            Backoff::every(20 * MS).next(20 * MS, Duration::from_secs(9)),
            20 * MS
        );
    }

    #[test]
    fn backoff_holds_its_first_pause_in_the_steady_phase() {
        let b = Backoff::doubling(20 * MS, 200 * MS).steady_for(Duration::from_secs(1));
        assert_eq!(b.next(20 * MS, Duration::from_millis(999)), 20 * MS);
        assert_eq!(b.next(20 * MS, Duration::from_secs(1)), 40 * MS);
        assert_eq!(b.next(160 * MS, Duration::from_secs(3)), 200 * MS);
    }

    #[test]
    fn the_timeout_names_what_was_waited_for() {
        let wait = Wait::new("nvidia-imex to exit", 30 * MS, Backoff::every(MS));
        let timed_out = wait.until(|| None::<()>).unwrap_err();
        assert_eq!(timed_out.what, "nvidia-imex to exit");
        assert_eq!(
            timed_out.to_string(),
            "gave up waiting for nvidia-imex to exit after 30ms"
        );
        let e: crate::error::Error = timed_out.into();
        assert_eq!(
            e.to_string(),
            "gave up waiting for nvidia-imex to exit after 30ms"
        );
    }
}
