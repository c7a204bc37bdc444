//! The NF side of the Data Director (issue #24): the copy envelope every NF and the kit encode and
//! the Data Director decodes ([`envelope`]), and the copier an NF installs as its SBI and
//! Diameter message-copy tap when `[<nf>.copy]` enables it ([`CopyConfig`], [`Copier`]).
//!
//! It is its own crate, like `nrf-client`, because every NF crate needs it and NF crates never
//! depend on each other or on `dd`.

pub mod config;
pub mod copier;
pub mod envelope;
pub mod extract;

pub use config::CopyConfig;
pub use copier::Copier;
pub use envelope::{Copy, CopyMeta, DecodeError, Protocol, TriggerPoint};
