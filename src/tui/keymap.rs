//! The console's keys: one table from which the main screen's key handling
//! (`input::on_key`) finds a [`UiAction`] and from which the `?` help is written, so a key
//! cannot be bound without being shown, or shown without being bound; and one table per
//! overlay (help, config errors, filter and priority prompts, confirmations, details, log,
//! history, ended jobs) from which the open overlay's keys find an [`OverlayAction`]. The submit form
//! reads its own keys (`popups::submit`): they edit its fields.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// What a key asks of the console on the main screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UiAction {
    NextPane,
    PrevPane,
    Down,
    Up,
    First,
    Last,
    PageDown,
    PageUp,
    /// Details of the selected job, or the selected share's jobs; on an array's row,
    /// fold or unfold it.
    Open,
    /// Fold or unfold the selected array (SPEC §13).
    Fold,
    Submit,
    Cancel,
    Priority,
    PriorityUp,
    PriorityDown,
    Log,
    History,
    /// `F`: the jobs that ended lately.
    Ended,
    Filter,
    /// Esc with a filter set.
    ClearFilter,
    Sort,
    Reload,
    ConfigErrors,
    Help,
    Quit,
}

/// One key: its code, and whether Ctrl is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub code: KeyCode,
    pub ctrl: bool,
}

const fn key(code: KeyCode) -> Key {
    Key { code, ctrl: false }
}

const fn ch(c: char) -> Key {
    key(KeyCode::Char(c))
}

/// A line of the help and what it binds.
#[derive(Debug, Clone, Copy)]
pub enum Row {
    /// A group's title.
    Group(&'static str),
    /// Keys: `label` is how the help writes them (each key of `shown` appears in it),
    /// `what` says what they do. `aliases` do the same as a shown key without being
    /// written out (Home for `g`, `=` for `+`, Esc clears the filter that `/` set).
    Keys {
        label: &'static str,
        what: &'static str,
        shown: &'static [(Key, UiAction)],
        aliases: &'static [(Key, UiAction)],
    },
    /// A line of the help that no key binds (the mouse, the shares bar's legend).
    Note(&'static str, &'static str),
}

const fn keys(
    label: &'static str,
    what: &'static str,
    shown: &'static [(Key, UiAction)],
    aliases: &'static [(Key, UiAction)],
) -> Row {
    Row::Keys {
        label,
        what,
        shown,
        aliases,
    }
}

use UiAction as A;

/// The main screen's keys in the order the help shows them.
pub const TABLE: &[Row] = &[
    Row::Group("Moving"),
    keys(
        "tab/S-tab",
        "next / previous pane",
        &[
            (key(KeyCode::Tab), A::NextPane),
            (key(KeyCode::BackTab), A::PrevPane),
        ],
        &[],
    ),
    keys(
        "j k ↓ ↑",
        "select row",
        &[
            (ch('j'), A::Down),
            (ch('k'), A::Up),
            (key(KeyCode::Down), A::Down),
            (key(KeyCode::Up), A::Up),
        ],
        &[],
    ),
    keys(
        "g / G",
        "first / last row",
        &[(ch('g'), A::First), (ch('G'), A::Last)],
        &[(key(KeyCode::Home), A::First), (key(KeyCode::End), A::Last)],
    ),
    keys(
        "PgDn/PgUp",
        "page down / up",
        &[
            (key(KeyCode::PageDown), A::PageDown),
            (key(KeyCode::PageUp), A::PageUp),
        ],
        &[],
    ),
    keys(
        "enter",
        "details / share's jobs / unfold",
        &[(key(KeyCode::Enter), A::Open)],
        &[],
    ),
    keys(
        "space",
        "fold / unfold an array",
        &[(ch(' '), A::Fold)],
        &[],
    ),
    Row::Note("click", "select pane and row"),
    Row::Group("Jobs"),
    keys("s", "submit a job", &[(ch('s'), A::Submit)], &[]),
    keys("c", "cancel job (asks y/n)", &[(ch('c'), A::Cancel)], &[]),
    keys("p", "set job priority", &[(ch('p'), A::Priority)], &[]),
    keys(
        "+ / -",
        "priority up / down by 1",
        &[(ch('+'), A::PriorityUp), (ch('-'), A::PriorityDown)],
        &[(ch('='), A::PriorityUp)],
    ),
    keys("l", "job's log tail", &[(ch('l'), A::Log)], &[]),
    Row::Group("View"),
    keys(
        "h / F",
        "GPU history / ended jobs",
        &[(ch('h'), A::History), (ch('F'), A::Ended)],
        &[],
    ),
    keys(
        "/",
        "filter jobs (see below)",
        &[(ch('/'), A::Filter)],
        &[(key(KeyCode::Esc), A::ClearFilter)],
    ),
    keys("o", "cycle queue sort order", &[(ch('o'), A::Sort)], &[]),
    keys("r", "re-read the config now", &[(ch('r'), A::Reload)], &[]),
    keys(
        "e",
        "the rejected config's errors",
        &[(ch('e'), A::ConfigErrors)],
        &[],
    ),
    keys("?", "this help", &[(ch('?'), A::Help)], &[]),
    keys(
        "q/ctrl-c",
        "quit / detach / stop",
        &[
            (ch('q'), A::Quit),
            (
                Key {
                    code: KeyCode::Char('c'),
                    ctrl: true,
                },
                A::Quit,
            ),
        ],
        &[],
    ),
    Row::Group("Shares bar"),
    Row::Note("■", "own, within limit"),
    Row::Note("▤", "borrowed (over limit)"),
    Row::Note("░", "idle, lent out"),
    Row::Note("·", "idle guarantee"),
];

/// The action `find` gives a key event: a Ctrl chord it does not bind does what the key
/// alone does.
fn chord<A>(ev: KeyEvent, find: impl Fn(Key) -> Option<A>) -> Option<A> {
    let ctrl = ev.modifiers.contains(KeyModifiers::CONTROL);
    find(Key {
        code: ev.code,
        ctrl,
    })
    .or_else(|| ctrl.then(|| find(key(ev.code))).flatten())
}

/// The action a key asks for on the main screen, if any. A Ctrl chord the table does not
/// bind does what the key alone does.
pub fn action_for(ev: KeyEvent) -> Option<UiAction> {
    chord(ev, |pressed| {
        TABLE.iter().find_map(|row| match row {
            Row::Keys { shown, aliases, .. } => shown
                .iter()
                .chain(aliases.iter())
                .find(|(k, _)| *k == pressed)
                .map(|(_, a)| *a),
            _ => None,
        })
    })
}

/// What a key asks of an open overlay; each overlay's table binds the ones it knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverlayAction {
    /// Close the overlay (in the filter prompt: restore the filter it began with).
    Close,
    /// Scroll or step one line down (the log: towards its end).
    Down,
    /// Scroll or step one line up (the log: back into it).
    Up,
    PageDown,
    PageUp,
    /// The log's first line.
    First,
    /// The log's last line.
    Last,
    /// Apply what the prompt holds (enter).
    Accept,
    /// Delete the prompt's last character.
    DeleteBack,
    /// Empty the prompt.
    ClearLine,
    /// Yes to the cancel confirmation.
    Yes,
    /// Leave the console, running jobs kept running (the quit dialog's `d`).
    Detach,
    /// The quit dialog's `q`: detach from an attached scheduler; nothing otherwise.
    DetachAttached,
    /// Stop every running job and quit (the quit dialog's `s`).
    StopJobs,
    /// The details' `c`: cancel the job shown (asks y/n).
    Cancel,
    /// The details' `p`: set the job's priority.
    Priority,
    /// The details' `l`: the job's log tail.
    Log,
    /// The history's `1`, `2`, `3`: the last hour, day or week.
    HourWindow,
    DayWindow,
    WeekWindow,
    /// The history's tab: the next window.
    NextWindow,
    /// The history's `u`: the next capacity unit.
    NextUnit,
    /// The ended jobs' enter: the selected job's details.
    Open,
    /// The ended jobs' `/`: the filter prompt (the view comes back when it closes).
    Filter,
}

