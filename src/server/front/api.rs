//! The two answers of the programmatic API (docs/API.md) that no CLI command had before:
//! `hello` (the protocol versions, and who the kernel says the caller is) and `job` (one
//! job by id, wherever it is: the live picture or, once archived, the database).

use super::protocol::{API_VERSION, API_VERSIONS, ErrorCode, Hello, Response};
use crate::access::Caller;
use crate::model::JobId;
use crate::snapshot::{JobView, Snapshot};
use std::path::PathBuf;

/// The answer to `hello`; with `api`, the version the client speaks must be one this
/// server speaks.
pub fn hello(api: Option<u32>, caller: &Caller, admin: bool) -> Response {
    if let Some(v) = api
        && !API_VERSIONS.contains(&v)
    {
        let known: Vec<String> = API_VERSIONS.iter().map(u32::to_string).collect();
        return Response::error(
            ErrorCode::UnsupportedApi,
            format!(
                "this scheduler does not speak API version {v} (it speaks {})",
                known.join(", ")
            ),
        );
    }
    Response {
        hello: Some(Hello {
            api: api.unwrap_or(API_VERSION),
            apis: API_VERSIONS.to_vec(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            user: caller.name.clone(),
            uid: caller.uid,
            admin,
        }),
        ..Response::ok()
    }
}

/// One job: from the picture while the scheduler has it in view (a queued one with its
/// reason and estimated start, as `jobs` lists it), else from the database of `root`.
pub async fn job(
    id: JobId,
    snap: &Snapshot,
    root: PathBuf,
    viewer: crate::snapshot::Viewer,
) -> Response {
    let live = snap.find_job(id).map(|(place, j)| match place {
        crate::snapshot::Place::Queued => snap.queued_row(j),
        _ => j.clone(),
    });
    let found = match live {
        Some(v) => Ok(Some(v)),
        None => match tokio::task::spawn_blocking(move || stored(id, root)).await {
            Ok(read) => read.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        },
    };
    match found {
        // Another user's command is not shown (SPEC §9).
        Ok(Some(v)) => Response {
            job: Some(viewer.view(v)),
            ..Response::ok()
        },
        Ok(None) => Response::error(ErrorCode::NotFound, format!("no job {id}")),
        Err(e) => Response::error(
            ErrorCode::Unavailable,
            format!("cannot read job {id} from the database: {e}"),
        ),
    }
}

/// A job the database holds. A scheduler without a database (`shareq demo`) has no
/// archive: a job out of view is not found.
fn stored(id: JobId, root: PathBuf) -> Result<Option<JobView>, crate::store::StoreError> {
    if !root.join(crate::store::DB_FILE).exists() {
        return Ok(None);
    }
    let store = crate::store::Store::open_read_only(&root)?;
    Ok(store.job(id)?.map(|r| JobView::from(&r)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_names_the_versions_and_the_caller_and_refuses_an_unknown_version() {
        let alice = Caller {
            uid: 1000,
            name: "alice".into(),
            groups: vec![],
        };
        let r = hello(Some(API_VERSION), &alice, true);
        let h = r.hello.expect("hello");
        assert!(r.ok);
        assert_eq!(
            (h.api, h.apis, h.user, h.uid, h.admin),
            (1, vec![1], "alice".into(), 1000, true)
        );
        let r = hello(Some(99), &alice, false);
        assert!(!r.ok);
        assert_eq!(r.code, Some(ErrorCode::UnsupportedApi));
        assert_eq!(
            r.error.as_deref(),
            Some("this scheduler does not speak API version 99 (it speaks 1)")
        );
    }
}
