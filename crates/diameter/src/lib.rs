//! Diameter (RFC 6733) codec and dictionary for fivecore: base protocol, NASREQ, DCCA and the
//! 3GPP applications Gx, Sd, Rx, Sy and Sh.
//!
//! * [`Message::decode`] reads a whole message from `Bytes` without copying AVP payloads;
//!   [`frame_len`] finds message boundaries in a stream.
//! * [`Message::request`], [`Message::answer_to`] and the typed constructors on
//!   [`dictionary::AvpDef`] build messages; [`Message::encode`] writes them.
//! * [`validate()`] checks a message against the dictionary; every [`Error`] knows its Result-Code
//!   and Failed-AVP, and [`Message::error_answer`] turns it into the answer.
//!
//! Peers, transport and routing (RFC 6733 §2, §5, §6; RFC 3539 watchdog):
//!
//! * [`DiameterNode`] (alias [`Stack`]) is a node with a local identity, a peer table, a realm
//!   routing table ([`Route`], [`RouteAction`]), local application handlers and the client API
//!   [`DiameterNode::request`]; it relays, proxies (with a [`NextHop`] hook) and redirects.
//! * [`transport`] carries messages over TCP or TLS ([`tls`]: mutual TLS from the first byte,
//!   the peer's certificate naming its Origin-Host, certificates re-read without a restart); [`peer`] holds the per-peer state machine
//!   ([`PeerState`]), the CER/CEA capabilities and the pending-request table; a connection's
//!   messages are encoded into one write buffer that its writer task flushes per wake-up.

pub mod accessors;
pub mod avp;
pub mod builders;
pub mod dictionary;
pub mod error;
mod fasthash;
pub mod header;
pub mod ids;
pub mod message;
pub mod metrics;
pub mod node;
mod outbox;
pub mod peer;
pub mod routing;
pub mod tap;
pub mod tls;
pub mod transport;
pub mod types;
pub mod validate;

pub use accessors::{ExperimentalResult, SubscriptionId, SupportedFeatures};
pub use avp::{Avp, AvpIter};
pub use dictionary::dcca::CcRequestType;
pub use dictionary::{AvpDef, VENDOR_3GPP};
pub use error::{result_code, EncodeError, Error};
pub use header::{frame_len, Header, HEADER_LEN};
pub use message::Message;
pub use node::{ApplicationId, DiameterNode, Handler, NodeBuilder, NodeConfig, PeerInfo, Stack};
pub use peer::{Capabilities, PeerConfig, PeerState, RequestError};
pub use routing::{NextHop, PeerName, Route, RouteAction};
pub use tap::{DiameterTap, Direction, TappedMessage};
pub use tls::{TlsConfig, TlsCredentials, TlsError};
pub use transport::Transport;
pub use types::{Address, DataType, Time};
pub use validate::{validate, validate_avps};
