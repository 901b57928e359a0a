//! The demo's first minute, replayed on the real scheduler with the built-in demo's
//! config: a newcomer must see borrowing, a cross-share reclaim, an in-share preemption
//! and two slices sharing the sliced GPU (SPEC §15). On the AWS example alone, the same
//! opening without the slices.

use crate::fixtures::AWS_CONFIG;
use shareq::config::{parse_documents, validate};
use shareq::replay::{self, Action, Options, Scenario, SimSubmit, TimedAction};
use shareq::tui::demo::{self, Demo};

/// The built-in demo's config as one text.
fn built_in() -> String {
    demo::CONFIG
        .iter()
        .map(|(_, t)| *t)
        .collect::<Vec<_>>()
        .join("\n---\n")
}

fn first_minute(seed: u64) -> Vec<serde_json::Value> {
    replay_minute(&built_in(), Demo::new(seed))
}

fn replay_minute(yaml: &str, demo: Demo) -> Vec<serde_json::Value> {
    let config = validate(parse_documents(yaml, Some("demo")).unwrap()).unwrap();
    let events = demo
        .take_while(|s| s.at.as_secs() <= 60)
        .map(|s| TimedAction {
            at: s.at.as_secs() as i64,
            action: Action::Submit(Box::new(SimSubmit {
                job_name: s.spec.job_name.clone(),
                quota_share_name: s.spec.quota_share_name.clone(),
                capacity_unit: s.spec.capacity_unit.clone(),
                quantity: s.spec.quantity,
                scheduling_priority: s.spec.scheduling_priority,
                duration: Some(i64::from(s.sleep_s)),
                exit_code: 0,
                stop_after: 0,
                preemption_retries_before_termination: None,
                retry_strategy: None,
                timeout_seconds: None,
                command: None,
                env: None,
                working_directory: None,
                user: None,
                depends_on: Vec::new(),
                array_properties: None,
                checkpoint_every_seconds: None,
                num_nodes: None,
            })),
            line: None,
        })
        .collect();
    let sc = Scenario {
        file: "demo".into(),
        description: None,
        config,
        events,
        trace: Vec::new(),
        until: Some(60),
        expect: None,
    };
    let out = replay::run(
        &sc,
        &mut std::io::sink(),
        Options {
            summary: false,
            keep_lines: true,
        },
    )
    .unwrap();
    out.lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn within_a_minute_the_demo_shows_lending_a_reclaim_and_an_in_share_preemption() {
    for seed in [1, 42, 2026] {
        let ev = first_minute(seed);
        let borrowed = ev
            .iter()
            .any(|e| e["event"] == "started" && e["borrowed"].as_u64().unwrap_or(0) > 0);
        let preempted = |reason: &str| {
            ev.iter()
                .any(|e| e["event"] == "preempted" && e["reason"] == reason)
        };
        assert!(borrowed, "seed {seed}: nobody borrowed");
        assert!(preempted("CROSS_SHARE_RECLAIM"), "seed {seed}: no reclaim");
        assert!(
            preempted("IN_SHARE_PRIORITY"),
            "seed {seed}: no in-share preemption"
        );
        let first_in_share = ev
            .iter()
            .find(|e| e["reason"] == "IN_SHARE_PRIORITY")
            .and_then(|e| e["t"].as_i64())
            .unwrap();
        assert!(
            first_in_share <= 30,
            "seed {seed}: in-share preemption at {first_in_share}s"
        );
        // Nothing the demo submits is refused, and the two opening slices share the
        // sliced GPU's one device.
        assert!(
            ev.iter().all(|e| e["event"] != "rejected"),
            "seed {seed}: {ev:?}"
        );
        let slice = |name: &str| {
            ev.iter()
                .find(|e| e["event"] == "started" && e["job"] == name)
                .unwrap_or_else(|| panic!("seed {seed}: {name} never started: {ev:?}"))
                .clone()
        };
        for (name, gib) in [("notebook-1", 20), ("infer-1", 30)] {
            let s = slice(name);
            assert_eq!(s["unit"], demo::SLICE_UNIT, "{s}");
            assert_eq!(s["quantity"], gib, "{s}");
            assert_eq!(s["devices"], serde_json::json!([0]), "{s}");
        }
    }
}

/// `shareq demo --config sample-configs/aws-example`: the same lending, reclaim and
/// in-share preemption, with no slice asked of a config that has none.
#[test]
fn on_the_aws_example_alone_the_opening_leaves_the_slices_out() {
    let ev = replay_minute(AWS_CONFIG, Demo::aws_example(1));
    assert!(ev.iter().all(|e| e["event"] != "rejected"), "{ev:?}");
    for reason in ["CROSS_SHARE_RECLAIM", "IN_SHARE_PRIORITY"] {
        assert!(
            ev.iter()
                .any(|e| e["event"] == "preempted" && e["reason"] == reason),
            "no {reason}: {ev:?}"
        );
    }
}
