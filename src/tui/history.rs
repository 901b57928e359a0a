//! The `h` view's state and figures: which window and unit it shows, the history last
//! received, and per share the series and window totals the charts and the table draw
//! (summed over the units shown, GPUs apart from the GiB of sliced units, SPEC §15).
//! Pure: the history arrives through the bridge.

use crate::snapshot::usage::{UsageHistory, UsagePoint, Window};

/// Ask again this often while the view is open.
pub const REFRESH_MS: i64 = 30_000;

/// What the history view shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistoryState {
    pub window: Window,
    /// One unit only (`u` cycles), or all of them summed.
    pub unit: Option<String>,
    /// The share whose own / borrowed / lent lines the first chart draws (`j`/`k`); `None`:
    /// every share's use.
    pub share: Option<String>,
    /// The last answer, until the next arrives.
    pub data: Option<Result<UsageHistory, crate::server::Refusal>>,
    /// When it was last asked for (ms).
    pub asked_at: i64,
}

/// One share over the window, its units of one kind summed: whole GPUs, or the GiB of
/// units sliced by memory (`gib`, SPEC §15), which are never added to GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct ShareLine {
    pub share: String,
    /// Its figures are GiB of sliced units, not GPUs.
    pub gib: bool,
    /// Σ limits of the units shown (newest sample).
    pub limit: u32,
    pub points: Vec<UsagePoint>,
    pub totals: Totals,
}

/// A share's figures over the whole window (buckets weighted by their samples).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Totals {
    pub own: f64,
    pub borrowed: f64,
    pub lent: f64,
    pub queued_gpus: f64,
    /// The highest bucket average of own + borrowed (a mean, so not a whole number: the
    /// table heads it `PEAK AVG`).
    pub peak: f64,
    pub wait_max_ms: i64,
    pub started: u32,
    pub started_wait_ms: i64,
}

impl Totals {
    /// Mean wait of the jobs started in the window (ms).
    pub fn mean_wait_ms(&self) -> Option<i64> {
        (self.started > 0).then(|| self.started_wait_ms / i64::from(self.started))
    }
}

