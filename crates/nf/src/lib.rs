//! What every fivecore NF shares above the SBI, Diameter and store crates.
//!
//! A newcomer's map: [`skeleton`] is how every NF starts and stops (configuration, store, SBI
//! bind, NRF registration, Diameter node, graceful stop), which each NF fills in; [`error`] is
//! the one edge where an NF's faults become ProblemDetails answers (handlers return
//! [`NfError`] and use `?`; the route converts); [`diameter_limits`] the Diameter node limits
//! every NF with a Diameter port exposes alike.

pub mod common_data;
pub mod diameter_limits;
pub mod error;
pub mod skeleton;

pub use diameter_limits::DiameterLimits;
pub use error::{Answer, NfError};
pub use skeleton::{NfStore, Serving, Skeleton, Spec, StartError};
