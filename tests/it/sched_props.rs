//! Scheduler invariants over random scenarios (STYLE.md): capacity never exceeded, RESERVE
//! never lends, a share within its limit never loses a job to another share, only lower
//! priorities are preempted in a share, the pass terminates, and the same inputs give the
//! same decisions; on a unit sliced by memory (SPEC §15) as well, where no device ever
//! holds more than its GiB.

use proptest::prelude::*;
use shareq::model::{JobId, Strategy as ShareStrategy};
use shareq::replay::{Observation, Options, Scenario, run, run_observed};
use shareq::sched::{Event, Phase, PreemptReason, Sched};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

#[derive(Debug, Clone)]
struct ShareGen {
    strategy: u8,
    limit: u32,
    borrow: i64,
    in_share: bool,
}

#[derive(Debug, Clone)]
struct JobGen {
    at: u32,
    share: usize,
    quantity: u32,
    priority: u32,
    duration: Option<u32>,
    stop_after: u32,
    exit_code: i32,
    retries: Option<u32>,
    /// A gang's node count (SPEC §16); 1 for a plain job.
    nodes: u32,
}

#[derive(Debug, Clone)]
enum Later {
    Cancel(usize),
    Update(usize, u32),
}

fn share_gen() -> impl Strategy<Value = ShareGen> {
    (
        0u8..3,
        1u32..5,
        prop_oneof![Just(-1i64), Just(0), Just(50), Just(100), Just(300)],
        any::<bool>(),
    )
        .prop_map(|(strategy, limit, borrow, in_share)| ShareGen {
            strategy,
            limit,
            borrow,
            in_share,
        })
}

fn job_gen(nshares: usize) -> impl Strategy<Value = JobGen> {
    (
        0u32..60,
        0..nshares,
        1u32..5,
        0u32..5,
        prop_oneof![4 => (1u32..40).prop_map(Some), 1 => Just(None)],
        0u32..4,
        prop_oneof![9 => Just(0i32), 1 => Just(3)],
        prop_oneof![3 => Just(None), 1 => (0u32..3).prop_map(Some)],
    )
        .prop_map(
            |(at, share, quantity, priority, duration, stop_after, exit_code, retries)| JobGen {
                at,
                share,
                quantity,
                priority,
                duration,
                stop_after,
                exit_code,
                retries,
                nodes: 1,
            },
        )
}

fn scenario_text(
    shares: &[ShareGen],
    extra: i32,
    grace: u32,
    jobs: &[JobGen],
    later: &[(u32, Later)],
    reload: Option<(u32, Vec<ShareGen>)>,
) -> String {
    scenario_text_on(shares, extra, grace, jobs, later, reload, None)
}

