//! Topic-level tests: appends and reads, recovery, rollover, the sparse index, retention,
//! consumer offsets.

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::frame::HEADER;
use super::segment;
use super::*;

fn open_topic(root: &Path, config: TopicConfig) -> Topic {
    fs::create_dir_all(root).expect("root");
    let lock = Arc::new(DirLock::take(root).expect("lock"));
    Topic::open(root, "t", config, lock).expect("topic opens")
}

/// Without the tail cache: these tests are about what is on disk.
fn config() -> TopicConfig {
    TopicConfig { tail_cache_bytes: 0, ..TopicConfig::new(Fsync::Always) }
}

fn record(i: u64, len: usize) -> Bytes {
    let mut r = format!("record {i} ").into_bytes();
    r.resize(len.max(r.len()), (i % 251) as u8);
    Bytes::from(r)
}

fn read_all(topic: &Topic, from: u64) -> Vec<(u64, Bytes)> {
    let mut out = Vec::new();
    let mut at = from;
    while at < topic.end_offset() {
        let batch = topic.read_blocking(at, 64 << 10, 1000).expect("read");
        assert!(!batch.is_empty(), "a read below the end returns a record");
        out.extend(batch.iter().map(|(o, r)| (o, r.clone())));
        at = batch.next_offset;
    }
    out
}

fn segment_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .collect();
    names.sort();
    names
}

#[test]
fn batches_get_consecutive_offsets_and_read_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let topic = open_topic(dir.path(), config());
    assert_eq!((topic.start_offset(), topic.end_offset()), (0, 0));
    let a: Vec<Bytes> = (0..3).map(|i| record(i, 50)).collect();
    let b: Vec<Bytes> = (3..10).map(|i| record(i, 1200)).collect();
    assert_eq!(topic.append_batch_blocking(&a).expect("append"), 0..3);
    assert_eq!(topic.append_batch_blocking(&b).expect("append"), 3..10);
    assert_eq!(topic.append_batch_blocking(&[]).expect("empty append"), 10..10);
    assert_eq!(topic.end_offset(), 10);
    let all = read_all(&topic, 0);
    let expected: Vec<(u64, Bytes)> =
        (0..10).map(|i| (i, record(i, if i < 3 { 50 } else { 1200 }))).collect();
    assert_eq!(all, expected);
    // From the middle, with each limit.
    let batch = topic.read_blocking(4, 1 << 20, 2).expect("read");
    assert_eq!((batch.first_offset, batch.next_offset, batch.len()), (4, 6, 2));
    let batch = topic.read_blocking(4, 2 * (1200 + HEADER), 100).expect("read");
    assert_eq!(batch.len(), 2, "two frames fit the byte limit exactly");
    let batch = topic.read_blocking(4, 10, 100).expect("read");
    assert_eq!(batch.records, vec![record(4, 1200)], "one record even when larger than the limit");
    let batch = topic.read_blocking(10, 1 << 20, 100).expect("read at the end");
    assert!(batch.is_empty() && batch.next_offset == 10 && batch.skipped == 0);
    assert!(matches!(
        topic.read_blocking(11, 1 << 20, 100),
        Err(LogError::OffsetBeyondEnd { offset: 11, end: 10, .. })
    ));
    assert!(matches!(
        topic.append_batch_blocking(&[Bytes::from(vec![0u8; MAX_RECORD_BYTES + 1])]),
        Err(LogError::RecordTooLarge { .. })
    ));
}

#[test]
fn records_read_are_slices_of_one_buffer() {
    let dir = tempfile::tempdir().expect("temp dir");
    let topic = open_topic(dir.path(), config());
    let records: Vec<Bytes> = (0..20).map(|i| record(i, 100)).collect();
    topic.append_batch_blocking(&records).expect("append");
    let batch = topic.read_blocking(0, 1 << 20, 100).expect("read");
    assert_eq!(batch.len(), 20);
    for pair in batch.records.windows(2) {
        // Consecutive payloads sit one frame header apart in the same allocation.
        let gap = pair[1].as_ptr() as usize - (pair[0].as_ptr() as usize + pair[0].len());
        assert_eq!(gap, HEADER);
    }
}

