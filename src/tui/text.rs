//! Words and numbers as the console prints them: clock times, truncation, padding
//! (durations are `crate::duration`'s, the one formatter the CLI and the core use too).

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// `HH:MM:SS` of an instant (ms since the epoch) at a fixed UTC offset.
pub fn clock(ms: i64, utc_offset_secs: i32) -> String {
    let secs = ms.div_euclid(1000) + i64::from(utc_offset_secs);
    let day = secs.rem_euclid(86_400);
    format!("{:02}:{:02}:{:02}", day / 3600, (day % 3600) / 60, day % 60)
}

/// Cut `s` to at most `width` terminal columns, ending in `…` when cut.
/// Control characters are shown escaped first (see [`crate::visible`]).
pub fn fit(s: &str, width: usize) -> String {
    let s = &*crate::visible::visible(s);
    if s.width() <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out = String::with_capacity(width + 2);
    let mut w = 0;
    for c in s.chars() {
        let cw = c.width().unwrap_or(0);
        if w + cw + 1 > width {
            break;
        }
        out.push(c);
        w += cw;
    }
    out.push('…');
    out
}

/// `fit`, then pad with spaces to exactly `width` columns (left-aligned).
pub fn pad(s: &str, width: usize) -> String {
    let mut out = fit(s, width);
    let w = out.width();
    out.extend(std::iter::repeat_n(' ', width.saturating_sub(w)));
    out
}

/// Right-aligned to `width` columns.
pub fn rpad(s: &str, width: usize) -> String {
    let out = fit(s, width);
    let w = out.width();
    let mut r = String::with_capacity(width);
    r.extend(std::iter::repeat_n(' ', width.saturating_sub(w)));
    r.push_str(&out);
    r
}

/// "1st", "2nd", "3rd", "4th"...
pub fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_uses_the_offset() {
        assert_eq!(clock(0, 0), "00:00:00");
        assert_eq!(clock(3_723_000, 3600), "02:02:03");
        assert_eq!(clock(0, -3600), "23:00:00");
    }

    #[test]
    fn fit_cuts_with_an_ellipsis() {
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("abc", 4), "abc");
        assert_eq!(fit("abc", 0), "");
        assert_eq!(pad("ab", 4), "ab  ");
        assert_eq!(rpad("ab", 4), "  ab");
        assert_eq!(fit("日本語", 4), "日…");
    }

    #[test]
    fn ordinals() {
        assert_eq!(ordinal(1), "1st");
        assert_eq!(ordinal(12), "12th");
        assert_eq!(ordinal(23), "23rd");
    }
}
