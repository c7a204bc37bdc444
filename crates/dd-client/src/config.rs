//! `[<nf>.copy]`: whether and what an NF copies to the Data Director (`[pcf.copy]`, `[bsf.copy]`,
//! `[udr.copy]`, `[nrf.copy]`). Every field has a default, so `enabled = true` alone copies
//! every message at the four trigger points to a Data Director on this host; unknown keys are
//! errors. docs/dd.md ("Message copy") explains each setting.
//!
//! ```toml
//! [pcf.copy]
//! enabled = true
//! uri = "http://127.0.0.1:7004"
//! triggers = ["ingress_request", "ingress_response", "egress_request", "egress_response"]
//! services = ["npcf-smpolicycontrol", "Gx"]
//! batch_size = 256
//! linger_ms = 2
//! buffer_bytes = 67108864
//! ```

use sbi::InvalidParam;
use serde::Deserialize;

use crate::envelope::TriggerPoint;

/// The path of the ingest API under [`CopyConfig::uri`].
pub const INGEST_PATH: &str = "/dd-ingest/v1/copies";

/// Smallest `buffer_bytes`: a few batches of ordinary SBI messages.
pub const MIN_BUFFER_BYTES: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CopyConfig {
    /// Copy messages to the Data Director. Default false: no tap is installed and copying costs
    /// nothing.
    #[serde(default)]
    pub enabled: bool,
    /// The Data Director's apiRoot (`http://host:port`, h2c with prior knowledge, or `https://`);
    /// batches are POSTed to `<uri>/dd-ingest/v1/copies`. Default `http://127.0.0.1:7004`.
    #[serde(default = "default_uri")]
    pub uri: String,
    /// The trigger points copied, any of `ingress_request`, `ingress_response` (what the NF
    /// serves and answers), `egress_request`, `egress_response` (what it sends to other NFs or
    /// Diameter peers and the answers it gets). Default all four.
    #[serde(default = "default_triggers")]
    pub triggers: Vec<String>,
    /// The services copied: SBI service names as in the NF's routes (`npcf-smpolicycontrol`,
    /// `nudr-dr`; the first segment of a request's path) and Diameter application names (`Gx`,
    /// `Rx`, `Sy`, `Sd`, `Sh`). Empty (the default): every service.
    #[serde(default)]
    pub services: Vec<String>,
    /// Copies per batch: a batch is sent once it holds this many, or holds 1 MiB, or its first
    /// copy has waited `linger_ms`. Default 256.
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
    /// Longest a copy waits for its batch to fill, milliseconds. Default 2.
    #[serde(default = "default_linger_ms")]
    pub linger_ms: u64,
    /// Bytes of copies kept while the Data Director is slow, unreachable or answers 503; the
    /// copies that would go beyond it are dropped and counted (`dd_copies_dropped_total{reason=
    /// "buffer_full"}`). At least 65536. Default 64 MiB.
    #[serde(default = "default_buffer_bytes")]
    pub buffer_bytes: usize,
}

fn default_uri() -> String {
    "http://127.0.0.1:7004".into()
}
fn default_triggers() -> Vec<String> {
    ALL_TRIGGERS.iter().map(|t| t.as_str().to_owned()).collect()
}
fn default_batch_size() -> usize {
    256
}
fn default_linger_ms() -> u64 {
    2
}
fn default_buffer_bytes() -> usize {
    64 << 20
}

pub(crate) const ALL_TRIGGERS: [TriggerPoint; 4] = [
    TriggerPoint::IngressRequest,
    TriggerPoint::IngressResponse,
    TriggerPoint::EgressRequest,
    TriggerPoint::EgressResponse,
];

impl Default for CopyConfig {
    fn default() -> Self {
        CopyConfig {
            enabled: false,
            uri: default_uri(),
            triggers: default_triggers(),
            services: Vec::new(),
            batch_size: default_batch_size(),
            linger_ms: default_linger_ms(),
            buffer_bytes: default_buffer_bytes(),
        }
    }
}

