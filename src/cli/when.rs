//! Instants on the command line (`jobs --since/--until`): an age back from now (`90s`,
//! `30m`, `2h`, `1d`, `1w`, or several: `1h30m`), `now`, a local date or date and time
//! (`2026-12-01`, `2026-12-01 14:00`, `2026-12-01T14:00:05`), a local time of today
//! (`14:00`), or RFC 3339 with its offset (`2026-12-01T14:00:00Z`).

use chrono::{Local, NaiveDate, NaiveDateTime, NaiveTime, TimeZone};

/// Text that names no instant (what was given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a time: give an age like 30m, 2h, 1d, 1w (back from now), \
     a local date or time like 2026-12-01, \"2026-12-01 14:00\", 14:00, or RFC 3339"
)]
pub struct NotATime(pub String);

/// The instant `text` names, in ms since the epoch, `now` being the current one.
pub fn parse_instant(text: &str, now: i64) -> Result<i64, NotATime> {
    let t = text.trim();
    let err = || NotATime(text.to_string());
    if t.eq_ignore_ascii_case("now") {
        return Ok(now);
    }
    if let Some(ms) = age_ms(t) {
        return Ok(now - ms);
    }
    if let Ok(d) = chrono::DateTime::parse_from_rfc3339(t) {
        return Ok(d.timestamp_millis());
    }
    let local = |dt: NaiveDateTime| {
        Local
            .from_local_datetime(&dt)
            .earliest()
            .map(|d| d.timestamp_millis())
    };
    for f in [
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(dt) = NaiveDateTime::parse_from_str(t, f) {
            return local(dt).ok_or_else(err);
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        return local(d.and_time(NaiveTime::MIN)).ok_or_else(err);
    }
    for f in ["%H:%M:%S", "%H:%M"] {
        if let Ok(tm) = NaiveTime::parse_from_str(t, f) {
            let today = Local
                .timestamp_millis_opt(now)
                .single()
                .ok_or_else(err)?
                .date_naive();
            return local(today.and_time(tm)).ok_or_else(err);
        }
    }
    Err(err())
}

/// `1h30m` → ms: the one duration syntax (`crate::duration::parse`, which `submit
/// --expect` and the console's submit form read too).
fn age_ms(t: &str) -> Option<i64> {
    crate::duration::parse(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_764_511_537_000;

    #[test]
    fn ages_dates_and_bad_text() {
        assert_eq!(parse_instant("2h", NOW), Ok(NOW - 7_200_000));
        assert_eq!(parse_instant("1h30m", NOW), Ok(NOW - 5_400_000));
        assert_eq!(parse_instant("1w", NOW), Ok(NOW - 7 * 86_400_000));
        assert_eq!(parse_instant("now", NOW), Ok(NOW));
        assert_eq!(
            parse_instant("2025-11-30T14:05:37Z", NOW),
            Ok(1_764_511_537_000)
        );
        let day = parse_instant("2025-11-30", NOW).unwrap();
        let later = parse_instant("2025-11-30 14:00", NOW).unwrap();
        assert_eq!(later - day, 14 * 3_600_000);
        assert!(parse_instant("14:00", NOW).is_ok());
        for bad in ["", "2x", "h", "yesterday-ish", "2025-13-01", "5"] {
            let e = parse_instant(bad, NOW).unwrap_err();
            assert!(e.to_string().contains("is not a time"), "{bad}: {e}");
        }
    }
}
