//! The size and connection limits of an NF's Diameter node, as its configuration section names
//! them (`[bsf.rx.limits]`, `[udr.sh.limits]`): one definition, so every NF with a Diameter
//! port exposes the same keys, defaults and checks (docs/diameter.md).

use std::collections::BTreeMap;

use diameter::NodeConfig;
use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiameterLimits {
    /// Longest first message (CER) a connecting peer may declare, bytes; longer closes the
    /// connection before its body is read. Default 65536 (a CER is well under 2 KiB).
    #[serde(default = "default_max_cer_bytes")]
    pub max_cer_bytes: usize,
    /// Longest message after CER, bytes; a longer request is answered 5015
    /// DIAMETER_INVALID_MESSAGE_LENGTH and its body skipped unread. Default 1048576.
    #[serde(default = "default_max_message_bytes")]
    pub max_message_bytes: usize,
    /// `max_message_bytes` per Application-Id (a table: `16777236 = 65536`). Default none.
    #[serde(default)]
    pub max_message_bytes_per_application: BTreeMap<String, usize>,
    /// Connections accepted but not through CER/CEA yet; beyond it a new one is closed at once.
    /// Open peers do not count. Default 64.
    #[serde(default = "default_max_connections_before_cer")]
    pub max_connections_before_cer: usize,
}

impl Default for DiameterLimits {
    fn default() -> Self {
        DiameterLimits {
            max_cer_bytes: default_max_cer_bytes(),
            max_message_bytes: default_max_message_bytes(),
            max_message_bytes_per_application: BTreeMap::new(),
            max_connections_before_cer: default_max_connections_before_cer(),
        }
    }
}

fn default_max_cer_bytes() -> usize {
    64 * 1024
}
fn default_max_message_bytes() -> usize {
    1 << 20
}
fn default_max_connections_before_cer() -> usize {
    64
}

impl DiameterLimits {
    /// `max_message_bytes_per_application` with its keys read as Application-Ids; `section`
    /// names the configuration section in the error.
    pub fn per_application(&self, section: &str) -> Result<Vec<(u32, usize)>, String> {
        self.max_message_bytes_per_application
            .iter()
            .map(|(app, max)| match app.parse::<u32>() {
                Ok(id) => Ok((id, *max)),
                Err(_) => Err(format!(
                    "{section}.max_message_bytes_per_application: {app:?} is not an Application-Id"
                )),
            })
            .collect()
    }

    /// Rejects limits that cannot work, naming `section` and the key.
    pub fn validate(&self, section: &str) -> Result<(), String> {
        // A Diameter header is 20 bytes; the Message Length field holds 24 bits.
        let sizes =
            [("max_cer_bytes", self.max_cer_bytes), ("max_message_bytes", self.max_message_bytes)]
                .into_iter()
                .chain(
                    self.per_application(section)?
                        .into_iter()
                        .map(|(_, m)| ("max_message_bytes_per_application", m)),
                );
        for (key, n) in sizes {
            if !(20..=0x00ff_ffff).contains(&n) {
                return Err(format!("{section}.{key}: {n} is not between 20 and 16777215"));
            }
        }
        if self.max_connections_before_cer == 0 {
            return Err(format!("{section}.max_connections_before_cer must be at least 1"));
        }
        Ok(())
    }

    /// Sets them on a node's configuration (validated first).
    pub fn apply(&self, section: &str, nc: &mut NodeConfig) -> Result<(), String> {
        self.validate(section)?;
        nc.max_cer_len = self.max_cer_bytes;
        nc.max_message_len = self.max_message_bytes;
        nc.max_message_len_per_application = self.per_application(section)?;
        nc.max_connections_before_cer = self.max_connections_before_cer;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_parse_and_bounds() {
        let d = DiameterLimits::default();
        assert_eq!((d.max_cer_bytes, d.max_message_bytes), (65_536, 1_048_576));
        assert_eq!(d.max_connections_before_cer, 64);
        assert!(d.validate("x").is_ok());
        let mut nc = NodeConfig::new("a.example", "example");
        let custom = DiameterLimits {
            max_cer_bytes: 8192,
            max_message_bytes_per_application: BTreeMap::from([("16777236".into(), 65_536)]),
            max_connections_before_cer: 16,
            ..DiameterLimits::default()
        };
        custom.apply("x", &mut nc).unwrap();
        assert_eq!(nc.max_cer_len, 8192);
        assert_eq!(nc.max_message_len_per_application, vec![(16_777_236, 65_536)]);
        assert_eq!(nc.max_connections_before_cer, 16);
        for bad in [
            DiameterLimits { max_cer_bytes: 10, ..DiameterLimits::default() },
            DiameterLimits { max_message_bytes: 1 << 24, ..DiameterLimits::default() },
            DiameterLimits { max_connections_before_cer: 0, ..DiameterLimits::default() },
            DiameterLimits {
                max_message_bytes_per_application: BTreeMap::from([("rx".into(), 100)]),
                ..DiameterLimits::default()
            },
        ] {
            let e = bad.validate("bsf.rx.limits").unwrap_err();
            assert!(e.starts_with("bsf.rx.limits"), "{e}");
        }
    }
}
