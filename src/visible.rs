//! Terminal safety (SPEC §9): text that users control — job names, commands, env, reasons
//! that quote them — is shown with its control characters made visible (`\x1b`, `\n`,
//! `\u{202e}`), so that printing it can never move the cursor, change colours, rename the
//! terminal or reorder what follows. The console and every CLI table print through
//! [`visible`]; JSON output is escaped by JSON itself.

use std::borrow::Cow;
use std::fmt::Write;

/// Would printing this character change the terminal rather than show a glyph?
fn is_unsafe(c: char) -> bool {
    c.is_control() // C0, DEL and C1 (the 8-bit CSI U+009B among them)
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') // bidi overrides
}

/// `s` with every control character written as an escape; unchanged (and not copied)
/// when it has none.
pub fn visible(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if is_unsafe(c) && (c as u32) < 0x100 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if is_unsafe(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The same for text of several lines (a list of config errors): the newlines between
/// them stay newlines, everything else unsafe is made visible.
pub fn visible_lines(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c != '\n' && is_unsafe(c)) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(s.split('\n').map(visible).collect::<Vec<_>>().join("\n"))
}

#[cfg(test)]
mod tests {
    use super::visible;

    #[test]
    fn escapes_become_inert_text_and_clean_text_is_not_copied() {
        assert_eq!(
            visible("\x1b[2J\x1b]0;pwned\x07x"),
            "\\x1b[2J\\x1b]0;pwned\\x07x"
        );
        assert_eq!(
            visible("a\nb\tc\u{9b}d\u{202e}e"),
            "a\\nb\\tc\\x9bd\\u{202e}e"
        );
        assert!(matches!(
            visible("train-ü 日本"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn lines_keep_their_newlines_and_nothing_else() {
        assert_eq!(super::visible_lines("a\nb"), "a\nb");
        assert_eq!(
            super::visible_lines("bad `x\x1b[2J`\nnext"),
            "bad `x\\x1b[2J`\nnext"
        );
    }
}
