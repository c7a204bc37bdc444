//! What happens to copies between the NF topics and the feeds.

pub mod aggregate;
