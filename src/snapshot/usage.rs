//! The utilisation history as readers see it: a window (hour, day, week) of the history
//! the scheduler samples, cut in [`BUCKETS`] buckets of per-share points. The store
//! (`store::usage`) writes the samples and reads them back into these types; the console,
//! `shareq history` and `{"op":"history"}` only read them.

use serde::{Deserialize, Serialize};

/// Samples are kept this many days (one week shown, plus a day of margin).
pub const KEEP_DAYS: i64 = 8;

/// The sampling interval unless `serve --sample-seconds` says otherwise.
pub const DEFAULT_EVERY_MS: i64 = 30_000;

/// Every window is read back in this many buckets (a point each in the charts).
pub const BUCKETS: usize = 120;

/// How far back a history view looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Window {
    #[default]
    Hour,
    Day,
    Week,
}

impl Window {
    pub const ALL: [Window; 3] = [Window::Hour, Window::Day, Window::Week];

    /// Its length in ms.
    pub fn ms(self) -> i64 {
        match self {
            Window::Hour => 3_600_000,
            Window::Day => 24 * 3_600_000,
            Window::Week => 7 * 24 * 3_600_000,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Window::Hour => "hour",
            Window::Day => "day",
            Window::Week => "week",
        }
    }

    pub fn next(self) -> Window {
        match self {
            Window::Hour => Window::Day,
            Window::Day => Window::Week,
            Window::Week => Window::Hour,
        }
    }

    pub fn parse(s: &str) -> Option<Window> {
        Window::ALL.into_iter().find(|w| w.label() == s)
    }
}
/// One bucket of one share on one unit: averages over the bucket's samples (an idle
/// sample counts as zero), the longest wait seen, and the jobs started in it.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct UsagePoint {
    pub own: f64,
    pub borrowed: f64,
    pub lent: f64,
    pub queued_gpus: f64,
    pub wait_max_ms: i64,
    pub started: u32,
    pub started_wait_ms: i64,
}

/// A share's history on one unit: one point per bucket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShareSeries {
    pub share: String,
    pub unit: String,
    /// Its guarantee in the newest sample of the window.
    pub limit: u32,
    /// A unit sliced by memory (SPEC §15), as the newest sample of the window says: the
    /// GiB of each device. Its figures (`limit` and the points) are then GiB, which are
    /// never added to GPUs.
    #[serde(rename = "memoryGiB", default, skip_serializing_if = "Option::is_none")]
    pub memory_gib: Option<u32>,
    pub points: Vec<UsagePoint>,
}

/// What the history view and `{"op":"history"}` show: a window cut in [`BUCKETS`]
/// buckets, how many samples each bucket had (0: no scheduler ran then), and the series
/// of every share that was not idle throughout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageHistory {
    pub window: Window,
    /// Start of the first bucket and end of the last (ms since the epoch).
    pub from: i64,
    pub to: i64,
    pub bucket_ms: i64,
    /// Samples per bucket.
    pub samples: Vec<u32>,
    /// The sampling interval of the newest sample (ms; 0 when none).
    pub every_ms: i64,
    /// Share in name order, then unit.
    pub series: Vec<ShareSeries>,
}

impl UsageHistory {
    /// No sample at all in the window.
    pub fn is_empty(&self) -> bool {
        self.samples.iter().all(|&n| n == 0)
    }

    /// The sampling interval: the newest sample's, else the default.
    pub fn interval_ms(&self) -> i64 {
        if self.every_ms > 0 {
            self.every_ms
        } else {
            DEFAULT_EVERY_MS
        }
    }

    /// The buckets' start instants.
    pub fn bucket_start(&self, i: usize) -> i64 {
        self.from + i as i64 * self.bucket_ms
    }
}
