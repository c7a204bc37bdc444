//! The PCF's state: its configuration, the policy project in force, the store, and the
//! counters its metrics export.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};

use policy::Deployed;
use sbi::SbiRequest;

use crate::config::PcfConfig;
use crate::store::PcfStore;

pub struct Pcf {
    pub config: PcfConfig,
    /// The policy project in force, swapped atomically by a deploy.
    pub policy: Arc<Deployed>,
    pub store: Arc<dyn PcfStore>,
    scheme: &'static str,
    /// The bound SBI address, for `Location` when a request carries no authority.
    pub local_authority: OnceLock<String>,
    pub counters: Counters,
}

/// What the PCF counts besides the engine's own counters (policy::Project::counters).
#[derive(Default)]
pub struct Counters {
    /// Deploys through the admin endpoint or a file change that put a version in force.
    pub deploys_ok: AtomicU64,
    /// Deploys refused because the project failed its check.
    pub deploys_refused: AtomicU64,
}

impl Pcf {
    pub fn new(
        config: PcfConfig,
        policy: Arc<Deployed>,
        store: Arc<dyn PcfStore>,
        scheme: &'static str,
    ) -> Self {
        Pcf {
            config,
            policy,
            store,
            scheme,
            local_authority: OnceLock::new(),
            counters: Counters::default(),
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
}
