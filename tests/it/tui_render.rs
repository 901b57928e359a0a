//! Screen snapshots of the console: every pane and every overlay at 80×24 and 160×48,
//! rendered on ratatui's TestBackend at the fixtures' fixed clock.

use crate::fixtures::{self, NOW};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Frame;
use shareq::model::JobId;
use shareq::snapshot::usage::{UsageHistory, Window};
use shareq::tui::app::{App, Mode, Pane};
use shareq::tui::input::on_key;
use shareq::tui::panes;

const SIZES: [(u16, u16); 2] = [(80, 24), (160, 48)];

fn key(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}

fn code(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

/// The snapshots keep the names and place they had when this file was a test crate of its
/// own (`tests/snapshots/tui_render__<name>.snap`), so that moving the file re-creates none.
fn assert_screen(name: &str, text: &str) {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| insta::assert_snapshot!(format!("tui_render__{name}"), text));
}

fn check(name: &str, mut make: impl FnMut() -> App) {
    for (w, h) in SIZES {
        let mut app = make();
        let text = fixtures::render_text(&mut app, w, h);
        assert_screen(&format!("{name}_{w}x{h}"), &text);
    }
}

fn check_pane(name: &str, draw: fn(&mut Frame, &mut App)) {
    for (w, h) in SIZES {
        let mut app = fixtures::app(fixtures::lab());
        let text = fixtures::render_with(w, h, |f| draw(f, &mut app));
        assert_screen(&format!("pane_{name}_{w}x{h}"), &text);
    }
}

#[test]
fn main_screens() {
    check("main_aws", || fixtures::app(fixtures::aws()));
    check("main_lab", || fixtures::app(fixtures::lab()));
    check("main_lab_nodes", || fixtures::app(fixtures::lab_nodes()));
}

#[test]
fn a_fair_share_share_is_marked_and_its_queue_shows_each_users_delay() {
    check("main_lab_fair", || fixtures::app(fixtures::lab_fair()));
    // The details of the light user's job say whose older job it goes ahead of, and why.
    let snap = fixtures::lab_fair();
    let vik = snap
        .queue
        .iter()
        .find(|j| j.name == "vik-probe")
        .expect("vik's job is queued")
        .clone();
    let note = snap.fair_share_note(&vik).expect("a fair-share note");
    assert!(
        note.contains("vik has not used vision lately, vera has"),
        "{note}"
    );
    assert!(note.contains("ahead of job"), "{note}");
    let mut app = fixtures::app(snap);
    let text = fixtures::render_with(100, 40, |f| {
        shareq::tui::popups::details::render(
            f,
            f.area(),
            &vik,
            false,
            Some(note.clone()),
            fixtures::NOW,
            0,
            &app.theme,
        )
    });
    let _ = &mut app;
    assert_screen("details_fair_share_100x40", &text);
}

#[test]
fn a_removed_and_a_disabled_share_and_an_oversubscribed_unit_are_marked() {
    check("main_reloaded", || fixtures::app(fixtures::reloaded()));
}

#[test]
fn every_pane_alone() {
    check_pane("header", |f, a| panes::header::render(f, f.area(), a));
    check_pane("footer", |f, a| panes::footer::render(f, f.area(), a));
    check_pane("shares", |f, a| panes::shares::render(f, f.area(), a));
    check_pane("lending", |f, a| panes::lending::render(f, f.area(), a));
    check_pane("gpus", |f, a| panes::gpus::render(f, f.area(), a));
    check_pane("queue", |f, a| panes::queue::render(f, f.area(), a));
    check_pane("running", |f, a| panes::running::render(f, f.area(), a));
    check_pane("preemptions", |f, a| {
        panes::preemptions::render(f, f.area(), a)
    });
}

