//! Writing: each batch of scheduler decisions, with the facts that caused them, in one
//! transaction that commits before the runtime carries any of them out.

use super::rows::{devices_json, encode_stop};
use super::{Store, StoreError};
use crate::model::JobId;
use crate::sched::{Event, Job, Sched, Time};
use rusqlite::{OptionalExtension, Transaction, params};
use std::collections::{BTreeSet, HashMap};

/// A fact the runtime observed and fed to the scheduler; recorded together with the
/// decisions it led to, so the store knows exit statuses and ends of attempts that the
/// scheduler's events do not carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observed {
    /// The job's command ended by itself: `sched.job_exited(job, code)`.
    Exited { job: JobId, code: i32 },
    /// The job's command was killed by `signal` from outside, not by shareq (its `code`
    /// is 128 + signal): `sched.job_killed(job, signal)`.
    Killed { job: JobId, signal: i32, code: i32 },
    /// A job being stopped is gone: `sched.gpus_released(job)`. `code` when known.
    Released { job: JobId, code: Option<i32> },
    /// Something without an event changed (SCHEDULED → STARTING → RUNNING): store the
    /// job's current state.
    StateChanged { job: JobId },
}

impl Observed {
    /// A command's end by itself: `Killed` when a signal ended it, else `Exited`.
    pub fn ended(job: JobId, code: i32, signal: Option<i32>) -> Observed {
        match signal {
            Some(signal) => Observed::Killed { job, signal, code },
            None => Observed::Exited { job, code },
        }
    }

    pub fn job(&self) -> JobId {
        match *self {
            Observed::Exited { job, .. }
            | Observed::Killed { job, .. }
            | Observed::Released { job, .. }
            | Observed::StateChanged { job } => job,
        }
    }

    /// Feed the fact to the scheduler (`StateChanged` has nothing to feed).
    pub fn apply(&self, sched: &mut Sched, now: Time) {
        match *self {
            Observed::Exited { job, code } => sched.job_exited(job, code, now),
            Observed::Killed { job, signal, .. } => sched.job_killed(job, signal, now),
            Observed::Released { job, .. } => sched.gpus_released(job, now),
            Observed::StateChanged { .. } => {}
        }
    }

    fn code(&self) -> Option<i32> {
        match *self {
            Observed::Exited { code, .. } | Observed::Killed { code, .. } => Some(code),
            Observed::Released { code, .. } => code,
            Observed::StateChanged { .. } => None,
        }
    }
}

/// How an attempt ended, from what its row says.
const CLOSE_ATTEMPT: &str = "UPDATE attempts SET ended_at = ?2, outcome = CASE
        WHEN stop IS NOT NULL THEN stop
        WHEN exit_code = 0 THEN 'SUCCEEDED'
        WHEN exit_code IS NOT NULL THEN 'NON_ZERO_EXIT'
        ELSE 'RELEASED' END
    WHERE job = ?1 AND ended_at IS NULL";

const UPSERT_JOB: &str = "INSERT INTO jobs (id, name, share, unit, quantity, priority, spec,
        submitted, state, preempted_count, failed_attempts, attempts_started, fail_reason,
        stop_kind, stop_by, stop_reason, stop_since, finished_at, parent, array_index, array_size,
        depends_on, lost_gpu_ms)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
        ?20, ?21, ?22, ?23)
    ON CONFLICT(id) DO UPDATE SET priority = excluded.priority, state = excluded.state,
        preempted_count = excluded.preempted_count, failed_attempts = excluded.failed_attempts,
        attempts_started = excluded.attempts_started,
        fail_reason = COALESCE(excluded.fail_reason, jobs.fail_reason),
        stop_kind = excluded.stop_kind, stop_by = excluded.stop_by,
        stop_reason = excluded.stop_reason, stop_since = excluded.stop_since,
        finished_at = excluded.finished_at, lost_gpu_ms = excluded.lost_gpu_ms";

impl Store {
    /// Keep a job's latest checkpoint report (SPEC §14: `shareq checkpoint`), committed
    /// before the report is answered or given to the scheduler. A write of its own: a
    /// report is rare (one per save of a job) and changes no decision.
    pub fn record_checkpoint(
        &mut self,
        job: JobId,
        attempt: u32,
        at: Time,
        note: Option<&str>,
    ) -> Result<(), StoreError> {
        let write = |conn: &rusqlite::Connection| {
            conn.prepare_cached(
                "UPDATE jobs SET ckpt_at = ?2, ckpt_attempt = ?3, ckpt_note = ?4 WHERE id = ?1",
            )
            .and_then(|mut st| st.execute(params![job.0 as i64, at, attempt, note]))
        };
        let mut done = write(&self.conn).map_err(|e| StoreError::from_sqlite(&self.path, e));
        if matches!(done, Err(StoreError::DiskFull { .. })) && self.make_room() {
            done = write(&self.conn).map_err(|e| StoreError::from_sqlite(&self.path, e));
        }
        done.map(|_| ())
    }

