//! How a multi-node job (a gang, SPEC §16) is shown, on a state the real scheduler made
//! ([`fixtures::lab_gang`]: two nodes of 4 GPUs, a 2×2 gang running, a 2×1 gang reclaimed
//! and queued again, a 2×3 gang waiting): one row in the console's queue, running and
//! ended views (`2×2`), every node in its details and the GPUs pane, all its nodes in the
//! preemption log; `jobs --json` with `numNodes` and `placements`; the event stream's
//! `started` and `preempted` lines with its nodes and devices per node.
//!
//! `jobs --json` is checked on the snapshot layer (the `JobsAnswer` the socket writes and
//! the CLI prints), not on a live `serve`: a running gang needs several nodes, which only
//! the Slurm executor carries out (the local executor runs on one machine and refuses
//! gangs), and the Slurm gang tests belong to `tests/slurm_executor.rs`.

use crate::fixtures::{self, NOW};
use shareq::model::JobSpec;
use shareq::snapshot::{JobView, Snapshot};
use shareq::tui::panes;

const SIZES: [(u16, u16); 2] = [(80, 24), (160, 48)];

fn assert_screen(name: &str, text: &str) {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| insta::assert_snapshot!(format!("gangs_view__{name}"), text));
}

fn running(snap: &Snapshot, name: &str) -> JobView {
    snap.running
        .iter()
        .find(|j| j.name == name)
        .unwrap_or_else(|| panic!("{name} runs: {:?}", snap.running))
        .clone()
}

fn queued(snap: &Snapshot, name: &str) -> JobView {
    snap.queue
        .iter()
        .find(|j| j.name == name)
        .map(|j| snap.queued_row(j))
        .unwrap_or_else(|| panic!("{name} is queued"))
}

/// The fixture is what the text below says: the scheduler placed the gangs so.
#[test]
fn the_gang_fixture_holds_gangs_on_both_nodes() {
    let snap = fixtures::lab_gang();
    let ddp = running(&snap, "ddp-resnet");
    assert_eq!((ddp.num_nodes, ddp.quantity), (Some(2), 4));
    let nodes: Vec<&str> = ddp.placements.iter().map(|p| p.node.as_str()).collect();
    assert_eq!(nodes, ["gpu1", "gpu2"]);
    assert!(
        ddp.placements.iter().all(|p| p.devices.len() == 2),
        "{ddp:?}"
    );
    // Rank 0 is what a reader of one node sees.
    assert_eq!(ddp.node.as_deref(), Some("gpu1"));
    assert_eq!(ddp.devices, ddp.placements[0].devices);
    let sweep = queued(&snap, "sweep-gang");
    assert_eq!((sweep.num_nodes, sweep.quantity), (Some(2), 2));
    assert!(sweep.placements.is_empty() && sweep.devices.is_empty());
    let big = queued(&snap, "ddp-big");
    assert_eq!((big.num_nodes, big.quantity), (Some(2), 6));
    let p = snap
        .preemptions
        .iter()
        .find(|p| p.victim_name == "sweep-gang")
        .expect("the gang victim is in the log");
    assert_eq!(p.gpus, 2);
    assert_eq!(p.victim_on().as_deref(), Some("gpu1:0 gpu2:0"));
    // Each node's devices show the gang's job.
    let on: Vec<(String, u32)> = snap.units[0]
        .devices
        .iter()
        .filter(|d| d.job == Some(ddp.id))
        .map(|d| (d.node.clone(), d.index))
        .collect();
    let placed: Vec<(String, u32)> = ddp
        .placements
        .iter()
        .flat_map(|p| p.devices.iter().map(|&i| (p.node.clone(), i)))
        .collect();
    assert_eq!(on, placed);
    // The runtime's log line of its start says the same, every node named.
    let d = fixtures::lab_gang_driver();
    let j = d.sched.job(ddp.id).expect("the gang");
    assert_eq!(
        shareq::snapshot::job_places_text(&d.sched, j, shareq::snapshot::PlaceStyle::Listed),
        "gpu1:[1, 2] gpu2:[1, 2]"
    );
}

