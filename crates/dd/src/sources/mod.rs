//! Where copies enter the Data Director.

pub mod kafka;
