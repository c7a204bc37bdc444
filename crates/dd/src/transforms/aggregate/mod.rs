//! Per-NF aggregation into MAIN (the reference's `ocnadd<nf>aggregation` services): one task per
//! NF topic reads it from its committed offset and appends what it read to MAIN's partitions,
//! then commits. A copy is in MAIN at least once: a kill between MAIN's append and the NF topic's
//! commit appends that batch again on restart (never loses it), which consumers that correlate by
//! the copy's sequence number can see. With MAIN as an index ([`crate::main_index`]) and each
//! batch one append (one partition, or round-robin), MAIN itself says how far aggregation got, so
//! a restart resumes there and appends nothing twice. The NF topic's offset is committed every 200 ms, and only
//! past batches MAIN has synced to disk, so MAIN may sync on an interval (one fdatasync on a
//! copy's path, the NF topic's, instead of two) without an OS crash losing what the NF topic
//! acknowledged.

pub mod config;

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use dd_client::Copy;
use tokio::sync::watch;

pub use config::{AggregateConfig, Ordering};

use crate::main_index::{IndexRecord, MainStore};
use crate::metrics::Metrics;
use crate::pipeline::pause;
use crate::topics::TopicLog;

/// The consumer name under which an aggregation task commits its NF topic's offset.
pub const CONSUMER: &str = "aggregate";

/// How often aggregation looks again for a copy its NF topic has written but not yet synced
/// (an NF topic with `fsync = { interval_ms }` and MAIN an index).
const UNSYNCED_POLL: Duration = Duration::from_millis(1);

/// Largest read from an NF topic, bytes.
const MAX_READ_BYTES: usize = 8 * 1024 * 1024;

/// The MAIN partition of one copy under key ordering.
pub fn key_partition(record: &Bytes, partitions: usize) -> usize {
    if partitions == 1 {
        return 0;
    }
    let mut h = rustc_hash::FxHasher::default();
    match Copy::decode(record.clone()) {
        Ok(c) if !c.supi().is_empty() => c.supi().hash(&mut h),
        Ok(c) if !c.session_id().is_empty() => c.session_id().hash(&mut h),
        Ok(c) => (c.nf_instance(), c.transaction).hash(&mut h),
        // Ingest admits only decodable copies; a record that is not one still goes somewhere.
        Err(_) => record.len().hash(&mut h),
    }
    (h.finish() % partitions as u64) as usize
}

/// How often an NF topic's offset is committed (each commit syncs a file): at-least-once makes a
/// later commit safe, it only widens what a restart aggregates again.
const COMMIT_EVERY: Duration = Duration::from_millis(200);

