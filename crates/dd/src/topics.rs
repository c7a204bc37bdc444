//! The topics the pipeline runs over: one per source NF type plus MAIN's partitions, as in the
//! reference ("each message will be copied into two topics": the NF's and MAIN), and the shape
//! every topic backend gives them (the embedded log of [`crate::log`]; Kafka in scale-out).

use std::future::Future;
use std::io;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The NF topics, by the copy's NF type. A copy from an NF type not listed goes to `other` (the
/// reference's non-Oracle aggregation), so a third party's copies are never refused for it.
pub const NF_TOPICS: [&str; 10] =
    ["nrf", "udr", "bsf", "pcf", "pcrf", "scp", "sepp", "amf", "smf", "other"];

/// The NF topic of a copy's NF type (`"PCF"` → `"pcf"`), without allocating.
pub fn nf_topic(nf_type: &str) -> &'static str {
    NF_TOPICS[..NF_TOPICS.len() - 1]
        .iter()
        .copied()
        .find(|t| t.eq_ignore_ascii_case(nf_type))
        .unwrap_or("other")
}

/// The name of MAIN's partition `i` (`MAIN-0`, `MAIN-1`...).
pub fn main_partition(i: usize) -> String {
    format!("MAIN-{i}")
}

/// A read from a topic.
#[derive(Debug, Default)]
pub struct Batch {
    /// The records from the requested offset on, in order.
    pub records: Vec<Bytes>,
    /// The offset to read from next.
    pub next: u64,
    /// Records the reader asked for that retention had already removed (its offset was below
    /// the topic's start): lost to this reader, counted.
    pub skipped: u64,
    /// Records of an indexed MAIN (`crate::main_index`) whose copy the NF topic no longer had
    /// (deleted, or not the record indexed): skipped before `records`, counted.
    pub unresolved: u64,
}

/// One append-only topic with consumer offsets. `append` resolves only once the records are
/// durable (what the ingest API acknowledges, so a kill loses nothing acknowledged).
pub trait TopicLog: Send + Sync + 'static {
    fn name(&self) -> &str;
    fn append(&self, records: Vec<Bytes>) -> BoxFuture<'_, io::Result<Range<u64>>>;
    fn read(
        &self,
        from: u64,
        max_bytes: usize,
        max_records: usize,
    ) -> BoxFuture<'_, io::Result<Batch>>;
    /// Resolves once the topic holds a record at `offset` (its end offset is past it).
    fn wait_for(&self, offset: u64) -> BoxFuture<'_, ()>;
    fn end_offset(&self) -> u64;
    /// The end offset as of the last sync to disk: below it, records survive an OS crash too.
    fn synced_end(&self) -> u64;
    fn start_offset(&self) -> u64;
    fn commit(&self, consumer: &str, offset: u64) -> BoxFuture<'_, io::Result<()>>;
    fn committed(&self, consumer: &str) -> Option<u64>;
}

/// Where topics come from.
pub trait Topics: Send + Sync + 'static {
    /// The topic of that name, created on first use.
    fn topic(&self, name: &str) -> io::Result<Arc<dyn TopicLog>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nf_types_map_to_their_topic_and_the_rest_to_other() {
        assert_eq!(nf_topic("PCF"), "pcf");
        assert_eq!(nf_topic("nrf"), "nrf");
        assert_eq!(nf_topic("SEPP"), "sepp");
        assert_eq!(nf_topic("NWDAF"), "other");
        assert_eq!(nf_topic(""), "other");
        assert_eq!(nf_topic("other"), "other");
        assert_eq!(main_partition(2), "MAIN-2");
    }
}
