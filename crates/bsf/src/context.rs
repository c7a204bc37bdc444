//! The BSF's state: its configuration, the binding store, the binding event subscriptions and
//! the notifier that tells subscribers about binding events.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};

use sbi::SbiRequest;
use serde_json::Value;

use crate::config::BsfConfig;
use crate::models::Keys;
use crate::store::BindingStore;
use crate::subscriptions::{BindingEvent, Notifier, Subscriptions};

pub struct Bsf {
    pub config: BsfConfig,
    /// Every binding and subscription, behind the BSF's store trait.
    pub store: Arc<dyn BindingStore>,
    pub subscriptions: Subscriptions,
    pub notifier: Notifier,
    scheme: &'static str,
    /// The bound SBI address, for `Location` when a request carries no authority.
    pub local_authority: OnceLock<String>,
    /// Bindings the audit removed since start.
    pub audit_removed: AtomicU64,
}

impl Bsf {
    pub fn new(
        config: BsfConfig,
        store: Arc<dyn BindingStore>,
        notifier: Notifier,
        scheme: &'static str,
    ) -> Self {
        Bsf {
            config,
            store,
            subscriptions: Subscriptions::default(),
            notifier,
            scheme,
            local_authority: OnceLock::new(),
            audit_removed: AtomicU64::new(0),
        }
    }

    /// The apiRoot consumers reach us at: configured, else the request's authority.
    pub fn api_root(&self, req: Option<&SbiRequest>) -> String {
        sbi::api_root(
            self.config.api_root.as_deref(),
            self.scheme,
            req,
            self.local_authority.get().map(String::as_str),
        )
    }

    /// Tells the matching subscribers about a binding event, off the request path (the
    /// notifications are sent by spawned tasks).
    pub fn binding_event(&self, event: BindingEvent, binding: &Value, keys: &Keys) {
        if self.subscriptions.is_empty() {
            return;
        }
        for (uri, body) in self.subscriptions.notifications(event, binding, keys) {
            self.notifier.send(uri, body);
        }
    }

    /// Tells the matching subscribers about a PCF for a UE binding event, off the request path.
    pub fn ue_binding_event(&self, event: BindingEvent, binding: &Value) {
        if self.subscriptions.is_empty() {
            return;
        }
        for (uri, body) in self.subscriptions.ue_notifications(event, binding) {
            self.notifier.send(uri, body);
        }
    }

    /// As [`Bsf::binding_event`] for a stored document whose keys must be recomputed.
    pub fn binding_event_stored(&self, event: BindingEvent, json: &[u8]) {
        if self.subscriptions.is_empty() {
            return;
        }
        let Ok(mut v) = serde_json::from_slice::<Value>(json) else { return };
        if let Ok(keys) = crate::models::validate_binding(&mut v) {
            self.binding_event(event, &v, &keys);
        }
    }
}
