//! The simulators' h2c connections, served straight on the `h2` crate.
//!
//! One task per connection does everything: it accepts streams, decides each answer at once
//! (`Sim::receive`) and holds it in a first-in first-out queue until its latency has passed.
//! A simulator's latency is one constant, so the queue is in due order and one timer (the
//! head's due time) serves every held answer; hyper's server spent a task, a timer entry and
//! a collected body on each of the ~13,700 SLF queries per second of the NRF mix at 0.3.
//! Only a request with a body (a notification) gets a task of its own, to drain it.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::RecvStream;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Request, Response};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::sim::{Reply, Sim};

/// Large windows: flow control must not pace what the NF sends to a simulator.
const STREAM_WINDOW: u32 = 1 << 20;
const CONNECTION_WINDOW: u32 = 1 << 26;
/// The NF holds a stream open per request for the simulator's whole latency (13,700 SLF
/// queries/s x 150 ms is ~2,000 at once): the simulator must not be what limits it.
const MAX_STREAMS: u32 = 100_000;

/// An answer waiting for its due time.
struct Held {
    due: Instant,
    respond: SendResponse<Bytes>,
    reply: Reply,
}

/// Serves one h2c connection until it closes.
pub(crate) async fn serve(tcp: TcpStream, sim: Arc<Sim>) {
    let Ok(mut conn) = h2::server::Builder::new()
        .max_concurrent_streams(MAX_STREAMS)
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .handshake::<_, Bytes>(tcp)
        .await
    else {
        return;
    };
    let mut held: VecDeque<Held> = VecDeque::new();
    let timer = tokio::time::sleep_until(Instant::now());
    tokio::pin!(timer);
    loop {
        tokio::select! {
            // Due answers first: they are late already if the connection keeps the task busy.
            biased;
            () = &mut timer, if !held.is_empty() => {
                send_due(&mut held);
                if let Some(h) = held.front() {
                    timer.as_mut().reset(h.due);
                }
            }
            next = conn.accept() => {
                let Some(Ok((req, respond))) = next else { break };
                let was_empty = held.is_empty();
                if let Some(h) = receive(&sim, req, respond) {
                    held.push_back(h);
                    if was_empty {
                        timer.as_mut().reset(held[0].due);
                    }
                }
            }
        }
    }
    // The client closed (GOAWAY): the streams it still waits for get their answers, on time.
    while let Some(h) = held.front() {
        let due = h.due;
        tokio::select! {
            () = tokio::time::sleep_until(due) => send_due(&mut held),
            _ = std::future::poll_fn(|cx| conn.poll_closed(cx)) => return,
        }
    }
    let _ = std::future::poll_fn(|cx| conn.poll_closed(cx)).await;
}

/// A new stream: its answer held until due, or, when the request has a body still to come,
/// a task that drains the body first.
fn receive(sim: &Arc<Sim>, req: Request<RecvStream>, respond: SendResponse<Bytes>) -> Option<Held> {
    let (parts, body) = req.into_parts();
    if body.is_end_stream() {
        let reply = sim.receive(&parts.method, &parts.uri, &[]);
        let due = Instant::now() + sim.latency;
        if sim.latency.is_zero() {
            send(respond, reply);
            return None;
        }
        return Some(Held { due, respond, reply });
    }
    let sim = sim.clone();
    tokio::spawn(async move {
        // The AMF reads the whole transfer (the N1 part, with its PTI, comes last).
        let whole = sim.kind == crate::scenario::SimKind::Amf;
        let Some(body) = drain(body, whole).await else { return };
        let reply = sim.receive(&parts.method, &parts.uri, &body);
        if !sim.latency.is_zero() {
            tokio::time::sleep(sim.latency).await;
        }
        send(respond, reply);
    });
    None
}

/// A request body, whole when it is a JSON array (the sink counts its elements) or `keep`;
/// else its first chunk. `None` when the stream was reset.
async fn drain(mut body: RecvStream, keep: bool) -> Option<Bytes> {
    let mut whole = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.ok()?;
        let _ = body.flow_control().release_capacity(chunk.len());
        // Only an array is looked into (its first byte says so); anything else counts as one,
        // unless the simulator reads the body (`keep`).
        if !keep && whole.is_empty() && chunk.first() != Some(&b'[') && !chunk.is_empty() {
            return drain_rest(body, chunk).await;
        }
        whole.extend_from_slice(&chunk);
    }
    Some(Bytes::from(whole))
}

/// The rest of a body that is not looked into: received and released, not kept.
async fn drain_rest(mut body: RecvStream, first: Bytes) -> Option<Bytes> {
    while let Some(chunk) = body.data().await {
        let chunk = chunk.ok()?;
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    Some(first)
}

/// Sends every held answer that is due.
fn send_due(held: &mut VecDeque<Held>) {
    let now = Instant::now();
    while held.front().is_some_and(|h| h.due <= now) {
        let h = held.pop_front().expect("front checked");
        send(h.respond, h.reply);
    }
}

/// Sends one answer; a stream the client reset meanwhile is skipped.
fn send(mut respond: SendResponse<Bytes>, reply: Reply) {
    let mut rsp = Response::new(());
    *rsp.status_mut() = reply.status;
    if reply.body.is_some() {
        rsp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    if let Some(l) = reply.location.as_deref().and_then(|l| HeaderValue::from_str(l).ok()) {
        rsp.headers_mut().insert(http::header::LOCATION, l);
    }
    let Ok(mut stream) = respond.send_response(rsp, reply.body.is_none()) else { return };
    if let Some(body) = reply.body {
        let _ = stream.send_data(body, true);
    }
}
