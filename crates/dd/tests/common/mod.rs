//! Helpers the Data Director's tests share.
#![allow(dead_code)]

pub mod consumers;
