//! The load generator behind `shareq demo`: a scripted opening over the AWS example shares
//! (qs1 LEND_AND_BORROW with in-share preemption, qs2 LEND, qs3 RESERVE, 1 GPU each, 3
//! fake GPUs) that shows borrowing, a reclaim and an in-share preemption within half a
//! minute, then a steady random mix of short `sleep` jobs. The built-in config
//! (`sample-configs/demo`, [`CONFIG`]) adds a GPU sliced by memory and a `notebooks` share
//! of it (SPEC §15): two slices share it from the opening on, and the mix asks 10–40 GiB
//! slices of it. On the AWS example alone the slices are left out; on any other config
//! (`shareq demo --config DIR`) the opening is left out and the mix goes to that config's
//! enabled shares, on the units they list. Deterministic for a seed.

use super::action::Action;
use crate::model::{Command, JobSpec, ShareState, Strategy, ValidConfig};
use std::time::Duration;
use tokio::sync::mpsc;

/// The shares the demo submits to (those of the AWS example).
pub const SHARES: [&str; 3] = ["qs1", "qs2", "qs3"];

/// The built-in demo's share of the sliced unit, and that unit.
pub const SLICE_SHARE: &str = "notebooks";
pub const SLICE_UNIT: &str = "gpu-mem";

/// The built-in demo's config directory (`sample-configs/demo`): the AWS example and a
/// GPU sliced by memory, so that it runs from any directory.
pub const CONFIG: &[(&str, &str)] = &[
    (
        "environment.yaml",
        include_str!("../../sample-configs/demo/environment.yaml"),
    ),
    (
        "shares.yaml",
        include_str!("../../sample-configs/demo/shares.yaml"),
    ),
];

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

/// The opening: (at s, name, share, prio, sleep s, GiB). A step with GiB is a slice of
/// the built-in config's sliced unit (left out on the AWS example alone); the others ask
/// one GPU. What each one shows:
type Opening = (u64, &'static str, &'static str, u32, u32, u32);
const SCRIPT: [Opening; 8] = [
    // qs1 runs on its own GPU.
    (0, "train-a", "qs1", 5, 45, 0),
    // qs1 goes beyond its limit: borrows qs2's idle GPU (qs3 RESERVE does not lend).
    (3, "sweep-1", "qs1", 2, 40, 0),
    // Nothing left to borrow: waits, and says why.
    (5, "sweep-2", "qs1", 2, 40, 0),
    // qs3 uses its reserve.
    (8, "sim-1", "qs3", 1, 20, 0),
    // A slice of the sliced GPU, and a second one beside it on the same device.
    (10, "notebook-1", "notebooks", 1, 45, 20),
    (12, "infer-1", "notebooks", 1, 35, 30),
    // qs2 wants its GPU back: CROSS_SHARE_RECLAIM of sweep-1.
    (14, "eval-1", "qs2", 3, 25, 0),
    // A higher priority inside qs1: IN_SHARE_PRIORITY preempts train-a.
    (22, "urgent-fix", "qs1", 9, 15, 0),
];

const KINDS: [&str; 5] = ["train", "eval", "sweep", "sim", "debug"];

/// A share the random mix submits to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoShare {
    pub name: String,
    /// Said in the submission when the environment has several units.
    pub unit: Option<String>,
    /// The largest job it gets (2 GPUs at most, never more than its limit).
    pub max_gpus: u32,
    /// On a unit sliced by memory (SPEC §15): the most GiB a job of it asks (its limit, at
    /// most one device); its jobs ask 10–40 GiB.
    pub max_gib: Option<u32>,
    /// How much of the mix it gets: borrowers most, so that lending keeps happening.
    pub weight: u64,
}

/// The demo's submissions, in time order: the scripted opening (AWS example only), then
/// an endless random mix (a job every 4–10 s, 5–30 s long, priorities 0–9, mostly 1 GPU).
#[derive(Debug, Clone)]
pub struct Demo {
    rng: Prng,
    script: &'static [Opening],
    /// The opening's whole GPUs are of this unit (the built-in config has two units);
    /// `None`: the only one, and the opening's slices are left out.
    gpu_unit: Option<&'static str>,
    scripted: usize,
    at_ms: u64,
    counter: u32,
    shares: Vec<DemoShare>,
}

impl Demo {
    /// The demo of the built-in config ([`CONFIG`]): the AWS example and its slices.
    pub fn new(seed: u64) -> Demo {
        let mut d = Demo::aws_example(seed);
        d.gpu_unit = Some("gpu");
        for s in &mut d.shares {
            s.unit = Some("gpu".into());
        }
        d.shares.push(DemoShare {
            name: SLICE_SHARE.into(),
            unit: Some(SLICE_UNIT.into()),
            max_gpus: 1,
            max_gib: Some(40),
            weight: 1,
        });
        d
    }

