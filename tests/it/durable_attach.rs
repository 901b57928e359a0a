//! A second console attaches to the running scheduler through its socket
//! (`server::client::remote::attach`): both attached views follow the same snapshots, actions sent
//! through an attachment take effect in the one scheduler, and nothing schedules twice.

use crate::common;

use common::{Server, config, share};
use shareq::exec::StateDir;
use shareq::model::{Command, JobId, JobSpec, JobState};
use shareq::server::client::remote;
use shareq::server::{Input, boot};
use shareq::snapshot::Snapshot;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, watch};

async fn wait_until(
    rx: &mut watch::Receiver<Arc<Snapshot>>,
    what: &str,
    f: impl Fn(&Snapshot) -> bool,
) -> Arc<Snapshot> {
    let r = tokio::time::timeout(Duration::from_secs(15), rx.wait_for(|s| f(s)))
        .await
        .map(|r| r.map(|s| s.clone()));
    match r {
        Ok(Ok(s)) => s,
        _ => panic!("timed out waiting for {what}: {:?}", rx.borrow()),
    }
}

fn state_of(s: &Snapshot, id: JobId) -> Option<JobState> {
    s.find_job(id).map(|(_, j)| j.state)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_attached_consoles_share_one_scheduler() {
    let s = Server::start(&config(1, 1, &share("team", 1, "LEND", false)));
    let state = StateDir::new(&s.state);

    // A console that tries to start its own scheduler here is told who runs it.
    let opts = boot::BootOptions::new(state.clone(), s.config.clone());
    match boot::start(opts).await {
        Err(boot::BootError::Locked { pid: Some(pid), .. }) => {
            let holder = std::fs::read_to_string(s.state.join("shareq.lock")).unwrap();
            assert_eq!(pid.to_string(), holder.trim());
        }
        other => panic!("expected Locked, got {:?}", other.map(|_| ())),
    }

    let (mut view1, inputs1) = remote::attach(&state).await.expect("attach 1");
    let (mut view2, inputs2) = remote::attach(&state).await.expect("attach 2");

    // Submit through the first attachment: a job that holds the only GPU, and one queued.
    let submit = |name: &str, cmd: &str| {
        let mut spec = JobSpec::new(name, "team", 1, 0);
        spec.command = Some(Command::Shell(cmd.to_string()));
        let (tx, rx) = oneshot::channel();
        inputs1
            .send(Input::Submit {
                spec,
                reply: Some(tx),
            })
            .unwrap();
        rx
    };
    let long = submit("long", "sleep 30")
        .await
        .unwrap()
        .expect("submitted");
    let queued = submit("queued", "true").await.unwrap().expect("submitted");

    let a = wait_until(&mut view1, "the jobs in view 1", |s| {
        state_of(s, long) == Some(JobState::Running) && state_of(s, queued).is_some()
    })
    .await;
    let b = wait_until(&mut view2, "the same version in view 2", |s| {
        s.version >= a.version
    })
    .await;
    // Quiet now (one job runs, one waits): both views reach the same latest version, and
    // it is the same picture.
    let t = std::time::Instant::now();
    loop {
        let (x, y) = (view1.borrow().clone(), view2.borrow().clone());
        if x.version == y.version && x.version >= b.version {
            assert_eq!(*x, *y, "two consoles, one version, two pictures");
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "versions {} and {} never met",
            x.version,
            y.version
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(state_of(&b, long), Some(JobState::Running));
    // The CLI sees the scheduler the consoles talk to: the same jobs, run once.
    assert_eq!(s.state_of(long.0), "RUNNING");

    // Reprioritize and cancel through the second attachment.
    let (tx, rx) = oneshot::channel();
    inputs2
        .send(Input::SetPriority {
            id: queued,
            priority: 7,
            by: "ignored: the socket names the caller".into(),
            reply: Some(tx),
        })
        .unwrap();
    assert_eq!(rx.await.unwrap(), Ok(true));
    let (tx, rx) = oneshot::channel();
    inputs2
        .send(Input::Cancel {
            ids: vec![long],
            by: "ignored".into(),
            reply: Some(tx),
        })
        .unwrap();
    let out = rx.await.unwrap();
    assert!(out[0].cancelled, "{out:?}");
    // The queued job then runs and succeeds; view 1 shows it.
    let end = wait_until(&mut view1, "the cancel and the next job", |s| {
        state_of(s, long) == Some(JobState::Failed)
            && state_of(s, queued) == Some(JobState::Succeeded)
    })
    .await;
    let q = end.finished.iter().find(|j| j.id == queued).unwrap();
    assert_eq!(q.priority, 7);
    assert_eq!(q.attempts, 1);

    // An unknown job is refused with the scheduler's words.
    let (tx, rx) = oneshot::channel();
    inputs2
        .send(Input::SetPriority {
            id: JobId(999),
            priority: 1,
            by: "ignored: the socket names the caller".into(),
            reply: Some(tx),
        })
        .unwrap();
    assert!(rx.await.unwrap().is_err());

    // When the scheduler goes away, the attached views learn it (and keep trying to
    // reconnect: see the next test).
    drop(s);
    wait_until(&mut view2, "view 2 to notice the scheduler's end", |s| {
        s.link_down_since.is_some()
    })
    .await;
}

/// An attached console outlives a restart of `serve` (issue 15 item 2): while the
/// scheduler is away its picture says so (`link_down_since`), it reconnects by itself,
/// and requests sent after the restart reach the new scheduler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attached_console_reconnects_after_serve_restarts() {
    let mut s = Server::start(&config(1, 1, &share("team", 1, "LEND", false)));
    let state = StateDir::new(&s.state);
    let (mut view, inputs) = remote::attach(&state).await.expect("attach");
    wait_until(&mut view, "the first picture", |s| {
        s.link_down_since.is_none()
    })
    .await;

    let stopper = tokio::task::spawn_blocking(move || {
        s.stop();
        s
    });
    wait_until(&mut view, "the link marked down", |s| {
        s.link_down_since.is_some()
    })
    .await;
    let mut s = stopper.await.unwrap();
    let restarted = tokio::task::spawn_blocking(move || {
        s.restart(&["--stop-jobs-on-exit"]);
        s
    });
    let _s = restarted.await.unwrap();
    wait_until(&mut view, "the link back up", |s| {
        s.link_down_since.is_none()
    })
    .await;

    let mut spec = JobSpec::new("after-restart", "team", 1, 0);
    spec.command = Some(Command::Shell("true".into()));
    let (tx, rx) = oneshot::channel();
    inputs
        .send(Input::Submit {
            spec,
            reply: Some(tx),
        })
        .unwrap();
    let id = tokio::time::timeout(Duration::from_secs(15), rx)
        .await
        .expect("an answer")
        .unwrap()
        .expect("submitted through the new connection");
    wait_until(&mut view, "the new job in the picture", |s| {
        state_of(s, id).is_some()
    })
    .await;
}