/// [`scenario_text`] on `nodes` of the given sizes (SPEC §10), when given: maxCapacity is
/// their total plus `extra` (at least 1).
fn scenario_text_on(
    shares: &[ShareGen],
    extra: i32,
    grace: u32,
    jobs: &[JobGen],
    later: &[(u32, Later)],
    reload: Option<(u32, Vec<ShareGen>)>,
    nodes: Option<&[u32]>,
) -> String {
    let total: u32 = match nodes {
        Some(sizes) => sizes.iter().sum(),
        None => shares.iter().map(|s| s.limit).sum(),
    };
    let usable = (total as i32 + extra).max(1);
    let mut y = String::new();
    let _ = writeln!(y, "config:");
    match nodes {
        None => {
            let _ = writeln!(
                y,
                "- {{kind: ServiceEnvironment, name: p, capacityLimits: [{{capacityUnit: gpu, maxCapacity: {usable}, devices: {{fake: {usable}}}}}], preemption: {{gracePeriodSeconds: {grace}}}}}"
            );
        }
        Some(sizes) => {
            let list: Vec<String> = sizes
                .iter()
                .enumerate()
                .map(|(i, n)| format!("{{name: n{i}, devices: {{gpu: {{fake: {n}}}}}}}"))
                .collect();
            let _ = writeln!(
                y,
                "- {{kind: ServiceEnvironment, name: p, capacityLimits: [{{capacityUnit: gpu, maxCapacity: {usable}}}], nodes: [{}], preemption: {{gracePeriodSeconds: {grace}}}}}",
                list.join(", ")
            );
        }
    }
    for (i, s) in shares.iter().enumerate() {
        let strategy = ["RESERVE", "LEND", "LEND_AND_BORROW"][s.strategy as usize];
        let borrow = if s.strategy == 2 {
            format!(", borrowLimit: {}", s.borrow)
        } else {
            String::new()
        };
        let ins = if s.in_share { "ENABLED" } else { "DISABLED" };
        let _ = writeln!(
            y,
            "- {{kind: QuotaShare, quotaShareName: s{i}, capacityLimits: [{{capacityUnit: gpu, maxCapacity: {}}}], resourceSharingConfiguration: {{strategy: {strategy}{borrow}}}, preemptionConfiguration: {{inSharePreemption: {ins}}}}}",
            s.limit
        );
    }
    let _ = writeln!(y, "events:");
    let mut evs: Vec<(u32, String)> = Vec::new();
    for (i, j) in jobs.iter().enumerate() {
        let mut f = format!(
            "jobName: j{i}, quotaShareName: s{}, quantity: {}, schedulingPriority: {}, stopAfter: {}, exitCode: {}",
            j.share, j.quantity, j.priority, j.stop_after, j.exit_code
        );
        if let Some(d) = j.duration {
            let _ = write!(f, ", duration: {d}");
        }
        if let Some(r) = j.retries {
            let _ = write!(f, ", preemptionRetriesBeforeTermination: {r}");
        }
        if j.nodes > 1 {
            let _ = write!(f, ", numNodes: {}", j.nodes);
        }
        if j.exit_code != 0 {
            f.push_str(", retryStrategy: {attempts: 2}");
        }
        evs.push((j.at, format!("  submit: {{{f}}}")));
    }
    for (at, l) in later {
        match l {
            Later::Cancel(i) if *i < jobs.len() => evs.push((*at, format!("  cancel: j{i}"))),
            Later::Update(i, p) if *i < jobs.len() => evs.push((
                *at,
                format!("  update: {{jobName: j{i}, schedulingPriority: {p}}}"),
            )),
            _ => {}
        }
    }
    if let Some((at, new)) = reload {
        // The same environment; shares resized, re-strategised, and the last one removed.
        let mut body = String::from("  config:\n");
        let env = y.lines().nth(1).unwrap_or_default().to_string();
        let _ = writeln!(body, "  {env}");
        for (i, s) in new
            .iter()
            .enumerate()
            .take(new.len().saturating_sub(1).max(1))
        {
            let strategy = ["RESERVE", "LEND", "LEND_AND_BORROW"][s.strategy as usize];
            let _ = writeln!(
                body,
                "  - {{kind: QuotaShare, quotaShareName: s{i}, capacityLimits: [{{capacityUnit: gpu, maxCapacity: {}}}], resourceSharingConfiguration: {{strategy: {strategy}}}, preemptionConfiguration: {{inSharePreemption: {}}}}}",
                s.limit,
                if s.in_share { "ENABLED" } else { "DISABLED" }
            );
        }
        evs.push((at, body.trim_end().to_string()));
    }
    evs.sort_by_key(|e| e.0);
    for (at, body) in evs {
        let _ = writeln!(y, "- at: {at}\n{body}");
    }
    y
}

