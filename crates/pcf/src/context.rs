//! The PCF's state: its configuration, the policy project in force and the store.

use std::sync::{Arc, OnceLock};

use policy::Deployed;
use sbi::SbiRequest;

use crate::collision::Collisions;
use crate::config::PcfConfig;
use crate::nbsf_management::Bindings;
use crate::nchf_spendinglimitcontrol::Chf;
use crate::notify::Notifier;
use crate::nudr_policy_data::PolicyData;
use crate::store::PcfStore;

pub struct Pcf {
    pub config: PcfConfig,
    /// The policy project in force, swapped atomically by a deploy.
    pub policy: Arc<Deployed>,
    pub store: Arc<dyn PcfStore>,
    /// The subscriber's policy data (the UDR, N36).
    pub policy_data: PolicyData,
    /// One request per subscriber at a time.
    pub collisions: Collisions,
    /// PCF bindings at the BSF.
    pub bindings: Bindings,
    /// UpdateNotify to SMFs.
    pub notifier: Notifier,
    /// Spending limit subscriptions at the CHF (N28).
    pub chf: Chf,
    scheme: &'static str,
    /// The bound SBI address, for `Location` when a request carries no authority.
    pub local_authority: OnceLock<String>,
}

impl Pcf {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: PcfConfig,
        policy: Arc<Deployed>,
        store: Arc<dyn PcfStore>,
        policy_data: PolicyData,
        bindings: Bindings,
        notifier: Notifier,
        chf: Chf,
        scheme: &'static str,
    ) -> Self {
        Pcf {
            config,
            policy,
            store,
            policy_data,
            collisions: Collisions::default(),
            bindings,
            notifier,
            chf,
            scheme,
            local_authority: OnceLock::new(),
        }
    }

    /// Holds `supi` for this request (collision control).
    pub async fn hold(&self, supi: &str) -> crate::collision::Held<'_> {
        self.collisions
            .hold(supi, std::time::Duration::from_millis(self.config.collision_lease_ms))
            .await
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
