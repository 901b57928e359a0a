//! The database schema and its versioned migrations (`PRAGMA user_version`).
//!
//! Migration N (1-based) takes a database from version N-1 to N, in its own transaction.
//! Never edit a released migration: append a new one.

use super::error::StoreError;
use rusqlite::Connection;
use std::path::Path;

/// `PRAGMA application_id`: "shrq". Tells our databases from other SQLite files.
pub const APPLICATION_ID: i64 = 0x7368_7271;

const MIGRATIONS: &[&str] = &[
    // 1: jobs, attempts, preemption log, applied configs, counters.
    "
    CREATE TABLE jobs (
        id               INTEGER PRIMARY KEY,
        name             TEXT    NOT NULL,
        share            TEXT    NOT NULL,
        unit             TEXT    NOT NULL,
        quantity         INTEGER NOT NULL,
        priority         INTEGER NOT NULL,
        spec             TEXT    NOT NULL,   -- JobSpec as JSON, SPEC field names
        submitted        INTEGER NOT NULL,   -- ms since the epoch
        state            TEXT    NOT NULL,   -- JobState, SCREAMING_SNAKE
        preempted_count  INTEGER NOT NULL DEFAULT 0,
        failed_attempts  INTEGER NOT NULL DEFAULT 0,
        attempts_started INTEGER NOT NULL DEFAULT 0,
        fail_reason      TEXT,               -- as shown: 'CANCELLED: by alice', ...
        stop_kind        TEXT,               -- PREEMPT | CANCEL | TIMEOUT while being stopped
        stop_by          INTEGER,            -- the job that caused a preemption
        stop_reason      TEXT,               -- PreemptReason
        stop_since       INTEGER,
        started_at       INTEGER,            -- start of the latest attempt
        devices          TEXT,               -- devices of the latest attempt, JSON
        finished_at      INTEGER             -- NULL while queued or holding GPUs
    );
    CREATE INDEX jobs_active ON jobs(id) WHERE finished_at IS NULL;
    CREATE INDEX jobs_finished ON jobs(finished_at, id) WHERE finished_at IS NOT NULL;

    CREATE TABLE attempts (
        job        INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
        attempt    INTEGER NOT NULL,         -- 1-based, = SHAREQ_ATTEMPT
        devices    TEXT    NOT NULL,         -- JSON array of device indices
        borrowed   INTEGER NOT NULL,
        started_at INTEGER NOT NULL,
        stop       TEXT,                     -- why it was stopped: a PreemptReason, CANCELLED, TIMEOUT
        ended_at   INTEGER,
        exit_code  INTEGER,
        outcome    TEXT,                     -- SUCCEEDED, NON_ZERO_EXIT, PREEMPTED, ..., LOST_ON_RESTART
        PRIMARY KEY (job, attempt)
    ) WITHOUT ROWID;

    CREATE TABLE preemptions (
        seq          INTEGER PRIMARY KEY,
        at           INTEGER NOT NULL,
        victim       INTEGER NOT NULL,
        victim_name  TEXT    NOT NULL,
        victim_share TEXT    NOT NULL,
        by_job       INTEGER,
        by_name      TEXT,
        by_share     TEXT,
        reason       TEXT    NOT NULL,
        gpus         INTEGER NOT NULL,
        ran_for      INTEGER NOT NULL,
        outcome      TEXT
    );
    CREATE INDEX preemptions_open ON preemptions(victim) WHERE outcome IS NULL;
    CREATE INDEX preemptions_at ON preemptions(at);

    CREATE TABLE configs (
        seq        INTEGER PRIMARY KEY,
        hash       TEXT    NOT NULL,
        source     TEXT    NOT NULL,
        applied_at INTEGER NOT NULL
    );

    -- Counters that must survive pruning (the highest job id ever handed out).
    CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value INTEGER NOT NULL
    ) WITHOUT ROWID;
    ",
    // 2: the audit trail of accepted actions (SPEC §9), written by `server::runtime::audit`.
    "
    CREATE TABLE audit (
        seq    INTEGER PRIMARY KEY,
        at     INTEGER NOT NULL,             -- ms since the epoch
        uid    INTEGER NOT NULL,             -- the caller, from peer credentials
        user   TEXT    NOT NULL,
        action TEXT    NOT NULL,             -- submit | cancel | priority | reload
        job    INTEGER,                      -- the job acted on, if one
        detail TEXT    NOT NULL DEFAULT ''
    );
    CREATE INDEX audit_at ON audit(at);
    ",
    // 3: find a job by the client token of its submit (SPEC §8: a retried submit gets
    // the same job).
    "
    CREATE UNIQUE INDEX jobs_client_token ON jobs(json_extract(spec, '$.clientToken'))
        WHERE json_extract(spec, '$.clientToken') IS NOT NULL;
    ",
    // 4: the node of each attempt's devices (SPEC §10); NULL without `nodes`.
    "
    ALTER TABLE jobs ADD COLUMN node TEXT;
    ALTER TABLE attempts ADD COLUMN node TEXT;
    ",
    // 5: the utilisation history (`store::usage`): one tick per sample instant, one row
    // per share and unit that was not idle then. Pruned after `usage::KEEP_DAYS`.
    "
    CREATE TABLE usage_ticks (
        at       INTEGER PRIMARY KEY,        -- ms since the epoch
        every_ms INTEGER NOT NULL            -- the sampling interval then
    );
    CREATE TABLE usage_samples (
        at           INTEGER NOT NULL,
        share        TEXT    NOT NULL,
        unit         TEXT    NOT NULL,
        limit_gpus   INTEGER NOT NULL,       -- maxCapacity then
        own          INTEGER NOT NULL,       -- GPUs held within the limit
        borrowed     INTEGER NOT NULL,       -- GPUs held beyond it
        lent         INTEGER NOT NULL,       -- idle guarantee used by borrowers
        queued_jobs  INTEGER NOT NULL,
        queued_gpus  INTEGER NOT NULL,
        wait_max     INTEGER NOT NULL,       -- ms the longest-waiting queued job had waited
        started      INTEGER NOT NULL,       -- jobs started since the previous sample
        started_wait INTEGER NOT NULL,       -- the sum of their waits, ms
        PRIMARY KEY (at, share, unit)
    ) WITHOUT ROWID;
    -- The same rows summed per 12 minutes (`usage::COARSE_MS`), kept up to date as samples
    -- are written, so that a day or a week reads ~1/24 of the rows.
    CREATE TABLE usage_coarse (
        bucket       INTEGER NOT NULL,       -- start, ms, a multiple of 12 minutes
        share        TEXT    NOT NULL,
        unit         TEXT    NOT NULL,
        limit_gpus   INTEGER NOT NULL,       -- in the newest sample
        last_at      INTEGER NOT NULL,       -- the newest sample
        own          INTEGER NOT NULL,       -- sums over the bucket's samples
        borrowed     INTEGER NOT NULL,
        lent         INTEGER NOT NULL,
        queued_gpus  INTEGER NOT NULL,
        wait_max     INTEGER NOT NULL,       -- the highest
        started      INTEGER NOT NULL,
        started_wait INTEGER NOT NULL,
        PRIMARY KEY (bucket, share, unit)
    ) WITHOUT ROWID;
    ",
    // 6: the decision stream (`shareq events`) and the standing after each change of it
    // (`shareq report`), written by `store::events` with each batch.
    "
    CREATE TABLE events (
        seq       INTEGER PRIMARY KEY,
        at        INTEGER NOT NULL,          -- ms since the epoch
        event     TEXT    NOT NULL,          -- submitted, started, preempted, ...
        job       INTEGER,                   -- the job's id, for job events
        share     TEXT,
        user      TEXT,                      -- the job's submitter
        submitted INTEGER,                   -- the job's submission time (ms)
        quantity  INTEGER,                   -- GPUs, on started lines
        line      TEXT    NOT NULL           -- the replay-format JSON line (SPEC §6)
    );
    CREATE INDEX events_at ON events(at);

    CREATE TABLE standing (
        seq     INTEGER PRIMARY KEY,
        at      INTEGER NOT NULL,            -- ms since the epoch
        figures TEXT    NOT NULL             -- replay::Standing as JSON: per share and unit
    );
    CREATE INDEX standing_at ON standing(at);
    ",
    // 7: each applied config's documents (its files' YAML joined with `---`), so that
    // `whatif` replays the configs that were in force over its window; NULL for the
    // configs recorded before.
    "
    ALTER TABLE configs ADD COLUMN documents TEXT;
    ",
    // 8: each user's decayed usage of each share (SPEC §12), written by
    // `store::user_usage`: the figure as of `at`, decayed on read.
    "
    CREATE TABLE user_usage (
        share TEXT    NOT NULL,
        user  TEXT    NOT NULL,
        usage REAL    NOT NULL,              -- GPU-seconds, decayed to `at`
        at    INTEGER NOT NULL,              -- ms since the epoch
        PRIMARY KEY (share, user)
    ) WITHOUT ROWID;
    ",
    // 9: dependencies and arrays (SPEC §13): an array child's parent and index, a
    // parent's size, and the ids a job waits for (JSON array, resolved: an N_TO_N or
    // SEQUENTIAL partner is an id like any other). NULL for jobs stored before.
    "
    ALTER TABLE jobs ADD COLUMN parent INTEGER;
    ALTER TABLE jobs ADD COLUMN array_index INTEGER;
    ALTER TABLE jobs ADD COLUMN array_size INTEGER;
    ALTER TABLE jobs ADD COLUMN depends_on TEXT;
    CREATE INDEX jobs_parent ON jobs(parent) WHERE parent IS NOT NULL;
    ",
    // 10: a job's whole spec (its command and env, up to 64 KiB) in a table of its own,
    // written once at submit; `jobs.spec` keeps the spec without them. A state change
    // then rewrites a small row, not the env's overflow pages: cancelling a thousand big
    // jobs on a nearly full state filesystem takes kilobytes, not their size again
    // (SPEC §8, issue 44).
    "
    CREATE TABLE job_specs (
        job  INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
        spec TEXT    NOT NULL                -- JobSpec as JSON, whole
    );
    INSERT INTO job_specs (job, spec) SELECT id, spec FROM jobs;
    UPDATE jobs SET spec = json_remove(spec, '$.env', '$.command');
    ",
    // 11: lost work (SPEC §14): each preemption's, written when its victim released its
    // GPUs (its GPUs × (the release − the attempt's last save), that last save, whether
    // it was a checkpoint report, the release), and each job's total over its
    // preemptions. NULL for a preemption still stopping, or ended otherwise, or recorded
    // before.
    "
    ALTER TABLE preemptions ADD COLUMN lost_gpu_ms INTEGER;
    ALTER TABLE preemptions ADD COLUMN last_save INTEGER;   -- ms since the epoch
    ALTER TABLE preemptions ADD COLUMN saved INTEGER;       -- 1: last_save was a checkpoint
    ALTER TABLE preemptions ADD COLUMN released INTEGER;    -- ms since the epoch
    ALTER TABLE jobs ADD COLUMN lost_gpu_ms INTEGER NOT NULL DEFAULT 0;
    ",
    // 12: each job's latest checkpoint report (SPEC §14, `shareq checkpoint`): when, by
    // which attempt, its note; written by `Store::record_checkpoint`. NULL until one.
    "
    ALTER TABLE jobs ADD COLUMN ckpt_at INTEGER;
    ALTER TABLE jobs ADD COLUMN ckpt_attempt INTEGER;
    ALTER TABLE jobs ADD COLUMN ckpt_note TEXT;
    ",
    // 13: a sliced unit's utilisation samples (SPEC §15) say so: the GiB of each of its
    // devices then (`slicing.memoryGiB`), its figures being GiB, never GPUs. NULL: whole
    // GPUs (or MIG instances), and every sample taken before.
    "
    ALTER TABLE usage_samples ADD COLUMN slice_gib INTEGER;
    ALTER TABLE usage_coarse ADD COLUMN slice_gib INTEGER;
    ",
    // 14: a gang's other nodes and its devices on each (SPEC §16), after `node` and
    // `devices` in node order, as JSON `[["gpu2",[0,1]],…]`; NULL for a plain job.
    "
    ALTER TABLE jobs ADD COLUMN more_nodes TEXT;
    ALTER TABLE attempts ADD COLUMN more_nodes TEXT;
    ",
];

