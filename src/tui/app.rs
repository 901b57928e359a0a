//! The console's state: the snapshot on show, focus, selections, filter and sort, the open
//! overlay, and the screen areas of the last frame (for mouse clicks). Keys change it in
//! `input`; `draw::settle` settles the scroll windows, and `draw::render` only reads it.

use super::filter::{Filter, RowOrder, Sort};
use super::line_input::LineInput;
use super::logs::LogSource;
use super::popups::submit::SubmitForm;
use super::theme::Theme;
use crate::access::{Access, Caller, Denied, JobAction};
use crate::model::JobId;
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
    /// `F`: the jobs that ended lately (see [`App::ended`]).
    Ended,
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
    /// The `F` view: open or not, its selection.
    pub ended: super::ended::EndedView,
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
    let linked = snap.linked.pending.iter().chain(&snap.linked.arrays);
    widest(
        snap.queue
            .iter()
            .chain(&snap.running)
            .chain(linked.map(|j| &**j)),
    )
}

/// Columns the widest id of `jobs` needs, at least 3.
fn widest<'a>(jobs: impl Iterator<Item = &'a JobView>) -> usize {
    let digits = |n: u64| n.checked_ilog10().map_or(1, |d| d as usize + 1);
    // An array child reads `12:3` (SPEC §13).
    let width = |j: &JobView| match (j.parent, j.array_index) {
        (Some(p), Some(i)) => digits(p.0) + 1 + digits(u64::from(i)),
        _ => digits(j.id.0),
    };
    jobs.map(width).max().unwrap_or(0).max(3)
}

/// The queue rows a batch of changes touched: each job's view after the batch (`None`:
/// it left the queue).
struct Touched(std::collections::HashMap<JobId, Option<Arc<JobView>>>);

impl Touched {
    fn new(changes: &[crate::snapshot::Change]) -> Touched {
        use crate::snapshot::Change;
        let mut t = std::collections::HashMap::with_capacity(changes.len());
        for c in changes {
            match c {
                Change::Upsert(v) => t.insert(v.id, Some(v.clone())),
                Change::Remove((_, _, id)) => t.insert(*id, None),
            };
        }
        Touched(t)
    }
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
            ended: Default::default(),
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

