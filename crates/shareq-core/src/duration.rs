//! How spans of time are written for people, the same everywhere: CLI tables, the console
//! and the core's waiting reasons (`41s`, `3m12s`, `2h05m`, `3d04h`).

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

/// A span as people type one, in ms: number-unit pairs (`90s`, `20m`, `2h`, `1d`, `1w`,
/// or several: `1h30m`). `None` unless the whole text is such pairs (or it overflows).
/// The one parser of the CLI's ages and durations (`jobs --since 2h`, `submit --expect
/// 20m`) and of the console's submit form.
pub fn parse(t: &str) -> Option<i64> {
    let mut total: i64 = 0;
    let mut digits = String::new();
    let mut any = false;
    for c in t.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let n: i64 = digits.parse().ok()?;
        digits.clear();
        let unit = match c {
            's' => 1_000,
            'm' => 60_000,
            'h' => 3_600_000,
            'd' => 86_400_000,
            'w' => 7 * 86_400_000,
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(unit)?)?;
        any = true;
    }
    (any && digits.is_empty()).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn spans_parse_as_typed() {
        assert_eq!(parse("90s"), Some(90_000));
        assert_eq!(parse("1h30m"), Some(5_400_000));
        assert_eq!(parse("1w"), Some(7 * 86_400_000));
        for bad in ["", "90", "h", "1x", "1h30", "99999999999999999999s"] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
