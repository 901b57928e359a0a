//! How spans of time are written for people, the same everywhere: CLI tables, the console
//! and the core's waiting reasons (`41s`, `3m12s`, `2h05m`, `3d04h`); and the one way the
//! command line reads them back (`90`, `20s`, `30m`, `2h`, `1h30m`: [`parse_seconds`]).

/// Text that is not a span of time (what was given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotADuration(pub String);

impl std::fmt::Display for NotADuration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` is not a duration: write seconds (90) or a number with a unit \
             (20s, 30m, 2h, 1d, 1w, or several: 1h30m)",
            self.0
        )
    }
}

impl std::error::Error for NotADuration {}

/// A span in whole seconds: a bare number of seconds (`90`), or number-unit pairs
/// (`20s`, `30m`, `2h`, `1d`, `1w`, `1h30m`). Every duration flag of the CLI reads its
/// value with it (`submit --timeout`, `--checkpoint-every`; ages of `--since` through
/// [`parse_span`]).
pub fn parse_seconds(text: &str) -> Result<u64, NotADuration> {
    let t = text.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse().map_err(|_| NotADuration(text.to_string()));
    }
    parse_span(t).ok_or_else(|| NotADuration(text.to_string()))
}

/// Number-unit pairs only (`20s`, `1h30m`; a bare number is not one) in seconds; `None`
/// unless the whole text is such pairs.
pub fn parse_span(text: &str) -> Option<u64> {
    let mut total: u64 = 0;
    let mut digits = 0usize;
    let mut n: u64 = 0;
    let mut any = false;
    for c in text.trim().chars() {
        if let Some(d) = c.to_digit(10) {
            n = n.checked_mul(10)?.checked_add(u64::from(d))?;
            digits += 1;
            continue;
        }
        if digits == 0 {
            return None;
        }
        let per: u64 = match c {
            's' => 1,
            'm' => 60,
            'h' => 3_600,
            'd' => 86_400,
            'w' => 7 * 86_400,
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(per)?)?;
        (n, digits, any) = (0, 0, true);
    }
    (any && digits == 0).then_some(total)
}

/// A duration in ms as an operator reads it: `41s`, `3m12s`, `2h05m`, `3d04h`.
pub fn human(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else if s < 86_400 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else {
        format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600)
    }
}

/// A short duration for confirmations: `3m`, `41s`, `2h`, `3d`.
pub fn short(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_from_seconds_units_and_pairs() {
        assert_eq!(parse_seconds("90"), Ok(90));
        assert_eq!(parse_seconds("20s"), Ok(20));
        assert_eq!(parse_seconds("30m"), Ok(1_800));
        assert_eq!(parse_seconds("2h"), Ok(7_200));
        assert_eq!(parse_seconds(" 1h30m "), Ok(5_400));
        assert_eq!(parse_seconds("1d"), Ok(86_400));
        assert_eq!(parse_seconds("2w"), Ok(14 * 86_400));
        for bad in [
            "",
            "h",
            "1x",
            "-5",
            "1.5h",
            "1h30",
            "m30",
            "99999999999999999999",
        ] {
            assert_eq!(
                parse_seconds(bad),
                Err(NotADuration(bad.to_string())),
                "{bad}"
            );
        }
        assert!(
            parse_seconds("1x")
                .unwrap_err()
                .to_string()
                .starts_with("`1x` is not a duration")
        );
        // A span needs its units: a bare number is seconds only for `parse_seconds`.
        assert_eq!(parse_span("90"), None);
        assert_eq!(parse_span("1h30m"), Some(5_400));
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human(41_000), "41s");
        assert_eq!(human(192_000), "3m12s");
        assert_eq!(human(7_500_000), "2h05m");
        assert_eq!(human(-5), "0s");
        assert_eq!(human(90_000_000), "1d01h");
        assert_eq!(human(26 * 3_600_000 + 5 * 60_000), "1d02h");
        assert_eq!(short(192_000), "3m");
    }
}
