//! Reading: what a restart recovers, the history for `shareq jobs --all`, attempts, the
//! preemption log, and pruning of old finished jobs.

use super::rows::{
    ConfigRecord, JobRecord, Recovered, StoredHolding, StoredJob, decode_stop, devices_from_json,
    state_from_str,
};
use super::{AttemptRecord, Store, StoreError};
use crate::model::{JobId, JobSpec, JobState};
use crate::sched::Time;
use crate::snapshot::PreemptionRecord;
use rusqlite::{OptionalExtension, Row, params};

/// How many of the latest preemptions and finished jobs `load` returns.
pub const RECENT_PREEMPTIONS: usize = 1000;
pub const RECENT_HISTORY: usize = 200;

const MS_PER_DAY: i64 = 86_400_000;

/// The jobs that ended SUCCEEDED, and every array as (parent, size) (SPEC §13).
pub type LinkHistory = (Vec<JobId>, Vec<(JobId, u32)>);

const JOB_RECORD_COLUMNS: &str = "id, name, share, unit, quantity, priority, state, submitted,
    started_at, finished_at, devices, attempts_started, preempted_count, fail_reason,
    json_extract(spec, '$.submitter.name'), json_extract(spec, '$.submitter.uid'),
    (SELECT json_type(w.spec, '$.command') FROM job_specs w WHERE w.job = jobs.id),
    (SELECT json_extract(w.spec, '$.command') FROM job_specs w WHERE w.job = jobs.id),
    parent, array_index,
    array_size, lost_gpu_ms, ckpt_at, ckpt_attempt, ckpt_note";