/// Liveness at the end of a pass (SPEC §3): while no job of the unit is releasing GPUs, no
/// guaranteed job that fits in the free GPUs waits (unless its nomination lapsed at this
/// very instant, which forbids it to preempt until the next one), and no nomination
/// outlives its victims' release.
fn liveness_failures(sched: &Sched, t: i64) -> Vec<String> {
    let mut out = Vec::new();
    let releasing = sched.jobs().any(|j| j.is_stopping());
    let (_, usable, used, _) = sched.unit_totals()[0].clone();
    let free = i64::from(usable) - i64::from(used);
    let mut usage: HashMap<usize, i64> = HashMap::new();
    for j in sched.jobs().filter(|j| j.is_holding()) {
        *usage.entry(j.share).or_insert(0) += i64::from(j.quantity);
    }
    for j in sched.jobs() {
        let Phase::Pending { nominated } = &j.phase else {
            continue;
        };
        if let Some(victims) = nominated {
            // Written out here rather than through the core's own helper, so that the
            // check does not share the code it checks.
            let releasing_for_it = victims.victims.iter().any(|v| {
                sched
                    .job(v.job)
                    .is_some_and(|vj| vj.is_stopping() && vj.attempts_started == v.attempt)
            });
            if !releasing_for_it {
                out.push(format!(
                    "t={t}: job {} is still nominated but none of its victims is releasing",
                    j.id
                ));
            }
            continue;
        }
        // With nodes, a borrower whose GPUs hold the count on a node too small for the
        // job is reclaimed all the same (SPEC §10, "When some node already fits j"), so
        // borrowing is no excuse to wait.
        if releasing || j.lapsed_at == Some(t) {
            continue;
        }
        let (Some((_, limit)), q) = (sched.share_stats_for(j.share, j.unit), j.quantity) else {
            continue;
        };
        let u = usage.get(&j.share).copied().unwrap_or(0);
        // With nodes, a job fits only where one node has that many free devices; on a
        // sliced unit, where one device has that many free GiB.
        let fits_a_node = match sched.slice_of(0) {
            Some(gib) => device_gib(sched)
                .values()
                .any(|&used| i64::from(gib) - used >= i64::from(q)),
            None if sched.has_nodes() => {
                let mut per_node: HashMap<String, i64> = HashMap::new();
                for (node, _, holder) in sched.device_map("gpu") {
                    *per_node.entry(node).or_insert(0) += i64::from(holder.is_none());
                }
                // A gang needs N nodes with its per-node quantity free (SPEC §16).
                let per = i64::from(j.per_node());
                per_node.values().filter(|&&f| f >= per).count() >= j.nodes as usize
            }
            None => true,
        };
        if u + i64::from(q) <= i64::from(limit) && i64::from(q) <= free && fits_a_node {
            out.push(format!(
                "t={t}: guaranteed job {} ({q} GPUs, share at {u}/{limit}) waits with {free} free and nothing releasing: {}",
                j.id,
                sched.reason(j.id)
            ));
        }
    }
    out
}

/// GiB held on each (node, device) of a sliced unit, from the jobs that hold them (its
/// healthy devices listed with 0), written out here rather than read from the core.
fn device_gib(sched: &Sched) -> BTreeMap<(String, u32), i64> {
    let mut out: BTreeMap<(String, u32), i64> = sched
        .device_map("gpu")
        .into_iter()
        .map(|(n, d, _)| ((n, d), 0))
        .collect();
    for j in sched.jobs().filter(|j| j.is_holding()) {
        let node = sched
            .job_node(j)
            .map(|n| sched.node_name(n).to_string())
            .unwrap_or_default();
        for d in j.devices() {
            *out.entry((node.clone(), *d)).or_insert(0) += i64::from(j.quantity);
        }
    }
    out
}

/// Checks the invariants as the run goes.
#[derive(Default)]
struct Checker {
    /// Non-releasing usage per share just before the pass, advanced through its events.
    shadow: HashMap<usize, i64>,
    /// All GPUs held per share (releasing ones too), and in total, likewise.
    held: HashMap<usize, i64>,
    used: i64,
    /// Off when the config changes mid-run: a raised RESERVE limit may find its GPUs busy.
    skip_reserve_check: bool,
    in_pass: bool,
    failures: Vec<String>,
}

fn holding_by_share(sched: &Sched) -> HashMap<usize, i64> {
    let mut m = HashMap::new();
    for j in sched.jobs() {
        if j.is_holding() && !j.is_stopping() {
            *m.entry(j.share).or_insert(0) += i64::from(j.quantity);
        }
    }
    m
}

fn limit_of(sched: &Sched, share: usize) -> i64 {
    let name = sched.share_name(share);
    sched
        .share_stats()
        .iter()
        .find(|s| s.share == name)
        .map_or(0, |s| i64::from(s.limit))
}

