//! `shareq events [--follow] [--json] [--since T] [--on EVENT]... [-- CMD ARGS...]`: the
//! scheduler's decisions as they happen (see `crate::events`), from its database for the
//! past and live after that; optionally each matching line handed to a command.

use super::error::CliError;
use crate::events::{EVENT_NAMES, EventLine};
use crate::server::{Client, Request};
use crate::visible::visible;
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct EventsArgs {
    /// Keep the connection open and print decisions as they are made.
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Print each line as JSON: the replay's line format plus `id`, `user`, `byId`, `seq`.
    #[arg(long)]
    pub json: bool,
    /// From this time: a span back (10m, 2h, 7d), a UTC date (2026-12-01) or date and
    /// time (2026-12-01T10:00), or `now`. Default: 1d, or `now` with --follow.
    #[arg(long, value_name = "T")]
    pub since: Option<String>,
    /// Only lines after this sequence number (`seq` of the last line a notifier handled):
    /// resume without missing or repeating a decision. Without --since, from the start of
    /// the stored stream.
    #[arg(long, value_name = "SEQ")]
    pub after: Option<u64>,
    /// Only these events (repeat or separate with commas): submitted, started, preempted,
    /// requeued, failed, succeeded, cancelled, timed_out, reprioritized, rejected,
    /// config_applied, config_rejected.
    #[arg(long = "on", value_name = "EVENT", value_delimiter = ',')]
    pub on: Vec<String>,
    #[arg(long, help = super::STATE_HELP)]
    pub state: Option<PathBuf>,
    /// Run this command for each (matching) line instead of printing it: the JSON line
    /// on its standard input, and SHAREQ_EVENT, SHAREQ_EVENT_JOB, SHAREQ_EVENT_ID,
    /// SHAREQ_EVENT_SHARE, SHAREQ_EVENT_USER, SHAREQ_EVENT_LINE in its environment. One
    /// at a time, in order; a command that fails is reported and the stream goes on.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Exit 0 after the past (without --follow), 1 when the scheduler cannot be reached or
/// (with --follow) closed the stream, 2 on a bad argument.
pub fn events(args: &EventsArgs) -> Result<(), CliError> {
    for e in &args.on {
        if !EVENT_NAMES.contains(&e.as_str()) {
            return Err(CliError::usage(format!(
                "shareq events: --on {}: no such event; events are {}",
                visible(e),
                EVENT_NAMES.join(", ")
            )));
        }
    }
    let now = crate::exec::now_ms();
    let since = match &args.since {
        Some(t) => match crate::report::parse_time(t, now) {
            Ok(ms) => ms,
            Err(e) => {
                return Err(CliError::usage(format!("shareq events: --since: {e}")));
            }
        },
        None if args.after.is_some() => 0,
        None if args.follow => now,
        None => now - 86_400_000,
    };
    let mut client = match super::serve::state_dir(args.state.as_deref())
        .map_err(|e| e.to_string())
        .and_then(|s| Client::connect(&s).map_err(|e| e.to_string()))
    {
        Ok(c) => c,
        Err(e) => {
            return Err(CliError::failed(format!("shareq events: {e}")));
        }
    };
    let req = Request::Events {
        after: args.after.unwrap_or(0),
        since,
        follow: args.follow,
    };
    if let Err(e) = client.send(&req) {
        return Err(CliError::failed(format!("shareq events: {e}")));
    }
    let stdout = std::io::stdout();
    loop {
        let line = match client.next_line() {
            Ok(Some(l)) => l,
            Ok(None) if args.follow => {
                // A follower outlives the stream only when the scheduler went away.
                return Err(CliError::failed(
                    "shareq events: the scheduler closed the stream (did it stop?)",
                ));
            }
            Ok(None) => return Ok(()),
            Err(e) => {
                return Err(CliError::failed(format!("shareq events: {e}")));
            }
        };
        let ev: EventLine = match serde_json::from_str(&line) {
            Ok(ev) => ev,
            Err(_) => {
                // An error answer (`{"ok":false,...}`) instead of the stream.
                let msg = serde_json::from_str::<crate::server::Response>(&line)
                    .ok()
                    .and_then(|r| r.error)
                    .unwrap_or(line);
                return Err(CliError::failed(format!(
                    "shareq events: {}",
                    visible(&msg)
                )));
            }
        };
        if !args.on.is_empty() && !args.on.contains(&ev.event) {
            continue;
        }
        if !args.command.is_empty() {
            run_hook(&args.command, &ev);
            continue;
        }
        let text = if args.json { ev.json() } else { human(&ev) };
        let mut out = stdout.lock();
        if writeln!(out, "{text}").and_then(|()| out.flush()).is_err() {
            return Ok(());
        }
    }
}

/// `2026-12-01 17:40:03.123  preempted  job=train id=12 share=qs1 by=x ...`: the time,
/// the event, then every other field of the line in its order; a line that ends a
/// preemption ends with what it lost as the console's preemption log says it
/// (`lost 2 GPU × 12m`, `saved 40s before`), its GPU-seconds kept as a field.
pub fn human(ev: &EventLine) -> String {
    let when = chrono::DateTime::from_timestamp_millis(ev.at)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
        .unwrap_or_default();
    let mut out = format!("{when}  {:<14}", ev.event);
    let lost = lost_work(ev);
    let value = ev.value();
    let gang = gang_places(&value);
    // What the words at the end say is not repeated as fields: the replay's `lost`, and
    // the GPUs, last save and whether it was a report (`lostGpuSeconds` stays); a gang's
    // nodes and devices.
    let said = |k: &str| {
        (lost.is_some() && matches!(k, "lost" | "lostGpus" | "lastSave" | "saved"))
            || (gang.is_some() && matches!(k, "devices" | "nodes"))
    };
    if let serde_json::Value::Object(map) = value {
        // The camelCase names the stream adds beside the old ones are not said twice.
        let keys: Vec<String> = map.keys().cloned().collect();
        let twin = |k: &str| crate::wire::is_new_twin(k, keys.iter().map(String::as_str));
        for (k, v) in map {
            if k == "t" || k == "event" || said(&k) || twin(&k) {
                continue;
            }
            let text = match v {
                serde_json::Value::String(s) => visible(&s).into_owned(),
                serde_json::Value::Null => "-".to_string(),
                other => other.to_string(),
            };
            out.push_str(&format!(" {k}={text}"));
        }
    }
    if let Some(on) = gang {
        out.push_str(&format!("  (on {})", visible(&on)));
    }
    if let Some(l) = lost {
        out.push_str(&format!("  ({})", l.text()));
    }
    out.trim_end().to_string()
}

/// A gang's `started` line (SPEC §16: `"devices"` per node, then `"nodes"`) as the console
/// names where a job runs: `gpu1:0,1 gpu2:0,1`; `None` for any other line.
fn gang_places(v: &serde_json::Value) -> Option<String> {
    let nodes = v["nodes"].as_array()?;
    let devices = v["devices"].as_array()?;
    if nodes.len() != devices.len() {
        return None;
    }
    let lists: Vec<(&str, Vec<u32>)> = nodes
        .iter()
        .zip(devices)
        .map(|(n, d)| {
            let d = d.as_array()?;
            let d = d
                .iter()
                .map(|i| i.as_u64().and_then(|i| u32::try_from(i).ok()))
                .collect::<Option<Vec<u32>>>()?;
            Some((n.as_str()?, d))
        })
        .collect::<Option<_>>()?;
    let places: Vec<(Option<&str>, &[u32])> = lists
        .iter()
        .map(|(n, d)| (Some(*n), d.as_slice()))
        .collect();
    Some(crate::snapshot::places_text(
        &places,
        crate::snapshot::PlaceStyle::Compact,
    ))
}

/// The work lost by the preemption a live line ends (`crate::events`' `lostGpus`,
/// `lastSave`, `saved`; released at the line's time).
fn lost_work(ev: &EventLine) -> Option<crate::snapshot::LostWork> {
    let v = ev.value();
    let last_save = v["lastSave"].as_f64()?;
    Some(crate::snapshot::LostWork {
        gpus: u32::try_from(v["lostGpus"].as_u64()?).ok()?,
        last_save: (last_save * 1000.0).round() as i64,
        released: ev.at,
        saved: v["saved"].as_bool().unwrap_or(false),
    })
}

fn run_hook(command: &[String], ev: &EventLine) {
    let json = ev.json();
    let v = ev.value();
    let field = |k: &str| v[k].as_str().unwrap_or_default().to_string();
    let mut cmd = std::process::Command::new(&command[0]);
    cmd.args(&command[1..])
        .env("SHAREQ_EVENT", &ev.event)
        .env("SHAREQ_EVENT_JOB", field("job"))
        .env(
            "SHAREQ_EVENT_ID",
            ev.job.map(|j| j.to_string()).unwrap_or_default(),
        )
        .env("SHAREQ_EVENT_SHARE", ev.share.clone().unwrap_or_default())
        .env("SHAREQ_EVENT_USER", ev.user.clone().unwrap_or_default())
        .env("SHAREQ_EVENT_LINE", &json)
        .stdin(std::process::Stdio::piped());
    let result = cmd.spawn().and_then(|mut child| {
        if let Some(mut stdin) = child.stdin.take() {
            let _ = writeln!(stdin, "{json}");
        }
        child.wait()
    });
    match result {
        Ok(status) if status.success() => {}
        Ok(status) => eprintln!(
            "shareq events: `{}` for {} (seq {}) ended with {status}",
            visible(&command.join(" ")),
            ev.event,
            ev.seq
        ),
        Err(e) => eprintln!(
            "shareq events: cannot run `{}`: {e}",
            visible(&command.join(" "))
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::human;
    use crate::events::EventLine;

    fn line(event: &str, json: &str) -> EventLine {
        EventLine {
            seq: 3,
            at: 1_796_144_101_899,
            event: event.into(),
            job: Some(4),
            share: Some("a".into()),
            user: None,
            submitted: None,
            quantity: None,
            line: json.into(),
        }
    }

    /// A gang's `started` line (SPEC §16) names all its nodes in words, as the console
    /// does, instead of its per-node `devices` and `nodes` fields; a job on one node keeps
    /// its fields.
    #[test]
    fn a_gangs_lines_name_every_node_in_words() {
        let gang = line(
            "started",
            r#"{"t":1.0,"event":"started","job":"g","share":"a","unit":"gpu","quantity":2,"borrowed":0,"devices":[[0,1],[2,3]],"nodes":["gpu1","gpu2"],"id":4}"#,
        );
        let text = human(&gang);
        assert!(
            text.ends_with("quantity=2 borrowed=0 id=4  (on gpu1:0,1 gpu2:2,3)"),
            "{text}"
        );
        let preempted = line(
            "preempted",
            r#"{"t":1.0,"event":"preempted","job":"g","share":"a","by":"k","by_share":"b","reason":"CROSS_SHARE_RECLAIM","id":4,"by_id":5,"devices":[[0,1],[2,3]],"nodes":["gpu1","gpu2"]}"#,
        );
        let text = human(&preempted);
        assert!(text.ends_with("by_id=5  (on gpu1:0,1 gpu2:2,3)"), "{text}");
        let plain = line(
            "started",
            r#"{"t":1.0,"event":"started","job":"j","share":"a","unit":"gpu","quantity":2,"borrowed":0,"devices":[0,1],"node":"gpu1","id":4}"#,
        );
        let text = human(&plain);
        assert!(text.ends_with("devices=[0,1] node=gpu1 id=4"), "{text}");
        assert!(!text.contains("(on"), "{text}");
    }
}
