//! The copier's sender: seals a batch whose first copy has waited `linger_ms`, and POSTs sealed
//! batches, one per POST, oldest first, one POST at a time (so the Data Director appends them in
//! the order they were copied), to `POST /dd-ingest/v1/copies`. While a POST is out the request
//! path lets the next batch grow (mod.rs), which is how the sender keeps up when the Data
//! Director is slower than the NF.
//!
//! A POST that fails without an answer, or is answered 503, 429 or another 5xx, is sent again
//! after `Retry-After` or a backoff (50 ms doubling to 1 s) until it is taken; meanwhile new
//! copies wait in the bounded buffer. An answer saying the batch can never be taken (400 naming
//! a bad frame, 413, 415, ...) drops it, counted as rejected.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::StatusCode;

use super::{Sealed, SenderState, Shared};
use crate::envelope::CONTENT_TYPE;

const MIN_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// A Retry-After longer than this is not waited for in full: the buffer would only fill.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// What the sender does next.
enum Next {
    Post(Sealed),
    /// Wait for a wake-up, or until the current batch's linger ends.
    Wait(Option<Instant>),
    /// Stopping and nothing is left.
    Done,
}

/// Why a POST did not deliver its batch.
enum Failure {
    /// Retryable: no answer (connect, timeout, reset).
    Unreachable,
    /// Retryable: 503, 429 or another 5xx, with its Retry-After.
    Unavailable(Option<Duration>),
    /// The Data Director will never take this body.
    Rejected(StatusCode),
}

pub(crate) async fn run(shared: Arc<Shared>) {
    let mut backoff = MIN_BACKOFF;
    let mut failing = false;
    loop {
        match next(&shared) {
            Next::Done => return,
            Next::Wait(None) => shared.wake.notified().await,
            Next::Wait(Some(deadline)) => {
                tokio::select! {
                    () = tokio::time::sleep_until(deadline.into()) => {}
                    () = shared.wake.notified() => {}
                }
            }
            Next::Post(post) => {
                let body = post.bytes;
                loop {
                    match send(&shared, body.clone()).await {
                        Ok(()) => {
                            let mut st = shared.lock();
                            st.in_flight = (0, 0);
                            st.batches.delivered += 1;
                            st.recycle(body);
                            drop(st);
                            if failing {
                                tracing::info!("the Data Director takes copies again");
                                failing = false;
                            }
                            backoff = MIN_BACKOFF;
                            break;
                        }
                        Err(Failure::Rejected(status)) => {
                            let mut st = shared.lock();
                            st.in_flight = (0, 0);
                            st.batches.rejected += 1;
                            st.dropped.rejected += post.copies as u64;
                            st.recycle(body);
                            drop(st);
                            tracing::warn!(%status, copies = post.copies, url = %shared.url, "the Data Director refused a batch of copies: dropped");
                            break;
                        }
                        Err(failure) => {
                            let wait = {
                                let mut st = shared.lock();
                                match failure {
                                    Failure::Unavailable(after) => {
                                        st.batches.unavailable += 1;
                                        after.map(|a| a.min(MAX_RETRY_AFTER))
                                    }
                                    _ => {
                                        st.batches.unreachable += 1;
                                        None
                                    }
                                }
                            }
                            .unwrap_or(backoff);
                            if !failing {
                                tracing::warn!(url = %shared.url, "the Data Director does not take copies: buffering them");
                                failing = true;
                            }
                            backoff = (backoff * 2).min(MAX_BACKOFF);
                            tokio::time::sleep(wait).await;
                        }
                    }
                }
            }
        }
    }
}

/// Under the lock: seals the current batch when its linger is over (or at the stop), then takes
/// the oldest sealed batch.
fn next(shared: &Shared) -> Next {
    let stopping = shared.stopping.load(Ordering::Acquire);
    let mut st = shared.lock();
    if st.sealed.is_empty() && st.count > 0 {
        let due = st.opened.map(|t| t + shared.linger);
        if stopping || due.is_none_or(|d| d <= Instant::now()) {
            st.seal();
        } else {
            st.sender = SenderState::Lingering;
            return Next::Wait(due);
        }
    }
    let Some(batch) = st.sealed.pop_front() else {
        st.sender = SenderState::Idle;
        return if stopping { Next::Done } else { Next::Wait(None) };
    };
    st.sender = SenderState::Posting;
    st.sealed_bytes -= batch.bytes.len();
    st.in_flight = (batch.bytes.len(), batch.copies);
    Next::Post(batch)
}

async fn send(shared: &Shared, body: Bytes) -> Result<(), Failure> {
    let rsp = shared
        .client
        .post(&shared.url)
        .header(http::header::CONTENT_TYPE, CONTENT_TYPE)
        .body(body)
        .send()
        .await
        .map_err(|e| {
            tracing::debug!(error = %e, "POST of copies failed");
            Failure::Unreachable
        })?;
    let status = rsp.status();
    if status.is_success() {
        return Ok(());
    }
    if status == StatusCode::SERVICE_UNAVAILABLE
        || status == StatusCode::TOO_MANY_REQUESTS
        || status.is_server_error()
    {
        let after = rsp.header("retry-after").and_then(|v| v.trim().parse::<u64>().ok());
        return Err(Failure::Unavailable(after.map(Duration::from_secs)));
    }
    Err(Failure::Rejected(status))
}