use OverlayAction as O;

/// The `?` help's keys.
pub const HELP_KEYS: &[(Key, OverlayAction)] = &[
    (key(KeyCode::Esc), O::Close),
    (ch('?'), O::Close),
    (ch('q'), O::Close),
    (key(KeyCode::Enter), O::Close),
];

/// The `e` config errors' keys.
pub const CONFIG_ERRORS_KEYS: &[(Key, OverlayAction)] = &[
    (key(KeyCode::Esc), O::Close),
    (ch('q'), O::Close),
    (ch('e'), O::Close),
    (key(KeyCode::Enter), O::Close),
    (ch('j'), O::Down),
    (key(KeyCode::Down), O::Down),
    (ch('k'), O::Up),
    (key(KeyCode::Up), O::Up),
];

/// The `/` filter prompt's keys; every other character is typed.
pub const FILTER_KEYS: &[(Key, OverlayAction)] = &[
    (key(KeyCode::Enter), O::Accept),
    (key(KeyCode::Esc), O::Close),
    (key(KeyCode::Backspace), O::DeleteBack),
    (
        Key {
            code: KeyCode::Char('u'),
            ctrl: true,
        },
        O::ClearLine,
    ),
];

/// The `p` priority prompt's keys; digits are typed.
pub const PRIORITY_KEYS: &[(Key, OverlayAction)] = &[
    (key(KeyCode::Esc), O::Close),
    (key(KeyCode::Enter), O::Accept),
    (key(KeyCode::Backspace), O::DeleteBack),
];