#[test]
fn a_reopened_topic_has_what_was_acknowledged_and_appends_after_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let topic = open_topic(dir.path(), config());
    let records: Vec<Bytes> = (0..100).map(|i| record(i, 300)).collect();
    topic.append_batch_blocking(&records).expect("append");
    drop(topic);
    let topic = open_topic(dir.path(), config());
    assert_eq!(topic.end_offset(), 100);
    assert_eq!(topic.append_batch_blocking(&[record(100, 300)]).expect("append"), 100..101);
    let all = read_all(&topic, 0);
    assert_eq!(all.len(), 101);
    assert!(all.iter().all(|(o, r)| *r == record(*o, 300)));
}

/// The tail batch cut at every byte (what a crash in the middle of its write leaves): the
/// batch before it stays whole, the tail keeps exactly its whole records, and appends resume at
/// the next offset.
#[test]
fn recovery_cuts_a_torn_tail_batch_at_every_byte_position() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("log");
    let topic = open_topic(&root, config());
    let head: Vec<Bytes> = (0..5).map(|i| record(i, 40)).collect();
    let tail: Vec<Bytes> = (5..9).map(|i| record(i, 25 + i as usize)).collect();
    topic.append_batch_blocking(&head).expect("head");
    let head_len = topic.stats().bytes;
    topic.append_batch_blocking(&tail).expect("tail");
    drop(topic);
    let seg = segment::log_path(&root.join("t"), 0);
    let whole = fs::read(&seg).expect("segment");
    // Where each tail record's frame ends.
    let mut ends = Vec::new();
    let mut pos = head_len as usize;
    for r in &tail {
        pos += HEADER + r.len();
        ends.push(pos);
    }
    assert_eq!(pos, whole.len());
    for cut in head_len as usize..whole.len() {
        fs::write(&seg, &whole[..cut]).expect("cut");
        let topic = open_topic(&root, config());
        let kept = ends.iter().filter(|&&end| end <= cut).count() as u64;
        assert_eq!(topic.end_offset(), 5 + kept, "cut at byte {cut}");
        assert_eq!(
            topic.stats().bytes,
            if kept == 0 { head_len } else { ends[kept as usize - 1] as u64 }
        );
        let next = topic.append_batch_blocking(&[Bytes::from_static(b"after")]).expect("append");
        assert_eq!(next, 5 + kept..6 + kept);
        let all = read_all(&topic, 0);
        assert_eq!(all.len() as u64, 6 + kept, "cut at byte {cut}");
        assert_eq!(all[all.len() - 1].1, Bytes::from_static(b"after"));
        drop(topic);
    }
}

#[test]
fn recovery_cuts_at_a_damaged_record() {
    let dir = tempfile::tempdir().expect("temp dir");
    let topic = open_topic(dir.path(), config());
    let records: Vec<Bytes> = (0..10).map(|i| record(i, 100)).collect();
    topic.append_batch_blocking(&records).expect("append");
    drop(topic);
    let seg = segment::log_path(&dir.path().join("t"), 0);
    let mut bytes = fs::read(&seg).expect("segment");
    // One bit of record 7's payload.
    bytes[7 * (HEADER + 100) + HEADER + 50] ^= 0x01;
    fs::write(&seg, &bytes).expect("damage");
    let topic = open_topic(dir.path(), config());
    assert_eq!(topic.end_offset(), 7);
    assert_eq!(fs::metadata(&seg).expect("meta").len(), 7 * (HEADER as u64 + 100));
}