impl Store {
    /// Each submitter's bytes of job data (commands and envs as stored): uid, name, bytes.
    pub fn data_by_user(&self) -> Result<Vec<(u32, String, u64)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT json_extract(j.spec, '$.submitter.uid') AS uid,
                    max(json_extract(j.spec, '$.submitter.name')), sum(length(s.spec))
                 FROM job_specs s JOIN jobs j ON j.id = s.job
                 WHERE uid IS NOT NULL GROUP BY uid",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (uid, name, bytes) = row.map_err(|e| self.err(e))?;
            let name = name.unwrap_or_else(|| uid.to_string());
            out.push((uid as u32, name, bytes.max(0) as u64));
        }
        Ok(out)
    }

    /// Everything a restarting runtime needs: jobs to queue or adopt (in id order), the
    /// preemption log, recent history, the highest id handed out and the last config.
    pub fn load(&self) -> Result<Recovered, StoreError> {
        let (succeeded, arrays) = self.link_history()?;
        Ok(Recovered {
            jobs: self.active_jobs()?,
            preemptions: self.preemptions(RECENT_PREEMPTIONS)?,
            history: self.history(RECENT_HISTORY, 0)?,
            max_job_id: self.max_job_id()?,
            config: self.last_config()?,
            owner: self.identity()?,
            succeeded,
            arrays,
        })
    }

    /// What dependencies on ended jobs are judged by (SPEC §13): the jobs that ended
    /// SUCCEEDED, and every array (parent, size), for `Sched::restore_history`.
    pub fn link_history(&self) -> Result<LinkHistory, StoreError> {
        Ok((
            self.ids("SELECT id FROM jobs WHERE state = 'SUCCEEDED'")?,
            self.arrays()?,
        ))
    }

    fn ids(&self, sql: &str) -> Result<Vec<JobId>, StoreError> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(|e| self.err(e))?;
        let ids = stmt
            .query_map([], |r| r.get::<_, i64>(0))
            .and_then(|rows| rows.map(|r| r.map(|i| JobId(i as u64))).collect())
            .map_err(|e| self.err(e))?;
        Ok(ids)
    }

    /// Every array: (parent, size), in id order.
    fn arrays(&self) -> Result<Vec<(JobId, u32)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT id, array_size FROM jobs WHERE array_size IS NOT NULL ORDER BY id",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| Ok((JobId(r.get::<_, i64>(0)? as u64), r.get(1)?)))
            .and_then(|rows| rows.collect())
            .map_err(|e| self.err(e))?;
        Ok(rows)
    }

    /// Jobs queued or holding GPUs, in id order.
    pub fn active_jobs(&self) -> Result<Vec<StoredJob>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT id, (SELECT spec FROM job_specs WHERE job = jobs.id), unit, submitted, priority, state, preempted_count,
                    failed_attempts, attempts_started, stop_kind, stop_by, stop_reason,
                    started_at, devices,
                    (SELECT attempt FROM attempts WHERE job = jobs.id AND ended_at IS NULL
                     ORDER BY attempt DESC LIMIT 1),
                    fail_reason, node, depends_on, parent, array_index, array_size,
                    lost_gpu_ms,
                    CASE WHEN array_size IS NULL THEN 0 ELSE (SELECT count(*) FROM jobs c
                        WHERE c.parent = jobs.id AND c.finished_at IS NULL) END,
                    CASE WHEN array_size IS NULL THEN 0 ELSE (SELECT count(*) FROM jobs c
                        WHERE c.parent = jobs.id AND c.state = 'FAILED') END,
                    ckpt_at, ckpt_attempt, ckpt_note, more_nodes
                 FROM jobs WHERE finished_at IS NULL ORDER BY id",
            )
            .map_err(|e| self.err(e))?;
        let mut rows = stmt.query([]).map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(|e| self.err(e))? {
            out.push(self.stored_job(row)?);
        }
        Ok(out)
    }

    fn stored_job(&self, row: &Row) -> Result<StoredJob, StoreError> {
        let e = |e| self.err(e);
        let id: i64 = row.get(0).map_err(e)?;
        let bad = |what: String| StoreError::bad_record(&self.path, format!("job {id}: {what}"));
        let spec_text: String = row.get(1).map_err(e)?;
        let spec: JobSpec =
            serde_json::from_str(&spec_text).map_err(|x| bad(format!("spec: {x}")))?;
        let state_text: String = row.get(5).map_err(e)?;
        let state =
            state_from_str(&state_text).ok_or_else(|| bad(format!("state `{state_text}`")))?;
        let holding = match state {
            JobState::Scheduled | JobState::Starting | JobState::Running => {
                let kind: Option<String> = row.get(9).map_err(e)?;
                let reason: Option<String> = row.get(11).map_err(e)?;
                let stopping =
                    decode_stop(kind.as_deref(), row.get(10).map_err(e)?, reason.as_deref())
                        .map_err(|x| bad(x.to_string()))?;
                let devices: Option<String> = row.get(13).map_err(e)?;
                let devices = devices_from_json(devices.as_deref().unwrap_or("null"))
                    .map_err(|x| bad(x.to_string()))?;
                let started_at: Option<Time> = row.get(12).map_err(e)?;
                let attempts_started: u32 = row.get(8).map_err(e)?;
                let open: Option<u32> = row.get(14).map_err(e)?;
                let more: Option<String> = row.get(27).map_err(e)?;
                Some(StoredHolding {
                    more: super::rows::more_from_json(more.as_deref())
                        .map_err(|x| bad(x.to_string()))?,
                    node: row.get(16).map_err(e)?,
                    attempt: open.unwrap_or(attempts_started.max(1)),
                    devices,
                    started_at: started_at.ok_or_else(|| bad("holding, no start time".into()))?,
                    stopping,
                })
            }
            _ => None,
        };
        let deps: Option<String> = row.get(17).map_err(e)?;
        let deps: Vec<u64> = match deps {
            Some(t) => serde_json::from_str(&t).map_err(|x| bad(format!("depends_on: {x}")))?,
            None => Vec::new(),
        };
        let deps = deps.into_iter().map(JobId).collect();
        let parent: Option<i64> = row.get(18).map_err(e)?;
        let index: Option<u32> = row.get(19).map_err(e)?;
        let size: Option<u32> = row.get(20).map_err(e)?;
        let array = match (parent, index, size) {
            (Some(p), Some(index), _) => Some(crate::sched::ArrayLink::Child {
                parent: JobId(p as u64),
                index,
            }),
            (_, _, Some(size)) => Some(crate::sched::ArrayLink::Parent {
                size,
                left: row.get(22).map_err(e)?,
                failed: row.get(23).map_err(e)?,
            }),
            _ => None,
        };
        Ok(StoredJob {
            id: JobId(id as u64),
            spec,
            unit: row.get(2).map_err(e)?,
            submitted: row.get(3).map_err(e)?,
            priority: row.get(4).map_err(e)?,
            state,
            preempted_count: row.get(6).map_err(e)?,
            failed_attempts: row.get(7).map_err(e)?,
            attempts_started: row.get(8).map_err(e)?,
            fail_reason: row.get(15).map_err(e)?,
            holding,
            deps,
            array,
            lost_gpu_ms: row.get(21).map_err(e)?,
            checkpoint: checkpoint_of(row, 24)
                .map_err(e)?
                .map(|c| crate::sched::Checkpoint {
                    at: c.at,
                    attempt: c.attempt,
                    note: c.note.map(std::sync::Arc::from),
                }),
        })
    }

    /// The newest `limit` finished jobs that were queued or running at some instant of
    /// `[since, until]` (submitted by `until`, finished at or after `since`; either end
    /// open), newest first: `shareq jobs --all --since/--until`.
    pub fn history_in(
        &self,
        limit: usize,
        since: Option<i64>,
        until: Option<i64>,
    ) -> Result<Vec<JobRecord>, StoreError> {
        if since.is_none() && until.is_none() {
            return self.history(limit, 0);
        }
        let sql = format!(
            "SELECT {JOB_RECORD_COLUMNS} FROM jobs WHERE finished_at IS NOT NULL
             AND finished_at >= ?2 AND submitted <= ?3
             ORDER BY finished_at DESC, id DESC LIMIT ?1"
        );
        let mut stmt = self.conn.prepare_cached(&sql).map_err(|e| self.err(e))?;
        let mut rows = stmt
            .query(params![
                limit as i64,
                since.unwrap_or(i64::MIN),
                until.unwrap_or(i64::MAX)
            ])
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(|e| self.err(e))? {
            out.push(self.job_record(row)?);
        }
        Ok(out)
    }

    /// Finished jobs, newest first (by finish time, then id), for `shareq jobs --all`.
    pub fn history(&self, limit: usize, offset: usize) -> Result<Vec<JobRecord>, StoreError> {
        let sql = format!(
            "SELECT {JOB_RECORD_COLUMNS} FROM jobs WHERE finished_at IS NOT NULL
             ORDER BY finished_at DESC, id DESC LIMIT ?1 OFFSET ?2"
        );
        let mut stmt = self.conn.prepare_cached(&sql).map_err(|e| self.err(e))?;
        let mut rows = stmt
            .query(params![limit as i64, offset as i64])
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(|e| self.err(e))? {
            out.push(self.job_record(row)?);
        }
        Ok(out)
    }

    /// One job, finished or not.
    pub fn job(&self, id: JobId) -> Result<Option<JobRecord>, StoreError> {
        let sql = format!("SELECT {JOB_RECORD_COLUMNS} FROM jobs WHERE id = ?1");
        let mut stmt = self.conn.prepare_cached(&sql).map_err(|e| self.err(e))?;
        let mut rows = stmt.query([id.0 as i64]).map_err(|e| self.err(e))?;
        match rows.next().map_err(|e| self.err(e))? {
            Some(row) => Ok(Some(self.job_record(row)?)),
            None => Ok(None),
        }
    }

    /// An array's children by state (SPEC §13).
    fn child_counts(
        &self,
        parent: i64,
    ) -> Result<std::collections::BTreeMap<JobState, u32>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT state, count(*) FROM jobs WHERE parent = ?1 GROUP BY state")
            .map_err(|e| self.err(e))?;
        let rows: Vec<(String, u32)> = stmt
            .query_map([parent], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|rows| rows.collect())
            .map_err(|e| self.err(e))?;
        Ok(rows
            .into_iter()
            .filter_map(|(s, n)| Some((state_from_str(&s)?, n)))
            .collect())
    }

    fn job_record(&self, row: &Row) -> Result<JobRecord, StoreError> {
        let e = |e| self.err(e);
        let id: i64 = row.get(0).map_err(e)?;
        let bad = |what: String| StoreError::bad_record(&self.path, format!("job {id}: {what}"));
        let state_text: String = row.get(6).map_err(e)?;
        let devices: Option<String> = row.get(10).map_err(e)?;
        let size: Option<u32> = row.get(20).map_err(e)?;
        let array = match size {
            Some(size) => Some(crate::snapshot::ArrayView {
                size,
                counts: self.child_counts(id)?,
            }),
            None => None,
        };
        Ok(JobRecord {
            parent: row
                .get::<_, Option<i64>>(18)
                .map_err(e)?
                .map(|p| JobId(p as u64)),
            array_index: row.get(19).map_err(e)?,
            array,
            last_checkpoint: checkpoint_of(row, 22).map_err(e)?,
            id: JobId(id as u64),
            name: row.get(1).map_err(e)?,
            share: row.get(2).map_err(e)?,
            unit: row.get(3).map_err(e)?,
            quantity: row.get(4).map_err(e)?,
            priority: row.get(5).map_err(e)?,
            state: state_from_str(&state_text)
                .ok_or_else(|| bad(format!("state `{state_text}`")))?,
            submitted: row.get(7).map_err(e)?,
            started_at: row.get(8).map_err(e)?,
            finished_at: row.get(9).map_err(e)?,
            devices: match devices {
                Some(d) => devices_from_json(&d).map_err(|x| bad(x.to_string()))?,
                None => Vec::new(),
            },
            attempts: row.get(11).map_err(e)?,
            preempted_count: row.get(12).map_err(e)?,
            lost_gpu_ms: row.get(21).map_err(e)?,
            fail_reason: row.get(13).map_err(e)?,
            submitter: match (
                row.get::<_, Option<String>>(14).map_err(e)?,
                row.get::<_, Option<u32>>(15).map_err(e)?,
            ) {
                (Some(name), Some(uid)) => {
                    Some(std::sync::Arc::new(crate::model::Submitter { name, uid }))
                }
                _ => None,
            },
            command: {
                let kind: Option<String> = row.get(16).map_err(e)?;
                let text: Option<String> = row.get(17).map_err(e)?;
                match (kind.as_deref(), text) {
                    (Some("text"), Some(t)) => crate::model::Command::Shell(t).line(),
                    (Some("array"), Some(t)) => serde_json::from_str::<Vec<String>>(&t)
                        .map(|v| crate::model::Command::Argv(v).line())
                        .map_err(|x| bad(format!("command: {x}")))?,
                    _ => String::new(),
                }
            },
        })
    }

    /// A job's attempts, first to last.
    pub fn attempts(&self, job: JobId) -> Result<Vec<AttemptRecord>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT attempt, devices, borrowed, started_at, stop, ended_at, exit_code, outcome
                 FROM attempts WHERE job = ?1 ORDER BY attempt",
            )
            .map_err(|e| self.err(e))?;
        let mut rows = stmt.query([job.0 as i64]).map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        while let Some(r) = rows.next().map_err(|e| self.err(e))? {
            let e = |e| self.err(e);
            let devices: String = r.get(1).map_err(e)?;
            out.push(AttemptRecord {
                job,
                attempt: r.get(0).map_err(e)?,
                devices: devices_from_json(&devices)
                    .map_err(|d| StoreError::bad_record(&self.path, format!("job {job}: {d}")))?,
                borrowed: r.get(2).map_err(e)?,
                started_at: r.get(3).map_err(e)?,
                stop: r.get(4).map_err(e)?,
                ended_at: r.get(5).map_err(e)?,
                exit_code: r.get(6).map_err(e)?,
                outcome: r.get(7).map_err(e)?,
            });
        }
        Ok(out)
    }

    /// The latest `limit` preemptions, newest first.
    pub fn preemptions(&self, limit: usize) -> Result<Vec<PreemptionRecord>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT at, victim, victim_name, victim_share, by_job, by_name, by_share,
                    reason, gpus, ran_for, outcome,
                    (SELECT json_extract(spec, '$.submitter.name') FROM jobs WHERE jobs.id = victim),
                    (SELECT json_extract(spec, '$.submitter.name') FROM jobs WHERE jobs.id = by_job),
                    last_save, saved, released
                 FROM preemptions ORDER BY seq DESC LIMIT ?1",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([limit as i64], |r| {
                Ok(PreemptionRecord {
                    at: r.get(0)?,
                    victim: JobId(r.get::<_, i64>(1)? as u64),
                    victim_name: r.get(2)?,
                    victim_share: r.get(3)?,
                    by: r.get::<_, Option<i64>>(4)?.map(|b| JobId(b as u64)),
                    by_name: r.get(5)?,
                    by_share: r.get(6)?,
                    reason: r.get(7)?,
                    gpus: r.get(8)?,
                    ran_for: r.get(9)?,
                    outcome: r.get(10)?,
                    victim_user: r.get(11)?,
                    by_user: r.get(12)?,
                    lost: match (r.get::<_, Option<i64>>(13)?, r.get::<_, Option<i64>>(15)?) {
                        (Some(last_save), Some(released)) => Some(crate::snapshot::LostWork {
                            gpus: r.get(8)?,
                            last_save,
                            released,
                            saved: r.get::<_, Option<bool>>(14)?.unwrap_or(false),
                        }),
                        _ => None,
                    },
                    victim_placements: Vec::new(),
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// The job whose submit carried this client token, if any (SPEC §8).
    pub fn job_by_client_token(&self, token: &str) -> Result<Option<JobId>, StoreError> {
        // Cached: every submit of the CLI carries a token, so this runs once per submit.
        self.conn
            .prepare_cached("SELECT id FROM jobs WHERE json_extract(spec, '$.clientToken') = ?1")
            .and_then(|mut s| s.query_row([token], |r| r.get::<_, i64>(0)).optional())
            .map(|o| o.map(|id| JobId(id as u64)))
            .map_err(|e| self.err(e))
    }

    /// The highest job id ever handed out; 0 when none.
    pub fn max_job_id(&self) -> Result<JobId, StoreError> {
        let v: i64 = self
            .conn
            .query_row(
                "SELECT max(COALESCE((SELECT value FROM meta WHERE key = 'max_job_id'), 0),
                            COALESCE((SELECT max(id) FROM jobs), 0))",
                [],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))?;
        Ok(JobId(v.max(0) as u64))
    }

    /// The configuration applied last.
    /// The configs in force over `[from, to]`: the last one applied at or before `from`,
    /// then every one applied after it up to `to`, in order; each with its documents
    /// (`None` for configs recorded before they were kept).
    pub fn configs_over(
        &self,
        from: Time,
        to: Time,
    ) -> Result<Vec<(ConfigRecord, Option<String>)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT hash, source, applied_at, documents FROM configs
                 WHERE seq >= coalesce((SELECT max(seq) FROM configs WHERE applied_at <= ?1), 0)
                   AND applied_at <= ?2
                 ORDER BY seq",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![from, to], |r| {
                Ok((
                    ConfigRecord {
                        hash: r.get(0)?,
                        source: r.get(1)?,
                        applied_at: r.get(2)?,
                    },
                    r.get(3)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.err(e))
    }

    pub fn last_config(&self) -> Result<Option<ConfigRecord>, StoreError> {
        self.conn
            .query_row(
                "SELECT hash, source, applied_at FROM configs ORDER BY seq DESC LIMIT 1",
                [],
                |r| {
                    Ok(ConfigRecord {
                        hash: r.get(0)?,
                        source: r.get(1)?,
                        applied_at: r.get(2)?,
                    })
                },
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Forget jobs that finished more than `retain_days` days before `now` (with their
    /// attempts), and older preemption-log lines and configs (the last config stays).
    /// Returns how many jobs went.
    pub fn prune(&mut self, retain_days: u32, now: Time) -> Result<u64, StoreError> {
        self.prune_jobs(retain_days, now)
            .map(|ids| ids.len() as u64)
    }

    /// [`Store::prune`], returning the ids of the jobs removed (their run files and logs
    /// go with them: `exec::state::runfiles::remove_jobs`).
    pub fn prune_jobs(&mut self, retain_days: u32, now: Time) -> Result<Vec<JobId>, StoreError> {
        let cutoff = now.saturating_sub(i64::from(retain_days).saturating_mul(MS_PER_DAY));
        let path = self.path.clone();
        let err = |e| StoreError::from_sqlite(&path, e);
        let tx = self.conn.transaction().map_err(err)?;
        let jobs: Vec<JobId> = tx
            .prepare(
                "DELETE FROM jobs WHERE finished_at IS NOT NULL AND finished_at < ?1
                 RETURNING id",
            )
            .and_then(|mut st| {
                st.query_map([cutoff], |r| r.get::<_, i64>(0))?
                    .map(|r| r.map(|id| JobId(id as u64)))
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(err)?;
        tx.execute("DELETE FROM preemptions WHERE at < ?1", [cutoff])
            .map_err(err)?;
        tx.execute(
            "DELETE FROM configs WHERE applied_at < ?1
             AND seq < (SELECT max(seq) FROM configs)",
            [cutoff],
        )
        .map_err(err)?;
        super::events::prune(&tx, cutoff).map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(jobs)
    }
}

/// The checkpoint columns (`ckpt_at`, `ckpt_attempt`, `ckpt_note`) from `first` on.
fn checkpoint_of(
    row: &Row,
    first: usize,
) -> rusqlite::Result<Option<crate::snapshot::CheckpointView>> {
    let at: Option<i64> = row.get(first)?;
    let attempt: Option<u32> = row.get(first + 1)?;
    Ok(match (at, attempt) {
        (Some(at), Some(attempt)) => Some(crate::snapshot::CheckpointView {
            at,
            attempt,
            note: row.get(first + 2)?,
        }),
        _ => None,
    })
}