/// The preemption log says what each reclaim lost (SPEC §14): `lost 1 GPU × 40m` for a
/// victim that had saved nothing, `saved 12s before` for one that reported a checkpoint
/// shortly before its release.
#[test]
fn the_preemption_log_says_what_each_preemption_lost() {
    let mut snap = fixtures::lab();
    {
        let log = std::sync::Arc::make_mut(&mut snap.preemptions);
        let ended = log
            .iter_mut()
            .find(|p| p.lost.is_some())
            .expect("an ended preemption with its loss");
        let released = ended.lost.map(|l| l.released).unwrap_or(ended.at);
        ended.lost = Some(shareq::snapshot::LostWork {
            gpus: 1,
            last_save: released - 12_000,
            released,
            saved: true,
        });
    }
    let app = fixtures::app(snap);
    let text = fixtures::render_with(160, 8, |f| panes::preemptions::render(f, f.area(), &app));
    assert!(
        text.contains("requeued (1st preemption)  saved 12s before"),
        "{text}"
    );
    assert!(
        text.contains("requeued (1st preemption)  lost 1 GPU × 11m"),
        "{text}"
    );
    assert_screen("pane_preemptions_saved_160x8", &text);
}

fn lab_with(keys: &[KeyEvent]) -> App {
    let mut app = fixtures::app(fixtures::lab());
    for k in keys {
        on_key(&mut app, *k);
    }
    // The submit form's question, answered as the runtime would: the real scheduler on a
    // copy of the lab's state.
    if let Some(shareq::tui::Action::Predict { key, spec }) =
        shareq::tui::input::prediction_request(&mut app)
    {
        let d = fixtures::lab_driver();
        let r = fixtures::lab_runtimes();
        app.prediction = Some((key, shareq::forecast::predict(d.sched, *spec, NOW, &r)));
    }
    app
}

#[test]
fn overlays() {
    check("help", || lab_with(&[key('?')]));
    check("submit_empty", || lab_with(&[key('s')]));
    check("submit_borrow", || {
        let mut keys = vec![
            key('s'),
            code(KeyCode::Tab),
            code(KeyCode::Tab),
            code(KeyCode::Tab),
        ];
        keys.extend("sweep-21".chars().map(key));
        keys.push(code(KeyCode::Tab));
        keys.extend("python sweep.py --lr 3e-4".chars().map(key));
        lab_with(&keys)
    });
    check("cancel_confirm", || lab_with(&[key('c')]));
    check("priority_prompt", || {
        lab_with(&[key('p'), code(KeyCode::Backspace), key('5')])
    });
    check("quit_dialog", || lab_with(&[key('q')]));
    check("details", || lab_with(&[code(KeyCode::Enter)]));
    check("filter_typing", || {
        let mut keys = vec![key('/')];
        keys.extend("share:infra".chars().map(key));
        lab_with(&keys)
    });
    check("sorted_by_wait", || lab_with(&[key('o')]));
    check("log_missing", || lab_with(&[key('l')]));
    check("log_tail", || {
        let mut app = fixtures::app(fixtures::lab());
        app.log_lines = (1..=60)
            .map(|i| format!("epoch {i}: loss {:.3}", 2.0 / i as f64))
            .collect();
        app.mode = Mode::Log {
            job: JobId(4),
            name: "sweep-16".into(),
            scroll_back: 0,
        };
        app
    });
}

#[test]
fn config_error_and_theme_warning_in_header() {
    check("config_error", || {
        let mut snap = fixtures::lab();
        // As the watcher reports it: full paths, several errors, one per line.
        snap.config.error = Some(format!(
            "{dir}/shares/vision.yaml:7:5: borrowLimit is only valid with LEND_AND_BORROW\n\
             {dir}/shares/nlp.yaml:3:1: capacityLimits[0].maxCapacity: expected a whole number",
            dir = snap.config.source
        ));
        snap.config.error_at = Some(NOW - 5_000);
        snap.units[0].guaranteed = 12;
        let mut app = fixtures::app(snap);
        app.theme_warning = Some("theme x.yaml: line 2: unknown field `acent`; using dark".into());
        app
    });
}

#[test]
fn e_opens_every_error_of_the_rejected_config() {
    check("config_errors_popup", || {
        let mut snap = fixtures::lab();
        snap.config.error = Some(format!(
            "{dir}/shares/vision.yaml:7:5: borrowLimit is only valid with LEND_AND_BORROW\n\
             {dir}/shares/nlp.yaml:3:1: capacityLimits[0].maxCapacity: expected a whole number, \
             found `two` (write a number of GPUs, e.g. 2)",
            dir = snap.config.source
        ));
        let mut app = fixtures::app(snap);
        on_key(&mut app, key('e'));
        app
    });
}