    /// Persist one batch of decisions in one transaction: `observed` are the facts fed to
    /// the scheduler since the last batch, `events` what it decided (`take_events`), and
    /// `sched` its state after deciding. Call it before carrying any decision out; when it
    /// fails, nothing of the batch is stored and nothing should be carried out.
    pub fn record(
        &mut self,
        now: Time,
        observed: &[Observed],
        events: &[Event],
        sched: &Sched,
    ) -> Result<(), StoreError> {
        // A batch of state labels only (SCHEDULED → STARTING → RUNNING, no decision, no
        // exit) is committed without the fsync: after a power cut recovery goes by the
        // attempt's run files, not by the label, so such a commit needs to survive only a
        // crash of shareq (which the write itself does); the next full commit's fsync
        // takes it to disk with its own.
        let labels_only = events.is_empty()
            && observed
                .iter()
                .all(|o| matches!(o, Observed::StateChanged { .. }));
        let relaxed = labels_only && self.durability == super::Durability::Full;
        if relaxed {
            self.conn
                .pragma_update(None, "synchronous", "NORMAL")
                .map_err(|e| StoreError::from_sqlite(&self.path, e))?;
        }
        let mut stored = self.record_batch(now, observed, events, sched);
        // Out of space: the ballast and the write-ahead log's slack are the database's
        // own room (`room`); give them up and try once more.
        if matches!(stored, Err(StoreError::DiskFull { .. })) && self.make_room() {
            stored = self.record_batch(now, observed, events, sched);
        }
        if relaxed {
            self.conn
                .pragma_update(None, "synchronous", "FULL")
                .map_err(|e| StoreError::from_sqlite(&self.path, e))?;
        }
        stored
    }

    fn record_batch(
        &mut self,
        now: Time,
        observed: &[Observed],
        events: &[Event],
        sched: &Sched,
    ) -> Result<(), StoreError> {
        let path = self.path.clone();
        let err = |e| StoreError::from_sqlite(&path, e);
        let tx = self.conn.transaction().map_err(err)?;
        let mut touched = BTreeSet::new();
        let mut max_id = None;
        let mut starts: HashMap<JobId, u32> = HashMap::new();
        for o in observed {
            touched.insert(o.job());
        }
        for e in events {
            if let Some(job) = crate::events::job_of(e) {
                touched.insert(job);
            }
            match e {
                Event::Submitted { job } => max_id = max_id.max(Some(job.0)),
                Event::Started { job, .. } => *starts.entry(*job).or_default() += 1,
                _ => {}
            }
        }
        // Job rows first (attempts refer to them), as the scheduler has them now.
        for &id in &touched {
            if let Some(job) = sched.job(id) {
                upsert_job(&tx, job, sched).map_err(err)?;
            }
        }
        if let Some(max) = max_id {
            tx.prepare_cached(
                "INSERT INTO meta (key, value) VALUES ('max_job_id', ?1)
                 ON CONFLICT(key) DO UPDATE SET value = max(value, excluded.value)",
            )
            .and_then(|mut s| s.execute([max as i64]))
            .map_err(err)?;
        }
        for o in observed {
            if let Some(code) = o.code() {
                tx.prepare_cached(
                    "UPDATE attempts SET exit_code = ?2 WHERE job = ?1 AND ended_at IS NULL",
                )
                .and_then(|mut s| s.execute(params![o.job().0 as i64, code]))
                .map_err(err)?;
            }
        }
        for e in events {
            record_event(&tx, now, e, sched, &mut starts).map_err(err)?;
        }
        // Attempts of jobs that no longer hold GPUs are over (a cancelled job's exit, for
        // one, is reported by no event).
        for &id in &touched {
            match sched.job(id) {
                Some(j) if j.is_holding() => {}
                // Ended at the time the core has for it (its supervisor's clock, SPEC
                // §7), which may be before this batch.
                j => close_attempt(&tx, id, j.and_then(|j| j.finished_at).unwrap_or(now))
                    .map_err(err)?,
            }
        }
        let (lines, standing) =
            super::events::record_stream(&tx, now, events, sched, self.standing.as_ref())
                .map_err(err)?;
        tx.commit().map_err(err)?;
        self.recorded = lines;
        if standing.is_some() {
            self.standing = standing;
        }
        Ok(())
    }

    /// [`Store::record`] with no observed facts.
    pub fn record_events(
        &mut self,
        now: Time,
        events: &[Event],
        sched: &Sched,
    ) -> Result<(), StoreError> {
        self.record(now, &[], events, sched)
    }

