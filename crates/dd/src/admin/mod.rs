//! The admin API on the Data Director's port (`/dd-admin/v1/...`).

pub mod xdrs;