/// Runs the aggregation of `nf` into `main` until `stop` turns true. With `store` `Index`, MAIN
/// gets an index record per copy ([`crate::main_index`]) rather than the copy.
pub async fn run(
    nf: Arc<dyn TopicLog>,
    nf_index: usize,
    main: Vec<Arc<dyn TopicLog>>,
    config: AggregateConfig,
    store: MainStore,
    metrics: Arc<Metrics>,
    mut stop: watch::Receiver<bool>,
) {
    let index = store == MainStore::Index;
    let mut offset = nf.committed(CONSUMER).unwrap_or_else(|| nf.start_offset());
    let mut next_partition = nf_index % main.len();
    // Batches appended to MAIN, oldest first: the MAIN end offsets they need synced, and the NF
    // topic offset that may be committed once they are.
    let mut unsynced: VecDeque<(Vec<(usize, u64)>, u64)> = VecDeque::new();
    let mut committed = offset;
    // MAIN as an index says how far aggregation got before a kill: resuming there rather than
    // at the committed offset appends nothing twice. Only where each batch was one append (one
    // partition, or round-robin), so that what MAIN holds of this topic is a prefix of it.
    if index && (main.len() == 1 || config.ordering == Ordering::RoundRobin) {
        if let Some(last) = resumable(&nf, last_indexed(&main, nf_index, offset).await).await {
            tracing::info!(
                topic = nf.name(),
                committed = offset,
                resume = last + 1,
                "aggregation resumes after the copies MAIN already indexes"
            );
            offset = last + 1;
            // Committed once MAIN's partitions have synced what they hold now.
            let ends = main.iter().enumerate().map(|(i, p)| (i, p.end_offset())).collect();
            unsynced.push_back((ends, offset));
        }
    }
    let mut last_commit = Instant::now();
    loop {
        let due = !unsynced.is_empty() || committed != offset;
        let stopping = tokio::select! {
            _ = nf.wait_for(offset) => false,
            _ = tokio::time::sleep(COMMIT_EVERY), if due => false,
            _ = stop.wait_for(|s| *s) => true,
        };
        if stopping {
            // MAIN's last batches may be unsynced yet: wait for them (a few ms) so the stop
            // commits what it moved.
            let deadline = Instant::now() + Duration::from_secs(1);
            while !unsynced.is_empty() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
                commit(&nf, &main, &mut unsynced, &mut committed).await;
            }
            commit(&nf, &main, &mut unsynced, &mut committed).await;
            return;
        }
        if last_commit.elapsed() >= COMMIT_EVERY {
            commit(&nf, &main, &mut unsynced, &mut committed).await;
            last_commit = Instant::now();
        }
        if nf.end_offset() <= offset {
            continue;
        }
        // An index record may point only at a copy its NF topic has synced: after an OS crash
        // the topic keeps what it synced, so MAIN never points past its end. (With the NF
        // topics' default fsync = "always" a readable record is a synced one.)
        let limit = if index { nf.synced_end() } else { nf.end_offset() };
        if limit <= offset {
            // A stop during the pause is seen at the top of the loop.
            let _ = pause(&mut stop, UNSYNCED_POLL).await;
            continue;
        }
        let max_records = config.batch.min((limit - offset) as usize);
        let batch = match nf.read(offset, MAX_READ_BYTES, max_records).await {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(topic = nf.name(), error = %e, "aggregation cannot read its topic");
                if pause(&mut stop, Duration::from_secs(1)).await {
                    return;
                }
                continue;
            }
        };
        if batch.skipped > 0 {
            metrics.aggregate_skipped(nf_index, batch.skipped);
        }
        if batch.records.is_empty() {
            offset = batch.next;
            continue;
        }
        let n = batch.records.len();
        let first = batch.next - n as u64;
        let mut parts: Vec<Vec<Bytes>> = vec![Vec::new(); main.len()];
        match (config.ordering, index) {
            (Ordering::RoundRobin, false) => {
                parts[next_partition] = batch.records;
                next_partition = (next_partition + 1) % main.len();
            }
            (Ordering::RoundRobin, true) => {
                parts[next_partition] = IndexRecord::encode_run(nf_index, first, &batch.records);
                next_partition = (next_partition + 1) % main.len();
            }
            (Ordering::Key, false) => {
                for r in batch.records {
                    parts[key_partition(&r, main.len())].push(r);
                }
            }
            (Ordering::Key, true) => {
                let records = IndexRecord::encode_run(nf_index, first, &batch.records);
                for (r, i) in batch.records.iter().zip(records) {
                    parts[key_partition(r, main.len())].push(i);
                }
            }
        }
        // MAIN first, then (once MAIN has synced it) the NF topic's offset: a failure in between
        // repeats, never skips.
        let main_ref = &main;
        let ends = loop {
            let appends = parts
                .iter()
                .enumerate()
                .filter(|(_, p)| !p.is_empty())
                .map(|(i, p)| async move { (i, main_ref[i].append(p.clone()).await) });
            let results = futures_util::future::join_all(appends).await;
            if let Some(e) = results.iter().find_map(|(_, r)| r.as_ref().err()) {
                tracing::error!(error = %e, "aggregation cannot append to MAIN; retrying");
                // Partitions that took the batch will hold it twice after the retry; MAIN is
                // at-least-once (see the module comment).
                if pause(&mut stop, Duration::from_secs(1)).await {
                    return;
                }
                continue;
            }
            break results
                .into_iter()
                .filter_map(|(i, r)| r.ok().map(|range| (i, range.end)))
                .collect::<Vec<_>>();
        };
        offset = batch.next;
        unsynced.push_back((ends, offset));
        metrics.aggregated(nf_index, n);
    }
}

/// Index records read at once when looking back through MAIN at start.
const SCAN_CHUNK: u64 = 4096;

