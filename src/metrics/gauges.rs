//! The gauges, read from the latest published snapshot at scrape time: per share and unit
//! (limit, usage, borrowed, lent, queued jobs and GPUs), per unit (usable, used), per user
//! of a fair-share share (decayed usage, only with `metrics.userLabels`: the endpoint asks
//! no one who they are) and per device (unit, node, index) where
//! telemetry has real data (utilisation, memory).

use crate::sched::ShareUnitStats;
use crate::snapshot::{DeviceView, Snapshot, UnitView};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

#[derive(Debug)]
pub(super) struct Gauges {
    pub(super) snapshots: Arc<Mutex<Option<watch::Receiver<Arc<Snapshot>>>>>,
    /// Per-user gauges are shown (`metrics.userLabels`, off by default).
    pub(super) user_labels: Arc<AtomicBool>,
}

type Rows = Vec<(Vec<(&'static str, String)>, f64)>;

/// Encode one gauge family: its help (ended with a full stop) and a row per label set.
fn family(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &Rows,
) -> Result<(), std::fmt::Error> {
    // The registry ends the counters' and histograms' help with a full stop: the same here.
    let help = format!("{help}.");
    let mut m = enc.encode_descriptor(name, &help, None, MetricType::Gauge)?;
    for (labels, v) in rows {
        let e = m.encode_family(labels)?;
        ConstGauge::new(*v).encode(e)?;
    }
    Ok(())
}

impl Collector for Gauges {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let snap = match self.snapshots.lock() {
            Ok(g) => match g.as_ref() {
                Some(rx) => rx.borrow().clone(),
                None => return Ok(()),
            },
            Err(_) => return Ok(()),
        };
        share_families(&mut enc, &snap)?;
        if self.user_labels.load(Ordering::Relaxed) {
            user_family(&mut enc, &snap)?;
        }
        unit_families(&mut enc, &snap)?;
        device_families(&mut enc, &snap)?;
        family(
            &mut enc,
            "shareq_config_error",
            "One while the config directory holds an error (the previous config stays in force), else zero",
            &vec![(
                vec![],
                if snap.config.error.is_some() {
                    1.0
                } else {
                    0.0
                },
            )],
        )
    }
}

/// The per (share, unit) gauges: limit, usage, borrowed, lent, idle, queued jobs and
/// GPUs, running jobs.
fn share_families(enc: &mut DescriptorEncoder, snap: &Snapshot) -> Result<(), std::fmt::Error> {
    let lane = |s: &ShareUnitStats| vec![("share", s.share.clone()), ("unit", s.unit.clone())];
    // Queued GPUs per (share, unit): one walk over the queue, off the runtime.
    let mut queued_gpus: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for j in snap.queue.iter() {
        *queued_gpus.entry((&j.share, &j.unit)).or_default() += u64::from(j.quantity);
    }
    let share_rows = |f: &dyn Fn(&ShareUnitStats) -> f64| -> Rows {
        snap.shares.iter().map(|s| (lane(s), f(s))).collect()
    };
    family(
        enc,
        "shareq_share_limit_gpus",
        "The share's guarantee (maxCapacity) on the unit",
        &share_rows(&|s| f64::from(s.limit)),
    )?;
    family(
        enc,
        "shareq_share_usage_gpus",
        "GPUs held by the share's jobs (releasing included)",
        &share_rows(&|s| f64::from(s.usage)),
    )?;
    family(
        enc,
        "shareq_share_borrowed_gpus",
        "GPUs the share uses beyond its limit",
        &share_rows(&|s| f64::from(s.borrowed)),
    )?;
    family(
        enc,
        "shareq_share_lent_gpus",
        "GPUs of the share's idle guarantee that other shares use",
        &share_rows(&|s| f64::from(s.lent)),
    )?;
    family(
        enc,
        "shareq_share_idle_gpus",
        "GPUs of the share's guarantee it does not use",
        &share_rows(&|s| f64::from(s.idle)),
    )?;
    family(
        enc,
        "shareq_queued_jobs",
        "RUNNABLE jobs of the share on the unit",
        &share_rows(&|s| s.queued as f64),
    )?;
    family(
        enc,
        "shareq_queued_gpus",
        "GPUs asked for by the share's RUNNABLE jobs on the unit",
        &share_rows(&|s| {
            queued_gpus
                .get(&(s.share.as_str(), s.unit.as_str()))
                .copied()
                .unwrap_or(0) as f64
        }),
    )?;
    family(
        enc,
        "shareq_running_jobs",
        "Jobs of the share holding GPUs of the unit",
        &share_rows(&|s| s.running as f64),
    )
}

/// Each user's decayed usage, of fair-share shares only (SPEC §12): bounded by the users
/// of those shares.
fn user_family(enc: &mut DescriptorEncoder, snap: &Snapshot) -> Result<(), std::fmt::Error> {
    let user_rows: Rows = snap
        .users
        .iter()
        .filter(|u| u.fair)
        .map(|u| {
            (
                vec![("share", u.share.clone()), ("user", u.user.clone())],
                u.usage_gpu_seconds,
            )
        })
        .collect();
    family(
        enc,
        "shareq_user_usage_gpu_seconds",
        "A user's decayed usage of a fair-share share, as of the scheduler's last change",
        &user_rows,
    )
}

/// The per unit gauges: usable and used GPUs, and the GiB of a sliced unit's devices.
fn unit_families(enc: &mut DescriptorEncoder, snap: &Snapshot) -> Result<(), std::fmt::Error> {
    let unit_rows = |f: &dyn Fn(&UnitView) -> f64| -> Rows {
        snap.units
            .iter()
            .map(|u| (vec![("unit", u.name.clone())], f(u)))
            .collect()
    };
    family(
        enc,
        "shareq_unit_usable_gpus",
        "Usable GPUs of the unit: min(maxCapacity, healthy devices)",
        &unit_rows(&|u| f64::from(u.usable)),
    )?;
    family(
        enc,
        "shareq_unit_used_gpus",
        "GPUs of the unit held by jobs",
        &unit_rows(&|u| f64::from(u.used)),
    )?;
    // Which units count GiB (SPEC §15): their `_gpus` series are GiB, never to be added to
    // another unit's GPUs.
    let sliced: Rows = snap
        .units
        .iter()
        .filter_map(|u| Some((vec![("unit", u.name.clone())], f64::from(u.memory_gib?))))
        .collect();
    family(
        enc,
        "shareq_unit_slice_memory_gib",
        "GiB of each device of a unit sliced by memory: that unit's _gpus series count GiB",
        &sliced,
    )
}

/// The per device gauges from telemetry (utilisation, memory), for the devices that have
/// real data.
fn device_families(enc: &mut DescriptorEncoder, snap: &Snapshot) -> Result<(), std::fmt::Error> {
    let device_rows = |f: &dyn Fn(&DeviceView) -> Option<f64>| -> Rows {
        snap.units
            .iter()
            .flat_map(|u| {
                u.devices.iter().filter_map(|d| {
                    f(d).map(|v| {
                        (
                            vec![
                                ("unit", u.name.clone()),
                                ("node", d.node.clone()),
                                ("device", d.index.to_string()),
                            ],
                            v,
                        )
                    })
                })
            })
            .collect()
    };
    family(
        enc,
        "shareq_device_utilization_ratio",
        "GPU utilisation from telemetry (0..1), real GPUs only",
        &device_rows(&|d| d.util.map(|p| f64::from(p) / 100.0)),
    )?;
    family(
        enc,
        "shareq_device_memory_used_bytes",
        "GPU memory in use from telemetry, real GPUs only",
        &device_rows(&|d| d.mem_used.map(|m| (m * 1024 * 1024) as f64)),
    )?;
    family(
        enc,
        "shareq_device_memory_total_bytes",
        "GPU memory from telemetry, real GPUs only",
        &device_rows(&|d| d.mem_total.map(|m| (m * 1024 * 1024) as f64)),
    )
}
