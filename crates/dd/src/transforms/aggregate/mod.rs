//! Per-NF aggregation into MAIN (the reference's `ocnadd<nf>aggregation` services): one task per
//! NF topic reads it from its committed offset and appends what it read to MAIN's partitions,
//! then commits. A copy is in MAIN at least once: a kill between MAIN's append and the NF topic's
//! commit appends that batch again on restart (never loses it), which consumers that correlate by
//! the copy's sequence number can see. The NF topic's offset is committed every 200 ms, and only
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

use crate::metrics::Metrics;
use crate::pipeline::pause;
use crate::topics::TopicLog;

/// The consumer name under which an aggregation task commits its NF topic's offset.
pub const CONSUMER: &str = "aggregate";

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

/// Runs the aggregation of `nf` into `main` until `stop` turns true.
pub async fn run(
    nf: Arc<dyn TopicLog>,
    nf_index: usize,
    main: Vec<Arc<dyn TopicLog>>,
    config: AggregateConfig,
    metrics: Arc<Metrics>,
    mut stop: watch::Receiver<bool>,
) {
    let mut offset = nf.committed(CONSUMER).unwrap_or_else(|| nf.start_offset());
    let mut next_partition = nf_index % main.len();
    // Batches appended to MAIN, oldest first: the MAIN end offsets they need synced, and the NF
    // topic offset that may be committed once they are.
    let mut unsynced: VecDeque<(Vec<(usize, u64)>, u64)> = VecDeque::new();
    let mut committed = offset;
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
        let batch = match nf.read(offset, MAX_READ_BYTES, config.batch).await {
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
        let mut parts: Vec<Vec<Bytes>> = vec![Vec::new(); main.len()];
        match config.ordering {
            Ordering::RoundRobin => {
                parts[next_partition] = batch.records;
                next_partition = (next_partition + 1) % main.len();
            }
            Ordering::Key => {
                for r in batch.records {
                    parts[key_partition(&r, main.len())].push(r);
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
