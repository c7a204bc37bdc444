//! Where copies come from: the ingest API (every fivecore NF's copier and third-party NFs).

pub mod ingest;