    /// The demo of the AWS example alone (`sample-configs/aws-example`): no slices.
    pub fn aws_example(seed: u64) -> Demo {
        let share = |name: &str, max_gpus, weight| DemoShare {
            name: name.into(),
            unit: None,
            max_gpus,
            max_gib: None,
            weight,
        };
        Demo {
            rng: Prng::new(seed),
            script: &SCRIPT,
            gpu_unit: None,
            scripted: 0,
            at_ms: 0,
            counter: 0,
            shares: vec![share("qs1", 2, 3), share("qs2", 1, 2), share("qs3", 1, 1)],
        }
    }

    /// The demo of any config: the built-in one's and the AWS example's shares get the
    /// scripted opening; other configs get the random mix over their enabled shares, on
    /// the first unit each lists.
    pub fn for_config(seed: u64, cfg: &ValidConfig) -> Demo {
        let mut names: Vec<&str> = cfg
            .shares
            .iter()
            .map(|s| s.quota_share_name.as_str())
            .collect();
        names.sort_unstable();
        if names == SHARES {
            return Demo::aws_example(seed);
        }
        if names == [SLICE_SHARE, "qs1", "qs2", "qs3"] {
            return Demo::new(seed);
        }
        let several_units = cfg.env.capacity_limits.len() > 1;
        let shares = cfg
            .shares
            .iter()
            .filter(|s| s.state == ShareState::Enabled)
            .filter_map(|s| {
                let c = s.capacity_limits.first()?;
                let slicing = cfg
                    .env
                    .capacity_limits
                    .iter()
                    .find(|u| u.capacity_unit == c.capacity_unit)
                    .and_then(|u| u.slicing);
                Some(DemoShare {
                    name: s.quota_share_name.clone(),
                    unit: several_units.then(|| c.capacity_unit.clone()),
                    max_gpus: c.max_capacity.clamp(1, 2),
                    max_gib: slicing.map(|sl| c.max_capacity.min(sl.memory_gib).max(1)),
                    weight: match s.resource_sharing_configuration.strategy {
                        Strategy::LendAndBorrow => 3,
                        Strategy::Lend => 2,
                        Strategy::Reserve => 1,
                    },
                })
            })
            .collect();
        Demo {
            rng: Prng::new(seed),
            script: &[],
            gpu_unit: None,
            scripted: 0,
            at_ms: 0,
            counter: 0,
            shares,
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
        while let Some(&(at, name, share, prio, sleep, gib)) = self.script.get(self.scripted) {
            self.scripted += 1;
            let slices = self.gpu_unit.is_some();
            if gib > 0 && !slices {
                continue;
            }
            self.at_ms = at * 1000;
            let mut s = step(self.at_ms, name, share, gib.max(1), prio, sleep);
            s.spec.capacity_unit = match gib {
                0 => self.gpu_unit.map(str::to_string),
                _ => Some(SLICE_UNIT.to_string()),
            };
            return Some(s);
        }
        let total: u64 = self.shares.iter().map(|s| s.weight).sum();
        if total == 0 {
            return None; // no enabled share: nothing to submit
        }
        self.at_ms += self.rng.range(4_000, 10_000);
        self.counter += 1;
        let mut pick = self.rng.range(0, total - 1);
        let share = self
            .shares
            .iter()
            .find(|s| {
                let hit = pick < s.weight;
                pick = pick.saturating_sub(s.weight);
                hit
            })
            .unwrap_or(&self.shares[0])
            .clone();
        let kind = KINDS[self.rng.range(0, KINDS.len() as u64 - 1) as usize];
        let gpus = match share.max_gib {
            // A slice: 10, 20, 30 or 40 GiB, within what the share may ask.
            Some(most) => (self.rng.range(1, 4) as u32 * 10).min(most),
            None if share.max_gpus >= 2 && self.rng.range(0, 9) == 0 => 2,
            None => 1,
        };
        let prio = self.rng.range(0, 9) as u32;
        let sleep = self.rng.range(5, 30) as u32;
        let name = format!("{kind}-{}", self.counter + 1);
        let mut s = step(self.at_ms, &name, &share.name, gpus, prio, sleep);
        s.spec.capacity_unit = share.unit;
        Some(s)
    }
}

/// Submit the demo's jobs on `actions` in real time until the channel closes.
pub async fn run_demo(actions: mpsc::Sender<Action>, demo: Demo) -> anyhow::Result<()> {
    let start = tokio::time::Instant::now();
    for s in demo {
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

    /// The AWS example's config directory (sample-configs/aws-example) as one text.
    const AWS_EXAMPLE: &str = concat!(
        include_str!("../../sample-configs/aws-example/environment.yaml"),
        "\n---\n",
        include_str!("../../sample-configs/aws-example/shares.yaml")
    );

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
        // Whole GPUs of `gpu` for the AWS shares, 10–40 GiB slices for notebooks.
        assert!(a.iter().all(|s| {
            let spec = &s.spec;
            if spec.quota_share_name == SLICE_SHARE {
                spec.capacity_unit.as_deref() == Some(SLICE_UNIT)
                    && (10..=40).contains(&spec.quantity)
            } else {
                SHARES.contains(&spec.quota_share_name.as_str())
                    && spec.capacity_unit.as_deref() == Some("gpu")
                    && spec.quantity <= 2
            }
        }));
        // The AWS example alone: its opening without the slices, on its only unit.
        let aws: Vec<DemoStep> = Demo::aws_example(7).take(40).collect();
        assert_eq!(aws.len(), 40);
        assert!(aws.iter().all(|s| {
            SHARES.contains(&s.spec.quota_share_name.as_str()) && s.spec.capacity_unit.is_none()
        }));
        assert_eq!(
            aws[..6]
                .iter()
                .map(|s| s.spec.job_name.as_str())
                .collect::<Vec<_>>(),
            [
                "train-a",
                "sweep-1",
                "sweep-2",
                "sim-1",
                "eval-1",
                "urgent-fix"
            ]
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
        let task = tokio::spawn(run_demo(tx, Demo::new(3)));
        let first = rx.recv().await;
        assert!(matches!(first, Some(Action::Submit(ref s)) if s.job_name == "train-a"));
        let t0 = tokio::time::Instant::now();
        let second = rx.recv().await;
        assert!(matches!(second, Some(Action::Submit(ref s)) if s.job_name == "sweep-1"));
        assert!(t0.elapsed() >= Duration::from_secs(3));
        drop(rx);
        assert!(task.await.unwrap().is_ok());
    }

    #[test]
    fn another_config_gets_load_for_its_own_shares_and_units() {
        let yaml = "kind: ServiceEnvironment
name: lab
capacityLimits:
- {capacityUnit: a100, maxCapacity: 4, devices: {fake: 4}}
- {capacityUnit: h100, maxCapacity: 2, devices: {fake: 2}}
---
kind: QuotaShare
quotaShareName: vision
capacityLimits: [{capacityUnit: a100, maxCapacity: 3}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
---
kind: QuotaShare
quotaShareName: nlp
capacityLimits: [{capacityUnit: h100, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND}
---
kind: QuotaShare
quotaShareName: old
capacityLimits: [{capacityUnit: a100, maxCapacity: 1}]
resourceSharingConfiguration: {strategy: LEND}
state: DISABLED
";
        let docs = crate::config::parse_documents(yaml, None).expect("parses");
        let cfg = crate::config::validate(docs).expect("valid");
        let steps: Vec<DemoStep> = Demo::for_config(5, &cfg).take(60).collect();
        assert!(steps.iter().all(|s| {
            let spec = &s.spec;
            match spec.quota_share_name.as_str() {
                "vision" => spec.capacity_unit.as_deref() == Some("a100") && spec.quantity <= 2,
                "nlp" => spec.capacity_unit.as_deref() == Some("h100") && spec.quantity == 1,
                _ => false,
            }
        }));
        for share in ["vision", "nlp"] {
            assert!(steps.iter().any(|s| s.spec.quota_share_name == share));
        }
        // A sliced unit (SPEC §15) gets slices of 10–40 GiB (sample-configs/slices).
        let sliced = concat!(
            include_str!("../../sample-configs/slices/environment.yaml"),
            "\n---\n",
            include_str!("../../sample-configs/slices/shares.yaml")
        );
        let cfg =
            crate::config::validate(crate::config::parse_documents(sliced, None).expect("parses"))
                .expect("valid");
        let steps: Vec<DemoStep> = Demo::for_config(5, &cfg).take(60).collect();
        let notebooks: Vec<u32> = steps
            .iter()
            .filter(|s| s.spec.quota_share_name == "notebooks")
            .map(|s| s.spec.quantity)
            .collect();
        assert!(!notebooks.is_empty());
        assert!(
            notebooks.iter().all(|q| [10, 20, 30, 40].contains(q)),
            "{notebooks:?}"
        );
        assert!(notebooks.iter().any(|&q| q > 10), "{notebooks:?}");
        assert!(steps.iter().all(|s| {
            s.spec.quota_share_name != "notebooks"
                || s.spec.capacity_unit.as_deref() == Some("a100-mem")
        }));
        // The AWS example's shares keep the scripted opening, without slices.
        let aws = crate::config::validate(
            crate::config::parse_documents(AWS_EXAMPLE, None).expect("parses"),
        )
        .expect("valid");
        assert_eq!(
            Demo::for_config(5, &aws).next().map(|s| s.spec.job_name),
            Some("train-a".to_string())
        );
        assert!(
            Demo::for_config(5, &aws)
                .take(40)
                .all(|s| s.spec.quota_share_name != SLICE_SHARE)
        );
        // The built-in config (`--config sample-configs/demo` too) is the built-in demo.
        let text = CONFIG
            .iter()
            .map(|(_, t)| *t)
            .collect::<Vec<_>>()
            .join("\n---\n");
        let built_in =
            crate::config::validate(crate::config::parse_documents(&text, None).expect("parses"))
                .expect("valid");
        let steps: Vec<DemoStep> = Demo::for_config(5, &built_in).take(40).collect();
        assert_eq!(steps, Demo::new(5).take(40).collect::<Vec<_>>());
    }
}