#[test]
fn the_quit_dialog_of_an_attached_console() {
    check("quit_attached", || {
        let mut app = fixtures::app(fixtures::lab());
        app.attached = true;
        on_key(&mut app, key('q'));
        app
    });
    // A non-admin is offered the command for their own jobs, never one for everyone's
    // (issue 46 item 6); an admin the one for every job.
    let attached_as = |uid: u32, name: &str, admins: Vec<String>| {
        let mut snap = fixtures::lab();
        let access = std::sync::Arc::make_mut(&mut snap.access);
        access.scheduler_uid = 0;
        access.scheduler_user = "root".into();
        access.admins = admins;
        let mut app = fixtures::app(snap);
        app.attached = true;
        app.caller = Some(shareq::access::Caller {
            uid,
            name: name.into(),
            groups: Vec::new(),
        });
        on_key(&mut app, key('q'));
        fixtures::render_text(&mut app, 100, 30)
    };
    let screen = attached_as(1001, "vera", Vec::new());
    assert!(
        screen.contains("shareq cancel --status running --user vera --yes"),
        "{screen}"
    );
    assert!(
        !screen.contains("cancel --status running --yes"),
        "{screen}"
    );
    let screen = attached_as(1002, "nadia", vec!["nadia".into()]);
    assert!(
        screen.contains("shareq cancel --status running --yes"),
        "{screen}"
    );
}

#[test]
fn an_attached_console_says_it_is_reconnecting() {
    check("reconnecting", || {
        let mut snap = fixtures::lab();
        snap.link_down_since = Some(NOW - 7_000);
        fixtures::app(snap)
    });
}

#[test]
fn an_attached_console_names_its_scheduler_in_the_header() {
    check("attached_header", || {
        let mut snap = fixtures::lab();
        snap.served_by = Some(shareq::snapshot::ServedBy {
            pid: 4121,
            since: Some(NOW - 3_600_000),
        });
        let mut app = fixtures::app(snap);
        app.attached = true;
        app
    });
}

#[test]
fn the_filter_finds_people_and_names_an_unknown_key() {
    check("filter_user", || {
        let mut keys = vec![key('/')];
        keys.extend("!user:vera".chars().map(key));
        keys.push(code(KeyCode::Enter));
        lab_with(&keys)
    });
    check("filter_unknown_key", || {
        let mut keys = vec![key('/')];
        keys.extend("owner:bob".chars().map(key));
        lab_with(&keys)
    });
}

/// A long command and reason continue under themselves, not under the labels.
#[test]
fn details_wrap_long_values_under_themselves() {
    for (w, h) in SIZES {
        let app = fixtures::app(fixtures::lab());
        let mut job = app.snap.running[0].clone();
        job.command = "python train.py --data /datasets/imagenet/train --epochs 90 \
                       --lr 0.1 --batch-size 256 --workers 16 --checkpoint-dir /scratch/ckpt"
            .into();
        job.reason = "running on borrowed capacity: nlp lends 1 GPU and may reclaim it \
                      when its own jobs queue (CROSS_SHARE_RECLAIM after the grace period)"
            .into();
        let text = fixtures::render_with(w, h, |f| {
            shareq::tui::popups::details::render(f, f.area(), &job, false, None, NOW, 0, &app.theme)
        });
        assert_screen(&format!("details_long_{w}x{h}"), &text);
    }
}

/// A lost GPU stays in the GPUs pane, marked, with since when.
#[test]
fn a_lost_gpu_is_shown_lost() {
    check("gpu_lost", || {
        let mut snap = fixtures::lab();
        let u = &mut snap.units[0];
        u.usable -= 1;
        u.devices.retain(|d| d.index != 7);
        u.devices.push(shareq::snapshot::DeviceView::lost(
            "local",
            7,
            NOW - 125_000,
        ));
        fixtures::app(snap)
    });
}

#[test]
fn running_pane_focused_and_scrolled() {
    check("running_focused", || {
        let mut app = fixtures::app(fixtures::lab());
        app.focus = Pane::Running;
        app.sel[Pane::Running.index()] = 4;
        app
    });
}

#[test]
fn hundred_thousand_queued() {
    check("queue_100k", || {
        let mut app = fixtures::app(fixtures::with_queue_len(&fixtures::lab(), 100_000));
        on_key(&mut app, key('G'));
        app
    });
}

#[test]
fn empty_and_tiny() {
    check("empty", || {
        fixtures::app(shareq::snapshot::Snapshot::empty())
    });
    let mut app = fixtures::app(fixtures::lab());
    let text = fixtures::render_text(&mut app, 50, 12);
    assert!(text.contains("needs at least 60×16"), "{text}");
}