    /// The command that stops the running jobs the person at the keyboard may stop: every
    /// running job for an admin, else their own (`--user NAME`; `cancel` would leave the
    /// others' jobs out anyway).
    pub fn stop_hint(&self) -> String {
        let all = "shareq cancel --status running --yes";
        match &self.caller {
            Some(c)
                if !self.snap.access.scheduler_user.is_empty() && !self.snap.access.is_admin(c) =>
            {
                format!("shareq cancel --status running --user {} --yes", c.name)
            }
            _ => all.to_string(),
        }
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
    ///
    /// The work is proportional to what changed in the queue, not to its length, when
    /// the snapshot's change log reaches back to the one on show (always, from one
    /// scheduler, unless the console fell 256 versions behind) and the queue pane shows
    /// the plain queue (no arrays folded in, no fair-share order): the row order takes in
    /// the changed rows, and the selection, the details and the pending priorities look
    /// only at those. Otherwise everything is worked out again (O(n log n)).
    pub fn set_snapshot(&mut self, snap: Arc<Snapshot>) {
        let keep_q = self.selected_in(Pane::Queue).cloned();
        let keep_r = self.selected_in(Pane::Running).cloned();
        let old = std::mem::replace(&mut self.snap, snap);
        let changes = if old.version == self.snap.version {
            // The same version again (a stale copy while reconnecting): unchanged only if
            // its queue is the very same list.
            old.queue.is_same(&self.snap.queue).then(Vec::new)
        } else {
            self.snap.changes.between(old.version, self.snap.version)
        };
        let touched = changes.as_deref().map(Touched::new);
        self.id_width = match &touched {
            // Widens as ids grow; narrows only when everything is worked out again.
            Some(t) => {
                let mut w = self.id_width;
                w = w.max(widest(self.snap.running.iter()));
                w = w.max(widest(t.0.values().flatten().map(|v| &**v)));
                if !Arc::ptr_eq(&old.linked, &self.snap.linked) {
                    let linked = &self.snap.linked;
                    w = w.max(widest(
                        linked.pending.iter().chain(&linked.arrays).map(|j| &**j),
                    ));
                }
                w
            }
            None => id_width(&self.snap),
        };
        // A sent priority that the picture now shows (or whose job left the queues) is done.
        let snap = &self.snap;
        self.pending_priority.retain(|id, p| {
            let now = match snap.running.iter().find(|j| j.id == *id) {
                Some(r) => Some(r.priority),
                None => match &touched {
                    Some(t) => match t.0.get(id) {
                        Some(v) => v.as_ref().map(|v| v.priority),
                        // Unchanged: still waiting to show (it expires by itself).
                        None => return true,
                    },
                    None => snap.queue.iter().find(|j| j.id == *id).map(|j| j.priority),
                },
            };
            now.is_some_and(|now| now != p.priority)
        });
        self.queue_list = crate::tui::arrays::QueueList::build(&self.snap, &self.unfolded);
        let followed = self.queue_list.is_none()
            && changes
                .as_deref()
                .is_some_and(|c| self.queue_rows.take_in(&old, &self.snap, c, &self.filter));
        if !followed {
            self.queue_rows = self.queue_order();
        }
        let snap = &self.snap;
        self.running_rows = RowOrder::build(snap, &snap.running, &self.filter, Sort::Scheduling);
        let fresh = |app: &App, was: &JobView| app.current_view(was, touched.as_ref());
        if let Some(was) = keep_q {
            let now = fresh(self, &was);
            self.reselect(Pane::Queue, was.id, now.as_ref());
        }
        if let Some(was) = keep_r {
            let now = fresh(self, &was);
            self.reselect(Pane::Running, was.id, now.as_ref());
        }
        if let Mode::Details(j) = &self.mode
            && let Some(now) = fresh(self, j)
        {
            self.mode = Mode::Details(Box::new(self.snap.resolved(&now)));
        }
        self.clamp_all();
    }

    /// The view on show now of a job that `was` showed: looked up by what changed
    /// (`touched`: running jobs, then the changed rows, then the unchanged queue by key),
    /// or anywhere when the change is not known.
    fn current_view(&self, was: &JobView, touched: Option<&Touched>) -> Option<JobView> {
        if let Some(r) = self.snap.running.iter().find(|j| j.id == was.id) {
            return Some(r.clone());
        }
        let Some(t) = touched else {
            return self.find_job(was.id).cloned();
        };
        let elsewhere = || {
            self.snap
                .finished
                .iter()
                .chain(self.snap.linked.pending.iter())
                .find(|j| j.id == was.id)
                .map(|j| (**j).clone())
        };
        match t.0.get(&was.id) {
            Some(Some(v)) => Some((**v).clone()),
            // Left the queue (not for a running job): ended, or waits on a dependency.
            Some(None) => elsewhere(),
            // Unchanged: where it was, in the queue at its key, or among the others.
            None => self
                .snap
                .queue
                .find(crate::snapshot::list::key_of(was))
                .cloned()
                .or_else(elsewhere),
        }
    }

    /// Recompute the shown order of the queue and running lists (filter or sort changed).
    pub fn rebuild_rows(&mut self) {
        self.queue_list = crate::tui::arrays::QueueList::build(&self.snap, &self.unfolded);
        self.queue_rows = self.queue_order();
        let snap = &self.snap;
        self.running_rows = RowOrder::build(snap, &snap.running, &self.filter, Sort::Scheduling);
    }

    /// The queue pane's row order, worked out from scratch.
    fn queue_order(&self) -> RowOrder {
        match &self.queue_list {
            Some(l) => RowOrder::build(&self.snap, l, &self.filter, self.sort),
            None => RowOrder::of_queue(&self.snap, &self.filter, self.sort),
        }
    }

    /// Select job `id` in `pane` again, where it is now shown (`now`: its current view;
    /// `None`: looked up by id in the pane's list). A job no longer shown leaves the
    /// selection where it was.
    fn reselect(&mut self, pane: Pane, id: JobId, now: Option<&JobView>) {
        let (rows, list): (_, &dyn JobRows) = match pane {
            Pane::Queue => (&self.queue_rows, self.queue_jobs()),
            Pane::Running => (&self.running_rows, &self.snap.running),
            _ => return,
        };
        let i = self.sel[pane.index()];
        if rows.job(i, list).is_some_and(|j| j.id == id) {
            return;
        }
        let pos = match now {
            Some(v) => rows.position(v, list),
            // Not known: found by id (O(n)).
            None => list
                .index_of(id)
                .and_then(|ix| list.row(ix))
                .and_then(|v| rows.position(v, list)),
        };
        if let Some(pos) = pos {
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
            Pane::Queue => self.queue_rows.job(i, self.queue_jobs()),
            Pane::Running => self.running_rows.job(i, &self.snap.running),
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
        self.reselect(Pane::Queue, parent, None);
        self.clamp_all();
        true
    }

    /// The job the focused pane points at.
    pub fn selected_job(&self) -> Option<&JobView> {
        self.selected_in(self.focus)
    }

    /// Look a job up anywhere in the snapshot (O(n); on key presses only).
    pub fn find_job(&self, id: JobId) -> Option<&JobView> {
        self.snap.find_job(id).map(|(_, j)| j)
    }

    pub fn say(&mut self, text: impl Into<String>, error: bool) {
        self.status = Some(Status {
            text: text.into(),
            error,
            until: self.now + 6_000,
        });
    }
}
