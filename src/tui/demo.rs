//! The load generator behind `shareq demo`: a scripted opening over the AWS example shares
//! (qs1 LEND_AND_BORROW with in-share preemption, qs2 LEND, qs3 RESERVE, 1 GPU each, 3
//! fake GPUs) that shows borrowing, a reclaim and an in-share preemption within half a
//! minute, then a steady random mix of short `sleep` jobs. Deterministic for a seed.

use super::action::Action;
use crate::model::{Command, JobSpec};
use std::time::Duration;
use tokio::sync::mpsc;

/// The shares the demo submits to (those of the AWS example).
pub const SHARES: [&str; 3] = ["qs1", "qs2", "qs3"];

/// A tiny, dependency-free PRNG (SplitMix64): good spread, fully reproducible.
#[derive(Debug, Clone)]
pub struct Prng(u64);

impl Prng {
    pub fn new(seed: u64) -> Prng {
        Prng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.next_u64() % (hi - lo + 1)
    }
}

/// One submission: when (from the demo's start), what, and how long it sleeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoStep {
    pub at: Duration,
    pub spec: JobSpec,
    pub sleep_s: u32,
}

/// The opening: (at s, name, share, prio, sleep s). What each one shows:
const SCRIPT: [(u64, &str, &str, u32, u32); 6] = [
    // qs1 runs on its own GPU.
    (0, "train-a", "qs1", 5, 45),
    // qs1 goes beyond its limit: borrows qs2's idle GPU (qs3 RESERVE does not lend).
    (3, "sweep-1", "qs1", 2, 40),
    // Nothing left to borrow: waits, and says why.
    (5, "sweep-2", "qs1", 2, 40),
    // qs3 uses its reserve.
    (8, "sim-1", "qs3", 1, 20),
    // qs2 wants its GPU back: CROSS_SHARE_RECLAIM of sweep-1.
    (14, "eval-1", "qs2", 3, 25),
    // A higher priority inside qs1: IN_SHARE_PRIORITY preempts train-a.
    (22, "urgent-fix", "qs1", 9, 15),
];

const KINDS: [&str; 5] = ["train", "eval", "sweep", "sim", "debug"];

/// The demo's submissions, in time order: the scripted opening, then an endless random
/// mix (a job every 4–10 s, 5–30 s long, priorities 0–9, mostly 1 GPU).
#[derive(Debug, Clone)]
pub struct Demo {
    rng: Prng,
    scripted: usize,
    at_ms: u64,
    counter: u32,
}

impl Demo {
    pub fn new(seed: u64) -> Demo {
        Demo {
            rng: Prng::new(seed),
            scripted: 0,
            at_ms: 0,
            counter: 0,
        }
    }
}

fn step(at_ms: u64, name: &str, share: &str, gpus: u32, prio: u32, sleep_s: u32) -> DemoStep {
    let mut spec = JobSpec::new(name, share, gpus, prio);
    spec.command = Some(Command::Shell(format!("sleep {sleep_s}")));
    DemoStep {
        at: Duration::from_millis(at_ms),
        spec,
        sleep_s,
    }
}

impl Iterator for Demo {
    type Item = DemoStep;

    fn next(&mut self) -> Option<DemoStep> {
        if let Some(&(at, name, share, prio, sleep)) = SCRIPT.get(self.scripted) {
            self.scripted += 1;
            self.at_ms = at * 1000;
            return Some(step(self.at_ms, name, share, 1, prio, sleep));
        }
        self.at_ms += self.rng.range(4_000, 10_000);
        self.counter += 1;
        // qs1 (the borrower) gets half the work so that lending keeps happening.
        let share = match self.rng.range(0, 5) {
            0..=2 => "qs1",
            3 | 4 => "qs2",
            _ => "qs3",
        };
        let kind = KINDS[self.rng.range(0, KINDS.len() as u64 - 1) as usize];
        let gpus = if share == "qs1" && self.rng.range(0, 9) == 0 {
            2
        } else {
            1
        };
        let prio = self.rng.range(0, 9) as u32;
        let sleep = self.rng.range(5, 30) as u32;
        let name = format!("{kind}-{}", self.counter + 1);
        Some(step(self.at_ms, &name, share, gpus, prio, sleep))
    }
}

/// Submit the demo's jobs on `actions` in real time until the channel closes.
pub async fn run_demo(actions: mpsc::Sender<Action>, seed: u64) -> anyhow::Result<()> {
    let start = tokio::time::Instant::now();
    for s in Demo::new(seed) {
        tokio::time::sleep_until(start + s.at).await;
        if actions
            .send(Action::Submit(Box::new(s.spec)))
            .await
            .is_err()
        {
            return Ok(()); // the runtime is gone: the demo is over
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_jobs_other_seed_other_mix() {
        let a: Vec<DemoStep> = Demo::new(7).take(40).collect();
        let b: Vec<DemoStep> = Demo::new(7).take(40).collect();
        let c: Vec<DemoStep> = Demo::new(8).take(40).collect();
        assert_eq!(a, b);
        assert_eq!(
            a[..SCRIPT.len()],
            c[..SCRIPT.len()],
            "the opening is the same"
        );
        assert_ne!(a, c);
        assert!(a.windows(2).all(|w| w[0].at <= w[1].at), "time order");
        assert!(
            a.iter()
                .all(|s| SHARES.contains(&s.spec.quota_share_name.as_str()))
        );
        assert!(a.iter().all(|s| (5..=45).contains(&s.sleep_s)));
        let names: std::collections::HashSet<_> = a.iter().map(|s| &s.spec.job_name).collect();
        assert_eq!(names.len(), a.len(), "names are unique");
    }

    #[test]
    fn prng_is_reproducible_and_in_range() {
        let mut r = Prng::new(1);
        let first: Vec<u64> = (0..5).map(|_| r.range(3, 6)).collect();
        let mut r2 = Prng::new(1);
        assert_eq!(first, (0..5).map(|_| r2.range(3, 6)).collect::<Vec<_>>());
        assert!(first.iter().all(|x| (3..=6).contains(x)));
        assert_eq!(Prng::new(0).range(5, 5), 5);
    }

    #[tokio::test(start_paused = true)]
    async fn run_demo_sends_in_time_and_stops_when_the_runtime_goes() {
        let (tx, mut rx) = mpsc::channel(4);
        let task = tokio::spawn(run_demo(tx, 3));
        let first = rx.recv().await;
        assert!(matches!(first, Some(Action::Submit(ref s)) if s.job_name == "train-a"));
        let t0 = tokio::time::Instant::now();
        let second = rx.recv().await;
        assert!(matches!(second, Some(Action::Submit(ref s)) if s.job_name == "sweep-1"));
        assert!(t0.elapsed() >= Duration::from_secs(3));
        drop(rx);
        assert!(task.await.unwrap().is_ok());
    }
}
