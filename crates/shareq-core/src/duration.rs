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
}
