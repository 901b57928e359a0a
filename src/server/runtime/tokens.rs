//! Client tokens of submits (SPEC §8): a client that lost the answer to a submit retries
//! with the same token and gets the job the first submit made. Tokens of jobs already
//! stored are found in the database (with the job's spec); those of the batch under way,
//! not stored yet, are kept here until the batch is recorded. A token is scoped to its
//! caller (SPEC §9): it is kept as `<uid>:<token>`, so another user replaying it makes a
//! job of their own and never learns of the first. (Its shape is the model's check.)

use crate::model::{JobId, Submitter};
use crate::store::Store;
use std::collections::HashMap;

/// The token as kept: prefixed by the caller's uid (`-` for a job with no submitter, such
/// as one made by the scheduler's own console in tests).
pub(crate) fn scoped(token: &str, submitter: Option<&Submitter>) -> String {
    match submitter {
        Some(s) => format!("{}:{token}", s.uid),
        None => format!("-:{token}"),
    }
}

#[derive(Debug, Default)]
pub(crate) struct ClientTokens {
    unstored: HashMap<String, JobId>,
}

impl ClientTokens {
    /// The job a submit with this token made before, if any.
    pub(crate) fn lookup(&self, token: &str, store: Option<&Store>) -> Option<JobId> {
        if let Some(&id) = self.unstored.get(token) {
            return Some(id);
        }
        match store?.job_by_client_token(token) {
            Ok(id) => id,
            Err(e) => {
                tracing::warn!("cannot look up a client token: {e}");
                None
            }
        }
    }

    pub(crate) fn remember(&mut self, token: String, job: JobId) {
        self.unstored.insert(token, job);
    }

    /// The batch is recorded: the store knows its tokens now. Without a store they are
    /// kept for the life of the runtime.
    pub(crate) fn stored(&mut self) {
        self.unstored.clear();
    }
}
