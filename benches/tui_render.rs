//! Console render cost with 100,000 queued jobs on ratatui's TestBackend: a steady frame,
//! a key press plus its frame, and taking in a new snapshot (with and without a filter):
//! the same snapshot again (worked out from scratch), and snapshots that each move 10
//! queued rows as the scheduler's priority changes do, taken in by their changes and,
//! side by side, with their change log dropped (worked out from scratch, as before).
//! Run: `cargo bench --bench tui_render` (prints median / p99 per case).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use shareq::snapshot::list::key_of;
use shareq::snapshot::{Change, Snapshot};
use shareq::tui::filter::{Filter, Sort};
use shareq::tui::{draw, input};
use std::sync::Arc;
use std::time::{Duration, Instant};

// The console's sample snapshots: test data, shared with the integration tests.
#[path = "../tests/it/fixtures.rs"]
#[allow(dead_code)]
mod fixtures;

const QUEUED: usize = 100_000;

fn stats(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let med = samples[samples.len() / 2];
    let p99 = samples[samples.len() * 99 / 100];
    println!(
        "{name:<44} median {:>8.3} ms   p99 {:>8.3} ms   (n={})",
        med.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        samples.len()
    );
}

fn main() {
    let base = fixtures::with_queue_len(&fixtures::lab(), QUEUED);
    println!(
        "{} queued, {} running",
        base.queue.len(),
        base.running.len()
    );
    for (w, h) in [(80u16, 24u16), (160, 48), (240, 70)] {
        let mut app = fixtures::app(base.clone());
        let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
        let mut frames = Vec::new();
        for i in 0..600 {
            // Alternate the clock so every frame really changes cells (wait times).
            app.now = fixtures::NOW + (i % 2) * 1000;
            let t = Instant::now();
            term.draw(|f| draw::draw(f, &mut app)).unwrap();
            frames.push(t.elapsed());
        }
        stats(&format!("frame {w}x{h}"), frames[100..].to_vec());

        let mut keys = Vec::new();
        for i in 0..500 {
            let k = if i % 50 < 25 { 'j' } else { 'k' };
            let t = Instant::now();
            input::on_key(
                &mut app,
                KeyEvent::new(KeyCode::Char(k), KeyModifiers::NONE),
            );
            term.draw(|f| draw::draw(f, &mut app)).unwrap();
            keys.push(t.elapsed());
        }
        stats(&format!("key j/k + frame {w}x{h}"), keys);
    }
    let mut app = fixtures::app(base.clone());
    let snap = Arc::new(base.clone());
    let mut ingest = Vec::new();
    for _ in 0..100 {
        let t = Instant::now();
        app.set_snapshot(snap.clone());
        ingest.push(t.elapsed());
    }
    stats("the same snapshot again", ingest);

    // What an attached console receives while the scheduler works: each snapshot moves 10
    // queued rows (one priority change each: a removal and an insertion).
    let churn = churned(&base, 200, 10);
    let forgetful: Vec<Arc<Snapshot>> = churn
        .iter()
        .map(|s| {
            let mut s = (**s).clone();
            s.changes = Default::default();
            Arc::new(s)
        })
        .collect();
    for (label, filter, sort) in [
        ("no filter", "", Sort::Scheduling),
        ("filter + sort", "share:vision !sweep-1", Sort::LongestWait),
    ] {
        for (how, snaps) in [("by its changes", &churn), ("from scratch", &forgetful)] {
            let mut app = fixtures::app(base.clone());
            app.filter = Filter::parse(filter).unwrap();
            app.sort = sort;
            app.rebuild_rows();
            // A selection in the middle of the queue, followed through every move.
            for _ in 0..500 {
                input::on_key(
                    &mut app,
                    KeyEvent::new(KeyCode::Char('j'), KeyModifiers::NONE),
                );
            }
            let mut ingest = Vec::new();
            for s in snaps.iter() {
                let t = Instant::now();
                app.set_snapshot(s.clone());
                ingest.push(t.elapsed());
            }
            stats(&format!("10 rows moved, {label}, {how}"), ingest);
        }
    }
}

/// `n` snapshots after `base`, each moving `per` queued rows to another priority, with
/// the change log the scheduler (or an attached console's stream) keeps.
fn churned(base: &Snapshot, n: usize, per: usize) -> Vec<Arc<Snapshot>> {
    let mut cur = base.clone();
    let len = cur.queue.len();
    (0..n)
        .map(|k| {
            let mut changes = Vec::new();
            for m in 0..per {
                let i = (k * 7919 + m * 104_729) % len;
                let old = cur.queue.get(i).unwrap().clone();
                cur.queue.remove(key_of(&old));
                let mut moved = old.clone();
                moved.priority = (old.priority + 1) % 4;
                let moved = Arc::new(moved);
                cur.queue.upsert(moved.clone());
                changes.push(Change::Remove((old.priority, old.submitted, old.id)));
                changes.push(Change::Upsert(moved));
            }
            cur.version += 1;
            cur.changes.push(cur.version, Some(changes));
            Arc::new(cur.clone())
        })
        .collect()
}
