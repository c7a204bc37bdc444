//! Where copies leave the Data Director: feeds to consumers, xDR storage.

pub mod kafka;