/// How far back (records per partition) the look at start goes: the records appended since the
/// last commit, at most ~200 ms of them, are near the end; beyond this, resuming at the
/// committed offset (appending some again) is the fallback.
const SCAN_LIMIT: u64 = 1 << 20;

/// The offset of `last`, when the NF topic holds the very copy it indexes: not when the topic
/// was deleted and started again (its offsets then name other copies, or none yet).
async fn resumable(nf: &Arc<dyn TopicLog>, last: Option<IndexRecord>) -> Option<u64> {
    let last = last?;
    if last.offset >= nf.end_offset() {
        return None;
    }
    let b = nf.read(last.offset, 1 << 20, 1).await.ok()?;
    let first = b.next - b.records.len() as u64;
    (first == last.offset && b.records.first().is_some_and(|r| last.matches(r)))
        .then_some(last.offset)
}

/// The index record with the highest offset of NF topic `nf_index` that MAIN's partitions hold
/// at or after `from`, looking back from their ends.
async fn last_indexed(
    main: &[Arc<dyn TopicLog>],
    nf_index: usize,
    from: u64,
) -> Option<IndexRecord> {
    let mut found = None;
    for p in main {
        let (start, end) = (p.start_offset(), p.end_offset());
        let mut hi = end;
        while hi > start && end - hi < SCAN_LIMIT {
            let lo = hi.saturating_sub(SCAN_CHUNK).max(start);
            // One read stops at a segment's end: read on until `hi`.
            let (mut at, mut last, mut failed) = (lo, None, false);
            while at < hi {
                match p.read(at, usize::MAX, (hi - at) as usize).await {
                    Ok(b) if b.next > at => {
                        let mut mine = b.records.iter().filter_map(|r| IndexRecord::decode(r));
                        last = mine.rfind(|r| r.topic as usize == nf_index).or(last);
                        at = b.next;
                    }
                    _ => {
                        failed = true;
                        break;
                    }
                }
            }
            if let Some(r) = last {
                if r.offset >= from && found.is_none_or(|f: IndexRecord| f.offset < r.offset) {
                    found = Some(r);
                }
                break;
            }
            if failed {
                break;
            }
            hi = lo;
        }
    }
    found
}

/// Commits the NF topic's offset past every batch MAIN has synced.
async fn commit(
    nf: &Arc<dyn TopicLog>,
    main: &[Arc<dyn TopicLog>],
    unsynced: &mut VecDeque<(Vec<(usize, u64)>, u64)>,
    committed: &mut u64,
) {
    let mut upto = *committed;
    while let Some((ends, next)) = unsynced.front() {
        if ends.iter().all(|(p, end)| main[*p].synced_end() >= *end) {
            upto = *next;
            unsynced.pop_front();
        } else {
            break;
        }
    }
    if upto != *committed {
        match nf.commit(CONSUMER, upto).await {
            Ok(()) => *committed = upto,
            Err(e) => {
                tracing::warn!(topic = nf.name(), error = %e, "aggregation offset not committed")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use dd_client::envelope::{encode, CopyMeta, Protocol, TriggerPoint};

    fn record(supi: &str, transaction: u64) -> Bytes {
        let meta = CopyMeta {
            trigger: TriggerPoint::IngressRequest,
            protocol: Protocol::Http2,
            timestamp_ns: 1,
            sequence: transaction,
            transaction,
            stream_id: 1,
            status: 0,
            nf_type: "PCF",
            nf_instance: "i",
            service: "s",
            operation: "o",
            method: "POST",
            path: "/",
            peer: "",
            supi,
            gpsi: "",
            session_id: "",
        };
        let mut b = BytesMut::new();
        encode(&meta, [], b"{}", &mut b).unwrap();
        b.freeze()
    }

    #[test]
    fn one_subscriber_always_lands_in_one_partition_and_subscribers_spread() {
        let p = key_partition(&record("imsi-001010000000001", 1), 4);
        for t in 2..50 {
            assert_eq!(key_partition(&record("imsi-001010000000001", t), 4), p);
        }
        let mut seen = [0usize; 4];
        for i in 0..4000 {
            seen[key_partition(&record(&format!("imsi-00101{i:010}"), 1), 4)] += 1;
        }
        assert!(seen.iter().all(|n| (800..1200).contains(n)), "{seen:?}");
        assert_eq!(key_partition(&record("x", 1), 1), 0);
    }
}
