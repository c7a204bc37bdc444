//! Test support shared by the NF test suites: validating answers against the 3GPP OpenAPI
//! files in `../shared/3gpp`, a notification sink that records what NFs POST to it, and small
//! request/answer helpers.
//! A dev-dependency only; nothing in a shipped crate uses it.

pub mod freediameter;
pub mod http;
pub mod sink;
pub mod specs;
