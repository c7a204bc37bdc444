//! The message-copy hook of a node (the Data Director's trigger points on Diameter, issue #24):
//! every application message a node receives from or sends to a peer, requests and answers
//! alike, is shown to the installed [`DiameterTap`] as the bytes on the wire. Base-protocol
//! messages (CER/CEA, DWR/DWA, DPR/DPA: application 0) are not.
//!
//! The tap sees the bytes the node already has: the frame it read, or the bytes it just encoded
//! into the connection's write buffer (called there, so a request's copy is always taken before
//! its answer can arrive). It must not block or await, and it copies what it keeps.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use crate::header::HEADER_LEN;

/// Whether the node read the message or wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Received,
    Sent,
}

/// One message as it crossed a peer connection.
#[derive(Debug, Clone, Copy)]
pub struct TappedMessage<'a> {
    pub direction: Direction,
    /// The whole message (header and AVPs) as read or written.
    pub wire: &'a [u8],
    /// The connection's id, unique for the node's life: hop-by-hop ids are per connection, so
    /// (connection, hop-by-hop id, end-to-end id) pairs a request with its answer.
    pub connection: u64,
    /// The peer's address and Diameter identity.
    pub peer_addr: SocketAddr,
    pub peer_host: &'a str,
}

pub trait DiameterTap: Send + Sync + 'static {
    fn copy(&self, message: &TappedMessage<'_>);
}

/// A node's tap, installed at most once and shared with its connections.
#[derive(Default)]
pub(crate) struct TapSlot(OnceLock<Arc<dyn DiameterTap>>);

impl TapSlot {
    pub fn set(&self, tap: Arc<dyn DiameterTap>) -> bool {
        self.0.set(tap).is_ok()
    }

    pub fn get(&self) -> Option<&Arc<dyn DiameterTap>> {
        self.0.get()
    }
}

/// True for a message of an application, not of the base protocol.
pub(crate) fn is_application(wire: &[u8]) -> bool {
    wire.len() >= HEADER_LEN && wire[8..12] != [0, 0, 0, 0]
}
