//! Test support shared by the NF test suites: validating answers against the 3GPP OpenAPI
//! files in `../shared/3gpp`, a notification sink that records what NFs POST to it, and small
//! request/answer helpers, Wireshark's dissector as a check of Diameter messages, and a real
//! Kafka broker for the Data Director's Kafka tests, MariaDB (one server and a Galera cluster)
//! for the MySQL-protocol store. With feature `dd-ingest`, a stand-in for the
//! Data Director's ingest API that receives NFs' message copies (`dd_ingest`). With feature
//! `otlp`, an OTLP/HTTP trace receiver that decodes the spans NFs export (`otlp`).
//! A dev-dependency only; nothing in a shipped crate uses it.

pub mod backends;
#[cfg(feature = "dd-ingest")]
pub mod dd_ingest;
pub mod freediameter;
pub mod http;
pub mod kafka;
pub mod mariadb;
#[cfg(feature = "otlp")]
pub mod otlp;
pub mod sink;
pub mod specs;
pub mod tshark;
