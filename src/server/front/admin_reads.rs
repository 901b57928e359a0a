//! What-ifs and dry runs on the scheduler's database for admins who cannot read it
//! (issue 46: the system scheduler's database is root's): `whatif` and `dry_run` run the
//! CLI's own code (`crate::whatif`) on this state directory, off the async workers, on the
//! configs the client sent as its files' text (the scheduler reads no path a client
//! names). The guard admitted admins only.

use super::protocol::{ErrorCode, Response};
use crate::whatif::{ConfigFile, Current, DryRunAnswer, WhatIfAnswer, WhatIfError, load_files};
use std::path::PathBuf;

/// The directory a client's files came from, for errors: the first file's folder.
fn dir_of(files: &[ConfigFile]) -> String {
    files
        .first()
        .and_then(|f| std::path::Path::new(&f.path).parent())
        .map_or_else(|| "the config sent".into(), |d| d.display().to_string())
}

fn failed(e: &WhatIfError) -> Response {
    let code = match e {
        WhatIfError::Invalid { .. } => ErrorCode::BadRequest,
        _ => ErrorCode::Unavailable,
    };
    Response::error(code, e.to_string())
}

/// `whatif`: the window since `since` (ms) replayed under the current configs (or
/// `current`) and under `config`.
pub async fn whatif(
    root: PathBuf,
    config: Vec<ConfigFile>,
    current: Option<Vec<ConfigFile>>,
    since: i64,
) -> Response {
    let run = tokio::task::spawn_blocking(move || {
        let proposed = load_files(&dir_of(&config), &config)?;
        let current = match current {
            None => Current::Recorded,
            Some(files) => {
                let dir = dir_of(&files);
                Current::Given(Box::new(load_files(&dir, &files)?), dir)
            }
        };
        let mut notes = Vec::new();
        let run = crate::whatif::what_if_on(&root, proposed.config, current, since, &mut notes)?;
        Ok::<_, WhatIfError>(WhatIfAnswer::of(run, notes))
    })
    .await;
    match run {
        Ok(Ok(answer)) => Response {
            whatif: Some(answer),
            ..Response::ok()
        },
        Ok(Err(e)) => failed(&e),
        Err(e) => Response::error(ErrorCode::Unavailable, format!("the what-if failed: {e}")),
    }
}

/// `dry_run`: what applying `config` now would do to the jobs the database holds.
pub async fn dry_run(root: PathBuf, config: Vec<ConfigFile>) -> Response {
    let run = tokio::task::spawn_blocking(move || {
        let proposed = load_files(&dir_of(&config), &config)?;
        let mut notes = Vec::new();
        let d = crate::whatif::dry_run_on(&root, &proposed.config, &mut notes)?;
        Ok::<_, WhatIfError>(DryRunAnswer::of(&d, notes))
    })
    .await;
    match run {
        Ok(Ok(answer)) => Response {
            dry_run: Some(answer),
            ..Response::ok()
        },
        Ok(Err(e)) => failed(&e),
        Err(e) => Response::error(ErrorCode::Unavailable, format!("the dry run failed: {e}")),
    }
}
