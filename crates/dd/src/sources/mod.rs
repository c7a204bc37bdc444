//! Where copies come from: the ingest API (every fivecore NF's copier and third-party NFs), and
//! Kafka topics NFs write their copies to.

pub mod ingest;
pub mod kafka;
