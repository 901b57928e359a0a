//! Colour themes: the built-in `themes/*.yaml`, theme files given by path, `NO_COLOR`, and
//! the stable share → colour mapping.

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;
use std::path::Path;
use std::str::FromStr;

/// The themes shipped inside the binary, by name.
pub const BUILTIN: [(&str, &str); 4] = [
    ("dark", include_str!("../../themes/dark.yaml")),
    ("light", include_str!("../../themes/light.yaml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.yaml"),
    ),
    (
        "colour-blind-safe",
        include_str!("../../themes/colour-blind-safe.yaml"),
    ),
];

/// Resolved colours for every part of the screen.
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: String,
    pub fg: Color,
    pub dim: Color,
    pub accent: Color,
    pub border: Color,
    pub border_focus: Color,
    pub selected_bg: Color,
    pub error: Color,
    pub warn: Color,
    pub ok: Color,
    pub fresh: Color,
    pub bar_own: Color,
    pub bar_borrowed: Color,
    pub bar_lent: Color,
    pub bar_idle: Color,
    pub shares: Vec<Color>,
    /// `NO_COLOR`: every colour is the terminal's own; emphasis uses bold/reverse only.
    pub monochrome: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTheme {
    name: Option<String>,
    fg: Option<String>,
    dim: Option<String>,
    accent: Option<String>,
    border: Option<String>,
    border_focus: Option<String>,
    selected_bg: Option<String>,
    error: Option<String>,
    warn: Option<String>,
    ok: Option<String>,
    fresh: Option<String>,
    bar_own: Option<String>,
    bar_borrowed: Option<String>,
    bar_lent: Option<String>,
    bar_idle: Option<String>,
    shares: Option<Vec<String>>,
}

fn colour(field: &str, v: &Option<String>, default: Color) -> Result<Color, String> {
    match v {
        None => Ok(default),
        Some(s) => Color::from_str(s.trim()).map_err(|_| {
            format!("`{field}`: unknown colour {s:?} (use a name like lightblue, #rrggbb or 0-255)")
        }),
    }
}

impl Default for Theme {
    fn default() -> Theme {
        Theme::dark()
    }
}

impl Theme {
    /// The default theme.
    pub fn dark() -> Theme {
        Theme::parse(BUILTIN[0].1, None).unwrap_or_else(|_| Theme::monochrome())
    }

    /// For `NO_COLOR`: the terminal's default colours everywhere.
    pub fn monochrome() -> Theme {
        let r = Color::Reset;
        Theme {
            name: "no-color".into(),
            fg: r,
            dim: r,
            accent: r,
            border: r,
            border_focus: r,
            selected_bg: r,
            error: r,
            warn: r,
            ok: r,
            fresh: r,
            bar_own: r,
            bar_borrowed: r,
            bar_lent: r,
            bar_idle: r,
            shares: vec![r],
            monochrome: true,
        }
    }

    /// Parse a theme file; fields it leaves out come from `base` (the dark theme when
    /// `None`). Errors name the line where YAML reports one.
    pub fn parse(text: &str, base: Option<&Theme>) -> Result<Theme, String> {
        let raw: RawTheme = serde_yaml::from_str(text).map_err(|e| match e.location() {
            Some(l) => format!("line {}: {}", l.line(), strip_location(&e.to_string())),
            None => e.to_string(),
        })?;
        let fallback;
        let b = match base {
            Some(b) => b,
            None => {
                fallback = Theme::builtin_base();
                &fallback
            }
        };
        let shares = match &raw.shares {
            None => b.shares.clone(),
            Some(list) if list.is_empty() => return Err("`shares`: list is empty".into()),
            Some(list) => list
                .iter()
                .map(|s| colour("shares", &Some(s.clone()), Color::Reset))
                .collect::<Result<_, _>>()?,
        };
        Ok(Theme {
            name: raw.name.clone().unwrap_or_else(|| b.name.clone()),
            fg: colour("fg", &raw.fg, b.fg)?,
            dim: colour("dim", &raw.dim, b.dim)?,
            accent: colour("accent", &raw.accent, b.accent)?,
            border: colour("border", &raw.border, b.border)?,
            border_focus: colour("border_focus", &raw.border_focus, b.border_focus)?,
            selected_bg: colour("selected_bg", &raw.selected_bg, b.selected_bg)?,
            error: colour("error", &raw.error, b.error)?,
            warn: colour("warn", &raw.warn, b.warn)?,
            ok: colour("ok", &raw.ok, b.ok)?,
            fresh: colour("fresh", &raw.fresh, b.fresh)?,
            bar_own: colour("bar_own", &raw.bar_own, b.bar_own)?,
            bar_borrowed: colour("bar_borrowed", &raw.bar_borrowed, b.bar_borrowed)?,
            bar_lent: colour("bar_lent", &raw.bar_lent, b.bar_lent)?,
            bar_idle: colour("bar_idle", &raw.bar_idle, b.bar_idle)?,
            shares,
            monochrome: false,
        })
    }

    /// Hard-coded colours under the built-in files (so a partial file still gets colours).
    fn builtin_base() -> Theme {
        Theme {
            name: "dark".into(),
            fg: Color::Gray,
            dim: Color::DarkGray,
            accent: Color::LightBlue,
            border: Color::DarkGray,
            border_focus: Color::LightBlue,
            selected_bg: Color::Indexed(237),
            error: Color::LightRed,
            warn: Color::Yellow,
            ok: Color::Green,
            fresh: Color::LightYellow,
            bar_own: Color::LightBlue,
            bar_borrowed: Color::LightYellow,
            bar_lent: Color::Green,
            bar_idle: Color::DarkGray,
            shares: vec![Color::LightBlue, Color::LightGreen, Color::LightYellow],
            monochrome: false,
        }
    }

