//! Where copies and xDRs leave the pipeline.

pub mod xdr_store;