impl CopyConfig {
    /// Every invalid setting, named by its key (`triggers[1]`), so an NF's start can list them
    /// all and the Data Director's admin API could answer 400 with them.
    pub fn validate(&self) -> Result<(), Vec<InvalidParam>> {
        let mut bad = Vec::new();
        match self.uri.parse::<http::Uri>() {
            Ok(u)
                if matches!(u.scheme_str(), Some("http" | "https"))
                    && u.authority().is_some()
                    && matches!(u.path(), "" | "/")
                    && u.query().is_none() => {}
            _ => bad.push(InvalidParam::new(
                "uri",
                format!("{:?} is not an apiRoot (http://host:port or https://host:port)", self.uri),
            )),
        }
        if self.triggers.is_empty() {
            bad.push(InvalidParam::new(
                "triggers",
                "no trigger point: list at least one, or set enabled = false",
            ));
        }
        for (i, t) in self.triggers.iter().enumerate() {
            if TriggerPoint::parse(t).is_none() {
                bad.push(InvalidParam::new(
                    format!("triggers[{i}]"),
                    format!(
                        "{t:?} is not one of ingress_request, ingress_response, egress_request, \
                         egress_response"
                    ),
                ));
            }
        }
        for (i, s) in self.services.iter().enumerate() {
            if s.trim().is_empty() || s.contains('/') {
                bad.push(InvalidParam::new(
                    format!("services[{i}]"),
                    format!("{s:?} is not a service name (npcf-smpolicycontrol, Gx, ...)"),
                ));
            }
        }
        if !(1..=65_536).contains(&self.batch_size) {
            bad.push(InvalidParam::new("batch_size", "must be 1..=65536 copies"));
        }
        if !(1..=10_000).contains(&self.linger_ms) {
            bad.push(InvalidParam::new("linger_ms", "must be 1..=10000 milliseconds"));
        }
        if self.buffer_bytes < MIN_BUFFER_BYTES {
            bad.push(InvalidParam::new(
                "buffer_bytes",
                format!("must be at least {MIN_BUFFER_BYTES} bytes"),
            ));
        }
        if bad.is_empty() {
            Ok(())
        } else {
            Err(bad)
        }
    }

    /// The configured trigger points (after [`CopyConfig::validate`]).
    pub fn trigger_points(&self) -> impl Iterator<Item = TriggerPoint> + '_ {
        self.triggers.iter().filter_map(|t| TriggerPoint::parse(t))
    }

    /// Where batches are POSTed.
    pub fn ingest_url(&self) -> String {
        format!("{}{INGEST_PATH}", self.uri.trim_end_matches('/'))
    }
}

/// `[x.copy] a: why; b: why`, for an NF's start-up error.
pub fn describe(section: &str, bad: &[InvalidParam]) -> String {
    let list: Vec<String> = bad
        .iter()
        .map(|p| format!("{}: {}", p.param, p.reason.as_deref().unwrap_or("invalid")))
        .collect();
    format!("[{section}] {}", list.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example_parses_and_is_valid() {
        let doc = include_str!("config.rs");
        let example: String = doc
            .lines()
            .skip_while(|l| !l.starts_with("//! [pcf.copy]"))
            .skip(1)
            .take_while(|l| !l.starts_with("//! ```"))
            .map(|l| format!("{}\n", l.trim_start_matches("//! ")))
            .collect();
        let c: CopyConfig = toml::from_str(&example).unwrap();
        assert!(c.enabled);
        assert_eq!(c.services, ["npcf-smpolicycontrol", "Gx"]);
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.trigger_points().count(), 4);
        assert_eq!(c.ingest_url(), "http://127.0.0.1:7004/dd-ingest/v1/copies");
    }

    #[test]
    fn defaults_copy_nothing_until_enabled_and_everything_once_enabled() {
        let c: CopyConfig = toml::from_str("").unwrap();
        assert_eq!(c, CopyConfig::default());
        assert!(!c.enabled);
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.trigger_points().collect::<Vec<_>>(), ALL_TRIGGERS);
        assert_eq!((c.batch_size, c.linger_ms, c.buffer_bytes), (256, 2, 64 << 20));
        assert!(c.services.is_empty());
    }

    #[test]
    fn unknown_keys_are_refused() {
        assert!(toml::from_str::<CopyConfig>("enable = true").is_err());
        assert!(toml::from_str::<CopyConfig>("batch = 3").is_err());
    }

    #[test]
    fn every_invalid_setting_is_named() {
        let c = CopyConfig {
            enabled: true,
            uri: "127.0.0.1:7004".into(),
            triggers: vec!["ingress_request".into(), "egress".into()],
            services: vec!["".into(), "Gx".into()],
            batch_size: 0,
            linger_ms: 0,
            buffer_bytes: 10,
        };
        let bad = c.validate().unwrap_err();
        let params: Vec<&str> = bad.iter().map(|p| p.param.as_str()).collect();
        assert_eq!(
            params,
            ["uri", "triggers[1]", "services[0]", "batch_size", "linger_ms", "buffer_bytes"]
        );
        let text = describe("pcf.copy", &bad);
        assert!(text.starts_with("[pcf.copy] uri: "), "{text}");
        assert!(text.contains("triggers[1]: \"egress\" is not one of"), "{text}");
        let none = CopyConfig { triggers: vec![], ..CopyConfig::default() };
        assert_eq!(none.validate().unwrap_err()[0].param, "triggers");
        for uri in ["http://dd:7004/x", "ftp://dd:7004", "http://dd:7004?a=1"] {
            let c = CopyConfig { uri: uri.into(), ..CopyConfig::default() };
            assert_eq!(c.validate().unwrap_err()[0].param, "uri", "{uri}");
        }
        let c = CopyConfig { uri: "https://dd.example:7004/".into(), ..CopyConfig::default() };
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.ingest_url(), "https://dd.example:7004/dd-ingest/v1/copies");
    }
}
