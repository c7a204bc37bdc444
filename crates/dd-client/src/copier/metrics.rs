//! The copier's metrics, read at scrape time from the counters its lock already guards (no
//! atomic on the request path).

use std::sync::Arc;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use super::Shared;
use crate::config::ALL_TRIGGERS;

/// Copies dropped, by reason.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Dropped {
    /// The buffer held `buffer_bytes` (the Data Director slow or unreachable).
    pub buffer_full: u64,
    /// A header or identifier longer than the envelope carries (65,535 bytes).
    pub too_long: u64,
    /// The Data Director refused their batch for good (4xx other than 429).
    pub rejected: u64,
    /// Still buffered when the NF stopped, or copied after.
    pub stopped: u64,
}

/// POSTs of batches, by result.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Batches {
    pub delivered: u64,
    /// Answered 503, 429 or 5xx: sent again.
    pub unavailable: u64,
    /// No answer: sent again.
    pub unreachable: u64,
    pub rejected: u64,
}

#[derive(Debug)]
pub(crate) struct Collector(pub Arc<Shared>);

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Copier").field("url", &self.url).finish_non_exhaustive()
    }
}

impl prometheus_client::collector::Collector for Collector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (copies, dropped, batches, buffered) = {
            let st = self.0.lock();
            (st.copies, st.dropped, st.batches, st.buffered())
        };
        let mut e = encoder.encode_descriptor(
            "dd_copies",
            "Messages copied for the Data Director, by trigger point",
            None,
            MetricType::Counter,
        )?;
        for t in ALL_TRIGGERS {
            ConstCounter::new(copies[t as usize - 1])
                .encode(e.encode_family(&[("trigger", t.as_str())])?)?;
        }
        let mut e = encoder.encode_descriptor(
            "dd_copies_dropped",
            "Copies dropped instead of sent to the Data Director, by reason",
            None,
            MetricType::Counter,
        )?;
        for (reason, n) in [
            ("buffer_full", dropped.buffer_full),
            ("too_long", dropped.too_long),
            ("rejected", dropped.rejected),
            ("stopped", dropped.stopped),
        ] {
            ConstCounter::new(n).encode(e.encode_family(&[("reason", reason)])?)?;
        }
        let mut e = encoder.encode_descriptor(
            "dd_copy_batches",
            "POSTs of batches of copies to the Data Director's ingest API, by result",
            None,
            MetricType::Counter,
        )?;
        for (result, n) in [
            ("delivered", batches.delivered),
            ("unavailable", batches.unavailable),
            ("unreachable", batches.unreachable),
            ("rejected", batches.rejected),
        ] {
            ConstCounter::new(n).encode(e.encode_family(&[("result", result)])?)?;
        }
        let g = ConstGauge::new(buffered as i64);
        let e = encoder.encode_descriptor(
            "dd_copy_buffer_bytes",
            "Bytes of copies buffered for the Data Director (not yet taken by it)",
            None,
            g.metric_type(),
        )?;
        g.encode(e)?;
        Ok(())
    }
}