#[test]
fn a_gang_is_one_row_and_its_nodes_are_named_in_every_pane() {
    for (w, h) in SIZES {
        let mut app = fixtures::app(fixtures::lab_gang());
        let text = fixtures::render_text(&mut app, w, h);
        assert_screen(&format!("main_{w}x{h}"), &text);
    }
    let app = fixtures::app(fixtures::lab_gang());
    let queue = fixtures::render_with(160, 10, |f| panes::queue::render(f, f.area(), &app));
    let row = |name: &str| {
        queue
            .lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("{name}: {queue}"))
            .to_string()
    };
    assert!(row("ddp-big").contains(" 2×3 "), "{queue}");
    assert!(row("sweep-gang").contains(" 2×1 "), "{queue}");
    let running = fixtures::render_with(160, 10, |f| panes::running::render(f, f.area(), &app));
    assert_eq!(
        running.matches("ddp-resnet").count(),
        1,
        "one row: {running}"
    );
    assert!(running.contains("2×2 gpu1:1,2 gpu2:1,2"), "{running}");
    assert_screen("pane_running_160x10", &running);
    let gpus = fixtures::render_with(60, 12, |f| panes::gpus::render(f, f.area(), &app));
    for dev in ["gpu1:1", "gpu1:2", "gpu2:1", "gpu2:2"] {
        let line = gpus
            .lines()
            .find(|l| l.contains(&format!("{dev} ")))
            .unwrap_or_else(|| panic!("{dev}: {gpus}"));
        assert!(line.contains("ddp-resnet"), "{dev}: {gpus}");
    }
    assert_screen("pane_gpus_60x12", &gpus);
    let log = fixtures::render_with(160, 6, |f| panes::preemptions::render(f, f.area(), &app));
    assert!(
        log.contains("sweep-gang (vision, vera, ran 25m00s, on gpu1:0 gpu2:0)"),
        "{log}"
    );
    assert_screen("pane_preemptions_160x6", &log);
}

/// An ended gang is one row of the `F` view too, its size `2×1`.
#[test]
fn an_ended_gang_is_one_row_of_the_ended_view() {
    let mut d = fixtures::lab_gang_driver();
    let sweep = d
        .sched
        .jobs()
        .find(|j| j.name() == "sweep-gang")
        .map(|j| j.id)
        .expect("the queued gang");
    d.sched.cancel(sweep, "vera", NOW - 1_000);
    d.pass(NOW - 1_000);
    let mut app = fixtures::app(d.snapshot(NOW, NOW - 206_000));
    shareq::tui::input::on_key(
        &mut app,
        crossterm::event::KeyEvent::new(
            crossterm::event::KeyCode::Char('F'),
            crossterm::event::KeyModifiers::NONE,
        ),
    );
    let text = fixtures::render_text(&mut app, 120, 20);
    let rows: Vec<&str> = text.lines().filter(|l| l.contains("sweep-gang")).collect();
    assert_eq!(rows.len(), 1, "{text}");
    assert!(rows[0].contains(" 2×1 cancelled"), "{text}");
}

#[test]
fn a_gangs_details_list_each_node_with_its_rank() {
    let snap = fixtures::lab_gang();
    let app = fixtures::app(snap.clone());
    let render = |j: &JobView| {
        fixtures::render_with(100, 30, |f| {
            shareq::tui::popups::details::render(f, f.area(), j, false, None, NOW, 0, &app.theme)
        })
    };
    let text = render(&running(&snap, "ddp-resnet"));
    assert!(
        text.contains("GPUs  2×2 (4 in all: 2 on each of 2 nodes)"),
        "{text}"
    );
    assert!(text.contains("nodes  gpu1:1,2 (rank 0, main)"), "{text}");
    assert!(text.contains("gpu2:1,2 (rank 1)"), "{text}");
    assert_screen("details_running_100x30", &text);
    let text = render(&queued(&snap, "ddp-big"));
    assert!(
        text.contains("GPUs  2×3 (6 in all: 3 on each of 2 nodes)"),
        "{text}"
    );
    assert!(
        !text.contains("rank 0"),
        "a queued gang holds no node: {text}"
    );
}

