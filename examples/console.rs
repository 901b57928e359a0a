//! Try the console without the real runtime: the AWS example on a simulated scheduler,
//! fed by the demo load generator; jobs "run" for their `sleep` seconds and stop 1 s
//! after SIGTERM. `cargo run --example console [-- SEED]`.

use shareq::model::{Command, JobId};
use shareq::tui::fixtures::{AWS_CONFIG, Driver};
use shareq::tui::{Action, ConsoleOptions, demo, run_console};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, watch};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn sleep_secs(c: &Option<Command>) -> i64 {
    match c {
        Some(Command::Shell(s)) => s
            .strip_prefix("sleep ")
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(30),
        _ => 30,
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let seed = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let start = now_ms();
    let mut d =
        Driver::new(AWS_CONFIG, "sample-configs/aws-example").map_err(anyhow::Error::msg)?;
    let (snap_tx, snap_rx) = watch::channel(Arc::new(d.snapshot(start, start)));
    let (act_tx, mut act_rx) = mpsc::channel::<Action>(64);
    let (demo_tx, mut demo_rx) = mpsc::channel::<Action>(64);
    tokio::spawn(demo::run_demo(demo_tx, seed));
    let runtime = tokio::spawn(async move {
        let mut durations: HashMap<JobId, i64> = HashMap::new();
        let mut ends: HashMap<JobId, i64> = HashMap::new();
        let mut releases: HashMap<JobId, i64> = HashMap::new();
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        loop {
            let action = tokio::select! {
                a = act_rx.recv() => match a { Some(a) => Some(a), None => return },
                a = demo_rx.recv() => a,
                _ = tick.tick() => None,
            };
            let now = now_ms();
            let mut changed = action.is_some();
            match action {
                Some(Action::Submit(spec)) => {
                    let secs = sleep_secs(&spec.command);
                    if let Ok(id) = d.sched.submit(spec, now) {
                        durations.insert(id, secs * 1000);
                    }
                }
                Some(Action::Cancel(id)) => {
                    d.sched.cancel(id, "console", now);
                }
                Some(Action::SetPriority(id, p)) => {
                    let _ = d.sched.set_priority(id, p, now);
                }
                Some(Action::Quit { .. } | Action::Detach) => return,
                Some(Action::Reload) | None => {}
            }
            for (id, _) in ends.clone().into_iter().filter(|(_, t)| *t <= now) {
                ends.remove(&id);
                d.exited(id, 0, now);
                changed = true;
            }
            for (id, _) in releases.clone().into_iter().filter(|(_, t)| *t <= now) {
                releases.remove(&id);
                d.released(id, now);
                changed = true;
            }
            d.pass(now);
            changed |= !d.started.is_empty() || !d.stopping.is_empty();
            for id in std::mem::take(&mut d.started) {
                ends.insert(id, now + durations.get(&id).copied().unwrap_or(30_000));
            }
            for id in std::mem::take(&mut d.stopping) {
                ends.remove(&id);
                releases.insert(id, now + 1_000);
            }
            if !changed {
                continue;
            }
            let snap = d.snapshot(now, start);
            if snap_tx.send(Arc::new(snap)).is_err() {
                return;
            }
        }
    });
    let opts = ConsoleOptions {
        theme: std::env::var("SHAREQ_THEME").ok(),
        ..ConsoleOptions::default()
    };
    let result = run_console(snap_rx, act_tx, opts).await;
    runtime.abort();
    result
}
