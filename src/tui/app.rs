//! The console's state: the snapshot on show, focus, selections, filter and sort, the open
//! overlay, and the screen areas of the last frame (for mouse clicks). Keys change it in
//! `input`; `draw::settle` settles the scroll windows, and `draw::render` only reads it.

use super::filter::{Filter, RowOrder, Sort};
use super::logs::LogSource;
use super::popups::submit::SubmitForm;
use super::theme::Theme;
use crate::model::JobId;
use crate::server::auth::{Access, Caller, Denied, JobAction};
use crate::snapshot::list::JobRows;
use crate::snapshot::{JobView, Snapshot};
use ratatui::layout::Rect;
use std::sync::Arc;

/// The focusable panes, in tab order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pane {
    Shares,
    Gpus,
    Queue,
    Running,
    Preemptions,
}

impl Pane {
    pub const ALL: [Pane; 5] = [
        Pane::Shares,
        Pane::Gpus,
        Pane::Queue,
        Pane::Running,
        Pane::Preemptions,
    ];

    pub fn index(self) -> usize {
        Pane::ALL.iter().position(|p| *p == self).unwrap_or(0)
    }

    pub fn title(self) -> &'static str {
        match self {
            Pane::Shares => "Shares",
            Pane::Gpus => "GPUs",
            Pane::Queue => "Queue",
            Pane::Running => "Running",
            Pane::Preemptions => "Preemptions",
        }
    }
}

/// A one-line text input (cursor at the end).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineInput {
    pub text: String,
}

impl LineInput {
    pub fn new(text: &str) -> LineInput {
        LineInput { text: text.into() }
    }
}

/// What covers the panes, if anything. Keys go to the top one.
#[derive(Debug, Clone, PartialEq)]
pub enum Mode {
    Normal,
    Help,
    /// `/` being typed; `before` is restored on Esc.
    Filter {
        input: LineInput,
        before: String,
    },
    Submit(Box<SubmitForm>),
    Priority {
        job: JobId,
        name: String,
        input: LineInput,
    },
    ConfirmCancel {
        job: JobId,
        question: String,
    },
    Quit {
        running: usize,
    },
    Details(Box<JobView>),
    Log {
        job: JobId,
        name: String,
        scroll_back: usize,
    },
    /// `e`: every error of the rejected config, in full.
    ConfigErrors {
        scroll: usize,
    },
    /// `h`: the utilisation history (see [`App::history`]).
    History,
}

/// A transient message in the footer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub text: String,
    pub error: bool,
    pub until: i64,
}

/// Where each pane was drawn in the last frame; the first row of its body.
#[derive(Debug, Clone, Copy, Default)]
pub struct PaneArea {
    pub area: Rect,
    /// Screen row of the first list row (below borders and column headers).
    pub body_top: u16,
    /// List index shown on `body_top`.
    pub offset: usize,
    pub rows: u16,
}

/// Console state.
pub struct App {
    pub snap: Arc<Snapshot>,
    /// "Now" for wait times and the clock (ms since the epoch).
    pub now: i64,
    pub utc_offset_secs: i32,
    pub theme: Theme,
    pub theme_warning: Option<String>,
    pub focus: Pane,
    /// Selected row per pane (index into the pane's shown rows).
    pub sel: [usize; 5],
    /// First shown row per pane (kept by `draw` so the selection stays visible).
    pub offset: [usize; 5],
    pub filter: Filter,
    pub sort: Sort,
    pub queue_rows: RowOrder,
    pub running_rows: RowOrder,
    /// The queue pane's list with arrays folded (SPEC §13); `None`: the snapshot's queue.
    pub queue_list: Option<crate::tui::arrays::QueueList>,
    /// Arrays the user unfolded (enter or space on the parent's row).
    pub unfolded: std::collections::HashSet<JobId>,
    pub mode: Mode,
    pub status: Option<Status>,
    pub areas: [PaneArea; 5],
    pub mouse: bool,
    pub logs: LogSource,
    /// Last lines of the log on show (`l`).
    pub log_lines: Vec<String>,
    /// Set when the console should exit.
    pub exit: bool,
    /// Columns the widest job id needs (computed once per snapshot).
    pub id_width: usize,
    /// Who sits at the keyboard: actions the scheduler would refuse them are refused
    /// here first, with the scheduler's words (`None`: no check, as in render tests).
    pub caller: Option<Caller>,
    /// Attached to a scheduler that runs elsewhere (its own process): quitting leaves it,
    /// and its jobs, running; "stop all jobs" is not this console's to offer.
    pub attached: bool,
    /// Priorities asked for with `+`/`-` that the snapshot may not show yet: the next press
    /// builds on them, so quick presses are never lost to a lagging display.
    pub pending_priority: std::collections::HashMap<crate::model::JobId, PendingPriority>,
    /// The submit form's latest prediction, with the form key it answers
    /// ([`crate::tui::popups::submit::SubmitForm::probe_key`]).
    pub prediction: Option<(String, crate::forecast::Prediction)>,
    /// The form key and snapshot version the last prediction was asked for.
    pub predict_asked: Option<(String, u64)>,
    /// The `h` view: window, unit, share and the history last received.
    pub history: super::history::HistoryState,
}