impl Checker {
    fn observe(&mut self, o: Observation) {
        let sched = o.sched;
        if o.before_pass {
            self.shadow = holding_by_share(sched);
            self.held.clear();
            for j in sched.jobs().filter(|j| j.is_holding()) {
                *self.held.entry(j.share).or_insert(0) += i64::from(j.quantity);
            }
            self.used = i64::from(sched.unit_totals()[0].2);
            self.in_pass = true;
            return;
        }
        // Capacity: never more GPUs in use than usable, no device held twice.
        for (unit, usable, used, _) in sched.unit_totals() {
            if used > usable {
                self.failures
                    .push(format!("t={}: {unit} uses {used} of {usable}", o.t));
            }
        }
        // No (node, device) held twice, and no job spans nodes: every device a job holds
        // is listed under its node (or was lost there), with the job as its holder. On a
        // sliced unit a job holds one device, shared, and no device holds more than its
        // GiB (SPEC §15).
        let slice = sched.slice_of(0);
        let mut held: BTreeMap<(String, u32), Vec<JobId>> = BTreeMap::new();
        let map = sched.device_map("gpu");
        if let Some(gib) = slice {
            for ((node, d), used) in device_gib(sched) {
                if used > i64::from(gib) {
                    self.failures.push(format!(
                        "t={}: device {d} of {node} holds {used} GiB of its {gib}",
                        o.t
                    ));
                }
            }
        }
        for j in sched.jobs() {
            let devices = if slice.is_some() {
                1
            } else {
                j.per_node() as usize
            };
            // Every node of a job (a gang's N, SPEC §16), with its devices there.
            let places = sched.job_places(j);
            // No partial start: a holding gang holds room on N distinct nodes, never fewer.
            let distinct: std::collections::BTreeSet<&String> =
                places.iter().map(|p| &p.0).collect();
            if j.is_holding()
                && (places.len() != j.nodes as usize || distinct.len() != places.len())
            {
                self.failures.push(format!(
                    "t={}: job {} of {} nodes holds room on {:?}",
                    o.t, j.id, j.nodes, places
                ));
            }
            for (node, on) in &places {
                if !j.is_stopping() && on.len() != devices {
                    self.failures.push(format!(
                        "t={}: job {} runs on {} devices of {node} for {} GPUs there",
                        o.t,
                        j.id,
                        on.len(),
                        j.per_node()
                    ));
                }
            }
            let all: Vec<(String, u32)> = places
                .iter()
                .flat_map(|(node, on)| on.iter().map(move |d| (node.clone(), *d)))
                .collect();
            for (node, d) in &all {
                let (node, d) = (node.clone(), d);
                let listed = map
                    .iter()
                    .any(|(n, dev, h)| *n == node && dev == d && *h == Some(j.id));
                if !listed {
                    self.failures.push(format!(
                        "t={}: job {} holds device {d} of {node}, which the device map does not give it",
                        o.t, j.id
                    ));
                }
                let holders = held.entry((node.clone(), *d)).or_default();
                if slice.is_none()
                    && let Some(other) = holders.first()
                {
                    self.failures.push(format!(
                        "t={}: device {d} of {node} held by {other} and {}",
                        o.t, j.id
                    ));
                }
                holders.push(j.id);
            }
        }
        // And the other way round: every holder the map names holds that device now.
        for (node, d, holder) in &map {
            let Some(id) = holder else { continue };
            if !held
                .get(&(node.clone(), *d))
                .is_some_and(|h| h.contains(id))
            {
                self.failures.push(format!(
                    "t={}: the device map gives device {d} of {node} to job {id}, which does not hold it",
                    o.t
                ));
            }
        }
        if !self.in_pass {
            return;
        }
        self.in_pass = false;
        self.failures.extend(liveness_failures(sched, o.t));
        for ev in o.events {
            match ev {
                Event::Started { job, borrowed, .. } => {
                    let j = sched.job(*job).expect("started job");
                    let q = i64::from(j.quantity);
                    *self.shadow.entry(j.share).or_insert(0) += q;
                    *self.held.entry(j.share).or_insert(0) += q;
                    self.used += q;
                    // RESERVE never lends: the idle guarantees of RESERVE shares stay free.
                    let usable = i64::from(sched.unit_totals()[0].1);
                    let reserved_idle: i64 = sched
                        .share_stats()
                        .iter()
                        .enumerate()
                        .filter(|(_, st)| st.strategy == ShareStrategy::Reserve)
                        .filter(|(_, st)| st.share != sched.share_name(j.share))
                        .map(|(_, st)| {
                            let ix = (0..64).find(|&i| {
                                i < 64 && sched.share_name_checked(i) == Some(st.share.as_str())
                            });
                            let held = ix.and_then(|i| self.held.get(&i)).copied().unwrap_or(0);
                            (i64::from(st.limit) - held).max(0)
                        })
                        .sum();
                    // On an oversubscribed unit guarantees overlap: a start within its own
                    // share's limit may use GPUs a RESERVE share also counts on (SPEC §3);
                    // lending (a borrowed start) still never touches them.
                    let guarantees = sched.unit_totals()[0].3 as i64;
                    let overlapping = guarantees > usable && *borrowed == 0;
                    if !self.skip_reserve_check
                        && !overlapping
                        && usable - self.used < reserved_idle
                    {
                        self.failures.push(format!(
                            "t={}: {} started leaving {} free while RESERVE shares keep {reserved_idle} idle",
                            o.t,
                            job,
                            usable - self.used
                        ));
                    }
                }
                Event::Requeued { job, .. } | Event::Failed { job, .. } => {
                    let j = sched.job(*job).expect("job");
                    *self.held.entry(j.share).or_insert(0) -= i64::from(j.quantity);
                    self.used -= i64::from(j.quantity);
                }
                Event::Preempted { job, by, reason } => {
                    let v = sched.job(*job).expect("victim");
                    let t = v.share;
                    if let Some(b) = by.and_then(|b| sched.job(b)) {
                        if i64::from(b.quantity) > limit_of(sched, b.share) {
                            self.failures.push(format!(
                                "t={}: job {} larger than its guarantee preempted",
                                o.t, b.id
                            ));
                        }
                        match reason {
                            PreemptReason::CrossShareReclaim => {
                                let nr = self.shadow.get(&t).copied().unwrap_or(0);
                                if b.share == t || nr <= limit_of(sched, t) {
                                    self.failures.push(format!(
                                        "t={}: {} reclaimed from share {} within its limit ({nr})",
                                        o.t,
                                        job,
                                        sched.share_name(t)
                                    ));
                                }
                            }
                            PreemptReason::InSharePriority => {
                                if b.share != t || v.priority >= b.priority {
                                    self.failures.push(format!(
                                        "t={}: in-share preemption of {} (prio {}) by {} (prio {})",
                                        o.t, job, v.priority, b.id, b.priority
                                    ));
                                }
                            }
                            PreemptReason::DeviceLost => {}
                        }
                    }
                    *self.shadow.entry(t).or_insert(0) -= i64::from(v.quantity);
                }
                _ => {}
            }
        }
    }
}

