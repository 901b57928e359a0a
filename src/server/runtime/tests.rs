//! The runtime on the scripted backend (`exec::scripted`): the whole path from a submit
//! through the pass, the write of decisions, carrying them out and the reports that come
//! back — with no supervisor or process. What a real executor does with a launch is
//! tested with it (`tests/runtime_jobs.rs`, `tests/slurm_executor.rs`).

use super::input::Input;
use super::{RuntimeHandle, RuntimeOptions};
use crate::config::{LoadedConfig, load_dir};
use crate::exec::backend::Report;
use crate::exec::scripted::Script;
use crate::exec::start::Stop;
use crate::exec::{Discovery, StateDir};
use crate::model::{Command, JobId, JobSpec, JobState};
use crate::snapshot::JobView;
use std::time::{Duration, Instant};

struct Rig {
    handle: RuntimeHandle,
    script: Script,
    state: StateDir,
    _dir: tempfile::TempDir,
}

const SHARES: &str = "kind: QuotaShare\nquotaShareName: a\ncapacityLimits:\n  - {capacityUnit: gpu, maxCapacity: 1}\nresourceSharingConfiguration: {strategy: LEND_AND_BORROW}\n---\nkind: QuotaShare\nquotaShareName: b\ncapacityLimits:\n  - {capacityUnit: gpu, maxCapacity: 1}\nresourceSharingConfiguration: {strategy: LEND_AND_BORROW}\n";

fn one_node(grace: u32) -> String {
    format!(
        "kind: ServiceEnvironment\nname: t\ncapacityLimits:\n  - {{capacityUnit: gpu, maxCapacity: 2, devices: {{fake: 2}}}}\npreemption: {{gracePeriodSeconds: {grace}}}\n---\n{SHARES}"
    )
}

const TWO_NODES: &str = "kind: ServiceEnvironment\nname: t\ncapacityLimits:\n  - {capacityUnit: gpu, maxCapacity: 2}\nnodes:\n  - {name: n1, devices: {gpu: {fake: 1}}}\n  - {name: n2, devices: {gpu: {fake: 1}}}\n---\n";

fn loaded(dir: &std::path::Path, yaml: &str) -> LoadedConfig {
    let cfg = dir.join("config");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("c.yaml"), yaml).unwrap();
    load_dir(&cfg).unwrap_or_else(|e| panic!("config: {e:?}"))
}

