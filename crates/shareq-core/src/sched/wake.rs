//! Instants the scheduler asks for by itself (SPEC §3, §6): a lapsed nomination's retry
//! one second later, where the job may cause preemption again (stale, and no instant at
//! all, when by then the job has started, was cancelled or is nominated again), and the
//! moment a big job qualifies for its unit's reservation (`reserve`). Every answer is read off the state, so a driver (the replay's clock,
//! the live runtime's one timer) only asks for the next one after each pass.

use super::{Sched, Time};
use crate::model::JobId;

impl Sched {
    /// A nomination of `id` lapsed at `now`: it may preempt again one second later.
    pub(crate) fn note_lapse(&mut self, id: JobId, now: Time) {
        let attempt = self.job(id).map_or(0, |j| j.attempts_started);
        self.retries
            .insert((now + self.clock.ticks_per_second(), id.0, attempt));
    }

    /// Forget retries whose instant has come (the pass at `now` is theirs).
    pub(crate) fn prune_retries(&mut self, now: Time) {
        while let Some(&first) = self.retries.first() {
            if first.0 > now {
                break;
            }
            self.retries.pop_first();
        }
    }

    /// Is a lapse retry of job `id` at `at` still live: the job is queued, has not
    /// started since (`attempt`), is not nominated again, and its last lapse is the one
    /// this retry is for?
    fn retry_is_live(&self, at: Time, id: JobId, attempt: u32) -> bool {
        self.job(id).is_some_and(|j| {
            j.is_pending()
                && !j.is_nominated()
                && j.attempts_started == attempt
                && j.lapsed_at == Some(at - self.clock.ticks_per_second())
        })
    }

    /// The next instant after `now` that the scheduler itself needs a pass at (SPEC §6),
    /// if any: the earliest live lapse retry, or the moment a big job qualifies for a
    /// reservation.
    pub fn next_wakeup(&self, now: Time) -> Option<Time> {
        let retry = self
            .retries
            .iter()
            .filter(|&&(at, _, _)| at > now)
            .find(|&&(at, id, attempt)| self.retry_is_live(at, JobId(id), attempt))
            .map(|&(at, _, _)| at);
        [retry, self.next_reservation_moment(now)]
            .into_iter()
            .flatten()
            .min()
    }
}
