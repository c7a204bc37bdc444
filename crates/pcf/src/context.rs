//! The PCF's state: its configuration, the policy project in force and the store.

use std::sync::{Arc, OnceLock};

use policy::Deployed;
use sbi::SbiRequest;

use crate::collision::Collisions;
use crate::config::PcfConfig;
use crate::namf_communication::Amf;
use crate::nbsf_management::Bindings;
use crate::nchf_spendinglimitcontrol::Chf;
use crate::notify::Notifier;
use crate::npcf_uepolicycontrol::UePolicy;
use crate::nudr_policy_data::PolicyData;
use crate::policy_versions::PolicyVersions;
use crate::store::PcfStore;

pub struct Pcf {
    pub config: PcfConfig,
    /// The policy project in force, swapped atomically by a deploy.
    pub policy: Arc<Deployed>,
    /// The policy project versions kept, and which is in force (`policy` holds it compiled).
    pub versions: PolicyVersions,
    pub store: Arc<dyn PcfStore>,
    /// The subscriber's policy data (the UDR, N36).
    pub policy_data: PolicyData,
    /// One request per subscriber at a time.
    pub collisions: Collisions,
    /// PCF bindings at the BSF.
    pub bindings: Bindings,
    /// UpdateNotify to SMFs (and AF notifications).
    pub notifier: Notifier,
    /// What the session audit found.
    pub audit: crate::audit::Stats,
    /// Application sessions' counters (N5).
    pub apps: crate::app_session::Stats,
    /// URSP delivery to UEs through their AMF.
    pub ue_policy: UePolicy,
    /// Spending limit subscriptions at the CHF (N28).
    pub chf: Chf,
    scheme: &'static str,
    /// The bound SBI address, for `Location` when a request carries no authority.
    pub local_authority: OnceLock<String>,
    /// The Diameter node serving Gx (`[pcf.diameter]`), once started: what RARs go out on.
    pub gx: OnceLock<diameter::DiameterNode>,
    /// Rx sessions aborted (ASR sent) whose AF has not yet sent its STR.
    pub rx_aborted: crate::rx::Aborted,
    /// Policy Event Records and the subscriber activity log (`[pcf.per]`, `[pcf.sal]`).
    pub per: crate::per::Recorder,
    /// Sy sessions with the OCS (`[pcf.sy]`).
    pub sy: crate::sy::Sy,
    /// Subscriber profiles from LDAP (`[pcf.ldap]`).
    pub ldap: Arc<crate::ldap::Ldap>,
    /// The subscribers' accumulated usage (`[pcf.usage]`).
    pub usage: crate::usage::Usage,
    /// Gx and Rx requests sent again, and those never answered (crate::resend).
    pub resend: crate::resend::Stats,
    /// TDF sessions of Gx sessions (`[pcf.sd]`).
    pub sd: Arc<crate::sd::Sd>,
}

impl Pcf {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: PcfConfig,
        policy: (Arc<Deployed>, PolicyVersions),
        store: Arc<dyn PcfStore>,
        policy_data: PolicyData,
        bindings: Bindings,
        notifier: Notifier,
        chf: Chf,
        scheme: &'static str,
    ) -> Self {
        // The AMF is reached with the same SBI client as the SMFs.
        let ue_policy = UePolicy::new(Amf::new(config.amf.clone(), notifier.client().clone()));
        let sy = crate::sy::Sy::new(config.sy.clone());
        let ldap = Arc::new(crate::ldap::Ldap::new(config.ldap.clone()));
        let usage = crate::usage::Usage::new(config.usage.enabled);
        let sd = Arc::new(crate::sd::Sd::new(config.sd.clone()));
        let (policy, versions) = policy;
        Pcf {
            config,
            policy,
            versions,
            store,
            policy_data,
            collisions: Collisions::default(),
            bindings,
            notifier,
            audit: Default::default(),
            apps: Default::default(),
            ue_policy,
            chf,
            scheme,
            local_authority: OnceLock::new(),
            gx: OnceLock::new(),
            rx_aborted: Default::default(),
            per: Default::default(),
            sy,
            ldap,
            usage,
            resend: Default::default(),
            sd,
        }
    }

    /// With its decisions recorded by `per` (off by default).
    pub fn with_per(mut self, per: crate::per::Recorder) -> Self {
        self.per = per;
        self
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
