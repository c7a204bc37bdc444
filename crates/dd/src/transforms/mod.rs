//! Transforms between MAIN and the sinks: filters pick the copies a feed or a correlation gets,
//! correlation turns the copies of a transaction or session into xDRs.

pub mod correlate;
pub mod filter;