fn scenario_strategy(with_reload: bool) -> impl Strategy<Value = String> {
    scenario_strategy_of(with_reload, 1..5)
}

/// [`scenario_strategy`] with a number of shares in `nshares`.
fn scenario_strategy_of(
    with_reload: bool,
    nshares: std::ops::Range<usize>,
) -> impl Strategy<Value = String> {
    prop::collection::vec(share_gen(), nshares).prop_flat_map(move |shares| {
        let n = shares.len();
        (
            Just(shares),
            -2i32..4,
            0u32..3,
            prop::collection::vec(job_gen(n), 1..30),
            prop::collection::vec(
                (
                    0u32..80,
                    prop_oneof![
                        (0usize..30).prop_map(Later::Cancel),
                        (0usize..30, 0u32..6).prop_map(|(i, p)| Later::Update(i, p))
                    ],
                ),
                0..6,
            ),
            (0u32..60, prop::collection::vec(share_gen(), n..=n)),
        )
            .prop_map(move |(shares, extra, grace, jobs, later, reload)| {
                let reload = with_reload.then_some(reload);
                scenario_text(&shares, extra, grace, &jobs, &later, reload)
            })
    })
}

/// Preemption churn: few shares, many short jobs with slow stops, so that victims often
/// release, requeue and start again while the job that preempted them still waits.
fn churn_strategy() -> impl Strategy<Value = String> {
    prop::collection::vec(share_gen(), 2..4).prop_flat_map(|shares| {
        let n = shares.len();
        let job = (0u32..40, 0..n, 1u32..4, 0u32..3, 1u32..30, 1u32..8).prop_map(
            |(at, share, quantity, priority, duration, stop_after)| JobGen {
                at,
                share,
                quantity,
                priority,
                duration: Some(duration),
                stop_after,
                exit_code: 0,
                retries: None,
                nodes: 1,
            },
        );
        (Just(shares), -1i32..3, prop::collection::vec(job, 8..40))
            .prop_map(|(shares, extra, jobs)| scenario_text(&shares, extra, 10, &jobs, &[], None))
    })
}

/// Scenarios on 1-4 nodes of 1-5 GPUs each (SPEC §10): jobs of 1-6 GPUs, some larger than
/// any node, so that placement, FRAGMENTED waits and per-node victim walks all happen.
fn nodes_strategy() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(share_gen(), 1..4),
        prop::collection::vec(1u32..6, 1..5),
    )
        .prop_flat_map(|(shares, nodes)| {
            let n = shares.len();
            let job = (job_gen(n), 1u32..7).prop_map(|(mut j, q)| {
                j.quantity = q;
                j
            });
            (
                Just(shares),
                Just(nodes),
                -2i32..1,
                0u32..3,
                prop::collection::vec(job, 1..30),
            )
                .prop_map(|(shares, nodes, extra, grace, jobs)| {
                    scenario_text_on(&shares, extra, grace, &jobs, &[], None, Some(&nodes))
                })
        })
}