    /// A configuration was applied: its hash and where it came from.
    pub fn record_config(
        &mut self,
        hash: &str,
        source: &str,
        documents: Option<&str>,
        now: Time,
    ) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO configs (hash, source, applied_at, documents) VALUES (?1, ?2, ?3, ?4)",
                params![hash, source, now, documents],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// Jobs whose supervisor vanished while no scheduler ran: their attempt ends as
    /// `LOST_ON_RESTART` and they are queued again. Record this before restoring them.
    pub fn record_lost(&mut self, now: Time, jobs: &[JobId]) -> Result<(), StoreError> {
        let path = self.path.clone();
        let err = |e| StoreError::from_sqlite(&path, e);
        let tx = self.conn.transaction().map_err(err)?;
        for job in jobs {
            let id = job.0 as i64;
            tx.prepare_cached(
                "UPDATE attempts SET ended_at = ?2, outcome = 'LOST_ON_RESTART'
                 WHERE job = ?1 AND ended_at IS NULL",
            )
            .and_then(|mut s| s.execute(params![id, now]))
            .map_err(err)?;
            tx.prepare_cached(
                "UPDATE jobs SET state = 'RUNNABLE', stop_kind = NULL, stop_by = NULL,
                 stop_reason = NULL, stop_since = NULL, finished_at = NULL WHERE id = ?1",
            )
            .and_then(|mut s| s.execute([id]))
            .map_err(err)?;
        }
        tx.commit().map_err(err)
    }
}

/// The whole spec, stored once (a job's spec never changes after its submit).
const INSERT_SPEC: &str =
    "INSERT INTO job_specs (job, spec) VALUES (?1, ?2) ON CONFLICT(job) DO NOTHING";

fn upsert_job(tx: &Transaction, job: &Job, sched: &Sched) -> rusqlite::Result<()> {
    let to_sql = |e| rusqlite::Error::ToSqlConversionFailure(Box::new(e));
    // `jobs.spec` leaves out the command and env (the bulk of a job): a state change
    // rewrites this row, and must stay small (schema step 10).
    let mut slim = serde_json::to_value(&job.spec).map_err(to_sql)?;
    if let Some(fields) = slim.as_object_mut() {
        fields.remove("command");
        fields.remove("env");
    }
    let spec = slim.to_string();
    let (kind, by, reason) = encode_stop(job.stop_cause());
    let deps = (!job.deps.is_empty()).then(|| {
        let ids: Vec<u64> = job.deps.iter().map(|d| d.0).collect();
        serde_json::to_string(&ids).unwrap_or_default()
    });
    let mut stmt = tx.prepare_cached(UPSERT_JOB)?;
    stmt.execute(params![
        job.id.0 as i64,
        job.spec.job_name,
        sched.share_name(job.share),
        sched.unit_name(job.unit),
        job.quantity,
        job.priority,
        spec,
        job.submitted,
        job.state.as_str(),
        job.preempted_count,
        job.failed_attempts,
        job.attempts_started,
        job.fail_reason.as_ref().map(ToString::to_string),
        kind,
        by,
        reason,
        job.stopping_since(),
        job.finished_at,
        job.parent().map(|p| p.0 as i64),
        job.array_index(),
        job.array_size(),
        deps,
        job.lost_ticks,
    ])?;
    let stored = tx
        .prepare_cached("SELECT 1 FROM job_specs WHERE job = ?1")?
        .query_row([job.id.0 as i64], |_| Ok(()))
        .optional()?;
    if stored.is_none() {
        let whole = serde_json::to_string(&job.spec).map_err(to_sql)?;
        tx.prepare_cached(INSERT_SPEC)?
            .execute(params![job.id.0 as i64, whole])?;
    }
    Ok(())
}

fn close_attempt(tx: &Transaction, job: JobId, now: Time) -> rusqlite::Result<()> {
    tx.prepare_cached(CLOSE_ATTEMPT)?
        .execute(params![job.0 as i64, now])
        .map(drop)
}

fn set_stop(tx: &Transaction, job: JobId, stop: &str) -> rusqlite::Result<()> {
    tx.prepare_cached("UPDATE attempts SET stop = ?2 WHERE job = ?1 AND ended_at IS NULL")?
        .execute(params![job.0 as i64, stop])
        .map(drop)
}

fn preemption_outcome(tx: &Transaction, job: JobId, outcome: &str) -> rusqlite::Result<()> {
    tx.prepare_cached("UPDATE preemptions SET outcome = ?2 WHERE victim = ?1 AND outcome IS NULL")?
        .execute(params![job.0 as i64, outcome])
        .map(drop)
}

