//! The report channel (`exec::supervisor::report`) between a real supervisor process (`shareq
//! __supervise -`, the spec on its standard input, as a Slurm batch script runs it) and
//! the relay that writes its run files and log: what the supervisor reports lands in the
//! state directory as the run-file protocol says; output faster than the channel arrives
//! whole; a wrong token is refused and nothing is written for it; the relay tells its
//! owner each start and end once, after writing it.

use shareq::exec::StateDir;
use shareq::exec::state::runfiles::{self, LaunchSpec, Owner};
use shareq::exec::supervisor::report::relay::{Heard, Relay};
use shareq::model::{Command as JobCommand, JobId};
use std::io::Write;
use std::process::{Command, Stdio};

fn spec(state: &StateDir, attempt: u32, script: &str) -> LaunchSpec {
    LaunchSpec {
        job: JobId(1),
        attempt,
        name: "probe".into(),
        share: "qs1".into(),
        preempted_count: 0,
        devices: vec![0],
        gpu_memory_gib: None,
        command: JobCommand::Argv(vec!["sh".into(), "-c".into(), script.into()]),
        env: Default::default(),
        working_directory: None,
        log: state.attempt_log(JobId(1), attempt),
        state: state.root().to_path_buf(),
        db: "db-report-test".into(),
        grace_seconds: 1,
        notice: None,
        log_cap: 64,
        free_reserve: 0,
        pids_max: 64,
        user_log: None,
        submitter: None,
        timeout_seconds: None,
        unit: "gpu".into(),
        mig: None,
        cgroup: Vec::new(),
        report: None,
        token: None,
        last_checkpoint: None,
        gang: None,
    }
}

/// Run a supervisor with `spec` on its standard input; its exit status.
fn supervise(spec: &LaunchSpec) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_shareq"))
        .args(["__supervise", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let json = serde_json::to_vec(spec).unwrap();
    child.stdin.take().unwrap().write_all(&json).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn a_supervisor_reports_and_the_relay_writes_its_run_files_and_capped_log() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path().join("state"));
    state.create().unwrap();
    let owner = Owner {
        db: "db-report-test".into(),
        legacy_below: 0,
    };
    // What the relay tells its owner, the moment it is written.
    let (told, heard) = std::sync::mpsc::channel();
    let relay = Relay::start(
        state.root(),
        owner.clone(),
        std::sync::Arc::new(move |h| {
            let _ = told.send(h);
        }),
    )
    .unwrap();
    let port = std::fs::read_to_string(state.root().join("report.port")).unwrap();
    assert_eq!(
        port.trim().parse::<u16>().ok(),
        Some(relay.report_to().unwrap().port)
    );

    let mut good = spec(
        &state,
        1,
        "echo out-$SHAREQ_JOB_ID; echo err >&2; head -c 500 /dev/zero | tr '\\0' a; exit 3",
    );
    good.report = Some(relay.report_to().unwrap());
    runfiles::write_spec(&good).unwrap();
    let out = supervise(&good);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exit = runfiles::read_exit(state.root(), JobId(1), 1, &owner).expect("an exit file");
    assert_eq!(exit.code, 3);
    assert!(exit.ran_ms.is_some());
    let pid = runfiles::read_pid(state.root(), JobId(1), 1, &owner).expect("a pid file");
    assert!(pid.pid > 0);
    // Recorded as a remote supervisor's: nothing on this machine is taken for it.
    assert!(pid.remote && !pid.is_alive(), "{pid:?}");
    let told: Vec<Heard> = heard.try_iter().collect();
    assert_eq!(
        told,
        vec![
            Heard::Started {
                job: JobId(1),
                attempt: 1,
                rank: 0
            },
            Heard::Exited {
                job: JobId(1),
                attempt: 1,
                rank: 0,
                status: exit
            }
        ],
        "the relay tells the start and the end once each, after writing them"
    );
    let log = std::fs::read_to_string(state.attempt_log(JobId(1), 1)).unwrap();
    assert!(log.starts_with("out-1\nerr\n"), "{log}");
    assert!(log.contains("log cut here after 64 bytes"), "{log}");

    // Output faster than the channel is held back, not dropped, while the scheduler is
    // there: every byte of 256 MiB (32 times the supervisor's queue) reaches the log.
    let mut flood = spec(&state, 3, "head -c 268435456 /dev/zero");
    flood.log_cap = 1 << 30;
    flood.report = Some(relay.report_to().unwrap());
    runfiles::write_spec(&flood).unwrap();
    let t = std::time::Instant::now();
    assert!(supervise(&flood).status.success());
    let took = t.elapsed();
    let len = std::fs::metadata(state.attempt_log(JobId(1), 3))
        .unwrap()
        .len();
    assert_eq!(len, 256 << 20, "every byte arrives");
    eprintln!(
        "256 MiB through the report channel in {:.2} s",
        took.as_secs_f64()
    );

    // The same spec with another token: refused, nothing written for it.
    let mut forged = spec(&state, 2, "echo forged");
    forged.report = Some(relay.report_to().unwrap());
    runfiles::write_spec(&forged).unwrap();
    let mut claimed = forged.clone();
    claimed.report.as_mut().unwrap().token = relay.report_to().unwrap().token;
    let out = supervise(&claimed);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("refused"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(runfiles::read_exit(state.root(), JobId(1), 2, &owner).is_none());
    assert!(runfiles::read_pid(state.root(), JobId(1), 2, &owner).is_none());
    assert!(!state.attempt_log(JobId(1), 2).exists());
    assert!(
        !heard.try_iter().any(|h| matches!(
            h,
            Heard::Started { attempt: 2, .. } | Heard::Exited { attempt: 2, .. }
        )),
        "nothing is told of a refused attempt"
    );

    // An attempt with its exit written takes no second one.
    let again = supervise(&good);
    assert!(!again.status.success());
    assert_eq!(
        runfiles::read_exit(state.root(), JobId(1), 1, &owner).map(|e| e.code),
        Some(3)
    );
}