/// The schema version this code writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Check that the file is ours and not from the future, reading only. Returns its version.
pub fn check(conn: &Connection, path: &Path) -> Result<i64, StoreError> {
    let err = |e| StoreError::from_sqlite(path, e);
    // Reading the header is what tells a corrupt or foreign file: do it before any write.
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(err)?;
    let app: i64 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .map_err(err)?;
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .map_err(err)?;
    if app != APPLICATION_ID && (version != 0 || tables != 0) {
        return Err(StoreError::Corrupt {
            path: path.to_path_buf(),
            detail: format!("an SQLite database of another program (application_id {app:#x})"),
        });
    }
    if version > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found: version,
            known: SCHEMA_VERSION,
        });
    }
    if version < 0 {
        return Err(StoreError::Corrupt {
            path: path.to_path_buf(),
            detail: format!("schema version {version}"),
        });
    }
    Ok(version)
}

/// Bring the database from `from` to [`SCHEMA_VERSION`], one transaction per step.
pub fn migrate(conn: &mut Connection, path: &Path, from: i64) -> Result<(), StoreError> {
    let err = |e| StoreError::from_sqlite(path, e);
    for (ix, sql) in MIGRATIONS.iter().enumerate().skip(from as usize) {
        let tx = conn.transaction().map_err(err)?;
        tx.execute_batch(sql).map_err(err)?;
        tx.pragma_update(None, "application_id", APPLICATION_ID)
            .map_err(err)?;
        tx.pragma_update(None, "user_version", ix as i64 + 1)
            .map_err(err)?;
        tx.commit().map_err(err)?;
    }
    Ok(())
}
