//! `[dd.ingest]`: the ingest API's bounds.

use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IngestConfig {
    /// Largest request body, bytes (a batch of framed copies). Default 16 MiB: a copier's batch
    /// of 256 copies of 3.5 KB (the reference's SCP message size) is under 1 MiB.
    #[serde(default = "default_max_request_bytes")]
    pub max_request_bytes: usize,

    /// Bytes of accepted copies not yet durable in their NF topic, across all requests; a request
    /// beyond it is answered 503 + Retry-After at once (shed early: the copier keeps its batch and
    /// sends it again) instead of queueing without bound. Default 256 MiB.
    #[serde(default = "default_max_pending_bytes")]
    pub max_pending_bytes: usize,

    /// Retry-After of that 503, seconds. Default 1.
    #[serde(default = "default_retry_after_s")]
    pub retry_after_s: u32,
}

fn default_max_request_bytes() -> usize {
    16 * 1024 * 1024
}
fn default_max_pending_bytes() -> usize {
    256 * 1024 * 1024
}
fn default_retry_after_s() -> u32 {
    1
}

impl Default for IngestConfig {
    fn default() -> Self {
        IngestConfig {
            max_request_bytes: default_max_request_bytes(),
            max_pending_bytes: default_max_pending_bytes(),
            retry_after_s: default_retry_after_s(),
        }
    }
}

impl IngestConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.max_request_bytes < 1024 {
            return Err("[dd.ingest] max_request_bytes must be at least 1024".into());
        }
        if self.max_pending_bytes < self.max_request_bytes {
            return Err("[dd.ingest] max_pending_bytes must be at least max_request_bytes".into());
        }
        Ok(())
    }
}
