//! The Data Director (issue #24), built like Vector: sources (NF message copies through the ingest
//! API, Kafka), transforms (per-NF aggregation into MAIN with ordering, filters, correlation into
//! xDRs) and sinks (HTTP/2, TCP and Kafka feeds, xDR storage), each a module with its `config.rs`
//! and its tests. In the embedded mode (what `up` runs) the NF topics and MAIN are the on-disk logs
//! of [`log`]-to-come; the copy format is `dd_client::envelope`.

pub use dd_client::envelope;

pub mod kafka;
pub mod sinks;
pub mod sources;
