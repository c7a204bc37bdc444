//! Per-NF aggregation into MAIN (the reference's `ocnadd<nf>aggregation` services): one task per
//! NF topic reads it from its committed offset and appends what it read to MAIN's partitions,
//! then commits. A copy is in MAIN at least once: a kill between MAIN's append and the NF topic's
//! commit appends that batch again on restart (never loses it), which consumers that correlate by
//! the copy's sequence number can see.

pub mod config;

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use dd_client::Copy;
use tokio::sync::watch;

pub use config::{AggregateConfig, Ordering};

use crate::metrics::Metrics;
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
    loop {
        tokio::select! {
            _ = nf.wait_for(offset) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let batch = match nf.read(offset, MAX_READ_BYTES, config.batch).await {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(topic = nf.name(), error = %e, "aggregation cannot read its topic");
                if sleep_or_stop(&mut stop, Duration::from_secs(1)).await {
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
        // MAIN first, then the NF topic's offset: a failure in between repeats, never skips.
        loop {
            let appends = parts
                .iter()
                .enumerate()
                .filter(|(_, p)| !p.is_empty())
                .map(|(i, p)| main[i].append(p.clone()));
            let results = futures_util::future::join_all(appends).await;
            if let Some(e) = results.into_iter().find_map(Result::err) {
                tracing::error!(error = %e, "aggregation cannot append to MAIN; retrying");
                // Partitions that took the batch will hold it twice after the retry; MAIN is
                // at-least-once (see the module comment).
                if sleep_or_stop(&mut stop, Duration::from_secs(1)).await {
                    return;
                }
                continue;
            }
            break;
        }
        offset = batch.next;
        if let Err(e) = nf.commit(CONSUMER, offset).await {
            tracing::warn!(topic = nf.name(), error = %e, "aggregation offset not committed");
        }
        metrics.aggregated(nf_index, n);
    }
}

/// Sleeps, or returns true at once when asked to stop.
async fn sleep_or_stop(stop: &mut watch::Receiver<bool>, d: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => false,
        _ = stop.wait_for(|s| *s) => true,
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