/// The work the open preemption of `job` lost (SPEC §14), written with its end.
fn preemption_lost(
    tx: &Transaction,
    job: JobId,
    lost: Option<&crate::sched::Lost>,
) -> rusqlite::Result<()> {
    let Some(l) = lost else { return Ok(()) };
    tx.prepare_cached(
        "UPDATE preemptions SET lost_gpu_ms = ?2, last_save = ?3, saved = ?4, released = ?5
         WHERE victim = ?1 AND outcome IS NULL",
    )?
    .execute(params![
        job.0 as i64,
        l.gpu_ticks(),
        l.since,
        l.checkpointed,
        l.until
    ])
    .map(drop)
}

fn record_event(
    tx: &Transaction,
    now: Time,
    e: &Event,
    sched: &Sched,
    starts: &mut HashMap<JobId, u32>,
) -> rusqlite::Result<()> {
    match e {
        Event::Started {
            job,
            node,
            devices,
            borrowed,
            more,
        } => {
            close_attempt(tx, *job, now)?;
            // The attempt number the runtime sees in `attempts_started` right after this
            // batch, less the starts of the same job still to come in it.
            let later = starts.get_mut(job).map_or(0, |n| {
                *n -= 1;
                *n
            });
            let attempt = match sched.job(*job) {
                Some(j) => i64::from(j.attempts_started.saturating_sub(later)).max(1),
                None => tx
                    .query_row(
                        "SELECT COALESCE(MAX(attempt), 0) + 1 FROM attempts WHERE job = ?1",
                        [job.0 as i64],
                        |r| r.get(0),
                    )
                    .optional()?
                    .unwrap_or(1),
            };
            let devices = devices_json(devices);
            let more = super::rows::more_json(more);
            tx.prepare_cached(
                "INSERT INTO attempts (job, attempt, devices, borrowed, started_at, node, more_nodes)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute(params![job.0 as i64, attempt, devices, borrowed, now, node, more])?;
            tx.prepare_cached(
                "UPDATE jobs SET started_at = ?2, devices = ?3, node = ?4, more_nodes = ?5
                 WHERE id = ?1",
            )?
            .execute(params![job.0 as i64, now, devices, node, more])?;
        }
        Event::Preempted { job, by, reason } => {
            set_stop(tx, *job, reason.as_str())?;
            let victim = sched.job(*job);
            let started: Option<Time> = match victim.and_then(Job::started_at) {
                Some(t) => Some(t),
                None => tx
                    .query_row(
                        "SELECT started_at FROM attempts WHERE job = ?1
                         ORDER BY attempt DESC LIMIT 1",
                        [job.0 as i64],
                        |r| r.get(0),
                    )
                    .optional()?,
            };
            let by_job = by.and_then(|b| sched.job(b));
            tx.prepare_cached(
                "INSERT INTO preemptions (at, victim, victim_name, victim_share, by_job,
                 by_name, by_share, reason, gpus, ran_for) VALUES
                 (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )?
            .execute(params![
                now,
                job.0 as i64,
                victim.map_or("", Job::name),
                victim.map_or("", |j| sched.share_name(j.share)),
                by.map(|b| b.0 as i64),
                by_job.map(Job::name),
                by_job.map(|j| sched.share_name(j.share)),
                reason.as_str(),
                victim.map_or(0, |j| j.quantity),
                started.map_or(0, |s| (now - s).max(0)),
            ])?;
        }
        Event::Cancelled { job, stop } => {
            if *stop {
                set_stop(tx, *job, "CANCELLED")?;
            }
            preemption_outcome(tx, *job, "cancelled")?;
        }
        Event::TimedOut { job } => set_stop(tx, *job, "TIMEOUT")?,
        Event::OverMemory {
            job, stop: true, ..
        } => set_stop(tx, *job, "OVER_MEMORY")?,
        Event::OverMemory { stop: false, .. } => {}
        Event::Requeued { job, lost } => {
            close_attempt(tx, *job, now)?;
            preemption_lost(tx, *job, lost.as_ref())?;
            preemption_outcome(tx, *job, "requeued")?;
        }
        Event::Failed { job, reason, lost } => {
            close_attempt(tx, *job, now)?;
            preemption_lost(tx, *job, lost.as_ref())?;
            preemption_outcome(tx, *job, &format!("failed ({})", reason.code()))?;
        }
        Event::Succeeded { job } => {
            close_attempt(tx, *job, now)?;
            preemption_outcome(tx, *job, "succeeded")?;
        }
        Event::Submitted { .. }
        | Event::Released { .. }
        | Event::Reprioritized { .. }
        | Event::Rejected { .. }
        | Event::ConfigApplied
        | Event::ConfigRejected { .. } => {}
    }
    Ok(())
}