/// Scenarios on 2-5 nodes of 1-5 GPUs each with gangs (SPEC §16): a third of the jobs are
/// gangs of 2-3 nodes × 1-3 GPUs (some that no N nodes could ever hold), the rest plain
/// jobs of 1-6 GPUs, so that gang placement, gang victims and gang nominations meet plain
/// jobs' walks, FRAGMENTED waits and reservations.
fn gangs_strategy() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(share_gen(), 1..4),
        prop::collection::vec(1u32..6, 2..6),
    )
        .prop_flat_map(|(shares, nodes)| {
            let n = shares.len();
            let job = (
                job_gen(n),
                1u32..7,
                prop_oneof![2 => Just(1u32), 1 => 2u32..4],
            )
                .prop_map(|(mut j, q, nodes)| {
                    j.nodes = nodes;
                    j.quantity = if nodes > 1 { q.div_ceil(2) } else { q };
                    j
                });
            (
                Just(shares),
                Just(nodes),
                -2i32..1,
                0u32..3,
                prop::collection::vec(job, 1..30),
                any::<bool>(),
            )
                .prop_map(|(shares, nodes, extra, grace, jobs, reserve)| {
                    let text =
                        scenario_text_on(&shares, extra, grace, &jobs, &[], None, Some(&nodes));
                    if reserve {
                        // Reservations for big jobs (SPEC §3), gangs' included.
                        text.replacen("nodes: [", "reserveAfterSeconds: 5, nodes: [", 1)
                    } else {
                        text
                    }
                })
        })
}

