//! Test support shared by the NF test suites: validating answers against the 3GPP OpenAPI
//! files in `../shared/3gpp`, and a notification sink that records what NFs POST to it.
//! A dev-dependency only; nothing in a shipped crate uses it.

pub mod sink;
pub mod specs;
