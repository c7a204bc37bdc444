//! The xDR store's configuration (`[dd.xdr_store]` once the Data Director's config has it).
//!
//! ```toml
//! retention_secs = 604800        # keep an xDR 7 days after it ended
//! retention_interval_secs = 60   # how often the old ones are deleted
//! delete_batch = 10000           # rows per delete, so one pass never holds the writer long
//! ```

use sbi::InvalidParam;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct XdrStoreConfig {
    /// How long an xDR is kept after its last message, in seconds. Default: 604,800 (7 days).
    pub retention_secs: u64,
    /// How often the retention pass runs, in seconds. Default: 60.
    pub retention_interval_secs: u64,
    /// Most rows one delete statement removes; a pass runs as many as it needs, each its own
    /// write, so xDR inserts queue behind one batch at most. Default: 10,000.
    pub delete_batch: usize,
}

impl Default for XdrStoreConfig {
    fn default() -> Self {
        XdrStoreConfig {
            retention_secs: 604_800,
            retention_interval_secs: 60,
            delete_batch: 10_000,
        }
    }
}

impl XdrStoreConfig {
    pub fn validate(&self) -> Result<(), Vec<InvalidParam>> {
        let mut errors = Vec::new();
        if self.retention_secs == 0 {
            errors.push(InvalidParam::new("/retention_secs", "at least 1 second"));
        }
        if self.retention_interval_secs == 0 {
            errors.push(InvalidParam::new("/retention_interval_secs", "at least 1 second"));
        }
        if self.delete_batch == 0 {
            errors.push(InvalidParam::new("/delete_batch", "at least 1 row"));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example_is_the_default() {
        let doc = include_str!("config.rs");
        let start = doc.find("//! ```toml\n").unwrap() + "//! ```toml\n".len();
        let end = start + doc[start..].find("//! ```\n").unwrap();
        let text: String = doc[start..end]
            .lines()
            .map(|l| l.strip_prefix("//! ").unwrap_or(l).to_owned() + "\n")
            .collect();
        let c: XdrStoreConfig = toml::from_str(&text).unwrap();
        assert_eq!(c, XdrStoreConfig::default());
        c.validate().unwrap();
        let zero = XdrStoreConfig { retention_secs: 0, delete_batch: 0, ..c };
        let params: Vec<String> =
            zero.validate().unwrap_err().into_iter().map(|p| p.param).collect();
        assert_eq!(params, ["/retention_secs", "/delete_batch"]);
    }
}