    /// Resolve `--theme NAME|PATH` (and `NO_COLOR`). Never fails: a theme that cannot be
    /// used gives the default theme plus a message saying why, for the header.
    pub fn resolve(spec: Option<&str>, no_color: bool) -> (Theme, Option<String>) {
        if no_color {
            return (Theme::monochrome(), None);
        }
        let Some(spec) = spec.filter(|s| !s.is_empty()) else {
            return (Theme::dark(), None);
        };
        if let Some((_, text)) = BUILTIN.iter().find(|(n, _)| *n == spec) {
            return match Theme::parse(text, None) {
                Ok(t) => (t, None),
                Err(e) => (Theme::dark(), Some(format!("built-in theme {spec}: {e}"))),
            };
        }
        let path = Path::new(spec);
        if !path.exists() {
            let names: Vec<&str> = BUILTIN.iter().map(|(n, _)| *n).collect();
            return (
                Theme::dark(),
                Some(format!(
                    "theme {spec:?} not found: use {} or a path to a .yaml file; using dark",
                    names.join(", ")
                )),
            );
        }
        match std::fs::read_to_string(path) {
            Err(e) => (
                Theme::dark(),
                Some(format!("theme {spec}: cannot read: {e}; using dark")),
            ),
            Ok(text) => match Theme::parse(&text, Some(&Theme::dark())) {
                Ok(t) => (t, None),
                Err(e) => (
                    Theme::dark(),
                    Some(format!("theme {spec}: {e}; using dark")),
                ),
            },
        }
    }

    /// True when `NO_COLOR` is set to anything non-empty (no-color.org).
    pub fn no_color_env() -> bool {
        std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
    }

    /// A share's colour: the same for the same name, in every pane, every run.
    pub fn share(&self, name: &str) -> Color {
        let i = (fnv1a(name.as_bytes()) % self.shares.len().max(1) as u64) as usize;
        self.shares.get(i).copied().unwrap_or(Color::Reset)
    }

    pub fn text(&self) -> Style {
        Style::new().fg(self.fg)
    }

    pub fn dimmed(&self) -> Style {
        if self.monochrome {
            Style::new().add_modifier(Modifier::DIM)
        } else {
            Style::new().fg(self.dim)
        }
    }

    pub fn error_style(&self) -> Style {
        Style::new().fg(self.error).add_modifier(Modifier::BOLD)
    }

    pub fn warn_style(&self) -> Style {
        Style::new().fg(self.warn)
    }

    pub fn selected(&self) -> Style {
        if self.monochrome {
            Style::new().add_modifier(Modifier::REVERSED)
        } else {
            Style::new()
                .bg(self.selected_bg)
                .add_modifier(Modifier::BOLD)
        }
    }

    /// Fresh preemptions: coloured and bold (reverse in monochrome).
    pub fn fresh_style(&self) -> Style {
        if self.monochrome {
            Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED)
        } else {
            Style::new().fg(self.fresh).add_modifier(Modifier::BOLD)
        }
    }

    pub fn border_style(&self, focused: bool) -> Style {
        match (focused, self.monochrome) {
            (true, true) => Style::new().add_modifier(Modifier::BOLD),
            (true, false) => Style::new().fg(self.border_focus),
            (false, _) => Style::new().fg(self.border),
        }
    }
}

fn strip_location(msg: &str) -> String {
    match msg.find(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_theme_parses_and_differs() {
        let mut seen = Vec::new();
        for (name, text) in BUILTIN {
            let t = Theme::parse(text, None).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(t.name, name);
            assert!(!t.shares.is_empty());
            assert!(!seen.contains(&t.accent) || name == "high-contrast");
            seen.push(t.accent);
        }
    }

    #[test]
    fn share_colours_are_stable_by_name() {
        let t = Theme::dark();
        assert_eq!(t.share("vision"), t.share("vision"));
        let distinct: std::collections::HashSet<_> = ["qs1", "qs2", "qs3", "nlp", "vision"]
            .iter()
            .map(|n| format!("{:?}", t.share(n)))
            .collect();
        assert!(distinct.len() >= 3, "palette spreads names: {distinct:?}");
    }

    #[test]
    fn broken_theme_file_falls_back_with_a_clear_message() {
        let dir = std::env::temp_dir().join(format!("shareq-theme-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bad = dir.join("bad.yaml");
        std::fs::write(&bad, "name: bad\naccent: blu\n").unwrap();
        let (t, msg) = Theme::resolve(bad.to_str(), false);
        assert_eq!(t, Theme::dark());
        let msg = msg.unwrap();
        assert!(msg.contains("accent") && msg.contains("blu"), "{msg}");
        std::fs::write(&bad, "name: bad\nacent: red\n").unwrap();
        let (_, msg) = Theme::resolve(bad.to_str(), false);
        assert!(msg.unwrap().contains("line 2"));
        let (_, msg) = Theme::resolve(Some("no-such-theme"), false);
        assert!(msg.unwrap().contains("dark, light"));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn partial_theme_file_inherits_the_default() {
        let t = Theme::parse("accent: \"#ff0000\"\n", Some(&Theme::dark())).unwrap();
        assert_eq!(t.accent, Color::Rgb(255, 0, 0));
        assert_eq!(t.fg, Theme::dark().fg);
    }

    #[test]
    fn no_color_gives_monochrome() {
        let (t, msg) = Theme::resolve(Some("light"), true);
        assert!(t.monochrome && msg.is_none());
        assert_eq!(t.share("anything"), Color::Reset);
    }
}