/// `jobs --json` (SPEC §16): `numNodes`, `quantity` the GPUs of all its nodes,
/// `node`/`devices` rank 0's, `placements` every node's; the gang victim's record names
/// its nodes. This is the `JobsAnswer` the socket writes and `shareq jobs --json` prints.
#[test]
fn jobs_json_carries_a_gangs_nodes_and_its_devices_on_each() {
    let snap = fixtures::lab_gang();
    let answer = shareq::server::JobsAnswer {
        queue: snap.queue_views(),
        running: snap.running.clone(),
        preemptions: snap.preemptions.to_vec(),
        ..Default::default()
    };
    let v = serde_json::to_value(&answer).unwrap();
    let job = |list: &str, name: &str| {
        v[list]
            .as_array()
            .and_then(|l| l.iter().find(|j| j["name"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("{name} in {list}: {v}"))
    };
    let ddp = job("running", "ddp-resnet");
    assert_eq!(ddp["numNodes"], 2, "{ddp}");
    assert_eq!(ddp["quantity"], 4, "{ddp}");
    assert_eq!(ddp["node"], "gpu1", "{ddp}");
    assert_eq!(ddp["devices"], serde_json::json!([1, 2]), "{ddp}");
    assert_eq!(
        ddp["placements"],
        serde_json::json!([
            {"node": "gpu1", "devices": [1, 2]},
            {"node": "gpu2", "devices": [1, 2]},
        ]),
        "{ddp}"
    );
    let big = job("queue", "ddp-big");
    assert_eq!((&big["numNodes"], &big["quantity"]), (&2.into(), &6.into()));
    assert!(big.get("placements").is_none(), "{big}");
    let plain = job("running", "ci-smoke");
    assert!(
        plain.get("numNodes").is_none() && plain.get("placements").is_none(),
        "{plain}"
    );
    let victim = v["preemptions"]
        .as_array()
        .and_then(|l| l.iter().find(|p| p["victim_name"] == "sweep-gang"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        victim["victimPlacements"],
        serde_json::json!([
            {"node": "gpu1", "devices": [0]},
            {"node": "gpu2", "devices": [0]},
        ]),
        "{victim}"
    );
    // What the CLI reads back is what was written.
    let text = serde_json::to_string(&answer).unwrap();
    let back: shareq::server::JobsAnswer = serde_json::from_str(&text).unwrap();
    assert_eq!(back, answer);
}

/// The event stream (SPEC §16): a gang's `started` line has its devices per node and its
/// nodes, and its live `quantity` counts the GPUs of every node (what `report` sums); when
/// it is preempted, the `preempted` line names its nodes and devices too.
#[test]
fn the_event_stream_names_every_node_of_a_gang() {
    let mut d = fixtures::Driver::new(&fixtures::lab_gang_config(), "lab-2nodes").unwrap();
    let t0 = NOW;
    let lines_of = |d: &mut fixtures::Driver, spec: JobSpec, at: i64| {
        let id = d.sched.submit(spec, at).expect("submitted");
        d.sched.pass(at);
        (
            id,
            shareq::events::lines(at, &d.sched.take_events(), &d.sched),
        )
    };
    let gang = |name: &str, per_node: u32, prio: u32| {
        let mut spec = JobSpec::new(name, "vision", per_node, prio);
        spec.num_nodes = Some(2);
        spec
    };
    let (sweep, _) = lines_of(&mut d, gang("sweep-gang", 1, 1), t0);
    let (ddp, lines) = lines_of(&mut d, gang("ddp-resnet", 2, 10), t0 + 1_000);
    let started = lines
        .iter()
        .find(|l| l.event == "started" && l.job == Some(ddp.0))
        .unwrap_or_else(|| panic!("{lines:?}"));
    let v = started.value();
    assert_eq!(v["nodes"], serde_json::json!(["gpu1", "gpu2"]), "{v}");
    assert_eq!(v["devices"], serde_json::json!([[1, 2], [1, 2]]), "{v}");
    assert_eq!(v["quantity"], 2, "the replay's per-node quantity: {v}");
    assert!(v.get("node").is_none(), "{v}");
    assert_eq!(started.quantity, Some(4), "both nodes' GPUs");
    // infra takes its GPU back from the borrowing vision: the low-priority gang goes.
    let (_, lines) = lines_of(&mut d, JobSpec::new("ci-smoke", "infra", 1, 8), t0 + 2_000);
    let preempted = lines
        .iter()
        .find(|l| l.event == "preempted" && l.job == Some(sweep.0))
        .unwrap_or_else(|| panic!("{lines:?}"));
    let v = preempted.value();
    assert_eq!(v["nodes"], serde_json::json!(["gpu1", "gpu2"]), "{v}");
    assert_eq!(v["devices"], serde_json::json!([[0], [0]]), "{v}");
    assert_eq!(v["by"], "ci-smoke", "{v}");
    // A plain job's lines carry no gang fields.
    let plain = lines
        .iter()
        .find(|l| l.event == "submitted")
        .map(|l| l.value())
        .unwrap_or_default();
    assert!(plain.get("nodes").is_none(), "{plain}");
}