/// The text captures in `assets/` are the screens the fixtures render today
/// (`UPDATE_ASSETS=1 cargo test --test it tui_render` rewrites them).
#[test]
fn asset_captures_are_current() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
    for (file, snap, w, h) in [
        ("console-lab-160x48.txt", fixtures::lab(), 160, 48),
        ("console-aws-80x24.txt", fixtures::aws(), 80, 24),
    ] {
        let text = fixtures::render_text(&mut fixtures::app(snap), w, h);
        let path = dir.join(file);
        if std::env::var_os("UPDATE_ASSETS").is_some() {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &text).unwrap();
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(on_disk, text, "{file} is stale: rerun with UPDATE_ASSETS=1");
    }
}

/// The layout holds from 80×24 to 240×70 (and degrades without panicking down to the
/// minimum): every pane gets room, the queue keeps rows, nothing overlaps the footer.
#[test]
fn layout_holds_across_sizes() {
    for snap in [
        fixtures::aws(),
        fixtures::lab(),
        fixtures::with_queue_len(&fixtures::lab(), 500),
    ] {
        for w in (60..=240).step_by(20) {
            for h in (16..=70).step_by(6) {
                let mut app = fixtures::app(snap.clone());
                let text = fixtures::render_text(&mut app, w, h);
                assert!(text.starts_with(" shareq"), "{w}x{h}: no header\n{text}");
                if w >= 80 && h >= 24 {
                    for p in Pane::ALL {
                        let a = app.areas[p.index()].area;
                        assert!(
                            a.height >= 3 && a.width >= 20,
                            "{w}x{h}: {p:?} squeezed to {a:?}"
                        );
                        assert!(a.y + a.height < h, "{w}x{h}: {p:?} covers the footer");
                    }
                    assert!(
                        app.areas[Pane::Queue.index()].rows >= 3,
                        "{w}x{h}: queue too short"
                    );
                }
            }
        }
    }
}

/// A share keeps one colour everywhere (bar, GPU cell, queue row), and a fresh preemption
/// is marked only for a few seconds.
#[test]
fn share_colours_are_consistent_and_fresh_marks_fade() {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    let mut app = fixtures::app(fixtures::lab());
    let vision = app.theme.share("vision");
    let mut term = Terminal::new(TestBackend::new(160, 48)).unwrap();
    term.draw(|f| shareq::tui::draw::draw(f, &mut app)).unwrap();
    let buf = term.backend().buffer().clone();
    let fg_of = |needle: &str, x0: u16| {
        (0..48u16).find_map(|y| {
            let row: String = (x0..160)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect();
            row.find(needle)
                .map(|i| buf[(x0 + row[..i].chars().count() as u16, y)].fg)
        })
    };
    let gpus_x = app.areas[Pane::Gpus.index()].area.x;
    let queue = app.areas[Pane::Queue.index()].area;
    assert_eq!(fg_of("vision", 0), Some(vision), "Shares row");
    assert_eq!(fg_of("vision", gpus_x), Some(vision), "GPU cell");
    let qrow = queue.y + 2;
    let qline: String = (0..160)
        .map(|x| buf[(x, qrow)].symbol().to_string())
        .collect();
    let at = qline.find("vision").unwrap();
    assert_eq!(
        buf[(qline[..at].chars().count() as u16, qrow)].fg,
        vision,
        "Queue row"
    );

    let fresh = fixtures::render_text(&mut app, 160, 48);
    assert!(fresh.contains("● "), "a preemption 2 s old is marked");
    app.now += 10_000;
    let later = fixtures::render_text(&mut app, 160, 48);
    assert!(!later.contains("● "), "and the mark is gone 10 s later");
}

/// NO_COLOR: every cell uses the terminal's colours, and the bar still reads by glyph.
#[test]
fn no_color_renders_without_colours() {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use ratatui::style::Color;
    let mut app = fixtures::app(fixtures::lab());
    app.theme = shareq::tui::Theme::monochrome();
    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap();
    term.draw(|f| shareq::tui::draw::draw(f, &mut app)).unwrap();
    let buf = term.backend().buffer();
    assert!(
        buf.content()
            .iter()
            .all(|c| c.fg == Color::Reset && c.bg == Color::Reset)
    );
    let text = fixtures::render_text(&mut app, 120, 40);
    assert!(text.contains("■■") && text.contains("▤") && text.contains("░"));
}

