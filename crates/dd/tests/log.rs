//! `kill -9` loses nothing the log acknowledged.
//!
//! The parent test re-runs this test binary as a child that appends batches from several tasks
//! and prints a line for each acknowledged batch (and for each committed consumer offset); the
//! parent SIGKILLs it mid-stream, reopens the log and looks for every acknowledged record, under
//! both flush policies.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use dd::log::{Fsync, LogConfig, LogDir};

/// Set in the child's environment to the log's root; `CHILD_FSYNC_ENV` to its policy.
const CHILD_ENV: &str = "FIVECORE_DD_LOG_CRASH_CHILD";
const CHILD_FSYNC_ENV: &str = "FIVECORE_DD_LOG_CRASH_FSYNC";
const CHILD_TEST: &str = "crash_child_appends_forever";
const APPENDERS: u64 = 8;
const RECORD: usize = 1200;
const ENOUGH_ACKS: usize = 3000;
const MAX_RUN: Duration = Duration::from_secs(4);

fn config(fsync: Fsync) -> LogConfig {
    // 1 MiB segments: the child rolls segments while it runs, so recovery meets closed ones.
    LogConfig { fsync, segment_mib: 1, ..LogConfig::default() }
}

fn record(appender: u64, batch: u64, i: u64) -> Bytes {
    let mut r = format!("appender {appender} batch {batch} record {i} ").into_bytes();
    r.resize(RECORD, b'a' + (batch % 26) as u8);
    Bytes::from(r)
}

/// Not a test by itself: the body of the child process. Without the environment variable (a
/// normal test run) it returns at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_child_appends_forever() {
    let Ok(root) = std::env::var(CHILD_ENV) else {
        return;
    };
    let fsync = match std::env::var(CHILD_FSYNC_ENV).as_deref() {
        Ok("interval") => Fsync::Interval(Duration::from_millis(20)),
        _ => Fsync::Always,
    };
    let log = LogDir::open(&root, config(fsync)).expect("child opens the log");
    let topic = log.topic("scp").expect("topic");
    let mut tasks = tokio::task::JoinSet::new();
    for appender in 0..APPENDERS {
        let topic = topic.clone();
        tasks.spawn(async move {
            for batch in 0u64.. {
                let size = 1 + (batch + appender) % 16;
                let records = (0..size).map(|i| record(appender, batch, i)).collect();
                let range = topic.append(records).await.expect("append");
                // Printed only once the append is acknowledged: this line is the promise.
                println!("ACK {} {} {appender} {batch}", range.start, range.end);
            }
        });
    }
    // A consumer reading behind the appenders and committing its offset.
    let consumer = topic.clone();
    tasks.spawn(async move {
        let mut at = 0;
        loop {
            consumer.wait_for(at).await.expect("wait");
            let batch = consumer.read(at, 256 << 10, 200).await.expect("read");
            at = batch.next_offset;
            consumer.commit("feed", at).await.expect("commit");
            println!("COMMIT {at}");
        }
    });
    while tasks.join_next().await.is_some() {}
}

fn sigkill_loses_nothing_acknowledged(fsync: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("log");
    let mut child = Command::new(std::env::current_exe().expect("test binary path"))
        .args(["--exact", CHILD_TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, &root)
        .env(CHILD_FSYNC_ENV, fsync)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("child starts");

    // Lines are read on a thread so the deadline holds even if the child stalls.
    let stdout = child.stdout.take().expect("piped stdout");
    let (lines_tx, lines_rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });

    // Acknowledged batches by their range, and the highest committed offset.
    let mut acked: BTreeMap<u64, (u64, u64, u64)> = BTreeMap::new();
    let mut committed = 0u64;
    let mut note = |line: &str| {
        // The test harness prints lines of its own.
        if !line.starts_with("ACK ") && !line.starts_with("COMMIT ") {
            return;
        }
        let parts: Vec<u64> =
            line.split(' ').skip(1).map(|p| p.parse().expect("number in child line")).collect();
        if line.starts_with("ACK ") {
            acked.insert(parts[0], (parts[1], parts[2], parts[3]));
        } else if line.starts_with("COMMIT ") {
            committed = committed.max(parts[0]);
        }
    };
    let start = Instant::now();
    let mut lines = 0;
    while lines < ENOUGH_ACKS && start.elapsed() < MAX_RUN {
        match lines_rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => {
                note(&line);
                lines += 1;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    // `Child::kill` is SIGKILL on Unix: no destructor, no flush, no sync.
    child.kill().expect("SIGKILL");
    let status = child.wait().expect("reaped");
    // Lines already in the pipe were printed after their acknowledgement: they count too.
    for line in lines_rx.iter() {
        note(&line);
    }
    reader.join().expect("reader thread");
    let mut stderr = String::new();
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_string(&mut stderr);
    }
    assert!(
        acked.len() >= 100,
        "child acknowledged only {} batches ({status}); stderr:\n{stderr}",
        acked.len()
    );
    assert!(!status.success(), "child must have been killed, not have finished");

    let log = LogDir::open(&root, config(Fsync::Always)).expect("reopen after SIGKILL");
    let topic = log.topic("scp").expect("topic");
    let last_acked = acked.values().map(|&(end, _, _)| end).max().expect("acks");
    assert!(
        topic.end_offset() >= last_acked,
        "end {} below acknowledged {last_acked}",
        topic.end_offset()
    );
    assert!(topic.stats().segments > 1, "segments rolled during the run: {:?}", topic.stats());
    let mut checked = 0;
    for (&first, &(end, appender, batch)) in &acked {
        let read = topic.read_blocking(first, usize::MAX, (end - first) as usize).expect("read");
        assert_eq!(read.first_offset, first);
        // A batch may straddle a segment boundary: read the rest from the next segment.
        let mut records = read.records;
        while (records.len() as u64) < end - first {
            let more = topic
                .read_blocking(
                    first + records.len() as u64,
                    usize::MAX,
                    (end - first) as usize - records.len(),
                )
                .expect("read");
            assert!(!more.is_empty(), "acknowledged batch {first}..{end} is cut short");
            records.extend(more.records);
        }
        for (i, r) in records.iter().enumerate() {
            assert_eq!(
                *r,
                record(appender, batch, i as u64),
                "record {} of batch {first}..{end}",
                first + i as u64
            );
            checked += 1;
        }
    }
    let durable = topic.committed("feed").unwrap_or(0);
    assert!(durable >= committed, "committed offset {durable} below the acknowledged {committed}");
    eprintln!(
        "log crash test ({fsync}): {} batches, {checked} records acknowledged and found; end {}, {} segments, consumer at {durable}",
        acked.len(),
        topic.end_offset(),
        topic.stats().segments
    );
}

#[test]
fn sigkill_loses_no_acknowledged_append_with_fsync_always() {
    sigkill_loses_nothing_acknowledged("always");
}

#[test]
fn sigkill_loses_no_acknowledged_append_with_fsync_interval() {
    sigkill_loses_nothing_acknowledged("interval");
}
