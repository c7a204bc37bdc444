//! The connection pool: per producer (`scheme://authority`) `connections_per_producer` slots,
//! each holding at most one live HTTP/2 connection, picked round robin.
//!
//! A request clones the slot's `h2` `SendRequest` (a handle on the connection, no task hop
//! and no channel), opens its stream on it and reads the answer itself; the connection's I/O
//! runs in its own task (`connect::drive`). Only the first request of a slot, or the first after
//! a connection was lost, connects; concurrent ones wait for that connect behind the slot's gate.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use bytes::Bytes;
use h2::client::SendRequest;
use http::uri::Authority;

use super::connect::Connector;
use super::BoxError;

pub(super) struct Pool {
    connector: Connector,
    per_producer: usize,
    /// FxHash: `Authority` hashes byte by byte (lower-cased), which under the default SipHash
    /// cost about a thousand instructions per request; the keys are the few producers this NF
    /// calls, from its configuration and the NRF, so no flooding defence is needed here.
    producers: RwLock<HashMap<(bool, Authority), Arc<Producer>, rustc_hash::FxBuildHasher>>,
}

/// The slots of one producer.
pub(super) struct Producer {
    slots: Box<[Arc<Slot>]>,
    next: AtomicUsize,
}

/// At most one live connection; `gate` lets one request at a time connect.
#[derive(Default)]
pub(super) struct Slot {
    live: Mutex<Option<Live>>,
    gate: tokio::sync::Mutex<()>,
    /// Connect attempts made, and the error of the last failed one: a request that waited at
    /// the gate while another's connect failed fails with it instead of trying again (so N
    /// waiting requests to a black hole do not take N connect timeouts one after the other).
    attempts: AtomicU64,
    last_failure: Mutex<Option<Arc<str>>>,
}

/// A connection as its slot holds it.
#[derive(Clone)]
pub(super) struct Live {
    pub send: SendRequest<Bytes>,
    pub state: Arc<ConnState>,
}

/// What the connection's driver reads to decide it is idle.
#[derive(Default)]
pub(super) struct ConnState {
    /// Requests leased and not yet finished (the answer body read or the request abandoned).
    in_flight: AtomicUsize,
    /// Requests ever leased; an unchanged count over a period means no activity.
    started: AtomicU64,
}

impl ConnState {
    pub(super) fn started(&self) -> u64 {
        self.started.load(Ordering::Relaxed)
    }
}

/// One request's use of a connection; counts as in flight until dropped.
pub(super) struct Lease {
    pub send: SendRequest<Bytes>,
    pub state: Arc<ConnState>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.state.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Pool {
    pub(super) fn new(connector: Connector, per_producer: usize) -> Self {
        Self { connector, per_producer, producers: RwLock::default() }
    }

    pub(super) fn connector(&self) -> &Connector {
        &self.connector
    }

    /// The next slot (round robin) of producer `(https, authority)`.
    pub(super) fn slot(&self, https: bool, authority: &Authority) -> Arc<Slot> {
        let key = (https, authority.clone());
        let found = self.producers.read().unwrap_or_else(|e| e.into_inner()).get(&key).cloned();
        let producer = match found {
            Some(p) => p,
            None => self
                .producers
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .entry(key)
                .or_insert_with(|| {
                    Arc::new(Producer {
                        slots: (0..self.per_producer).map(|_| Arc::default()).collect(),
                        next: AtomicUsize::new(0),
                    })
                })
                .clone(),
        };
        let i = match producer.slots.len() {
            1 => 0,
            n => producer.next.fetch_add(1, Ordering::Relaxed) % n,
        };
        producer.slots[i].clone()
    }
}

impl Slot {
    /// The live connection, or a new one. Errors mean no connection could be made.
    pub(super) async fn lease(
        self: &Arc<Self>,
        pool: &Pool,
        https: bool,
        authority: &Authority,
    ) -> Result<Lease, BoxError> {
        if let Some(l) = self.try_lease() {
            return Ok(l);
        }
        let attempts_before = self.attempts.load(Ordering::Acquire);
        let _gate = self.gate.lock().await;
        if let Some(l) = self.try_lease() {
            return Ok(l);
        }
        if self.attempts.load(Ordering::Acquire) != attempts_before {
            let why = self.lock_failure().clone();
            if let Some(why) = why {
                return Err(format!("connecting (attempt of a concurrent request): {why}").into());
            }
        }
        self.attempts.fetch_add(1, Ordering::AcqRel);
        // Boxed: the connect future (TCP, TLS and HTTP/2 handshakes, ~4 KB) would otherwise be
        // part of every request's future, and every request future is moved (copied whole) into
        // the box its server handler runs in, though only a slot's first request connects.
        match Box::pin(pool.connector().connect(https, authority, self)).await {
            Ok(live) => {
                *self.lock_failure() = None;
                *self.lock_live() = Some(live);
                self.try_lease().ok_or_else(|| "connection closed as soon as opened".into())
            }
            Err(e) => {
                *self.lock_failure() = Some(super::ErrorChain(&*e).to_string().into());
                Err(e)
            }
        }
    }

    fn try_lease(&self) -> Option<Lease> {
        let live = self.lock_live();
        let live = live.as_ref()?;
        // Incremented under the slot lock, so `release_if_idle` (also under it) never lets a
        // connection go while a lease on it is being taken.
        live.state.in_flight.fetch_add(1, Ordering::AcqRel);
        live.state.started.fetch_add(1, Ordering::Relaxed);
        Some(Lease { send: live.send.clone(), state: live.state.clone() })
    }

    /// Drops the slot's handle on the connection of `state` if it is still the slot's.
    pub(super) fn forget(&self, state: &Arc<ConnState>) {
        let mut live = self.lock_live();
        if live.as_ref().is_some_and(|l| Arc::ptr_eq(&l.state, state)) {
            *live = None;
        }
    }

    /// Drops the slot's handle on the connection of `state` if no request uses it; true when
    /// dropped.
    pub(super) fn release_if_idle(&self, state: &Arc<ConnState>) -> bool {
        let mut live = self.lock_live();
        let ours = live.as_ref().is_some_and(|l| Arc::ptr_eq(&l.state, state));
        if ours && state.in_flight.load(Ordering::Acquire) == 0 {
            *live = None;
            return true;
        }
        false
    }

    fn lock_live(&self) -> std::sync::MutexGuard<'_, Option<Live>> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_failure(&self) -> std::sync::MutexGuard<'_, Option<Arc<str>>> {
        self.last_failure.lock().unwrap_or_else(|e| e.into_inner())
    }
}
