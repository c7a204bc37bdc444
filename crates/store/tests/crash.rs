//! `kill -9` loses nothing acknowledged.
//!
//! The parent test re-runs this test binary as a child that writes as fast as
//! it can and prints a line for each acknowledged write; the parent SIGKILLs
//! it mid-stream, reopens the database and looks for every acknowledged
//! write.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use store::{DocumentData, DocumentStore, SqliteConfig, SqliteStore};

/// Set in the child's environment to the database path.
const CHILD_ENV: &str = "FIVECORE_STORE_CRASH_CHILD";
const CHILD_TEST: &str = "crash_child_writes_forever";
const WRITERS: usize = 32;
/// Each writer cycles over a few documents so versions climb as well.
const DOCS_PER_WRITER: u64 = 8;
const ENOUGH_ACKS: usize = 2000;
const MAX_RUN: Duration = Duration::from_secs(3);

/// Not a test by itself: the body of the child process. Without the
/// environment variable (a normal test run) it returns at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_child_writes_forever() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let store = SqliteStore::open(SqliteConfig::new(path)).await.expect("child opens the store");
    let mut writers = tokio::task::JoinSet::new();
    for writer in 0..WRITERS {
        let store = store.clone();
        writers.spawn(async move {
            for round in 0u64.. {
                let id = format!("w{writer}-d{}", round % DOCS_PER_WRITER);
                let data =
                    DocumentData::new(format!("round {round}")).index("writer", writer.to_string());
                let written = store.upsert("crash", &id, data).await.expect("write");
                // Printed only after the commit: this line is the promise.
                println!("ACK {id} {} {round}", written.document.version);
            }
        });
    }
    while writers.join_next().await.is_some() {}
}

#[test]
fn sigkill_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("crash.db");
    let mut child = Command::new(std::env::current_exe().expect("test binary path"))
        .args(["--exact", CHILD_TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("child starts");

    // Lines are read on a thread so the deadline holds even if the child
    // stalls; the channel closes when the child's stdout does.
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

    let mut acked: HashMap<String, (u64, String)> = HashMap::new();
    let mut acks = 0;
    let record = |line: &str, acked: &mut HashMap<String, (u64, String)>| -> bool {
        let Some(rest) = line.strip_prefix("ACK ") else {
            return false;
        };
        let mut parts = rest.split(' ');
        let (Some(id), Some(version), Some(round)) = (parts.next(), parts.next(), parts.next())
        else {
            panic!("malformed ack line {line:?}");
        };
        let version: u64 = version.parse().expect("version");
        // A writer's acks for one document come in order, so the last one
        // seen is the highest.
        acked.insert(id.to_owned(), (version, format!("round {round}")));
        true
    };

    let start = Instant::now();
    while acks < ENOUGH_ACKS && start.elapsed() < MAX_RUN {
        match lines_rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => acks += usize::from(record(&line, &mut acked)),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    // `Child::kill` is SIGKILL on Unix: no destructor, no flush, no commit.
    child.kill().expect("SIGKILL");
    let status = child.wait().expect("reaped");
    // Lines already in the pipe were printed after their commit: they
    // count too.
    for line in lines_rx.iter() {
        acks += usize::from(record(&line, &mut acked));
    }
    reader.join().expect("reader thread");

    let mut stderr = String::new();
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_string(&mut stderr);
    }
    assert!(
        acks >= 100,
        "child acknowledged only {acks} writes (status {status}); stderr:\n{stderr}"
    );
    assert!(!status.success(), "child must have been killed, not have finished");

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let store = common::open_at(&path).await;
        let mut missing = Vec::new();
        for (id, (version, body)) in &acked {
            match store.get("crash", id).await.expect("get") {
                // A write committed but killed before its ack was printed
                // may have bumped the version further.
                Some(doc) if doc.version > *version => {}
                Some(doc) if doc.version == *version && doc.body == body.as_bytes() => {}
                found => missing.push(format!("{id} v{version}: found {found:?}")),
            }
        }
        assert!(
            missing.is_empty(),
            "{} of {} acknowledged documents lost or stale after SIGKILL: {missing:?}",
            missing.len(),
            acked.len()
        );
        eprintln!(
            "crash test: {acks} acknowledged writes over {} documents, all found",
            acked.len()
        );
    });
}