fn history_app(window: Window, data: Option<Result<UsageHistory, shareq::server::Refusal>>) -> App {
    let mut app = fixtures::app(fixtures::lab());
    on_key(&mut app, key('h'));
    if window != Window::Hour {
        on_key(&mut app, key(if window == Window::Day { '2' } else { '3' }));
    }
    app.history.data = data;
    app
}

#[test]
fn history_view() {
    for w in Window::ALL {
        check(&format!("history_{}", w.label()), || {
            history_app(w, Some(Ok(fixtures::history(w))))
        });
    }
    check("history_one_share", || {
        let mut app = history_app(Window::Hour, Some(Ok(fixtures::history(Window::Hour))));
        // k steps back from "every share" to the last one.
        on_key(&mut app, key('k'));
        assert_eq!(app.history.share.as_deref(), Some("vision"));
        app
    });
    check("history_empty", || {
        let mut h = fixtures::history(Window::Hour);
        h.samples.iter_mut().for_each(|n| *n = 0);
        h.series.clear();
        history_app(Window::Hour, Some(Ok(h)))
    });
    check("history_loading", || history_app(Window::Day, None));
    check("history_unavailable", || {
        history_app(Window::Hour, Some(Err(shareq::server::Refusal::NoHistory)))
    });
}

#[test]
fn a_paused_scheduler_and_jobs_not_contained_are_said_in_the_header() {
    check("main_paused", || {
        let mut snap = fixtures::lab();
        snap.paused = Some(
            "scheduling is paused: the scheduler cannot write its decisions to the database \
             (database or disk is full); nothing starts or is preempted, and it resumes by \
             itself once a write succeeds"
                .into(),
        );
        snap.containment = Some(
            "jobs are not contained (the scheduler may not manage cgroups: run it as root, or \
             in a delegated cgroup); GPUs are not isolated: CUDA_VISIBLE_DEVICES is advisory"
                .into(),
        );
        fixtures::app(snap)
    });
}

/// SPEC §13: a 12-child array on the lab's 8 GPUs, and a job after it. The queued
/// children fold behind the parent's row, which counts them by state; space unfolds it,
/// and the PENDING job waits below the queue, estimated `after`.
fn arrays_app(unfold: bool) -> App {
    let mut d = fixtures::Driver::new(fixtures::LAB_CONFIG, "lab").unwrap();
    let mut spec = shareq::model::JobSpec::new("sweep", "vision", 1, 0);
    spec.command = Some(shareq::model::Command::Shell("python sweep.py".into()));
    spec.array_properties = Some(shareq::model::ArrayProperties { size: 12 });
    let parent = d.sched.submit(spec, NOW - 60_000).unwrap();
    d.pass(NOW - 60_000);
    let mut after = shareq::model::JobSpec::new("report", "vision", 1, 0);
    after.command = Some(shareq::model::Command::Shell("python report.py".into()));
    after.depends_on = vec![shareq::model::Dependency::on(shareq::model::JobRef::job(
        parent.0,
    ))];
    d.sched.submit(after, NOW - 30_000).unwrap();
    d.pass(NOW - 30_000);
    let mut app = fixtures::app(d.snapshot(NOW, NOW - 120_000));
    if unfold {
        on_key(&mut app, key(' '));
    }
    app
}

#[test]
fn an_array_folds_behind_its_parent_and_unfolds_with_space() {
    check("arrays_folded", || arrays_app(false));
    check("arrays_unfolded", || arrays_app(true));
    let mut folded = arrays_app(false);
    let text = fixtures::render_text(&mut folded, 160, 48);
    assert!(text.contains("▸ sweep"), "{text}");
    assert!(text.contains("array 12: "), "{text}");
    assert!(text.contains("waiting for job 1 (RUNNING)"), "{text}");
    assert!(!text.contains(" 1:11 "), "{text}");
    let mut open = arrays_app(true);
    let text = fixtures::render_text(&mut open, 160, 48);
    assert!(text.contains("▾ sweep"), "{text}");
    assert!(text.contains("1:11"), "{text}");
    // Space again folds it back.
    on_key(&mut open, key(' '));
    let text = fixtures::render_text(&mut open, 160, 48);
    assert!(!text.contains(" 1:11 "), "{text}");
    // The PENDING job's details list what it waits for, with its state.
    let mut app = arrays_app(false);
    on_key(&mut app, key('j'));
    on_key(&mut app, code(KeyCode::Enter));
    let text = fixtures::render_text(&mut app, 160, 48);
    assert!(text.contains("depends on  job 1 (RUNNING)"), "{text}");
    assert!(text.contains("Job 14"), "{text}");
    // Enter on the parent's row unfolds it, rather than opening details.
    let mut app = arrays_app(false);
    on_key(&mut app, code(KeyCode::Enter));
    let text = fixtures::render_text(&mut app, 160, 48);
    assert!(text.contains("▾ sweep") && text.contains("1:11"), "{text}");
}

