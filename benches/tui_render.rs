//! Console render cost with 100,000 queued jobs on ratatui's TestBackend: a steady frame,
//! a key press plus its frame, and taking in a new snapshot (with and without a filter).
//! Run: `cargo bench --bench tui_render` (prints median / p99 per case).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use shareq::tui::filter::Filter;
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
    stats("new snapshot, no filter", ingest);
    app.filter = Filter::parse("share:vision !sweep-1").unwrap();
    app.sort = shareq::tui::filter::Sort::LongestWait;
    let mut ingest = Vec::new();
    for _ in 0..30 {
        let t = Instant::now();
        app.set_snapshot(snap.clone());
        ingest.push(t.elapsed());
    }
    stats("new snapshot, filter + sort (100k rows)", ingest);
}