/// The cancel confirmation's keys (y/n).
pub const CONFIRM_CANCEL_KEYS: &[(Key, OverlayAction)] = &[
    (ch('y'), O::Yes),
    (ch('Y'), O::Yes),
    (ch('n'), O::Close),
    (ch('N'), O::Close),
    (key(KeyCode::Esc), O::Close),
    (ch('q'), O::Close),
];

/// The quit dialog's keys (detach, stop all, back).
pub const QUIT_KEYS: &[(Key, OverlayAction)] = &[
    (ch('d'), O::Detach),
    (ch('D'), O::Detach),
    (ch('q'), O::DetachAttached),
    (ch('Q'), O::DetachAttached),
    (ch('s'), O::StopJobs),
    (ch('S'), O::StopJobs),
    (key(KeyCode::Esc), O::Close),
    (ch('n'), O::Close),
    (ch('c'), O::Close),
];

/// The job details' keys.
pub const DETAILS_KEYS: &[(Key, OverlayAction)] = &[
    (key(KeyCode::Esc), O::Close),
    (key(KeyCode::Enter), O::Close),
    (ch('q'), O::Close),
    (ch('c'), O::Cancel),
    (ch('p'), O::Priority),
    (ch('l'), O::Log),
];

/// The `l` log tail's keys.
pub const LOG_KEYS: &[(Key, OverlayAction)] = &[
    (key(KeyCode::Esc), O::Close),
    (ch('q'), O::Close),
    (ch('l'), O::Close),
    (ch('k'), O::Up),
    (key(KeyCode::Up), O::Up),
    (ch('j'), O::Down),
    (key(KeyCode::Down), O::Down),
    (key(KeyCode::PageUp), O::PageUp),
    (key(KeyCode::PageDown), O::PageDown),
    (ch('G'), O::Last),
    (key(KeyCode::End), O::Last),
    (ch('g'), O::First),
    (key(KeyCode::Home), O::First),
];

/// The `h` history's keys: 1/2/3 or tab pick the window, u the unit, j/k a share; esc, q
/// or h close it.
pub const HISTORY_KEYS: &[(Key, OverlayAction)] = &[
    (key(KeyCode::Esc), O::Close),
    (ch('q'), O::Close),
    (ch('h'), O::Close),
    (ch('1'), O::HourWindow),
    (ch('2'), O::DayWindow),
    (ch('3'), O::WeekWindow),
    (key(KeyCode::Tab), O::NextWindow),
    (ch('u'), O::NextUnit),
    (ch('j'), O::Down),
    (key(KeyCode::Down), O::Down),
    (ch('k'), O::Up),
    (key(KeyCode::Up), O::Up),
];

/// The `F` ended jobs' keys: move, open the details or the log, filter; esc, q or F close.
pub const ENDED_KEYS: &[(Key, OverlayAction)] = &[
    (key(KeyCode::Esc), O::Close),
    (ch('q'), O::Close),
    (ch('F'), O::Close),
    (ch('j'), O::Down),
    (key(KeyCode::Down), O::Down),
    (ch('k'), O::Up),
    (key(KeyCode::Up), O::Up),
    (key(KeyCode::PageDown), O::PageDown),
    (key(KeyCode::PageUp), O::PageUp),
    (ch('g'), O::First),
    (key(KeyCode::Home), O::First),
    (ch('G'), O::Last),
    (key(KeyCode::End), O::Last),
    (key(KeyCode::Enter), O::Open),
    (ch('l'), O::Log),
    (ch('/'), O::Filter),
];

/// The action a key asks of an overlay whose keys are `table`, if any. A Ctrl chord the
/// table does not bind does what the key alone does.
pub fn overlay_action(table: &[(Key, OverlayAction)], ev: KeyEvent) -> Option<OverlayAction> {
    chord(ev, |pressed| {
        table.iter().find(|(k, _)| *k == pressed).map(|(_, a)| *a)
    })
}

/// The help's lines as (keys, what they do); an empty first part starts a group.
pub fn help_lines() -> impl Iterator<Item = (&'static str, &'static str)> {
    TABLE.iter().map(|row| match *row {
        Row::Group(title) => ("", title),
        Row::Keys { label, what, .. } => (label, what),
        Row::Note(k, what) => (k, what),
    })
}