/// A priority change sent but perhaps not yet shown.
#[derive(Debug, Clone, Copy)]
pub struct PendingPriority {
    pub priority: u32,
    /// The console's clock when it was sent (ms): an answer that never shows (refused,
    /// job gone) stops counting after [`PENDING_PRIORITY_MS`].
    pub at: i64,
}

/// How long a sent priority is built on without the snapshot showing it.
pub const PENDING_PRIORITY_MS: i64 = 3_000;

fn id_width(snap: &Snapshot) -> usize {
    let digits = |n: u64| n.to_string().len();
    // An array child reads `12:3` (SPEC §13).
    let width = |j: &JobView| match (j.parent, j.array_index) {
        (Some(p), Some(i)) => digits(p.0) + 1 + digits(u64::from(i)),
        _ => digits(j.id.0),
    };
    let linked = snap.linked.pending.iter().chain(&snap.linked.arrays);
    snap.queue
        .iter()
        .chain(&snap.running)
        .map(width)
        .chain(linked.map(|j| width(j)))
        .max()
        .unwrap_or(0)
        .max(3)
}

/// How long fresh preemptions stay highlighted.
pub const FRESH_MS: i64 = 5_000;

impl App {
    pub fn new(snap: Arc<Snapshot>, theme: Theme) -> App {
        let queue_rows = RowOrder::build(&snap, &snap.queue, &Filter::default(), Sort::Scheduling);
        let running_rows =
            RowOrder::build(&snap, &snap.running, &Filter::default(), Sort::Scheduling);
        let mut app = App {
            attached: false,
            pending_priority: Default::default(),
            id_width: id_width(&snap),
            now: snap.at,
            snap,
            utc_offset_secs: 0,
            theme,
            theme_warning: None,
            focus: Pane::Queue,
            sel: [0; 5],
            offset: [0; 5],
            filter: Filter::default(),
            sort: Sort::Scheduling,
            queue_rows,
            running_rows,
            queue_list: None,
            unfolded: Default::default(),
            mode: Mode::Normal,
            status: None,
            areas: [PaneArea::default(); 5],
            mouse: true,
            logs: LogSource::None,
            log_lines: Vec::new(),
            exit: false,
            caller: None,
            prediction: None,
            predict_asked: None,
            history: Default::default(),
        };
        // Arrays fold from the first picture on (SPEC §13).
        app.rebuild_rows();
        app
    }

    /// The history view's next refresh, when it is open and due.
    pub fn history_refresh(&mut self) -> Option<super::Action> {
        let open = self.mode == Mode::History;
        self.history.refresh_due(open, self.now)
    }

    /// May the person at the keyboard take this action on this job (SPEC §9)? When not,
    /// the footer says why, in the words the scheduler would use.
    pub fn may(&mut self, action: JobAction, j: &JobView) -> bool {
        self.permit(|a, c| a.may_touch(c, action, j.id, j.submitter.as_deref()))
    }

    pub fn may_submit(&mut self, share: &str) -> bool {
        self.permit(|a, c| a.may_submit(c, share))
    }

    pub fn may_reload(&mut self) -> bool {
        self.permit(|a, c| a.may_administer(c, "reload the config"))
    }

    fn permit(&mut self, rule: impl FnOnce(&Access, &Caller) -> Result<(), Denied>) -> bool {
        let Some(caller) = &self.caller else {
            return true;
        };
        // An empty picture (nothing from the scheduler yet) has no rules to apply.
        if self.snap.access.scheduler_user.is_empty() {
            return true;
        }
        match rule(&self.snap.access, caller) {
            Ok(()) => true,
            Err(d) => {
                self.say(d.0, true);
                false
            }
        }
    }

    /// Show a new snapshot, keeping the selected job selected where it still exists.
    pub fn set_snapshot(&mut self, snap: Arc<Snapshot>) {
        let keep_q = self.selected_in(Pane::Queue).map(|j| j.id);
        let keep_r = self.selected_in(Pane::Running).map(|j| j.id);
        self.snap = snap;
        self.id_width = id_width(&self.snap);
        // A sent priority that the picture now shows (or whose job left the queues) is done.
        let snap = &self.snap;
        self.pending_priority.retain(|id, p| {
            snap.queue
                .iter()
                .chain(snap.running.iter())
                .find(|j| j.id == *id)
                .is_some_and(|j| j.priority != p.priority)
        });
        self.rebuild_rows();
        self.reselect(Pane::Queue, keep_q);
        self.reselect(Pane::Running, keep_r);
        if let Mode::Details(j) = &self.mode {
            let id = j.id;
            if let Some(fresh) = self.find_job(id) {
                self.mode = Mode::Details(Box::new(self.snap.resolved(fresh)));
            }
        }
        self.clamp_all();
    }