/// A queued job beyond the forecast's horizon reads the same in the console as in
/// `jobs` (`not within 7d`, the table's `>7d`), however long ago the forecast ran: counted
/// from now, the console said `>6d` a second after a 7-day forecast.
#[test]
fn a_job_beyond_the_horizon_reads_as_jobs_says_it() {
    let mut snap = fixtures::lab();
    let first = snap.queue.get(0).expect("a queued job").id;
    let week = 7 * 24 * 3_600_000;
    let at = NOW - 5_000;
    snap.estimates = std::sync::Arc::new(shareq::forecast::Estimates {
        computed_at: at,
        horizon_end: at + week,
        starts: vec![(first, shareq::forecast::Start::Beyond)],
        took_ms: 1,
        clone_ms: 0,
    });
    let note = snap.queued_row(snap.queue.get(0).unwrap()).estimate_note;
    assert_eq!(note.as_deref(), Some("not within 7d"));
    let mut app = fixtures::app(snap);
    app.now = NOW;
    let text = fixtures::render_text(&mut app, 160, 48);
    let row = text
        .lines()
        .find(|l| l.contains(&format!(" {} ", first.0)) && l.contains("no idle"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains(">7d"), "{row}");
}

/// `F` (issue 46 item 3): the jobs that ended, newest first, each with its outcome and
/// reason (a kill from outside says by which signal); the `/` filter narrows them; enter
/// opens a job's details, whose esc comes back to the view; esc closes it.
#[test]
fn f_shows_the_jobs_that_ended_and_enter_opens_one() {
    let ended_with = |keys: &[KeyEvent]| {
        let mut app = fixtures::app(fixtures::ended());
        for k in keys {
            on_key(&mut app, *k);
        }
        app
    };
    check("ended", || ended_with(&[key('F')]));
    // The filter in force applies, and `/` inside the view sets it.
    let mut typed = vec![key('F'), key('/')];
    typed.extend("share:qs1".chars().map(key));
    typed.push(code(KeyCode::Enter));
    check("ended_filtered", || ended_with(&typed));
    let app = ended_with(&typed);
    assert_eq!(
        app.mode,
        Mode::Ended,
        "the filter prompt goes back to the view"
    );
    // The third row (sweep, killed from outside): its details, with when it ended.
    check("ended_details", || {
        ended_with(&[key('F'), key('j'), key('j'), code(KeyCode::Enter)])
    });
    let mut app = ended_with(&[key('F'), key('j'), key('j'), code(KeyCode::Enter)]);
    let Mode::Details(j) = &app.mode else {
        panic!("enter opens the details: {:?}", app.mode)
    };
    assert_eq!(j.name, "sweep");
    assert_eq!(
        &*j.reason,
        "NON_ZERO_EXIT: killed by SIGKILL (not by shareq)"
    );
    on_key(&mut app, code(KeyCode::Esc));
    assert_eq!(
        app.mode,
        Mode::Ended,
        "closing the details goes back to the view"
    );
    on_key(&mut app, code(KeyCode::Esc));
    assert_eq!(app.mode, Mode::Normal);
    on_key(&mut app, code(KeyCode::Esc));
    assert_eq!(app.mode, Mode::Normal, "a closed view stays closed");
    // The killed job carries its signal as a field, its code kept.
    let snap = fixtures::ended();
    let sweep = snap.finished.iter().find(|j| j.name == "sweep").unwrap();
    assert_eq!(sweep.signal.as_deref(), Some("SIGKILL"));
    assert_eq!(
        &*sweep.reason,
        "NON_ZERO_EXIT: killed by SIGKILL (not by shareq)"
    );
    let json = serde_json::to_value(&**sweep).unwrap();
    assert_eq!(json["signal"], "SIGKILL");
    let eval = snap.finished.iter().find(|j| j.name == "eval").unwrap();
    assert!(
        serde_json::to_value(&**eval)
            .unwrap()
            .get("signal")
            .is_none()
    );
}

/// A fake GPU (`devices: {fake: N}`, marked so by the runtime) says what it is where a
/// real one shows NVML's figures; only a real GPU without figures reads `n/a`.
#[test]
fn a_fake_gpu_says_so_instead_of_n_a() {
    let mut snap = fixtures::lab();
    for u in &mut snap.units {
        for d in &mut u.devices {
            d.fake = d.util.is_none();
        }
    }
    let app = fixtures::app(snap);
    let text = fixtures::render_with(160, 48, |f| panes::gpus::render(f, f.area(), &app));
    assert!(text.contains("fake GPU"), "{text}");
    assert!(!text.contains("n/a"), "{text}");
    assert!(text.contains("97%"), "{text}");
}

/// A MIG unit's device reads as its instance in the GPUs pane (SPEC §15): `MIG 1g.10gb of
/// GPU 4`, or `MIG 1g.10gb` for a fake one.
#[test]
fn a_mig_instance_is_shown_with_its_profile_and_parent() {
    let mut snap = fixtures::lab();
    let u = &mut snap.units[0];
    u.devices[0].mig = Some(shareq::snapshot::MigView {
        profile: "1g.10gb".into(),
        parent: Some(4),
        uuid: "MIG-0e1f2a3b-aaaa-bbbb-cccc-000000000001".into(),
    });
    u.devices[1].mig = Some(shareq::snapshot::MigView {
        profile: "1g.10gb".into(),
        parent: None,
        uuid: "MIG-fake-gpu-1".into(),
    });
    let app = fixtures::app(snap);
    let text = fixtures::render_with(160, 48, |f| panes::gpus::render(f, f.area(), &app));
    let rows: Vec<&str> = text.lines().filter(|l| l.contains("MIG 1g.10gb")).collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(rows[0].contains("MIG 1g.10gb of GPU 4"), "{text}");
    assert!(!rows[1].contains("of GPU"), "{text}");
}

/// A MIG unit whose profile matches no instance says why in the header (SPEC §15).
#[test]
fn a_unit_without_instances_says_why_in_the_header() {
    let mut snap = fixtures::lab();
    snap.units[0].unusable = Some("no 1g.10gb MIG instance: GPU 0 has MIG disabled".into());
    let app = fixtures::app(snap);
    let text = fixtures::render_with(160, 48, |f| panes::header::render(f, f.area(), &app));
    assert!(
        text.contains("no 1g.10gb MIG instance: GPU 0 has MIG disabled"),
        "{text}"
    );
}

/// A unit sliced by memory (SPEC §15) beside whole GPUs: each sliced device reads as its
/// GiB in use and each job's GiB (`1 ▮▮▮▯ 60/80 GiB  j2 20 · j3 40`), the title counts
/// GiB apart from GPUs.
#[test]
fn a_sliced_device_shows_its_gib_per_job() {
    const SLICED: &str = "\
kind: ServiceEnvironment
name: lab
capacityLimits:
- {capacityUnit: a100, maxCapacity: 2, devices: {fake: 2}}
- {capacityUnit: a100-mem, maxCapacity: 160, devices: {fake: 2}, slicing: {memoryGiB: 80}}
---
kind: QuotaShare
quotaShareName: vision
capacityLimits: [{capacityUnit: a100, maxCapacity: 2}, {capacityUnit: a100-mem, maxCapacity: 80}]
resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
---
kind: QuotaShare
quotaShareName: nlp
capacityLimits: [{capacityUnit: a100-mem, maxCapacity: 80}]
resourceSharingConfiguration: {strategy: LEND}
";
    let mut d = fixtures::Driver::new(SLICED, "sample-configs/sliced").unwrap();
    let t0 = NOW - 600_000;
    let mut submit = |name: &str, share: &str, unit: &str, q: u32, at: i64| {
        let mut spec = shareq::model::JobSpec::new(name, share, q, 5);
        spec.capacity_unit = Some(unit.to_string());
        spec.command = Some(shareq::model::Command::Argv(vec!["run".into()]));
        d.sched.submit(spec, at).unwrap();
        d.pass(at);
    };
    submit("train", "vision", "a100", 1, t0);
    submit("notebook", "vision", "a100-mem", 50, t0 + 1_000);
    submit("infer", "nlp", "a100-mem", 20, t0 + 2_000);
    submit("debug", "nlp", "a100-mem", 40, t0 + 3_000);
    let snap = d.snapshot(NOW, NOW - 60_000);
    let u = snap.units.iter().find(|u| u.name == "a100-mem").unwrap();
    assert_eq!(u.memory_gib, Some(80));
    // One row per sliced device, its jobs in `slices`.
    assert_eq!(u.devices.len(), 2, "{:?}", u.devices);
    assert_eq!(u.devices.iter().map(|d| d.gib_used()).sum::<u32>(), 110);
    for (w, h) in SIZES {
        let app = fixtures::app(snap.clone());
        let text = fixtures::render_with(w, h, |f| panes::gpus::render(f, f.area(), &app));
        assert_screen(&format!("pane_gpus_sliced_{w}x{h}"), &text);
    }
    // A slice's details say its GiB, not GPUs.
    assert!(snap.sliced("a100-mem") && !snap.sliced("a100"));
    let app = fixtures::app(snap.clone());
    let infer = snap.running.iter().find(|j| j.name == "infer").unwrap();
    let text = fixtures::render_with(100, 40, |f| {
        shareq::tui::popups::details::render(f, f.area(), infer, true, None, NOW, 0, &app.theme)
    });
    assert!(
        text.contains("GPU memory") && text.contains("20 GiB"),
        "{text}"
    );
    // Found over its slice with `overuse: REPORT` (SPEC §15): the running row and the
    // details carry the mark; the other slices do not.
    let mut over = snap.clone();
    for j in &mut over.running {
        if j.name == "infer" {
            j.over_memory = Some(shareq::snapshot::OverMemoryView {
                held_gib: 22,
                of_gib: 20,
            });
        }
    }
    for (w, h) in SIZES {
        let app = fixtures::app(over.clone());
        let text = fixtures::render_with(w, h, |f| panes::running::render(f, f.area(), &app));
        assert_screen(&format!("pane_running_over_memory_{w}x{h}"), &text);
        let marked: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("over 22/20 GiB"))
            .collect();
        assert_eq!(marked.len(), 1, "{text}");
        assert!(marked[0].contains("infer"), "{text}");
    }
    let infer = over.running.iter().find(|j| j.name == "infer").unwrap();
    let app = fixtures::app(over.clone());
    let text = fixtures::render_with(100, 40, |f| {
        shareq::tui::popups::details::render(f, f.area(), infer, true, None, NOW, 0, &app.theme)
    });
    assert!(
        text.contains("overuse") && text.contains("over 22/20 GiB"),
        "{text}"
    );
    assert!(text.contains("(OVER_MEMORY)"), "{text}");
}

