//! What happens to copies between the NF topics and the sinks: aggregation merges the NF topics
//! into MAIN; filters pick the copies a feed or a correlation gets; correlation turns the copies of
//! a transaction or session into xDRs.

pub mod aggregate;
pub mod correlate;
pub mod filter;