    /// Recompute the shown order of the queue and running lists (filter or sort changed).
    pub fn rebuild_rows(&mut self) {
        self.queue_list = crate::tui::arrays::QueueList::build(&self.snap, &self.unfolded);
        let snap = &self.snap;
        self.queue_rows = RowOrder::build(snap, self.queue_jobs(), &self.filter, self.sort);
        self.running_rows = RowOrder::build(snap, &snap.running, &self.filter, Sort::Scheduling);
    }

    fn reselect(&mut self, pane: Pane, id: Option<JobId>) {
        let Some(id) = id else { return };
        let (rows, list): (_, &dyn JobRows) = match pane {
            Pane::Queue => (&self.queue_rows, self.queue_jobs()),
            Pane::Running => (&self.running_rows, &self.snap.running),
            _ => return,
        };
        let i = self.sel[pane.index()];
        if rows
            .get(i)
            .and_then(|ix| list.row(ix))
            .is_some_and(|j| j.id == id)
        {
            return;
        }
        if let Some(pos) = list.index_of(id).and_then(|ix| rows.position(ix)) {
            self.sel[pane.index()] = pos;
        }
    }

    /// How many rows a pane lists.
    pub fn len(&self, pane: Pane) -> usize {
        match pane {
            Pane::Shares => self.snap.shares.len(),
            Pane::Gpus => self.snap.units.iter().map(|u| u.devices.len()).sum(),
            Pane::Queue => self.queue_rows.len(),
            Pane::Running => self.running_rows.len(),
            Pane::Preemptions => self.snap.preemptions.len(),
        }
    }

    pub fn clamp_all(&mut self) {
        for p in Pane::ALL {
            let n = self.len(p);
            let s = &mut self.sel[p.index()];
            *s = (*s).min(n.saturating_sub(1));
        }
    }

    pub fn selected(&self) -> usize {
        self.sel[self.focus.index()]
    }

    /// The job selected in `pane`, for panes that list jobs.
    pub fn selected_in(&self, pane: Pane) -> Option<&JobView> {
        let i = self.sel[pane.index()];
        match pane {
            Pane::Queue => self
                .queue_rows
                .get(i)
                .and_then(|ix| self.queue_jobs().row(ix)),
            Pane::Running => self
                .running_rows
                .get(i)
                .and_then(|ix| self.snap.running.get(ix)),
            Pane::Gpus => {
                let dev = self.snap.units.iter().flat_map(|u| &u.devices).nth(i)?;
                dev.job
                    .and_then(|id| self.snap.running.iter().find(|j| j.id == id))
            }
            Pane::Preemptions => {
                let rec = self.snap.preemptions.get(i)?;
                self.find_job(rec.victim)
            }
            Pane::Shares => None,
        }
    }

    /// The rows the queue pane lists: the queue, with arrays folded and PENDING jobs after
    /// it when there are any (SPEC §13).
    pub fn queue_jobs(&self) -> &dyn JobRows {
        match &self.queue_list {
            Some(l) => l,
            None => &self.snap.queue,
        }
    }

    /// Fold or unfold the array of the selected queue row (its parent's or a child's).
    pub fn toggle_fold(&mut self) -> bool {
        let Some(j) = self.selected_in(Pane::Queue) else {
            return false;
        };
        let parent = match (j.array.is_some(), j.parent) {
            (true, _) => j.id,
            (false, Some(p)) => p,
            (false, None) => return false,
        };
        if !self.unfolded.remove(&parent) {
            self.unfolded.insert(parent);
        }
        self.rebuild_rows();
        self.reselect(Pane::Queue, Some(parent));
        self.clamp_all();
        true
    }

    /// The job the focused pane points at.
    pub fn selected_job(&self) -> Option<&JobView> {
        self.selected_in(self.focus)
    }

    /// Look a job up anywhere in the snapshot (O(n); on key presses only).
    pub fn find_job(&self, id: JobId) -> Option<&JobView> {
        self.snap
            .running
            .iter()
            .chain(self.snap.queue.iter())
            .chain(self.snap.finished.iter())
            .find(|j| j.id == id)
    }

    pub fn say(&mut self, text: impl Into<String>, error: bool) {
        self.status = Some(Status {
            text: text.into(),
            error,
            until: self.now + 6_000,
        });
    }
}