/// SPEC §15: a share's GiB of a sliced unit are never drawn or summed with GPUs: the
/// table lists them under a heading of their own; `u` on the sliced unit charts its GiB.
#[test]
fn history_view_with_a_sliced_unit() {
    let sliced = || {
        let mut h = fixtures::history(Window::Hour);
        let mut s = h.series[1].clone();
        s.unit = "a100-mem".into();
        s.limit = 80;
        s.memory_gib = Some(80);
        for p in &mut s.points {
            p.own *= 30.0;
            p.lent *= 20.0;
        }
        h.series.push(s);
        h
    };
    check("history_sliced", || {
        let app = history_app(Window::Hour, Some(Ok(sliced())));
        let lines = app.history.lines();
        let nlp: Vec<(bool, u32)> = lines
            .iter()
            .filter(|l| l.share == "nlp")
            .map(|l| (l.gib, l.limit))
            .collect();
        assert_eq!(nlp, vec![(false, 3), (true, 80)]);
        app
    });
    check("history_sliced_unit", || {
        let mut app = history_app(Window::Hour, Some(Ok(sliced())));
        on_key(&mut app, key('u'));
        on_key(&mut app, key('u'));
        assert_eq!(app.history.unit.as_deref(), Some("a100-mem"));
        app
    });
}
