//! The Data Director scenarios (`nfs = ["dd"]`, issue #24, reference §4.5 D1-D12): the kit plays
//! the NFs with message copy on and the third-party consumers behind the feeds, and reports
//! copies per second through ingest, the NF topics, aggregation into MAIN, filters and feeds,
//! their end-to-end latency, and the Data Director's CPU per copy.
//!
//! - [`config`]: `[dd]` of a scenario file (sources, filters, feeds).
//! - [`message`]: the copied messages, one transaction's envelopes at the reference's sizes.
//! - [`source`]: the copy source simulator (open loop, batched POSTs to the ingest API).
//! - [`consumer`]: the TCP and HTTP/2 consumers, counting copies and E2E latency.
//! - [`kafka`]: the broker a Kafka scenario needs, and the Kafka consumer of a Kafka feed.
//! - [`run`]: set-up through the admin API, the load, the drain, the numbers.
//! - [`report`]: the rows of the report.

pub mod config;
pub mod consumer;
pub mod kafka;
pub mod message;
pub mod report;
pub mod run;
pub mod source;

pub use config::DdScenario;