/// The columns of the window's figures: heading and width (wide: whole words).
fn columns(wide: bool) -> [(&'static str, usize); 8] {
    if wide {
        [
            ("OWN", 6),
            ("BORROWED", 8),
            ("LENT", 6),
            ("PEAK AVG", 8),
            ("QUEUED", 7),
            ("MAX WAIT", 9),
            ("STARTED", 8),
            ("MEAN WAIT", 9),
        ]
    } else {
        [
            ("OWN", 5),
            ("BORR", 5),
            ("LENT", 5),
            ("PKAVG", 5),
            ("QUEUE", 6),
            ("MAXW", 6),
            ("START", 5),
            ("MEANW", 6),
        ]
    }
}

/// The headings of [`figures`], for the `h` view's table and `shareq history`.
pub fn headings(wide: bool) -> String {
    columns(wide)
        .iter()
        .map(|(h, w)| format!(" {h:>w$}"))
        .collect()
}

/// A share's figures over the window, in the columns of [`headings`].
pub fn figures(t: &Totals, wide: bool) -> String {
    let wait = |ms: i64| {
        if ms > 0 {
            crate::duration::short(ms)
        } else {
            "-".to_string()
        }
    };
    let values = [
        format!("{:.1}", t.own),
        format!("{:.1}", t.borrowed),
        format!("{:.1}", t.lent),
        format!("{:.1}", t.peak),
        format!("{:.1}", t.queued_gpus),
        wait(t.wait_max_ms),
        t.started.to_string(),
        t.mean_wait_ms()
            .map_or("-".to_string(), crate::duration::short),
    ];
    columns(wide)
        .iter()
        .zip(values)
        .map(|((_, w), v)| format!(" {v:>w$}"))
        .collect()
}

impl HistoryState {
    /// Open on (or switch to) `window`: the request to send.
    pub fn ask(&mut self, window: Window, now: i64) -> crate::tui::Action {
        if window != self.window {
            self.data = None;
        }
        self.window = window;
        self.asked_at = now;
        crate::tui::Action::History(window)
    }

    /// The units the history has, in name order.
    pub fn units(&self) -> Vec<String> {
        let mut u: Vec<String> = match &self.data {
            Some(Ok(h)) => h.series.iter().map(|s| s.unit.clone()).collect(),
            _ => Vec::new(),
        };
        u.sort();
        u.dedup();
        u
    }

    /// `u`: all units → each unit → all.
    pub fn next_unit(&mut self) {
        let units = self.units();
        self.unit = match &self.unit {
            None => units.first().cloned(),
            Some(cur) => units
                .iter()
                .position(|u| u == cur)
                .and_then(|i| units.get(i + 1).cloned()),
        };
    }

    /// `j`/`k`: every share → each share in turn → every share (of the kind the use
    /// chart draws, [`charts_gib`]).
    pub fn step_share(&mut self, step: isize) {
        let lines = self.lines();
        let gib = charts_gib(&lines);
        let names: Vec<String> = lines
            .into_iter()
            .filter(|l| l.gib == gib)
            .map(|l| l.share)
            .collect();
        if names.is_empty() {
            self.share = None;
            return;
        }
        // Position 0 is "every share", then the shares.
        let pos = self
            .share
            .as_ref()
            .and_then(|s| names.iter().position(|n| n == s))
            .map_or(0, |i| i as isize + 1);
        let n = names.len() as isize + 1;
        let next = (pos + step).rem_euclid(n);
        self.share = (next > 0).then(|| names[next as usize - 1].clone());
    }

    /// Per share, the units shown summed, whole GPUs and GiB of sliced units apart: the
    /// GPU lines in share name order, then the GiB lines.
    pub fn lines(&self) -> Vec<ShareLine> {
        let Some(Ok(h)) = &self.data else {
            return Vec::new();
        };
        let mut out: Vec<ShareLine> = Vec::new();
        for s in &h.series {
            if self.unit.as_ref().is_some_and(|u| *u != s.unit) {
                continue;
            }
            let gib = s.memory_gib.is_some();
            let line = match out.iter_mut().find(|l| l.share == s.share && l.gib == gib) {
                Some(l) => l,
                None => {
                    out.push(ShareLine {
                        share: s.share.clone(),
                        gib,
                        limit: 0,
                        points: vec![UsagePoint::default(); s.points.len()],
                        totals: Totals::default(),
                    });
                    out.last_mut().expect("just pushed")
                }
            };
            line.limit += s.limit;
            for (a, b) in line.points.iter_mut().zip(&s.points) {
                a.own += b.own;
                a.borrowed += b.borrowed;
                a.lent += b.lent;
                a.queued_gpus += b.queued_gpus;
                a.wait_max_ms = a.wait_max_ms.max(b.wait_max_ms);
                a.started += b.started;
                a.started_wait_ms += b.started_wait_ms;
            }
        }
        for l in &mut out {
            l.totals = totals(&l.points, &h.samples);
        }
        out.sort_by(|a, b| (a.gib, &a.share).cmp(&(b.gib, &b.share)));
        out
    }

    /// The next refresh, when the view is open and the last ask is old enough.
    pub fn refresh_due(&mut self, open: bool, now: i64) -> Option<crate::tui::Action> {
        (open && now - self.asked_at >= REFRESH_MS).then(|| self.ask(self.window, now))
    }
}

/// Does the use chart draw GiB? GPUs and GiB never share its axis: it draws the GPU
/// lines, or the GiB lines when every unit shown is sliced (`u` picks one).
pub fn charts_gib(lines: &[ShareLine]) -> bool {
    !lines.is_empty() && lines.iter().all(|l| l.gib)
}

fn totals(points: &[UsagePoint], samples: &[u32]) -> Totals {
    let mut t = Totals::default();
    let mut weight = 0.0;
    for (p, &n) in points.iter().zip(samples) {
        if n == 0 {
            continue;
        }
        let w = f64::from(n);
        weight += w;
        t.own += p.own * w;
        t.borrowed += p.borrowed * w;
        t.lent += p.lent * w;
        t.queued_gpus += p.queued_gpus * w;
        t.peak = t.peak.max(p.own + p.borrowed);
        t.wait_max_ms = t.wait_max_ms.max(p.wait_max_ms);
        t.started += p.started;
        t.started_wait_ms += p.started_wait_ms;
    }
    if weight > 0.0 {
        t.own /= weight;
        t.borrowed /= weight;
        t.lent /= weight;
        t.queued_gpus /= weight;
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::usage::ShareSeries;

    fn history() -> UsageHistory {
        let p = |own: f64, borrowed: f64| UsagePoint {
            own,
            borrowed,
            ..UsagePoint::default()
        };
        UsageHistory {
            window: Window::Hour,
            from: 0,
            to: 3 * 30_000,
            bucket_ms: 30_000,
            samples: vec![2, 0, 1],
            every_ms: 15_000,
            series: vec![
                ShareSeries {
                    share: "a".into(),
                    unit: "h100".into(),
                    limit: 2,
                    memory_gib: None,
                    points: vec![p(2.0, 1.0), p(0.0, 0.0), p(1.0, 0.0)],
                },
                ShareSeries {
                    share: "a".into(),
                    unit: "a100".into(),
                    limit: 1,
                    memory_gib: None,
                    points: vec![p(1.0, 0.0), p(0.0, 0.0), p(0.0, 0.0)],
                },
                ShareSeries {
                    share: "b".into(),
                    unit: "h100".into(),
                    limit: 4,
                    memory_gib: None,
                    points: vec![p(0.0, 0.0), p(0.0, 0.0), p(4.0, 0.0)],
                },
            ],
        }
    }

    #[test]
    fn units_are_summed_and_totals_weigh_buckets_by_their_samples() {
        let mut st = HistoryState {
            data: Some(Ok(history())),
            ..HistoryState::default()
        };
        let lines = st.lines();
        assert_eq!(lines.len(), 2);
        let a = &lines[0];
        assert_eq!((a.share.as_str(), a.limit), ("a", 3));
        assert_eq!(a.points[0].own, 3.0);
        // (3·2 + 1·1) / 3 samples; the bucket without samples does not count.
        assert!((a.totals.own - 7.0 / 3.0).abs() < 1e-9);
        assert_eq!(a.totals.peak, 4.0);
        st.next_unit();
        assert_eq!(st.unit.as_deref(), Some("a100"));
        assert_eq!(st.lines().len(), 1);
        st.next_unit();
        st.next_unit();
        assert_eq!(st.unit, None);
        st.step_share(1);
        assert_eq!(st.share.as_deref(), Some("a"));
        st.step_share(-2);
        assert_eq!(st.share.as_deref(), Some("b"));
        st.step_share(1);
        assert_eq!(st.share, None);
    }

    /// SPEC §15: a share's GiB of a sliced unit are a line of their own, never added to
    /// its GPUs; the use chart draws GPUs, or GiB when only sliced units are shown.
    #[test]
    fn gib_of_sliced_units_are_summed_apart_from_gpus() {
        let mut h = history();
        h.series.push(ShareSeries {
            share: "a".into(),
            unit: "a100-mem".into(),
            limit: 80,
            memory_gib: Some(80),
            points: vec![
                UsagePoint {
                    own: 40.0,
                    borrowed: 20.0,
                    ..UsagePoint::default()
                };
                3
            ],
        });
        let mut st = HistoryState {
            data: Some(Ok(h)),
            ..HistoryState::default()
        };
        let lines = st.lines();
        let kinds: Vec<(&str, bool, u32)> = lines
            .iter()
            .map(|l| (l.share.as_str(), l.gib, l.limit))
            .collect();
        assert_eq!(
            kinds,
            vec![("a", false, 3), ("b", false, 4), ("a", true, 80)]
        );
        // The GPU line of `a` is what it was without the sliced unit.
        assert!((lines[0].totals.own - 7.0 / 3.0).abs() < 1e-9);
        assert_eq!(lines[0].totals.peak, 4.0);
        assert_eq!(lines[2].totals.own, 40.0);
        assert_eq!(lines[2].totals.peak, 60.0);
        assert!(!charts_gib(&lines));
        // `j` steps over the shares the chart draws (GPUs here): a, b, every share.
        st.step_share(1);
        st.step_share(1);
        assert_eq!(st.share.as_deref(), Some("b"));
        st.share = None;
        // Only the sliced unit: its GiB are charted.
        st.unit = Some("a100-mem".into());
        let lines = st.lines();
        assert_eq!(lines.len(), 1);
        assert!(charts_gib(&lines));
        st.step_share(1);
        assert_eq!(st.share.as_deref(), Some("a"));
    }

    #[test]
    fn refreshes_while_open_only() {
        let mut st = HistoryState::default();
        assert!(st.refresh_due(false, REFRESH_MS * 2).is_none());
        assert_eq!(
            st.refresh_due(true, REFRESH_MS * 2),
            Some(crate::tui::Action::History(Window::Hour))
        );
        assert!(st.refresh_due(true, REFRESH_MS * 2 + 1).is_none());
    }
}
