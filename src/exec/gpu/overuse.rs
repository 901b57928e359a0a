//! Memory overuse of sliced units (SPEC §15): the pure parts. Map NVML's per-process memory
//! samples on one device to attempts (given a pid → attempt function), and the rule that a job
//! holding more than its GiB (+ 1 GiB) on two samples in a row is over (`OVER_MEMORY`).

use std::collections::HashMap;

/// MiB in one GiB; NVML's per-process figures are turned into MiB before they come here.
const MIB_PER_GIB: u64 = 1024;

/// Sum the memory (MiB) of each attempt's processes on one device. `procs` is NVML's
/// `running_compute_processes()` as (pid, used MiB); a process that maps to no attempt
/// (not ours, or already gone) is left out.
pub fn memory_by_attempt<A: std::hash::Hash + Eq>(
    procs: &[(u32, u64)],
    attempt_of: impl Fn(u32) -> Option<A>,
) -> HashMap<A, u64> {
    let mut sums = HashMap::new();
    for &(pid, used_mib) in procs {
        if let Some(a) = attempt_of(pid) {
            *sums.entry(a).or_insert(0) += used_mib;
        }
    }
    sums
}

/// One job found over its slice: it holds `held_gib` (rounded up) of its `of_gib`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Over<J> {
    pub job: J,
    pub held_gib: u64,
    pub of_gib: u64,
}

impl<J: std::fmt::Display> std::fmt::Display for Over<J> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "OVER_MEMORY: job {} holds {} GiB of its {}",
            self.job, self.held_gib, self.of_gib
        )
    }
}

/// The two-samples-over rule, fed one round of samples at a time. A job is reported once
/// when its second sample in a row is over its GiB + 1 GiB; a sample at or under the line
/// re-arms it, and a job missing from a round (ended, or no process on the device) is
/// forgotten.
#[derive(Debug, Default)]
pub struct Watch<J> {
    /// Jobs whose last sample was over, and whether they were reported since.
    over: HashMap<J, bool>,
}

impl<J: std::hash::Hash + Eq + Clone> Watch<J> {
    pub fn new() -> Self {
        Watch {
            over: HashMap::new(),
        }
    }

    /// Feed one round: each job's summed memory (MiB) and its slice (GiB). Returns the jobs
    /// newly over (two samples in a row), once each until they come back under the line.
    pub fn round(&mut self, samples: &[(J, u64, u64)]) -> Vec<Over<J>> {
        let mut next = HashMap::new();
        let mut found = Vec::new();
        for (job, used_mib, of_gib) in samples {
            let line = (of_gib + 1) * MIB_PER_GIB;
            if *used_mib <= line {
                continue;
            }
            let reported = match self.over.get(job) {
                None => false,
                Some(true) => true,
                Some(false) => {
                    found.push(Over {
                        job: job.clone(),
                        held_gib: used_mib.div_ceil(MIB_PER_GIB),
                        of_gib: *of_gib,
                    });
                    true
                }
            };
            next.insert(job.clone(), reported);
        }
        self.over = next;
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: u64 = MIB_PER_GIB;

    #[test]
    fn memory_is_summed_per_attempt_and_strangers_are_left_out() {
        let owner = |pid: u32| match pid {
            10 | 11 => Some((12u64, 1u32)),
            20 => Some((13, 2)),
            _ => None,
        };
        let m = memory_by_attempt(&[(10, 3 * G), (11, 5 * G), (20, G), (99, 40 * G)], owner);
        assert_eq!(m.len(), 2);
        assert_eq!(m[&(12, 1)], 8 * G);
        assert_eq!(m[&(13, 2)], G);
        assert!(memory_by_attempt(&[(99, G)], owner).is_empty());
    }

    #[test]
    fn two_samples_over_in_a_row_report_once() {
        let mut w = Watch::new();
        assert!(w.round(&[(12u64, 27 * G, 20)]).is_empty());
        let over = w.round(&[(12, 27 * G, 20)]);
        assert_eq!(
            over,
            vec![Over {
                job: 12,
                held_gib: 27,
                of_gib: 20
            }]
        );
        assert_eq!(
            over[0].to_string(),
            "OVER_MEMORY: job 12 holds 27 GiB of its 20"
        );
        // Still over: not reported again.
        assert!(w.round(&[(12, 28 * G, 20)]).is_empty());
    }

    #[test]
    fn the_allowance_is_one_gib_and_a_dip_rearms() {
        let mut w = Watch::new();
        // Exactly GiB + 1 is not over.
        for _ in 0..3 {
            assert!(w.round(&[(1u64, 21 * G, 20)]).is_empty());
        }
        // Over, under, over: never two in a row.
        assert!(w.round(&[(1, 21 * G + 1, 20)]).is_empty());
        assert!(w.round(&[(1, 10 * G, 20)]).is_empty());
        assert!(w.round(&[(1, 22 * G, 20)]).is_empty());
        let over = w.round(&[(1, 21 * G + 1, 20)]);
        assert_eq!(over.len(), 1);
        assert_eq!(over[0].held_gib, 22);
        // Back under re-arms: two more over report again.
        assert!(w.round(&[(1, G, 20)]).is_empty());
        assert!(w.round(&[(1, 30 * G, 20)]).is_empty());
        assert_eq!(w.round(&[(1, 30 * G, 20)]).len(), 1);
    }

    #[test]
    fn a_job_missing_from_a_round_is_forgotten_and_jobs_are_apart() {
        let mut w = Watch::new();
        assert!(w.round(&[(1u64, 30 * G, 20), (2, 30 * G, 20)]).is_empty());
        // Job 1 missing this round: its streak ends; job 2 is over twice.
        let over = w.round(&[(2, 30 * G, 20)]);
        assert_eq!(over.iter().map(|o| o.job).collect::<Vec<_>>(), vec![2]);
        assert!(w.round(&[(1, 30 * G, 20), (2, 30 * G, 20)]).is_empty());
        assert_eq!(
            w.round(&[(1, 30 * G, 20)])
                .iter()
                .map(|o| o.job)
                .collect::<Vec<_>>(),
            vec![1]
        );
    }
}