#[test]
fn segments_roll_at_their_size_and_reads_cross_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = TopicConfig { segment_bytes: 50_000, index_interval_bytes: 1024, ..config() };
    let topic = open_topic(dir.path(), config.clone());
    // 30 batches of 5 records of ~1 KB: a segment closes after ten batches (the first write
    // past the size).
    for b in 0..30u64 {
        let batch: Vec<Bytes> = (b * 5..b * 5 + 5).map(|i| record(i, 1000)).collect();
        topic.append_batch_blocking(&batch).expect("append");
    }
    let files = segment_files(&dir.path().join("t"));
    assert_eq!(
        files,
        vec![format!("{:020}.log", 0), format!("{:020}.log", 50), format!("{:020}.log", 100)]
    );
    for base in [0u64, 50] {
        assert!(
            segment::index_path(&dir.path().join("t"), base).exists(),
            "closed segment {base} has its index file"
        );
    }
    let all = read_all(&topic, 0);
    assert_eq!(all.len(), 150);
    assert!(all.iter().all(|(o, r)| *r == record(*o, 1000)));
    // A read near a segment's end stops there; the next starts in the next segment.
    let batch = topic.read_blocking(48, 1 << 20, 100).expect("read");
    assert_eq!((batch.first_offset, batch.next_offset), (48, 50));
    drop(topic);
    let topic = open_topic(dir.path(), config);
    assert_eq!(topic.stats().segments, 3);
    assert_eq!(read_all(&topic, 37).len(), 113);
}

#[test]
fn segments_roll_at_their_age() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = TopicConfig { segment_age: Duration::from_millis(100), ..config() };
    let topic = open_topic(dir.path(), config);
    topic.append_batch_blocking(&[record(0, 10)]).expect("append");
    assert_eq!(topic.stats().segments, 1);
    std::thread::sleep(Duration::from_millis(150));
    // The segment's first record is older than its age: this append starts a new one.
    assert_eq!(topic.append_batch_blocking(&[record(1, 10)]).expect("append"), 1..2);
    assert_eq!(
        segment_files(&dir.path().join("t")),
        vec![format!("{:020}.log", 0), format!("{:020}.log", 1)]
    );
    assert_eq!(topic.stats().segments, 2);
}

/// A read from any offset of a large segment starts at its sparse index entry: it reads at most
/// about one index interval before the record, not the segment.
#[test]
fn a_read_seeks_through_the_sparse_index() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = TopicConfig { index_interval_bytes: 4096, ..config() };
    let topic = open_topic(dir.path(), config.clone());
    let records: Vec<Bytes> = (0..2000).map(|i| record(i, 1200)).collect();
    for chunk in records.chunks(100) {
        topic.append_batch_blocking(chunk).expect("append");
    }
    assert!(topic.stats().bytes > 2_000_000);
    for from in [0u64, 1, 999, 1234, 1999] {
        let before = topic.stats().read_bytes;
        let batch = topic.read_blocking(from, 1, 1).expect("read");
        assert_eq!(batch.records, vec![record(from, 1200)]);
        let read = topic.stats().read_bytes - before;
        // The first read covers the index interval; one more when the record it ends in is
        // cut short.
        assert!(read <= 2 * (4096 + 1) + 1200 + HEADER as u64, "reading {from} read {read} bytes");
    }
    // The same from a reopened topic: the index was rebuilt by the recovery scan.
    drop(topic);
    let topic = open_topic(dir.path(), config);
    let before = topic.stats().read_bytes;
    assert_eq!(topic.read_blocking(1500, 1, 1).expect("read").records, vec![record(1500, 1200)]);
    assert!(topic.stats().read_bytes - before < 8192);
}

#[test]
fn retention_by_size_deletes_old_segments_and_moves_a_lagging_consumer() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = TopicConfig { segment_bytes: 5_000, retention_bytes: Some(12_000), ..config() };
    let topic = open_topic(dir.path(), config);
    for b in 0..20u64 {
        let batch: Vec<Bytes> = (b * 5..b * 5 + 5).map(|i| record(i, 200)).collect();
        topic.append_batch_blocking(&batch).expect("append");
    }
    topic.commit_blocking("slow-feed", 3).expect("commit");
    let before = topic.stats();
    assert_eq!(before.segments, 4, "25 records of 216 bytes a segment: {before:?}");
    let report = topic.enforce_retention().expect("retention");
    let after = topic.stats();
    assert_eq!(report.segments_deleted, 2);
    assert!(after.bytes <= 12_000, "{after:?}");
    assert_eq!(after.segments, before.segments - report.segments_deleted);
    assert_eq!(report.start_offset, after.start_offset);
    assert_eq!(segment_files(&dir.path().join("t")).len(), after.segments);
    // The consumer at offset 3 resumes at the start; what it lost is counted.
    let from = topic.committed("slow-feed").expect("committed");
    let batch = topic.read_blocking(from, 1 << 20, 10_000).expect("read");
    assert_eq!(batch.first_offset, after.start_offset);
    assert_eq!(batch.skipped, after.start_offset - 3);
    // A read stays within one segment.
    assert_eq!(batch.next_offset, after.start_offset + 25);
    assert_eq!(batch.records[0], record(after.start_offset, 200));
    // A second pass deletes nothing more.
    assert_eq!(topic.enforce_retention().expect("retention").segments_deleted, 0);
}

