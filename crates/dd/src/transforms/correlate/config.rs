//! A correlation's configuration: the JSON the admin API takes (`/dd-admin/v1/correlations`).
//!
//! ```json
//! {
//!   "key": "session",
//!   "window_secs": 30,
//!   "nf_types": ["PCF", "BSF", "UDR"],
//!   "services": [],
//!   "max_open": 100000,
//!   "max_procedures": 256
//! }
//! ```
//!
//! - `key`: what one xDR gathers. `transaction`: one request and its answer at one NF, with the
//!   egress calls that NF made while serving it (same SUPI or session id, before its answer).
//!   `session` (the default): every transaction of one session id (SM policy association,
//!   Diameter Session-Id, binding id), closed by the session's terminating operation; a
//!   transaction without a session id is a record of its own, as with `transaction`. `supi`:
//!   every transaction of one subscriber while messages keep coming within the window; one without
//!   a SUPI is a record of its own.
//! - `window_secs` (default 30, 1 to 86,400): a record with no new message for this long
//!   closes, and a request still unanswered then is a timeout.
//! - `nf_types`, `services`: the copies correlated (empty: all). Names as in the copies (`PCF`,
//!   `npcf-smpolicycontrol`, `Gx`); NF types ignore case.
//! - `max_open` (default 100,000): records open at once; beyond it the record with the oldest
//!   activity closes first (`close_reason: evicted`), counted.
//! - `max_procedures` (default 256): a record that reaches it closes (`max_procedures`) and
//!   the messages after it start a new one, so one chatty subscriber cannot hold unbounded memory.
//! - `terminating_operations`: the operations whose answer closes a session record. Default:
//!   every operation ending in `_Delete` (`Npcf_SMPolicyControl_Delete`, ...),
//!   `Nbsf_Management_Deregister`, `CCR-T` and `STR`.

use sbi::InvalidParam;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CorrelationConfig {
    #[serde(default)]
    pub key: CorrelationKey,
    #[serde(default = "default_window_secs")]
    pub window_secs: u64,
    #[serde(default)]
    pub nf_types: Vec<String>,
    #[serde(default)]
    pub services: Vec<String>,
    #[serde(default = "default_max_open")]
    pub max_open: usize,
    #[serde(default = "default_max_procedures")]
    pub max_procedures: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminating_operations: Option<Vec<String>>,
}

fn default_window_secs() -> u64 {
    30
}

fn default_max_open() -> usize {
    100_000
}

fn default_max_procedures() -> usize {
    256
}

impl Default for CorrelationConfig {
    fn default() -> Self {
        CorrelationConfig {
            key: CorrelationKey::default(),
            window_secs: default_window_secs(),
            nf_types: Vec::new(),
            services: Vec::new(),
            max_open: default_max_open(),
            max_procedures: default_max_procedures(),
            terminating_operations: None,
        }
    }
}

/// What one xDR gathers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CorrelationKey {
    Transaction,
    #[default]
    Session,
    Supi,
}

impl CorrelationKey {
    pub fn as_str(self) -> &'static str {
        match self {
            CorrelationKey::Transaction => "transaction",
            CorrelationKey::Session => "session",
            CorrelationKey::Supi => "supi",
        }
    }
}

impl CorrelationConfig {
    /// Every wrong field, named by its JSON pointer.
    pub fn validate(&self) -> Result<(), Vec<InvalidParam>> {
        let mut errors = Vec::new();
        if !(1..=86_400).contains(&self.window_secs) {
            errors.push(InvalidParam::new("/window_secs", "1 to 86400 seconds"));
        }
        if !(1..=10_000_000).contains(&self.max_open) {
            errors.push(InvalidParam::new("/max_open", "1 to 10,000,000 records"));
        }
        if !(1..=100_000).contains(&self.max_procedures) {
            errors.push(InvalidParam::new("/max_procedures", "1 to 100,000 procedures"));
        }
        for (field, list) in [("nf_types", &self.nf_types), ("services", &self.services)] {
            for (i, n) in list.iter().enumerate() {
                if n.is_empty() {
                    errors.push(InvalidParam::new(format!("/{field}/{i}"), "a name is not empty"));
                }
            }
        }
        for (i, n) in self.terminating_operations.iter().flatten().enumerate() {
            if n.is_empty() {
                errors.push(InvalidParam::new(
                    format!("/terminating_operations/{i}"),
                    "an operation name is not empty",
                ));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// Whether the answer to `operation` ends a session.
    pub fn is_terminating(&self, operation: &str) -> bool {
        match &self.terminating_operations {
            Some(list) => list.iter().any(|o| o == operation),
            None => {
                operation.ends_with("_Delete")
                    || matches!(operation, "Nbsf_Management_Deregister" | "CCR-T" | "STR")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example_parses_and_is_valid() {
        let doc = include_str!("config.rs");
        let start = doc.find("//! ```json\n").unwrap() + "//! ```json\n".len();
        let end = start + doc[start..].find("//! ```\n").unwrap();
        let json: String =
            doc[start..end].lines().map(|l| l.strip_prefix("//!").unwrap_or(l)).collect();
        let c: CorrelationConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(c.key, CorrelationKey::Session);
        c.validate().unwrap();
        let empty: CorrelationConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(empty, CorrelationConfig::default());
    }

    #[test]
    fn wrong_fields_are_named() {
        let c = CorrelationConfig {
            window_secs: 0,
            max_open: 0,
            services: vec!["Gx".into(), String::new()],
            terminating_operations: Some(vec![String::new()]),
            ..CorrelationConfig::default()
        };
        let params: Vec<String> = c.validate().unwrap_err().into_iter().map(|p| p.param).collect();
        assert_eq!(
            params,
            ["/window_secs", "/max_open", "/services/1", "/terminating_operations/0"]
        );
        assert!(serde_json::from_str::<CorrelationConfig>(r#"{"key":"imsi"}"#).is_err());
        assert!(serde_json::from_str::<CorrelationConfig>(r#"{"window":3}"#).is_err());
    }

    #[test]
    fn terminating_operations_default_and_override() {
        let c = CorrelationConfig::default();
        for op in ["Npcf_SMPolicyControl_Delete", "CCR-T", "STR", "Nbsf_Management_Deregister"] {
            assert!(c.is_terminating(op), "{op}");
        }
        assert!(!c.is_terminating("CCR-U"));
        let c = CorrelationConfig {
            terminating_operations: Some(vec!["CCR-U".into()]),
            ..CorrelationConfig::default()
        };
        assert!(c.is_terminating("CCR-U") && !c.is_terminating("CCR-T"));
    }
}
