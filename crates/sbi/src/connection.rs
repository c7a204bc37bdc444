//! The SBI server's connections: how many are open (capped, so accept() never takes the
//! descriptors the store needs), when an idle one is closed, and the drain at shutdown.
//!
//! Clients that time out and reconnect leave their old connections behind (issue #20); with
//! nothing to close them, they pile up until the descriptor limit. Here a connection that starts
//! no request for `idle_timeout_secs` is closed gracefully (HTTP/2 GOAWAY, HTTP/1.1 close), and
//! beyond `max_connections` a new connection is closed as soon as it is accepted.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper_util::server::graceful::GracefulConnection;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{watch, Notify};

use crate::observe::Observability;
use crate::server::BoxError;

/// Per-connection timers of a server.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// Close a connection that started no request for this long.
    pub idle: Option<Duration>,
    /// For the HTTP/1.1 request head and the HTTP/2 preface.
    pub header_read: Duration,
}

/// The open connections of one server.
pub(crate) struct Connections {
    max: i64,
    /// `sbi_connections_open`: the count the cap is checked against.
    open: Gauge,
    refused: Counter,
    accept_errors: Counter,
    stop: watch::Sender<bool>,
    closed: Notify,
}

impl Connections {
    pub fn new(max: usize, obs: &Observability) -> Arc<Self> {
        let c = Arc::new(Connections {
            max: i64::try_from(max).unwrap_or(i64::MAX),
            open: Gauge::default(),
            refused: Counter::default(),
            accept_errors: Counter::default(),
            stop: watch::channel(false).0,
            closed: Notify::new(),
        });
        obs.with_registry(|r| {
            r.register("sbi_connections_open", "SBI connections open", c.open.clone());
            r.register(
                "sbi_connections_refused",
                "SBI connections closed at once because max_connections were open",
                c.refused.clone(),
            );
            r.register(
                "sbi_accept_errors",
                "accept() failures on the SBI port (EMFILE, ENFILE, ...)",
                c.accept_errors.clone(),
            );
        });
        c
    }

    /// A place for one more connection, or `None` at the cap (counted as refused).
    pub fn admit(self: &Arc<Self>) -> Option<Permit> {
        if self.open.inc() >= self.max {
            self.open.dec();
            self.refused.inc();
            return None;
        }
        Some(Permit(self.clone()))
    }

    pub fn accept_failed(&self) {
        self.accept_errors.inc();
    }

    /// Tells every connection to finish gracefully when the server stops.
    pub fn stop_signal(&self) -> watch::Receiver<bool> {
        self.stop.subscribe()
    }

    /// Asks every connection to finish and waits for them, at most `grace`; whether all did.
    pub async fn drain(&self, grace: Duration) -> bool {
        self.stop.send_replace(true);
        let all_closed = async {
            loop {
                let notified = self.closed.notified();
                if self.open.get() <= 0 {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(grace, all_closed).await.is_ok()
    }
}

/// One open connection; dropping it frees its place.
pub(crate) struct Permit(Arc<Connections>);

impl Drop for Permit {
    fn drop(&mut self) {
        if self.0.open.dec() <= 1 {
            self.0.closed.notify_waiters();
        }
    }
}

/// Runs one connection to its end. It is shut down gracefully (in-flight requests finish) when
/// the server stops, or when no request started on it (`activity` unchanged) for a whole `idle`
/// period. PINGs do not count as activity: a connection kept only by PINGs is idle.
pub(crate) async fn drive<C>(
    conn: C,
    activity: &AtomicU64,
    idle: Option<Duration>,
    stop: &mut watch::Receiver<bool>,
) -> Result<(), BoxError>
where
    C: GracefulConnection<Error = hyper::Error>,
{
    let mut conn = std::pin::pin!(conn);
    let mut closing = *stop.borrow_and_update();
    if closing {
        Pin::as_mut(&mut conn).graceful_shutdown();
    }
    let mut seen = activity.load(Ordering::Relaxed);
    let idle_period = idle.unwrap_or(Duration::MAX);
    loop {
        let timer = tokio::time::sleep(idle_period.min(Duration::from_secs(86_400 * 365)));
        tokio::select! {
            r = conn.as_mut() => return r.map_err(BoxError::from),
            changed = stop.changed(), if !closing => {
                // A dropped sender means the server is gone: close too.
                if changed.is_err() || *stop.borrow() {
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
            () = timer, if !closing && idle.is_some() => {
                let now = activity.load(Ordering::Relaxed);
                if now == seen {
                    tracing::debug!("closing an idle connection");
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
                seen = now;
            }
        }
    }
}