#[test]
fn retention_by_age_deletes_old_segments_then_the_idle_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = TopicConfig {
        segment_bytes: 1_000,
        retention_age: Some(Duration::from_millis(1500)),
        ..config()
    };
    let topic = open_topic(dir.path(), config);
    for i in 0..10 {
        topic.append_batch_blocking(&[record(i, 600)]).expect("append");
    }
    assert_eq!(
        topic.enforce_retention().expect("retention").segments_deleted,
        0,
        "nothing old yet"
    );
    std::thread::sleep(Duration::from_millis(1600));
    topic.append_batch_blocking(&[record(10, 600)]).expect("append a fresh one");
    let report = topic.enforce_retention().expect("retention");
    // Every segment but the one being written, which holds record 10.
    assert_eq!(topic.start_offset(), 10, "{report:?}");
    assert_eq!(topic.read_blocking(0, 1 << 20, 100).expect("read").skipped, 10);
    // Idle past retention: the pass asks the writer to close the segment, the next deletes it.
    std::thread::sleep(Duration::from_millis(1600));
    topic.enforce_retention().expect("retention");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while topic.stats().segments < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    topic.enforce_retention().expect("retention");
    assert_eq!(topic.start_offset(), 11);
    assert_eq!(topic.end_offset(), 11);
    assert_eq!(topic.stats().bytes, 0);
    assert_eq!(topic.append_batch_blocking(&[record(11, 10)]).expect("append"), 11..12);
}

#[test]
fn offsets_survive_reopen_and_are_checked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let topic = open_topic(dir.path(), config());
    topic
        .append_batch_blocking(&(0..10).map(|i| record(i, 10)).collect::<Vec<_>>())
        .expect("append");
    topic.commit_blocking("feed-a", 4).expect("commit");
    topic.commit_blocking("feed-b", 10).expect("commit at the end");
    assert!(matches!(topic.commit_blocking("feed-a", 11), Err(LogError::OffsetBeyondEnd { .. })));
    assert!(matches!(topic.commit_blocking("", 1), Err(LogError::InvalidConsumerName(_))));
    drop(topic);
    let topic = open_topic(dir.path(), config());
    assert_eq!(topic.committed("feed-a"), Some(4));
    assert_eq!(topic.committed("feed-b"), Some(10));
    assert_eq!(topic.committed("feed-c"), None);
    assert_eq!(topic.consumers().len(), 2);
}

#[test]
fn an_offset_beyond_a_shortened_end_is_lowered_on_open() {
    let dir = tempfile::tempdir().expect("temp dir");
    let topic = open_topic(dir.path(), config());
    topic
        .append_batch_blocking(&(0..10).map(|i| record(i, 10)).collect::<Vec<_>>())
        .expect("append");
    topic.commit_blocking("feed", 10).expect("commit");
    drop(topic);
    // What an OS crash under fsync = interval can leave: the last records gone.
    let seg = segment::log_path(&dir.path().join("t"), 0);
    let bytes = fs::read(&seg).expect("segment");
    fs::write(&seg, &bytes[..6 * (HEADER + 10)]).expect("cut");
    let topic = open_topic(dir.path(), config());
    assert_eq!(topic.end_offset(), 6);
    assert_eq!(topic.committed("feed"), Some(6));
    drop(topic);
    assert_eq!(open_topic(dir.path(), config()).committed("feed"), Some(6), "lowered durably");
}

