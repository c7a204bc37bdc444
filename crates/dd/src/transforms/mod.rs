//! What happens to copies between the NF topics and the sinks: aggregation merges the NF topics
//! into MAIN; filters pick the copies a feed or a correlation gets.

pub mod aggregate;
pub mod filter;
