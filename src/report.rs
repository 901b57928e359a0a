//! `shareq report`: usage figures over a window of the live history, per share (and per
//! user), computed by the replay's summary accumulator (`replay::Stats`) from the standing
//! and decisions the runtime recorded: the same figures as `replay --summary`, by the
//! same code. Also the window's `--since` / `--until` words.

use crate::events::EventLine;
use crate::replay::{Fact, FactKind, Stats, Summary};
use crate::store::HistoryWindow;
use serde::{Deserialize, Serialize};

/// A report: the window (ms since the epoch) and its figures. `users` is empty unless the
/// caller may read per-user figures (admins).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub since: i64,
    pub until: i64,
    /// Per-user figures were asked for and the caller is an admin.
    pub users_shown: bool,
    /// With the per-user figures: each fair-share share's users' decayed usage against
    /// their weight, now (SPEC §12).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fair_share: Vec<crate::sched::UserStanding>,
    #[serde(flatten)]
    pub summary: Summary,
}

/// The figures of [since, until] from what the store read for that window. Times are in
/// clock ticks, `per_second` of them a second: 1000 for the live scheduler's milliseconds
/// (a scheduler driven on the replay's seconds records seconds: 1).
pub fn figures(w: &HistoryWindow, since: i64, until: i64, per_second: u32) -> Summary {
    let mut st = Stats::new(per_second);
    // The sliced units (SPEC §15), as the recorded standings name them.
    let sliced: std::collections::HashSet<String> = w
        .standing_before
        .iter()
        .chain(&w.standings)
        .flat_map(|s| &s.standing.units)
        .filter(|u| u.slice_gib > 0)
        .map(|u| u.unit.clone())
        .collect();
    for l in &w.before {
        if let Some(f) = fact(l, &sliced) {
            st.prime(f, l.at);
        }
    }
    st.start_at(since);
    let standing = w
        .standing_before
        .as_ref()
        .map(|s| s.standing.clone())
        .unwrap_or_default();
    st.advance_with(since, standing);
    let mut standings = w.standings.iter().peekable();
    for l in &w.inside {
        while let Some(s) = standings.next_if(|s| s.at <= l.at) {
            st.advance_with(s.at, s.standing.clone());
        }
        st.advance_to(l.at);
        if let Some(f) = fact(l, &sliced) {
            st.note(f, l.at);
        } else if l.event == "rejected" {
            st.rejected(l.value()["error"].as_str().unwrap_or_default());
        }
    }
    for s in standings {
        st.advance_with(s.at, s.standing.clone());
    }
    st.advance_to(until);
    st.summary()
}

/// A stored line as the accumulator reads it.
fn fact<'a>(l: &'a EventLine, sliced: &std::collections::HashSet<String>) -> Option<Fact<'a>> {
    // An array parent's lines say `"array":N`: its children are the jobs counted (SPEC §13).
    if l.line.contains("\"array\":") && l.value().get("array").is_some() {
        return None;
    }
    let kind = match l.event.as_str() {
        "started" => FactKind::Started {
            quantity: l.quantity.unwrap_or(0),
            gib: l.value()["unit"]
                .as_str()
                .is_some_and(|u| sliced.contains(u)),
        },
        "succeeded" => FactKind::Succeeded,
        "failed" => FactKind::Failed {
            exhausted: l.value()["reason"] == "PREEMPTION_RETRIES_EXHAUSTED",
        },
        "cancelled" => FactKind::Cancelled,
        "requeued" => FactKind::Requeued,
        "preempted" => FactKind::Preempted,
        _ => return None,
    };
    Some(Fact {
        job: l.job?,
        share: l.share.as_deref().unwrap_or("?"),
        user: l.user.as_deref(),
        submitted: l.submitted.unwrap_or(l.at),
        kind,
        // SPEC §14: the line that ends a preemption says what it lost: every live line
        // (`lostGpuSeconds`), a replay-format line where it says it (`lost`).
        lost: matches!(kind, FactKind::Requeued | FactKind::Failed { .. })
            .then(|| {
                let v = l.value();
                v["lostGpuSeconds"].as_f64().or_else(|| v["lost"].as_f64())
            })
            .flatten(),
    })
}

/// Text that names no point in time (what was given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a time: write a span back from now (7d, 12h, 30m, 2w), a date \
     (2026-12-01, UTC), a date and time (2026-12-01T10:00, UTC), or `now`"
)]
pub struct NotATime(pub String);

/// A point in time for `--since` / `--until` (ms since the epoch): a span back from `now`
/// (`7d`, `12h`, `30m`, `90s`, `2w`), a UTC date `2026-12-01`, a UTC date and time
/// `2026-12-01T10:00` (or with seconds, or an RFC 3339 offset), `now`, or epoch seconds.
pub fn parse_time(text: &str, now: i64) -> Result<i64, NotATime> {
    let t = text.trim();
    let bad = || NotATime(text.to_string());
    if t == "now" {
        return Ok(now);
    }
    // A span back from now: the CLI's one duration reader (`crate::duration`).
    if let Some(secs) = crate::duration::parse_span(t) {
        let ms = i64::try_from(secs).unwrap_or(i64::MAX).saturating_mul(1000);
        return Ok(now.saturating_sub(ms));
    }
    if let Ok(secs) = t.parse::<i64>() {
        return Ok(secs.saturating_mul(1000));
    }
    if let Ok(dt) = chrono::DateTime::parse_from_rfc3339(t) {
        return Ok(dt.timestamp_millis());
    }
    for f in [
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(dt) = chrono::NaiveDateTime::parse_from_str(t, f) {
            return Ok(dt.and_utc().timestamp_millis());
        }
    }
    if let Ok(d) = chrono::NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        return Ok(d
            .and_hms_opt(0, 0, 0)
            .ok_or_else(bad)?
            .and_utc()
            .timestamp_millis());
    }
    Err(bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_as_spans_dates_and_epochs() {
        let now = 1_000_000_000_000;
        assert_eq!(parse_time("7d", now), Ok(now - 7 * 86_400_000));
        assert_eq!(parse_time("90s", now), Ok(now - 90_000));
        assert_eq!(parse_time("now", now), Ok(now));
        assert_eq!(parse_time("2026-12-01", now), Ok(1_796_083_200_000));
        assert_eq!(parse_time("2026-12-01T00:01", now), Ok(1_796_083_260_000));
        assert_eq!(parse_time("1796083200", now), Ok(1_796_083_200_000));
        assert!(
            parse_time("7x", now)
                .unwrap_err()
                .to_string()
                .contains("`7x` is not a time")
        );
        assert!(parse_time("yesterday", now).is_err());
    }
}