#[test]
fn concurrent_appenders_share_writes_and_syncs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let topic = open_topic(dir.path(), config());
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let topic = topic.clone();
            std::thread::spawn(move || {
                (0..50u64)
                    .map(|i| {
                        let batch = [record(t * 1000 + i, 100), record(t * 1000 + i, 100)];
                        topic.append_batch_blocking(&batch).expect("append")
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut ranges: Vec<_> = threads.into_iter().flat_map(|t| t.join().expect("thread")).collect();
    ranges.sort_by_key(|r| r.start);
    // Every batch whole and the ranges tiling 0..800.
    let mut at = 0;
    for r in &ranges {
        assert_eq!((r.start, r.end - r.start), (at, 2));
        at = r.end;
    }
    assert_eq!(at, 800);
    let stats = topic.stats();
    assert!(stats.fdatasyncs <= 400, "{stats:?}");
    assert_eq!(stats.writes, stats.fdatasyncs, "fsync = always syncs each write");
    // Each batch's two records are adjacent.
    let all = read_all(&topic, 0);
    for pair in all.chunks(2) {
        assert_eq!(pair[0].1, pair[1].1);
    }
}

#[test]
fn fsync_interval_acknowledges_before_syncing_and_syncs_later() {
    let dir = tempfile::tempdir().expect("temp dir");
    let every = Duration::from_millis(200);
    let topic = open_topic(dir.path(), TopicConfig::new(Fsync::Interval(every)));
    let first = topic.stats().fdatasyncs;
    let started = std::time::Instant::now();
    for i in 0..100 {
        topic.append_batch_blocking(&[record(i, 100)]).expect("append");
    }
    let stats = topic.stats();
    assert_eq!(stats.writes, 100);
    // At most one sync per interval (and the first write's), however slow the machine.
    let intervals = (started.elapsed().as_millis() / every.as_millis()) as u64;
    assert!(stats.fdatasyncs - first <= intervals + 1, "{stats:?} over {intervals} intervals");
    assert!(stats.fdatasyncs - first < 100);
    std::thread::sleep(2 * every);
    assert!(topic.stats().fdatasyncs > stats.fdatasyncs, "the pending sync ran on its timer");
    assert_eq!(read_all(&topic, 0).len(), 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_wakes_when_the_record_is_appended() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = LogDir::open(dir.path(), LogConfig::default()).expect("open");
    let topic = log.topic("nrf").expect("topic");
    let waiter = {
        let topic = topic.clone();
        tokio::spawn(async move {
            let end = topic.wait_for(0).await.expect("wait");
            (end, topic.read(0, 1 << 20, 10).await.expect("read").records.len())
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiter.is_finished(), "nothing to wait for yet");
    topic.append(vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")]).await.expect("append");
    let got =
        tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("woken").expect("task");
    assert_eq!(got, (2, 2), "woken with the batch's end, both records readable");
    // Already there: returns at once.
    assert_eq!(topic.wait_for(1).await.expect("wait"), 2);
    topic.commit("feed", 2).await.expect("commit");
    assert_eq!(topic.committed("feed"), Some(2));
}

#[test]
fn a_log_dir_is_locked_reopens_its_topics_and_checks_names() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = LogDir::open(dir.path(), LogConfig::default()).expect("open");
    assert!(matches!(LogDir::open(dir.path(), LogConfig::default()), Err(LogError::Locked(_))));
    for bad in ["", ".hidden", "a/b", "..", "sp ace"] {
        assert!(matches!(log.topic(bad), Err(LogError::InvalidTopicName(_))), "{bad:?}");
    }
    let main = log.topic(MAIN).expect("MAIN");
    assert_eq!(main.config().retention_age, Some(Duration::from_secs(6 * 3600)));
    main.append_batch_blocking(&[record(0, 10)]).expect("append");
    log.topic("udr").expect("udr");
    drop(main);
    drop(log);
    let log = LogDir::open(dir.path(), LogConfig::default()).expect("reopen once closed");
    let names: Vec<String> = log.topics().iter().map(|t| t.name().to_owned()).collect();
    assert_eq!(names, vec![MAIN.to_owned(), "udr".to_owned()]);
    assert_eq!(log.topic(MAIN).expect("MAIN").end_offset(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retention_task_deletes_what_is_past_retention() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = LogConfig { segment_mib: 1, retention_mib: Some(1), ..LogConfig::default() };
    let log = Arc::new(LogDir::open(dir.path(), config).expect("open"));
    let topic = log.topic("bsf").expect("topic");
    for b in 0..30u64 {
        topic
            .append((b * 100..b * 100 + 100).map(|i| record(i, 1200)).collect())
            .await
            .expect("append");
    }
    assert!(topic.stats().segments >= 3, "{:?}", topic.stats());
    let task = log.spawn_retention(Duration::from_millis(10));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while topic.stats().bytes > 2 << 20 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    task.abort();
    let stats = topic.stats();
    assert!(stats.bytes <= 2 << 20 && stats.start_offset > 0, "{stats:?}");
    let batch = topic.read(0, 1 << 20, 10).await.expect("read");
    assert_eq!(batch.skipped, stats.start_offset);
}

#[test]
fn the_tail_cache_serves_recent_reads_as_the_files_would() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = TopicConfig {
        tail_cache_bytes: 1 << 20,
        segment_bytes: 1 << 20,
        ..TopicConfig::new(Fsync::Always)
    };
    let topic = open_topic(dir.path(), config);
    for b in 0..30u64 {
        let batch: Vec<Bytes> = (b * 100..b * 100 + 100).map(|i| record(i, 1200)).collect();
        topic.append_batch_blocking(&batch).expect("append");
    }
    assert!(topic.stats().segments > 2);
    let limits = [(1 << 20, 10_000), (5000, 10_000), (1, 1), (1 << 20, 7)];
    for from in [0, 1000, 2100, 2150, 2899, 2950, 2999, 3000] {
        for (max_bytes, max_records) in limits {
            let got = topic.read_blocking(from, max_bytes, max_records).expect("read");
            let disk = topic.read_from_disk(from, max_bytes, max_records).expect("disk read");
            // The cache may go on past a segment's end where the file read stops: the records
            // both return are the same.
            let n = got.len().min(disk.len());
            assert_eq!(
                got.records[..n],
                disk.records[..n],
                "from {from} limits {max_bytes}/{max_records}"
            );
            assert_eq!(got.first_offset, disk.first_offset);
            assert!(got.len() >= disk.len());
            assert!(got.iter().all(|(o, r)| *r == record(o, 1200)));
        }
    }
    let stats = topic.stats();
    assert!(stats.reads_from_memory > 0 && stats.reads_from_disk > 0, "{stats:?}");
    // The last megabyte comes from memory, the start from the files.
    let before = topic.stats();
    topic.read_blocking(2990, 1 << 20, 10).expect("read");
    assert_eq!(topic.stats().reads_from_memory, before.reads_from_memory + 1);
    topic.read_blocking(0, 1 << 20, 10).expect("read");
    assert_eq!(topic.stats().reads_from_disk, before.reads_from_disk + 1);
}

#[test]
fn a_damaged_closed_segment_is_cut_and_readers_skip_the_gap() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = TopicConfig { segment_bytes: 2_000, ..config() };
    let topic = open_topic(dir.path(), config.clone());
    for b in 0..6u64 {
        let batch: Vec<Bytes> = (b * 10..b * 10 + 10).map(|i| record(i, 100)).collect();
        topic.append_batch_blocking(&batch).expect("append");
    }
    // Two batches (20 records) a segment: 0, 20, 40.
    assert_eq!(topic.stats().segments, 3);
    drop(topic);
    let tdir = dir.path().join("t");
    // Record 25 of the middle segment damaged, and its index file gone, so it is scanned.
    let seg = segment::log_path(&tdir, 20);
    let mut bytes = fs::read(&seg).expect("segment");
    bytes[5 * (HEADER + 100) + HEADER + 3] ^= 0x40;
    fs::write(&seg, &bytes).expect("damage");
    fs::remove_file(segment::index_path(&tdir, 20)).expect("index removed");
    let topic = open_topic(dir.path(), config);
    assert_eq!(topic.end_offset(), 60);
    let batch = topic.read_blocking(22, 1 << 20, 100).expect("read");
    assert_eq!((batch.first_offset, batch.next_offset), (22, 25), "up to the cut");
    let batch = topic.read_blocking(25, 1 << 20, 100).expect("read");
    assert_eq!((batch.first_offset, batch.skipped), (40, 15), "the lost records are counted");
    assert_eq!(batch.records[0], record(40, 100));
}
