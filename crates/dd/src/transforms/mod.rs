//! Transforms between MAIN and the sinks: filters pick the copies a feed or a correlation gets.

pub mod filter;
