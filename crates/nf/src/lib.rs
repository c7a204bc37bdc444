//! What every fivecore NF shares above the SBI and store crates.
//!
//! A newcomer's map: [`error`] is the one edge where an NF's faults become ProblemDetails
//! answers (handlers return [`NfError`] and use `?`; the route converts); the start-up skeleton
//! every NF fills in (configuration, store, SBI bind, NRF registration, Diameter node, graceful
//! stop) joins it here.

pub mod error;

pub use error::{Answer, NfError};
