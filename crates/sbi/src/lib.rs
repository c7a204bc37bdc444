//! The SBI stack every fivecore NF stands on (TS 29.500, TS 29.501).
//!
//! A newcomer's map: [`server`] accepts h2c, HTTP/1.1 and TLS on one port and runs each request
//! through the [`layer`] stack into a [`router::Router`] of service operations; [`client`] calls
//! other NFs; [`problem`], [`headers`], [`query`] and [`body`] hold the TS 29.500 rules that both
//! sides share; [`observe`] serves `/metrics` and the health endpoints.

mod backpressure;
pub mod body;
pub mod client;
mod connection;
pub mod descriptors;
pub mod headers;
pub mod layer;
pub mod oauth2;
pub mod observe;
pub mod problem;
pub mod query;
pub mod router;
pub mod server;
pub mod tls;

pub use body::Body;
pub use observe::Observability;
pub use problem::{InvalidParam, ProblemDetails};
pub use router::{
    api_root, empty_response, json_response, HandlerResult, Response, Router, SbiRequest,
};
pub use server::{NfIdentity, SbiServer, ServerConfig};
