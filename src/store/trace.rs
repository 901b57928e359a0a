//! What the history says about how jobs ran: attempt run times (the forecast's typical
//! runtimes, SPEC §11) and the real submissions of a window (`shareq whatif`,
//! `shareq export-trace`).

use super::{Store, StoreError};
use crate::replay::history::TraceJob;
use crate::sched::Time;
use rusqlite::params;

impl Store {
    /// The latest `limit` attempts that ended by themselves (succeeded or a non-zero exit)
    /// or by preemption (their outcome is the preemption's reason), newest first: their user, share, GPUs and run time (ms), a
    /// preempted one censored (it ran at least that long, SPEC §11).
    pub fn attempt_runtimes(
        &self,
        limit: usize,
    ) -> Result<Vec<crate::forecast::Sample>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT coalesce(json_extract(j.spec, '$.submitter.name'), ''), j.share,
                    j.quantity, a.ended_at - a.started_at,
                    a.outcome NOT IN ('SUCCEEDED', 'NON_ZERO_EXIT')
                 FROM attempts a
                 JOIN jobs j ON j.id = a.job
                 WHERE a.ended_at IS NOT NULL AND a.started_at IS NOT NULL
                   AND a.outcome NOT IN ('CANCELLED', 'TIMEOUT', 'RELEASED', 'LOST_ON_RESTART')
                 ORDER BY a.ended_at DESC LIMIT ?1",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([limit as i64], |r| {
                Ok(crate::forecast::Sample {
                    user: r.get(0)?,
                    share: r.get(1)?,
                    gpus: r.get(2)?,
                    ms: r.get(3)?,
                    censored: r.get(4)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Every job submitted at or after `since` (ms), in submission order.
    pub fn trace_jobs(&self, since: Time, now: Time) -> Result<Vec<TraceJob>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT j.id, j.name, j.share, j.unit, j.quantity, j.priority, j.submitted,
                    a.started_at, a.ended_at, json_extract(j.spec, '$.submitter.name')
                 FROM jobs j
                 LEFT JOIN attempts a ON a.job = j.id AND a.attempt =
                    (SELECT max(attempt) FROM attempts WHERE job = j.id)
                 WHERE j.submitted >= ?1 ORDER BY j.submitted, j.id",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![since], |r| {
                let started: Option<i64> = r.get(7)?;
                let ended: Option<i64> = r.get(8)?;
                Ok(TraceJob {
                    id: r.get::<_, i64>(0)? as u64,
                    name: r.get(1)?,
                    share: r.get(2)?,
                    unit: r.get(3)?,
                    quantity: r.get(4)?,
                    priority: r.get(5)?,
                    submitted: r.get(6)?,
                    ran_ms: started.map(|s| (ended.unwrap_or(now) - s).max(0)),
                    running: started.is_some() && ended.is_none(),
                    user: r.get(9)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }
}
