//! Where the PCF's producers are: a configured apiRoot, else the NRF's answer to an
//! NFDiscover for the NF type and service (cached as its validity period allows). Each call
//! gets the producers in order; the SBI client fails over to the next when one cannot be
//! reached.

use std::sync::OnceLock;
use std::time::Duration;

use http::{StatusCode, Uri};
use nrf_client::{DiscoveryQuery, NrfClient};

pub struct Producers {
    nf_type: &'static str,
    service: &'static str,
    fixed: Vec<Uri>,
    nrf: OnceLock<NrfClient>,
}

impl Producers {
    /// `api_root`, when configured, is the only producer; else they are discovered.
    pub fn new(
        nf_type: &'static str,
        service: &'static str,
        api_root: Option<&str>,
    ) -> Result<Self, String> {
        let fixed = match api_root {
            Some(root) => vec![root
                .parse::<Uri>()
                .map_err(|e| format!("{nf_type} api_root {root:?}: {e}"))?],
            None => Vec::new(),
        };
        Ok(Producers { nf_type, service, fixed, nrf: OnceLock::new() })
    }

    /// Discovery goes through this NRF client (the PCF's own registration).
    pub fn use_nrf(&self, nrf: NrfClient) {
        let _ = self.nrf.set(nrf);
    }

    /// Whether there is a producer to ask: configured, or an NRF to find one.
    pub fn known(&self) -> bool {
        !self.fixed.is_empty() || self.nrf.get().is_some()
    }

    /// The producers for `supi` (a discovery parameter when given), best first; empty when
    /// none is configured and there is no NRF.
    pub async fn find(&self, supi: Option<&str>) -> Result<Vec<Uri>, String> {
        if !self.fixed.is_empty() {
            return Ok(self.fixed.clone());
        }
        let Some(nrf) = self.nrf.get() else { return Ok(Vec::new()) };
        let mut query = DiscoveryQuery::new(self.nf_type, "PCF").service(self.service);
        if let Some(s) = supi {
            query = query.supi(s);
        }
        let found =
            nrf.discover(&query).await.map_err(|e| format!("{} discovery: {e}", self.nf_type))?;
        let roots: Vec<Uri> =
            found.api_roots(self.service).iter().filter_map(|r| r.parse().ok()).collect();
        if roots.is_empty() {
            return Err(format!("the NRF knows no {} serving {}", self.nf_type, self.service));
        }
        Ok(roots)
    }
}

/// DELETEs a resource the PCF created at a producer (a binding, a subscription): done when the
/// producer answers 2xx, or 404 (it is gone already: an audit, an operator); else why not.
pub async fn delete(
    client: &sbi::client::SbiClient,
    uri: &str,
    timeout: Duration,
) -> Result<(), String> {
    match client.delete(uri).max_rsp_time(timeout).send().await {
        Ok(r) if r.status().is_success() || r.status() == StatusCode::NOT_FOUND => Ok(()),
        Ok(r) => Err(format!("the producer answered {}", r.status())),
        Err(e) => Err(e.to_string()),
    }
}
