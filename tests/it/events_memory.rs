//! The decision stream holds little memory whatever its readers do (issue 44, item 4): a
//! `since: 0` follow stream that is never read is held to a bounded buffer, cut off with
//! a reason line once its reader has taken nothing for the idle limit, and the other
//! clients are answered meanwhile.

use crate::common::{Server, config, share};
use crate::runtime_socket::ask;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// The scheduler's resident memory (KiB), from /proc.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

/// About `jobs` × 2 decisions: each job submitted (pipelined), then all cancelled.
fn make_history(s: &Server, jobs: usize) {
    let stream = UnixStream::connect(s.state.join("shareq.sock")).unwrap();
    let mut w = stream.try_clone().unwrap();
    let mut r = BufReader::new(stream);
    for _ in 0..jobs.div_ceil(250) {
        let mut lines = Vec::new();
        for i in 0..250 {
            let job = json!({"jobName": format!("filler-{i}"), "quotaShareName": "team",
                             "command": ["sleep", "300"]});
            lines.extend(serde_json::to_vec(&json!({"op": "submit", "job": job})).unwrap());
            lines.push(b'\n');
        }
        w.write_all(&lines).unwrap();
        let mut ids = Vec::new();
        for _ in 0..250 {
            let mut a = String::new();
            r.read_line(&mut a).unwrap();
            let a: Value = serde_json::from_str(&a).unwrap();
            ids.push(a["id"].as_u64().unwrap_or_else(|| panic!("{a}")));
        }
        let cancel = serde_json::to_vec(&json!({"op": "cancel", "ids": ids})).unwrap();
        w.write_all(&cancel).unwrap();
        w.write_all(b"\n").unwrap();
        let mut a = String::new();
        r.read_line(&mut a).unwrap();
        assert!(a.contains("\"ok\":true"), "{a}");
    }
}

/// `streams` connections that ask for the whole stream, following, and read nothing.
fn unread_streams(s: &Server, streams: usize) -> Vec<UnixStream> {
    (0..streams)
        .map(|_| {
            let c = UnixStream::connect(s.state.join("shareq.sock")).unwrap();
            (&c).write_all(b"{\"op\":\"events\",\"since\":0,\"follow\":true}\n")
                .unwrap();
            c
        })
        .collect()
}

/// 20 unread `since: 0` follow streams on a history of about 4,000 decisions (about
/// 2.4 MB of lines): serve's memory grows by less than 16 MiB. A stream holds at most
/// 64 KiB of lines and one page of 64 read from the database, about 230 KiB a stream
/// with its connection's task and the allocator's slack (5 MiB for 20, measured), plus
/// the blocking pool's threads; the whole history per stream, as before, took 76 MiB for
/// 20. Other clients are answered meanwhile, and each stream is cut after the idle limit
/// with the reason as its last line, after whole lines only.
#[test]
fn unread_follow_streams_hold_a_bounded_buffer_and_are_cut_with_the_reason() {
    let idle = 3;
    let mut s = Server::start_with(
        &config(1, 1, &share("team", 1, "LEND", false)),
        &["--stop-jobs-on-exit", "--idle-timeout", &idle.to_string()],
    );
    make_history(&s, 2000);
    let pid = s.child().expect("serve runs").id();
    // One full read first: what any reader costs (the database's pages, the pool).
    let all = s.cli(&["events", "--json"]);
    let lines = String::from_utf8_lossy(&all.stdout).lines().count();
    assert!(lines >= 4000, "only {lines} lines of history");
    let before = rss_kib(pid);
    let streams = unread_streams(&s, 20);
    let t = Instant::now();
    let mut most = before;
    while t.elapsed() < Duration::from_secs(idle - 1) {
        let a = ask(&s, &[b"{\"op\":\"status\"}\n"]);
        assert_eq!(a[0]["ok"], true, "{}", a[0]);
        most = most.max(rss_kib(pid));
        std::thread::sleep(Duration::from_millis(100));
    }
    let grew = most.saturating_sub(before);
    eprintln!("serve's RSS: {before} KiB before, at most {most} KiB with 20 unread streams");
    assert!(grew < 16 * 1024, "20 unread streams took {grew} KiB");
    // Past the idle limit, the streams are cut: what each holds is its reader's to take.
    std::thread::sleep(Duration::from_secs(idle + 2).saturating_sub(t.elapsed()));
    for c in &streams {
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut text = String::new();
        (&*c).read_to_string(&mut text).expect("the stream ends");
        let mut got: Vec<&str> = text.lines().collect();
        let last: Value = serde_json::from_str(got.pop().expect("a line")).unwrap();
        assert_eq!(last["ok"], false, "{last}");
        assert_eq!(last["code"], "limit", "{last}");
        let error = last["error"].as_str().unwrap_or("");
        assert!(
            error.starts_with("events stream cut off: the reader took nothing"),
            "{error}"
        );
        assert!(
            got.len() < lines,
            "the whole history was sent: {}",
            got.len()
        );
        let mut seq = 0;
        for l in &got {
            let ev: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            let next = ev["seq"].as_u64().expect("a seq");
            assert!(next > seq, "{next} after {seq}");
            seq = next;
        }
        assert!(
            error.contains(&format!("\"after\": {seq} to go on")),
            "{error}"
        );
    }
}
