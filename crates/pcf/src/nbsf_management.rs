//! The PCF's Nbsf_Management consumer (TS 29.521, N7-Nbsf): with `[pcf.bsf] enabled`, an SM
//! policy association with a UE address registers a PCF binding at create (so AFs and the Rx
//! proxy find this PCF by the UE's address) and deregisters it at delete. An update that
//! changes the UE's address (a new `ipv4Address` or `ipv6AddressPrefix`, or a
//! `relIpv4Address` / `relIpv6AddressPrefix`) moves the binding to the new address.
//!
//! A binding that cannot be registered does not fail the create: the SMF's session works, only
//! AF sessions for that address will not find this PCF. It is logged and counted, as is a
//! deregistration that fails (the BSF's audit removes what is left).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use http::{header, StatusCode};
use nrf_client::NrfClient;
use sbi::client::SbiClient;
use serde_json::{json, Map, Value};

use crate::config::BsfConfig;
use crate::producers::Producers;

/// Outcomes, for `/metrics`.
#[derive(Debug, Default)]
pub struct Stats {
    pub registered: AtomicU64,
    pub register_failed: AtomicU64,
    pub deregistered: AtomicU64,
    pub deregister_failed: AtomicU64,
}

/// A session's UE IPv4 address and IPv6 prefix, as its context has them.
pub type Addresses = (Option<Value>, Option<Value>);

pub struct Bindings {
    config: BsfConfig,
    client: SbiClient,
    bsfs: Producers,
    /// What the binding says of this PCF: its nfInstanceId and SBI endpoint (known once bound).
    own: OnceLock<Map<String, Value>>,
    pub stats: Stats,
}

impl Bindings {
    pub fn new(config: BsfConfig, client: SbiClient) -> Result<Self, String> {
        let bsfs = Producers::new("BSF", "nbsf-management", config.api_root.as_deref())?;
        Ok(Bindings { config, client, bsfs, own: OnceLock::new(), stats: Stats::default() })
    }

    pub fn use_nrf(&self, nrf: NrfClient) {
        self.bsfs.use_nrf(nrf);
    }

    /// This PCF in its bindings: `pcfId` and `pcfIpEndPoints` (its SBI address and port), and
    /// `pcfDiamHost` / `pcfDiamRealm` when it serves Diameter (`diameter`: its Origin-Host and
    /// Origin-Realm), which a BSF's Rx proxy routes an AF's AAR by (TS 29.521 §5.6.2.2).
    pub fn set_own(
        &self,
        instance_id: &str,
        ipv4: std::net::Ipv4Addr,
        port: u16,
        diameter: Option<(&str, &str)>,
    ) {
        let mut m = Map::new();
        m.insert("pcfId".into(), Value::from(instance_id));
        m.insert(
            "pcfIpEndPoints".into(),
            json!([{"ipv4Address": ipv4.to_string(), "transport": "TCP", "port": port}]),
        );
        if let Some((host, realm)) = diameter {
            m.insert("pcfDiamHost".into(), Value::from(host));
            m.insert("pcfDiamRealm".into(), Value::from(realm));
        }
        let _ = self.own.set(m);
    }

    pub fn is_on(&self) -> bool {
        self.config.enabled && self.bsfs.known()
    }

    /// The PcfBinding of an SmPolicyContextData, when it has a UE address to bind.
    pub fn binding_of(&self, context: &Value) -> Option<Value> {
        let c = context.as_object()?;
        if !c.contains_key("ipv4Address") && !c.contains_key("ipv6AddressPrefix") {
            return None;
        }
        let mut b = self.own.get().cloned().unwrap_or_default();
        for (from, to) in [
            ("supi", "supi"),
            ("gpsi", "gpsi"),
            ("ipv4Address", "ipv4Addr"),
            ("ipDomain", "ipDomain"),
            ("ipv6AddressPrefix", "ipv6Prefix"),
            ("dnn", "dnn"),
            ("sliceInfo", "snssai"),
        ] {
            if let Some(v) = c.get(from) {
                b.insert(to.into(), v.clone());
            }
        }
        Some(Value::Object(b))
    }

    /// Registers the binding of `context`; its URI at the BSF, or None (none to register, the
    /// BSF off or failing: counted).
    pub async fn register(&self, context: &Value) -> Option<String> {
        if !self.config.enabled {
            return None;
        }
        let binding = self.binding_of(context)?;
        let supi = context.get("supi").and_then(Value::as_str);
        let bsfs = match self.bsfs.find(supi).await {
            Ok(b) if b.is_empty() => return None,
            Ok(b) => b,
            Err(e) => return self.failed(&e),
        };
        let sent = self
            .client
            .post("/nbsf-management/v1/pcfBindings")
            .json(&binding)
            .max_rsp_time(Duration::from_millis(self.config.timeout_ms))
            .send_with_alternates(&bsfs)
            .await;
        match sent {
            Ok(r) if r.status() == StatusCode::CREATED => {
                let Some(loc) = r.header(header::LOCATION.as_str()) else {
                    return self.failed("the BSF's 201 has no Location");
                };
                self.stats.registered.fetch_add(1, Ordering::Relaxed);
                Some(loc.to_string())
            }
            Ok(r) => self.failed(&format!("the BSF answered {}", r.status())),
            Err(e) => self.failed(&e.to_string()),
        }
    }

    fn failed(&self, why: &str) -> Option<String> {
        tracing::warn!(%why, "PCF binding not registered at the BSF");
        self.stats.register_failed.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// The UE addresses a binding of `context` holds (IPv4, IPv6 prefix).
    pub fn addresses(context: &Value) -> Addresses {
        (context.get("ipv4Address").cloned(), context.get("ipv6AddressPrefix").cloned())
    }

    /// After an update changed the session's UE address (`before`, from
    /// [`Bindings::addresses`] of the context before it): the old binding deregistered and one
    /// for the new address registered, so AFs find this PCF by the address the UE has now.
    /// Returns the binding the association keeps.
    pub async fn rebind(
        &self,
        before: Addresses,
        after: &Value,
        binding: Option<String>,
    ) -> Option<String> {
        if !self.config.enabled
            || (after.get("ipv4Address"), after.get("ipv6AddressPrefix"))
                == (before.0.as_ref(), before.1.as_ref())
        {
            return binding;
        }
        let old = async {
            if let Some(uri) = &binding {
                self.deregister(uri).await;
            }
        };
        let ((), new) = tokio::join!(old, self.register(after));
        new
    }

    /// Deregisters the binding at `uri` (what [`Bindings::register`] returned).
    pub async fn deregister(&self, uri: &str) {
        let timeout = Duration::from_millis(self.config.timeout_ms);
        match crate::producers::delete(&self.client, uri, timeout).await {
            Ok(()) => {
                self.stats.deregistered.fetch_add(1, Ordering::Relaxed);
            }
            Err(why) => {
                tracing::warn!(%uri, %why, "PCF binding not deregistered at the BSF");
                self.stats.deregister_failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
