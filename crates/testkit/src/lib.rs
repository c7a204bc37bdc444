//! Test support shared by the NF test suites: validating answers against the 3GPP OpenAPI
//! files in `../shared/3gpp`, a notification sink that records what NFs POST to it, and small
//! request/answer helpers, Wireshark's dissector as a check of Diameter messages, and a real
//! Kafka broker for the Data Director's Kafka tests.
//! A dev-dependency only; nothing in a shipped crate uses it.

pub mod freediameter;
pub mod http;
pub mod kafka;
pub mod sink;
pub mod specs;
pub mod tshark;
