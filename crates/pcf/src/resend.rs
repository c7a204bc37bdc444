//! The PCRF-initiated requests (Gx RAR, Rx RAR and ASR) sent again when they go unanswered:
//! a PCEF or AF that missed one would otherwise keep rules, or a session, the PCF has moved
//! past until its next CCR or STR.
//!
//! A request that gets no answer within `[pcf.diameter] request_timeout_ms`, whose connection
//! closed before the answer, or that finds no open connection to its peer (the peer
//! reconnecting), is sent again up to `[pcf.diameter] retries` times (default 2), after
//! `retry_backoff_ms` (default 200), doubled before each next send. The node keeps one
//! connection per peer (RFC 6733 §5.6.4's election), so a resend goes to the connection the
//! peer has then: a new one if it reconnected in the meantime. A resend keeps the end-to-end
//! id and sets the T flag (RFC 6733 §3), so a peer that did get the first one answers it from
//! its duplicate cache instead of applying it twice. An answer of any Result-Code is an
//! answer: it is not sent again.
//!
//! Counted in `pcf_diameter_resent_total{command}` and `pcf_diameter_unanswered_total{command}`
//! (the final failures, each logged by the caller with what it means for the session).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use diameter::header::FLAG_RETRANSMIT;
use diameter::{DiameterNode, Message, RequestError};

use crate::context::Pcf;

/// The requests the PCF initiates on Diameter, for the counters' `command` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    GxRar,
    RxRar,
    RxAsr,
}

impl Command {
    pub const ALL: [Command; 3] = [Command::GxRar, Command::RxRar, Command::RxAsr];

    pub fn label(self) -> &'static str {
        match self {
            Command::GxRar => "Gx-RAR",
            Command::RxRar => "Rx-RAR",
            Command::RxAsr => "Rx-ASR",
        }
    }
}

/// Resends and final failures, per [`Command`] (indexed by its position in `Command::ALL`).
#[derive(Debug, Default)]
pub struct Stats {
    pub resent: [AtomicU64; 3],
    pub unanswered: [AtomicU64; 3],
}

/// Whether another send may get the answer this one did not.
fn worth_resending(e: &RequestError) -> bool {
    matches!(
        e,
        RequestError::Timeout
            | RequestError::PeerDown
            | RequestError::UnableToDeliver
            | RequestError::TooBusy
    )
}

/// Sends `msg` on `node`, again when unanswered (module doc); the answer, or the last error.
pub async fn request(
    pcf: &Pcf,
    node: &DiameterNode,
    command: Command,
    mut msg: Message,
) -> Result<Message, RequestError> {
    let cfg = &pcf.config.diameter;
    if msg.end_to_end_id() == 0 {
        msg.set_end_to_end_id(node.next_end_to_end_id());
    }
    let i = command as usize;
    let mut wait = Duration::from_millis(cfg.retry_backoff_ms);
    let mut sends = 1;
    loop {
        match node.request(msg.clone()).await {
            Err(e) if worth_resending(&e) && sends <= cfg.retries => {
                tracing::debug!(command = command.label(), session = msg.session_id().unwrap_or(""),
                    sends, error = %e, "unanswered: sent again after {wait:?}");
                tokio::time::sleep(wait).await;
                wait = wait.saturating_mul(2);
                msg.header.flags |= FLAG_RETRANSMIT;
                sends += 1;
                pcf.resend.resent[i].fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                pcf.resend.unanswered[i].fetch_add(1, Ordering::Relaxed);
                // The caller logs what the failure means for its session (at warn).
                tracing::debug!(command = command.label(), session = msg.session_id().unwrap_or(""),
                    sends, error = %e, "no answer after the last send");
                return Err(e);
            }
            Ok(a) => return Ok(a),
        }
    }
}