impl Rig {
    fn start(yaml: &str) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let loaded = loaded(dir.path(), yaml);
        let state = StateDir::new(dir.path().join("state"));
        state.create().unwrap();
        let opts = RuntimeOptions {
            state: state.clone(),
            config_dir: dir.path().join("config"),
            supervisor_exe: "/nonexistent/shareq".into(),
            discovery: Discovery::skipped(),
        };
        let script = Script::new();
        let handle = RuntimeHandle::start_on(opts, loaded, script.backend());
        Rig {
            handle,
            script,
            state,
            _dir: dir,
        }
    }

    /// An attempt's log once it holds `what` (the runtime writes its lines off its task).
    async fn log_text(&self, job: JobId, attempt: u32, what: &str) -> String {
        let path = self.state.attempt_log(job, attempt);
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if text.contains(what) {
                return text;
            }
            assert!(
                Instant::now() < until,
                "{} never said {what}: {text:?}",
                path.display()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn sync(&self) {
        let (reply, done) = tokio::sync::oneshot::channel();
        self.handle.inputs.send(Input::Sync { reply }).unwrap();
        done.await.unwrap();
    }

    async fn submit(&self, share: &str, gpus: u32, timeout: Option<u64>) -> JobId {
        let mut spec = JobSpec::new("j", share, gpus, 0);
        spec.command = Some(Command::Argv(vec!["true".into()]));
        spec.timeout_seconds = timeout;
        let (reply, id) = tokio::sync::oneshot::channel();
        let input = Input::Submit {
            spec,
            reply: Some(reply),
        };
        self.handle.inputs.send(input).unwrap();
        let id = id.await.unwrap().unwrap();
        self.sync().await;
        id
    }

    async fn report(&self, r: Report) {
        assert!(self.script.report(r));
        self.sync().await;
    }

    fn job(&self, id: JobId) -> JobView {
        let snap = self.handle.snapshots.borrow().clone();
        snap.running
            .iter()
            .cloned()
            .chain(snap.queue_views())
            .chain(snap.finished.iter().map(|j| (**j).clone()))
            .find(|j| j.id == id)
            .unwrap_or_else(|| panic!("no job {id}"))
    }

    fn state(&self, id: JobId) -> JobState {
        self.job(id).state
    }

    /// Wait (syncing) until `cond` holds, at most `secs`.
    async fn wait(&self, secs: u64, what: &str, cond: impl Fn(&Rig) -> bool) {
        let until = Instant::now() + Duration::from_secs(secs);
        while !cond(self) {
            assert!(Instant::now() < until, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
            self.sync().await;
        }
    }

    async fn ended(&self, job: JobId, attempt: u32, code: i32) {
        let status = crate::exec::ExitStatus::ended_now(code);
        self.report(Report::Ended {
            job,
            attempt,
            status,
        })
        .await;
    }

    async fn drained(&self, node: &str, drained: bool) {
        let node = node.to_string();
        self.report(Report::NodeDrained { node, drained }).await;
    }

    /// The attempt ran: accepted, then its command runs.
    async fn run(&self, job: JobId, attempt: u32) {
        self.report(Report::Accepted { job, attempt }).await;
        assert_eq!(self.state(job), JobState::Starting);
        self.report(Report::Running { job, attempt }).await;
        assert_eq!(self.state(job), JobState::Running);
    }
}

#[tokio::test]
async fn a_start_goes_to_the_backend_and_its_reports_move_the_job_on() {
    let rig = Rig::start(&one_node(1));
    let id = rig.submit("a", 2, None).await;
    let launches = rig.script.launches();
    assert_eq!(launches.len(), 1, "{launches:?}");
    assert_eq!((launches[0].job, launches[0].attempt), (id, 1));
    assert_eq!(launches[0].devices, vec![0, 1]);
    assert_eq!(rig.state(id), JobState::Scheduled);
    rig.run(id, 1).await;
    // A report of another attempt is stale: nothing happens.
    rig.ended(id, 2, 1).await;
    assert_eq!(rig.state(id), JobState::Running);
    rig.ended(id, 1, 0).await;
    assert_eq!(rig.state(id), JobState::Succeeded);
    assert_eq!(rig.script.forgotten(), vec![(id, 1)]);
    assert!(rig.script.signals().is_empty());
    rig.handle.shutdown(false).await;
}

#[tokio::test]
async fn a_reclaim_of_a_share_with_a_notice_asks_for_it_and_kills_after_notice_and_grace() {
    let yaml = one_node(1).replacen(
        "resourceSharingConfiguration: {strategy: LEND_AND_BORROW}\n",
        "resourceSharingConfiguration: {strategy: LEND_AND_BORROW}\npreemptionConfiguration: {notice: {signal: SIGUSR2, seconds: 1}}\n",
        1,
    );
    let rig = Rig::start(&yaml);
    let borrower = rig.submit("a", 2, None).await;
    let launch = &rig.script.launches()[0];
    assert_eq!(launch.env["SHAREQ_NOTICE_SIGNAL"], "SIGUSR2");
    assert_eq!(launch.env["SHAREQ_NOTICE_SECONDS"], "1");
    assert_eq!(launch.env["SHAREQ_GRACE_SECONDS"], "1");
    rig.run(borrower, 1).await;
    rig.submit("b", 1, None).await;
    // The supervisor is asked for the notice; SIGKILL only after notice + grace.
    assert_eq!(rig.script.signals(), vec![(borrower, 1, Stop::Notice)]);
    let stop = rig.job(borrower).stop.expect("a stop under way");
    assert_eq!(stop.term_at - stop.since, 1000);
    assert_eq!(stop.kill_at - stop.since, 2000);
    let t0 = Instant::now();
    rig.wait(6, "SIGKILL", |r| r.script.signals().len() == 2)
        .await;
    assert!(
        t0.elapsed() >= Duration::from_millis(1900),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(rig.script.signals()[1], (borrower, 1, Stop::Kill));
    // It saved and exited 0 meanwhile: still the preemption (SPEC §14), requeued.
    rig.ended(borrower, 1, 0).await;
    assert_eq!(rig.job(borrower).preempted_count, 1);
    assert_eq!(rig.state(borrower), JobState::Runnable);
    rig.handle.shutdown(false).await;
}

#[tokio::test]
async fn a_cancel_of_a_job_whose_share_has_a_notice_sends_no_notice() {
    let yaml = one_node(1).replacen(
        "resourceSharingConfiguration: {strategy: LEND_AND_BORROW}\n",
        "resourceSharingConfiguration: {strategy: LEND_AND_BORROW}\npreemptionConfiguration: {notice: {signal: SIGUSR2, seconds: 60}}\n",
        1,
    );
    let rig = Rig::start(&yaml);
    let id = rig.submit("a", 1, None).await;
    rig.run(id, 1).await;
    let (reply, done) = tokio::sync::oneshot::channel();
    rig.handle
        .inputs
        .send(Input::Cancel {
            ids: vec![id],
            by: "root".to_string(),
            reply: Some(reply),
        })
        .unwrap();
    let _ = done.await;
    rig.sync().await;
    assert_eq!(rig.script.signals(), vec![(id, 1, Stop::Term)]);
    rig.handle.shutdown(false).await;
}

#[tokio::test]
async fn a_reclaim_signals_term_then_kill_after_the_grace_period() {
    let rig = Rig::start(&one_node(1));
    let borrower = rig.submit("a", 2, None).await;
    rig.run(borrower, 1).await;
    let owner = rig.submit("b", 1, None).await;
    // b reclaims its GPU: SIGTERM now, SIGKILL once the grace period is over.
    assert_eq!(rig.script.signals(), vec![(borrower, 1, Stop::Term)]);
    let t0 = Instant::now();
    rig.wait(5, "SIGKILL", |r| r.script.signals().len() == 2)
        .await;
    assert!(
        t0.elapsed() >= Duration::from_millis(900),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(rig.script.signals()[1], (borrower, 1, Stop::Kill));
    assert_eq!(rig.script.launches().len(), 1, "b waits for the release");
    rig.ended(borrower, 1, 137).await;
    // The borrower is requeued (a preemption is no failure), b starts.
    let launches = rig.script.launches();
    assert_eq!(launches.last().map(|l| l.job), Some(owner), "{launches:?}");
    assert_eq!(rig.job(borrower).preempted_count, 1);
    let snap = rig.handle.snapshots.borrow().clone();
    assert_eq!(snap.preemptions.len(), 1);
    assert_eq!(snap.preemptions[0].victim, borrower);
    assert_eq!(snap.preemptions[0].by, Some(owner));
    assert_eq!(snap.preemptions[0].outcome.as_deref(), Some("requeued"));
    rig.handle.shutdown(false).await;
}

#[tokio::test]
async fn a_timeout_its_supervisor_enforced_fails_the_job_as_a_timeout() {
    let rig = Rig::start(&one_node(5));
    let id = rig.submit("a", 1, Some(1)).await;
    rig.run(id, 1).await;
    // The supervisor stops the attempt at its timeout itself (SPEC §7) and says so; the
    // runtime's own timer is only a backstop, long after.
    let status = crate::exec::ExitStatus {
        timed_out: true,
        ran_ms: Some(1_000),
        ..crate::exec::ExitStatus::ended_now(143)
    };
    rig.report(Report::Ended {
        job: id,
        attempt: 1,
        status,
    })
    .await;
    assert!(
        rig.script.signals().is_empty(),
        "{:?}",
        rig.script.signals()
    );
    let j = rig.job(id);
    assert_eq!(j.state, JobState::Failed);
    assert_eq!(&*j.reason, "TIMEOUT");
    rig.handle.shutdown(false).await;
}

#[tokio::test]
async fn node_reports_go_to_the_core_drained_nodes_take_nothing_lost_ones_preempt() {
    let rig = Rig::start(&format!("{TWO_NODES}{SHARES}"));
    // A drained node takes no new job; back in service, it does.
    rig.drained("n1", true).await;
    let on_n2 = rig.submit("a", 1, None).await;
    let waits = rig.submit("b", 1, None).await;
    let launches = rig.script.launches();
    assert_eq!(
        launches.len(),
        1,
        "nothing starts on a drained node: {launches:?}"
    );
    assert_eq!((launches[0].job, launches[0].node.as_str()), (on_n2, "n2"));
    assert_eq!(rig.state(waits), JobState::Runnable);
    rig.drained("n1", false).await;
    let launches = rig.script.launches();
    assert_eq!(launches.len(), 2, "{launches:?}");
    assert_eq!((launches[1].job, launches[1].node.as_str()), (waits, "n1"));
    rig.run(on_n2, 1).await;
    rig.run(waits, 1).await;
    // n1 goes down: its job is preempted (DEVICE_LOST); once the executor says its
    // attempt ended it waits for room, and runs again on n2 when that is free.
    rig.report(Report::NodeDown { node: "n1".into() }).await;
    rig.ended(waits, 1, 255).await;
    assert_eq!(rig.job(waits).preempted_count, 1);
    assert_eq!(rig.state(waits), JobState::Runnable);
    let snap = rig.handle.snapshots.borrow().clone();
    assert_eq!(snap.preemptions[0].victim, waits);
    assert_eq!(snap.preemptions[0].reason, "DEVICE_LOST");
    rig.ended(on_n2, 1, 0).await;
    let launches = rig.script.launches();
    assert_eq!(launches.len(), 3, "{launches:?}");
    assert_eq!(
        (
            launches[2].job,
            launches[2].attempt,
            launches[2].node.as_str()
        ),
        (waits, 2, "n2")
    );
    rig.handle.shutdown(false).await;
}

/// SPEC §15: a sliced job whose processes hold more than its GiB + 1 on two rounds in a
/// row is reported, and with `overuse: STOP` stopped and FAILED `OVER_MEMORY`, no retry.
#[tokio::test]
async fn a_sliced_job_over_its_gib_twice_in_a_row_is_stopped_as_over_memory() {
    let yaml = "kind: ServiceEnvironment\nname: t\ncapacityLimits:\n  - {capacityUnit: mem, maxCapacity: 80, devices: {fake: 1}, slicing: {memoryGiB: 80, overuse: STOP}}\npreemption: {gracePeriodSeconds: 5}\n---\nkind: QuotaShare\nquotaShareName: a\ncapacityLimits:\n  - {capacityUnit: mem, maxCapacity: 80}\nresourceSharingConfiguration: {strategy: LEND}\n";
    let rig = Rig::start(yaml);
    let id = rig.submit("a", 20, None).await;
    rig.run(id, 1).await;
    rig.script.owns(4242, id, 1);
    let procs = |mib: u64| gpu_processes(4242, mib);
    // Over once, then under: nothing; over twice: stopped.
    for mib in [27 * 1024, 1024, 27 * 1024] {
        rig.handle.inputs.send(procs(mib)).unwrap();
        rig.sync().await;
        assert!(
            rig.script.signals().is_empty(),
            "{:?}",
            rig.script.signals()
        );
    }
    rig.handle.inputs.send(procs(27 * 1024)).unwrap();
    rig.sync().await;
    assert!(!rig.script.signals().is_empty());
    assert_eq!(rig.script.signals()[0].0, id);
    // Its log says so, and that it is being stopped.
    let log = rig.log_text(id, 1, "being stopped").await;
    assert!(
        log.contains("shareq: OVER_MEMORY: this job held 27 GiB of its 20 GiB slice (overuse: STOP): it is being stopped"),
        "{log}"
    );
    rig.ended(id, 1, 137).await;
    let j = rig.job(id);
    assert_eq!(j.state, JobState::Failed);
    assert!(j.reason.starts_with("OVER_MEMORY"), "{}", j.reason);
    rig.handle.shutdown(false).await;
}

/// NVML's per-process answer for device 0 of unit `mem`: `pid` holds `mib`, a process of
/// no attempt holds 70 GiB.
fn gpu_processes(pid: u32, mib: u64) -> Input {
    let mut p = crate::exec::gpu::telemetry::Processes::new();
    p.insert(("mem".to_string(), 0), vec![(pid, mib), (9999, 70 * 1024)]);
    Input::Exec(super::input::ExecReport(
        super::input::ExecKind::GpuProcesses(p),
    ))
}

/// SPEC §15 with `overuse: REPORT` (the default): a job over its slice keeps running;
/// its row carries the mark (`over 27/20 GiB`) while that attempt runs, its attempt log
/// says so in one line, and the next attempt starts unmarked.
#[tokio::test]
async fn a_sliced_job_over_its_gib_with_report_is_marked_and_told_in_its_log() {
    let yaml = "kind: ServiceEnvironment\nname: t\ncapacityLimits:\n  - {capacityUnit: mem, maxCapacity: 80, devices: {fake: 1}, slicing: {memoryGiB: 80}}\n---\nkind: QuotaShare\nquotaShareName: a\ncapacityLimits:\n  - {capacityUnit: mem, maxCapacity: 80}\nresourceSharingConfiguration: {strategy: LEND}\n";
    let rig = Rig::start(yaml);
    let mut spec = JobSpec::new("nb", "a", 20, 0);
    spec.command = Some(Command::Argv(vec!["true".into()]));
    spec.retry_strategy = Some(crate::model::RetryStrategy { attempts: 2 });
    let (reply, id) = tokio::sync::oneshot::channel();
    let submit = Input::Submit {
        spec,
        reply: Some(reply),
    };
    rig.handle.inputs.send(submit).unwrap();
    let id = id.await.unwrap().unwrap();
    rig.sync().await;
    rig.run(id, 1).await;
    rig.script.owns(4242, id, 1);
    rig.handle
        .inputs
        .send(gpu_processes(4242, 27 * 1024))
        .unwrap();
    rig.sync().await;
    assert_eq!(
        rig.job(id).over_memory,
        None,
        "one sample over is not enough"
    );
    rig.handle
        .inputs
        .send(gpu_processes(4242, 27 * 1024))
        .unwrap();
    rig.sync().await;
    let j = rig.job(id);
    assert_eq!(
        j.over_memory,
        Some(crate::snapshot::OverMemoryView {
            held_gib: 27,
            of_gib: 20
        })
    );
    assert_eq!(j.over_memory.unwrap().text(), "over 27/20 GiB");
    assert_eq!(j.state, JobState::Running);
    assert!(
        rig.script.signals().is_empty(),
        "{:?}",
        rig.script.signals()
    );
    let log = rig.log_text(id, 1, "OVER_MEMORY").await;
    assert_eq!(
        log,
        "shareq: OVER_MEMORY: this job held 27 GiB of its 20 GiB slice (overuse: REPORT, not stopped)\n"
    );
    // Still over: the mark stays, and nothing more is written.
    rig.handle
        .inputs
        .send(gpu_processes(4242, 28 * 1024))
        .unwrap();
    rig.sync().await;
    assert!(rig.job(id).over_memory.is_some());
    // The attempt fails and is retried: the new attempt is not marked.
    rig.ended(id, 1, 1).await;
    let launches = rig.script.launches();
    assert_eq!(launches.last().map(|l| (l.job, l.attempt)), Some((id, 2)));
    rig.run(id, 2).await;
    assert_eq!(rig.job(id).over_memory, None);
    assert_eq!(
        std::fs::read_to_string(rig.state.attempt_log(id, 1)).unwrap(),
        log,
        "one line per report"
    );
    rig.handle.shutdown(false).await;
}
