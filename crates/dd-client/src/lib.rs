//! The NF side of the Data Director (issue #24): the copy envelope every NF and the kit encode and
//! the Data Director decodes ([`envelope`]).
//!
//! It is its own crate, like `nrf-client`, because every NF crate needs it and NF crates never
//! depend on each other or on `dd`.

pub mod envelope;

pub use envelope::{Copy, CopyMeta, DecodeError, Protocol, TriggerPoint};