/// Scenarios on a unit sliced by memory (SPEC §15): 1-4 devices of 3-9 GiB, without or
/// with `nodes` (the devices spread over 2 nodes), shares' limits and jobs in GiB (some
/// larger than a device), so that best fit over devices, FRAGMENTED waits and the
/// per-device victim walk all happen. `with_reload`: the shares are reloaded (as
/// `scenario_strategy` does) with each device's GiB the same or up to 2 more (fewer
/// GiB, which can leave a job being stopped holding more than is left until it exits, are
/// in the core's `tests_slice`).
fn sliced_strategy(with_reload: bool) -> impl Strategy<Value = String> {
    (
        prop::collection::vec(share_gen(), 1..4),
        1u32..5,
        3u32..10,
        any::<bool>(),
    )
        .prop_flat_map(move |(shares, devices, gib, nodes)| {
            let n = shares.len();
            let job = (job_gen(n), 1..gib + 2).prop_map(|(mut j, q)| {
                j.quantity = q;
                j
            });
            let scale = move |v: Vec<ShareGen>| -> Vec<ShareGen> {
                v.into_iter()
                    .map(|mut s| {
                        s.limit = s.limit * gib / 2 + 1;
                        s
                    })
                    .collect()
            };
            (
                Just(scale(shares)),
                Just((devices, gib, nodes)),
                -3i32..2,
                0u32..3,
                prop::collection::vec(job, 1..30),
                (0u32..60, prop::collection::vec(share_gen(), n..=n), 0i32..3),
            )
                .prop_map(move |(shares, (devices, gib, nodes), extra, grace, jobs, reload)| {
                    let (at, new, delta) = reload;
                    let reload = with_reload.then(|| (at, scale(new)));
                    let text = scenario_text(&shares, 0, grace, &jobs, &[], reload);
                    let plain = text.lines().nth(1).unwrap_or_default().to_string();
                    // maxCapacity stays as it was at the reload: a lower one leaves jobs
                    // running above it, which is allowed (SPEC §4.3).
                    let max =
                        (i64::from(devices * gib) + i64::from(extra) * i64::from(gib / 2)).max(1);
                    let env = |gib: u32| {
                        if nodes && devices > 1 {
                            // n0 has fake devices 0.., n1 listed indices (not from 0).
                            let first = devices / 2;
                            let listed: Vec<String> = [2, 5, 7, 9][..(devices - first) as usize]
                                .iter()
                                .map(u32::to_string)
                                .collect();
                            format!(
                                "- {{kind: ServiceEnvironment, name: p, capacityLimits: [{{capacityUnit: gpu, maxCapacity: {max}, slicing: {{memoryGiB: {gib}}}}}], nodes: [{{name: n0, devices: {{gpu: {{fake: {first}}}}}}}, {{name: n1, devices: {{gpu: [{}]}}}}], preemption: {{gracePeriodSeconds: {grace}}}}}",
                                listed.join(", ")
                            )
                        } else {
                            format!(
                                "- {{kind: ServiceEnvironment, name: p, capacityLimits: [{{capacityUnit: gpu, maxCapacity: {max}, devices: {{fake: {devices}}}, slicing: {{memoryGiB: {gib}}}}}], preemption: {{gracePeriodSeconds: {grace}}}}}"
                            )
                        }
                    };
                    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
                    lines[1] = env(gib);
                    // The reload's environment: the same devices, with other GiB.
                    let reloaded = env((gib as i32 + delta).max(1) as u32);
                    let body = format!("  {plain}");
                    for l in lines.iter_mut().skip(2) {
                        if *l == body {
                            *l = format!("  {reloaded}");
                        }
                    }
                    lines.join("\n") + "\n"
                })
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_on_sliced_devices(text in sliced_strategy(false)) {
        check_run(&text, false)?;
    }

    #[test]
    fn invariants_hold_on_sliced_devices_across_reloads(text in sliced_strategy(true)) {
        check_run(&text, true)?;
    }

    #[test]
    fn invariants_hold_with_gangs(text in gangs_strategy()) {
        check_run(&text, false)?;
    }

    #[test]
    fn invariants_hold_on_nodes(text in nodes_strategy()) {
        check_run(&text, false)?;
    }

    #[test]
    fn invariants_hold_under_preemption_churn(text in churn_strategy()) {
        check_run(&text, false)?;
    }

    #[test]
    fn invariants_hold(text in scenario_strategy(false)) {
        check_run(&text, false)?;
    }

    #[test]
    fn invariants_hold_across_reloads(text in scenario_strategy(true)) {
        check_run(&text, true)?;
    }
}

/// `text` with a reload of its own initial config added at instant `t` (after the events
/// already there at `t`).
fn with_noop_reload(text: &str, t: u32) -> String {
    let config: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "config:")
        .skip(1)
        .take_while(|l| *l != "events:")
        .collect();
    let mut out = text.trim_end().to_string();
    let _ = write!(out, "\n- at: {t}\n  config:");
    for l in config {
        let _ = write!(out, "\n  {l}");
    }
    out.push('\n');
    out
}

/// The decision lines of a run, config lines left out.
fn decisions(text: &str) -> Vec<String> {
    let sc = Scenario::parse(text, "prop.yaml", None).expect("generated scenario parses");
    let mut out = Vec::new();
    run(&sc, &mut out, Options::default()).expect("runs");
    String::from_utf8_lossy(&out)
        .lines()
        .filter(|l| !l.contains("\"event\":\"config_applied\""))
        .map(str::to_string)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// No decision depends on anything but the state (SPEC §10): a reload of the config
    /// in force, at any instant, changes no decision line (with and without `nodes`, and
    /// on sliced devices, SPEC §15, and with gangs, §16).
    #[test]
    fn a_noop_reload_changes_no_decision(
        text in prop_oneof![
            nodes_strategy(),
            scenario_strategy(false),
            churn_strategy(),
            sliced_strategy(false),
            gangs_strategy()
        ],
        t in 0u32..120,
    ) {
        let plain = decisions(&text);
        let reloaded = decisions(&with_noop_reload(&text, t));
        prop_assert_eq!(plain, reloaded, "reload at {}\n{}", t, text);
    }
}

/// Does the generated scenario's initial config guarantee more than the machine has?
fn oversubscribed(text: &str) -> bool {
    let number_after = |l: &str, key: &str| -> Option<u64> {
        let rest = &l[l.find(key)? + key.len()..];
        rest.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .ok()
    };
    let config = text.lines().take_while(|l| *l != "events:");
    let (mut usable, mut guaranteed) = (0, 0);
    for l in config {
        let Some(n) = number_after(l, "maxCapacity: ") else {
            continue;
        };
        if l.contains("ServiceEnvironment") {
            usable = n;
        } else {
            guaranteed += n;
        }
    }
    guaranteed > usable
}

/// `text` (a scenario without `nodes`) with its devices listed as one node, `n0`.
fn on_one_node(text: &str) -> String {
    text.lines()
        .map(|l| {
            let Some(start) = l.find(", devices: {fake: ") else {
                return l.to_string();
            };
            let rest = &l[start + ", devices: {fake: ".len()..];
            let n: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let l = l.replacen(&format!(", devices: {{fake: {n}}}"), "", 1);
            l.replacen(
                "}], preemption:",
                &format!(
                    "}}], nodes: [{{name: n0, devices: {{gpu: {{fake: {n}}}}}}}], preemption:"
                ),
                1,
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 200,
        max_global_rejects: 100_000,
        ..ProptestConfig::default()
    })]

    /// Listing the machine's devices as one node changes nothing but the `node` field of
    /// the started lines (SPEC §10) on an oversubscribed unit, where `waiting` counts only
    /// work that could start now either way. (Elsewhere SPEC §10 itself differs: with
    /// `nodes`, `waiting` counts only jobs some node has room for now, without, every job
    /// within the idle guarantee.)
    #[test]
    fn one_node_changes_nothing_but_the_node_field(
        text in prop_oneof![scenario_strategy(false), churn_strategy()],
    ) {
        prop_assume!(oversubscribed(&text));
        let plain = decisions(&text);
        let noded = on_one_node(&text);
        prop_assert!(noded.contains("nodes: [{name: n0"), "{}", noded);
        let one: Vec<String> = decisions(&noded)
            .into_iter()
            .map(|l| l.replace(",\"node\":\"n0\"", ""))
            .collect();
        prop_assert_eq!(plain, one, "\n{}", noded);
    }
}

fn check_run(text: &str, reload: bool) -> Result<(), TestCaseError> {
    {
        let sc = Scenario::parse(text, "prop.yaml", None).expect("generated scenario parses");
        let mut checker = Checker {
            skip_reserve_check: reload,
            ..Checker::default()
        };
        let mut out = Vec::new();
        run_observed(&sc, &mut out, Options::default(), &mut |o| {
            checker.observe(o)
        })
        .expect("runs");
        prop_assert!(
            checker.failures.is_empty(),
            "{}\n{}",
            checker.failures.join("\n"),
            text
        );
        // The same inputs give the same decisions.
        let mut again = Vec::new();
        run(&sc, &mut again, Options::default()).expect("runs");
        prop_assert_eq!(&out, &again);
        if reload {
            let text_out = String::from_utf8_lossy(&out);
            prop_assert!(text_out.contains("\"config_applied\""), "{}", text_out);
        }
    }
    Ok(())
}

/// `text` with `fairShare` (and `extra` fields) on every share, initial and reloaded
/// (SPEC §12), and, with `users`, each job submitted by one of three users.
fn with_fair_share(text: &str, extra: &str, users: bool) -> String {
    let mut out = text.replace(
        "kind: QuotaShare, ",
        &format!("kind: QuotaShare, fairShare: {{halfLifeSeconds: 600}}{extra}, "),
    );
    if users {
        let mut lines: Vec<String> = Vec::new();
        for l in out.lines() {
            match l.strip_prefix("  submit: {jobName: j") {
                Some(rest) => {
                    let n: u32 = rest
                        .chars()
                        .take_while(char::is_ascii_digit)
                        .collect::<String>()
                        .parse()
                        .unwrap_or(0);
                    lines.push(l.replacen(
                        "  submit: {",
                        &format!("  submit: {{user: u{}, ", n % 3),
                        1,
                    ));
                }
                None => lines.push(l.to_string()),
            }
        }
        out = lines.join("\n");
        out.push('\n');
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 150, ..ProptestConfig::default() })]

    /// In a machine of one share used by one user, fair share moves every job by the same
    /// penalty, and a userLimit no user can reach caps nothing: neither changes a decision
    /// (SPEC §12). (With several shares it may: the global order of steps 1 and 3 takes
    /// each share's own penalty.)
    #[test]
    fn fair_share_with_one_user_changes_no_decision(
        text in prop_oneof![scenario_strategy_of(false, 1..2), scenario_strategy_of(true, 1..2)],
    ) {
        let plain = decisions(&text);
        let fair = with_fair_share(&text, ", userLimit: 1000", false);
        prop_assert!(fair.contains("fairShare"), "{}", fair);
        prop_assert_eq!(plain, decisions(&fair), "\n{}", fair);
    }

    /// Fair share among three users keeps every invariant of the plain rules (SPEC §3, §4,
    /// §12), and a no-op reload at any instant changes no decision.
    #[test]
    fn fair_share_among_users_keeps_the_invariants(
        text in prop_oneof![scenario_strategy(false), churn_strategy()],
        t in 0u32..120,
    ) {
        let fair = with_fair_share(&text, "", true);
        check_run(&fair, false)?;
        let reloaded = decisions(&with_noop_reload(&fair, t));
        prop_assert_eq!(decisions(&fair), reloaded, "reload at {}\n{}", t, fair);
    }
}