/// How the help writes a key.
pub fn spelling(k: Key) -> String {
    let base = match k.code {
        KeyCode::Tab => "tab".to_string(),
        KeyCode::BackTab => "S-tab".to_string(),
        KeyCode::Down => "↓".to_string(),
        KeyCode::Up => "↑".to_string(),
        KeyCode::PageDown => "PgDn".to_string(),
        KeyCode::PageUp => "PgUp".to_string(),
        KeyCode::Enter => "enter".to_string(),
        KeyCode::Esc => "esc".to_string(),
        KeyCode::Home => "home".to_string(),
        KeyCode::End => "end".to_string(),
        KeyCode::Char(' ') => "space".to_string(),
        KeyCode::Char(c) => c.to_string(),
        other => format!("{other:?}"),
    };
    if k.ctrl { format!("ctrl-{base}") } else { base }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bindings() -> Vec<(&'static str, Key, UiAction, bool)> {
        let mut out = Vec::new();
        for row in TABLE {
            if let Row::Keys {
                label,
                shown,
                aliases,
                ..
            } = row
            {
                out.extend(shown.iter().map(|&(k, a)| (*label, k, a, true)));
                out.extend(aliases.iter().map(|&(k, a)| (*label, k, a, false)));
            }
        }
        out
    }

    /// The keys a help label writes: `g / G`, `j k ↓ ↑`, `tab/S-tab`, `/`.
    fn label_words(label: &str) -> Vec<&str> {
        if label.contains(' ') {
            label.split(' ').filter(|w| *w != "/").collect()
        } else if label == "/" {
            vec![label]
        } else {
            label.split('/').collect()
        }
    }

    /// Every shown key is written in its help line, and every word of a help line's keys
    /// is a key it binds: the help and the bindings cannot drift apart.
    #[test]
    fn the_help_shows_exactly_the_keys_it_binds() {
        for row in TABLE {
            let Row::Keys { label, shown, .. } = row else {
                continue;
            };
            let spelled: Vec<String> = shown.iter().map(|&(k, _)| spelling(k)).collect();
            let words = label_words(label);
            for s in &spelled {
                assert!(
                    words.contains(&s.as_str()),
                    "{s} is bound but `{label}` does not show it"
                );
            }
            for w in &words {
                assert!(
                    spelled.iter().any(|s| s == w),
                    "`{label}` shows {w}, which binds nothing"
                );
            }
        }
    }

    /// One key, one meaning: no key appears twice in the table, and every binding is the
    /// one `action_for` finds.
    #[test]
    fn each_key_is_bound_once() {
        let all = bindings();
        for (i, (label, k, a, _)) in all.iter().enumerate() {
            assert!(
                all[i + 1..].iter().all(|(_, other, _, _)| other != k),
                "{} is bound twice (first in `{label}`)",
                spelling(*k)
            );
            let ev = KeyEvent::new(
                k.code,
                if k.ctrl {
                    KeyModifiers::CONTROL
                } else {
                    KeyModifiers::NONE
                },
            );
            assert_eq!(action_for(ev), Some(*a), "{}", spelling(*k));
        }
    }

    /// In each overlay too, one key has one meaning, and it is the one `overlay_action`
    /// finds.
    #[test]
    fn each_overlay_key_is_bound_once() {
        let tables: &[(&str, &[(Key, OverlayAction)])] = &[
            ("help", HELP_KEYS),
            ("config errors", CONFIG_ERRORS_KEYS),
            ("filter", FILTER_KEYS),
            ("priority", PRIORITY_KEYS),
            ("confirm cancel", CONFIRM_CANCEL_KEYS),
            ("quit", QUIT_KEYS),
            ("details", DETAILS_KEYS),
            ("log", LOG_KEYS),
            ("history", HISTORY_KEYS),
            ("ended", ENDED_KEYS),
        ];
        for (name, table) in tables {
            for (i, (k, a)) in table.iter().enumerate() {
                assert!(
                    table[i + 1..].iter().all(|(other, _)| other != k),
                    "{} is bound twice in the {name} overlay",
                    spelling(*k)
                );
                let ev = KeyEvent::new(
                    k.code,
                    if k.ctrl {
                        KeyModifiers::CONTROL
                    } else {
                        KeyModifiers::NONE
                    },
                );
                assert_eq!(
                    overlay_action(table, ev),
                    Some(*a),
                    "{name}: {}",
                    spelling(*k)
                );
            }
        }
    }

    /// A prompt's typed characters are no actions: only its editing keys are, and Ctrl-U
    /// clears the filter while a plain `u` is typed.
    #[test]
    fn prompts_leave_typed_characters_alone() {
        let plain = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
        assert_eq!(overlay_action(FILTER_KEYS, plain('u')), None);
        assert_eq!(
            overlay_action(
                FILTER_KEYS,
                KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL)
            ),
            Some(OverlayAction::ClearLine)
        );
        assert_eq!(overlay_action(PRIORITY_KEYS, plain('7')), None);
    }

    #[test]
    fn the_help_reads_as_the_table() {
        let lines: Vec<_> = help_lines().collect();
        assert_eq!(lines.first(), Some(&("", "Moving")));
        assert!(lines.contains(&("q/ctrl-c", "quit / detach / stop")));
        assert_eq!(lines.len(), TABLE.len());
    }
}
