//! The UDR's state: its configuration, the store, and each service's part of the data.

use std::sync::OnceLock;

use std::sync::Arc;

use sbi::SbiRequest;

use crate::config::UdrConfig;
use crate::eir::EirStore;
use crate::policy_data::PolicyData;
use crate::slf::Slf;
use crate::stores::Stores;

pub struct Udr {
    pub config: UdrConfig,
    /// Every service's store.
    pub stores: Stores,
    /// The subscriber-to-NF-group map (SLF).
    pub slf: Slf,
    /// Diameter Sh: settings, subscriptions, the node once listening.
    pub sh: crate::sh::Sh,
    /// The 5G-EIR's equipment lists.
    pub eir: Arc<dyn EirStore>,
    /// Policy data (N36), its subscriptions and their notifications.
    pub policy: PolicyData,
    scheme: &'static str,
    /// The bound SBI address, for `Location` when a request carries no authority.
    pub local_authority: OnceLock<String>,
}

impl Udr {
    pub fn new(config: UdrConfig, stores: Stores, scheme: &'static str) -> Self {
        Udr {
            sh: crate::sh::Sh::new(config.sh.clone(), stores.sh.clone()),
            policy: PolicyData::new(config.policy.clone(), stores.policy.clone()),
            config,
            slf: Slf::new(stores.slf.clone()),
            eir: stores.eir.clone(),
            stores,
            scheme,
            local_authority: OnceLock::new(),
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
