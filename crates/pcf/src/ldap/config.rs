//! `[pcf.ldap]`: an LDAP directory as the source of subscriber profiles (the reference's 3.1.1
//! PCRF: one query per Gx CCR-I). docs/pcf.md, "LDAP data source", explains each setting.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::config::OnUnknown;

/// The identities a filter template may name, each replaced by the session's value (escaped as
/// RFC 4515 asks).
pub const PLACEHOLDERS: [&str; 3] = ["imsi", "msisdn", "supi"];

#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LdapConfig {
    /// Read subscriber profiles from LDAP. Default false.
    #[serde(default)]
    pub enabled: bool,
    /// The directory's URLs (`ldap://127.0.0.1:389`), tried in this order when a connection is
    /// opened: the first that connects and binds serves it (failover).
    #[serde(default)]
    pub urls: Vec<String>,
    /// The DN to bind as; empty: an anonymous bind (none is sent).
    #[serde(default)]
    pub bind_dn: String,
    /// The bind DN's password.
    #[serde(default)]
    pub bind_password: String,
    /// Where the search starts (`ou=subscribers,dc=example,dc=com`).
    #[serde(default)]
    pub base_dn: String,
    /// `sub` (the base and all below it, default), `one` (the entries right below it) or `base`.
    #[serde(default)]
    pub scope: Scope,
    /// The search filter, `{imsi}`, `{msisdn}` and `{supi}` replaced by the session's IMSI,
    /// MSISDN (digits) and SUPI (`imsi-...`). Default `(imsi={imsi})`.
    #[serde(default = "default_filter")]
    pub filter: String,
    /// The attributes read; each lands in the engine's `subscriber` at `ldap.<attribute>`
    /// unless `map` says where.
    #[serde(default)]
    pub attributes: Vec<String>,
    /// Attributes that are always arrays (one element when the entry has one value). Any other
    /// attribute is a string, or an array when the entry holds several values.
    #[serde(default)]
    pub multi_valued: Vec<String>,
    /// attribute -> dotted path under `subscriber` (`pcrfMaxDownlink = "plan.maxDl"`), instead
    /// of `ldap.<attribute>`.
    #[serde(default)]
    pub map: BTreeMap<String, String>,
    /// Connections to the directory at most (each bound once, reused). Default 4.
    #[serde(default = "default_pool_size")]
    pub pool_size: usize,
    /// How long opening and binding one connection to one URL may take before the next URL is
    /// tried, ms. Default 500.
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
    /// How long one lookup may take in all (a free connection, a connection opened when none
    /// is idle, the search), ms. Default 1000.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// When no directory answers in time: `fallback` (the project's fallback decision, as
    /// `[pcf.udr]`; default), `decide` (decide without the LDAP attributes) or `reject` (Gx
    /// 3004 DIAMETER_TOO_BUSY, N7 503 TARGET_NF_NOT_REACHABLE).
    #[serde(default)]
    pub on_unreachable: OnUnreachable,
    /// When no entry matches the filter: `decide` without the LDAP attributes (default) or
    /// `reject` (Gx Experimental-Result 5030 DIAMETER_USER_UNKNOWN, N7 400 USER_UNKNOWN).
    #[serde(default)]
    pub on_unknown_subscriber: OnUnknown,
    /// N7 (SM policy) sessions read LDAP too; Gx sessions always do. Default false.
    #[serde(default)]
    pub n7: bool,
}

/// `[pcf.ldap] on_unreachable`: `[pcf.udr]`'s two answers and one more, deciding without the
/// profile (the UDR has no such choice: without its data a decision has nothing to go on, while
/// LDAP attributes are often a refinement of it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnUnreachable {
    #[default]
    Fallback,
    Decide,
    Reject,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Base,
    One,
    #[default]
    Sub,
}

impl Scope {
    pub fn ldap3(self) -> ldap3::Scope {
        match self {
            Scope::Base => ldap3::Scope::Base,
            Scope::One => ldap3::Scope::OneLevel,
            Scope::Sub => ldap3::Scope::Subtree,
        }
    }
}

fn default_filter() -> String {
    "(imsi={imsi})".into()
}

fn default_pool_size() -> usize {
    4
}

fn default_connect_timeout_ms() -> u64 {
    500
}

fn default_timeout_ms() -> u64 {
    1000
}

impl Default for LdapConfig {
    fn default() -> Self {
        LdapConfig {
            enabled: false,
            urls: Vec::new(),
            bind_dn: String::new(),
            bind_password: String::new(),
            base_dn: String::new(),
            scope: Scope::default(),
            filter: default_filter(),
            attributes: Vec::new(),
            multi_valued: Vec::new(),
            map: BTreeMap::new(),
            pool_size: default_pool_size(),
            connect_timeout_ms: default_connect_timeout_ms(),
            timeout_ms: default_timeout_ms(),
            on_unreachable: OnUnreachable::default(),
            on_unknown_subscriber: OnUnknown::default(),
            n7: false,
        }
    }
}

// The password stays out of any log that prints the configuration.
impl std::fmt::Debug for LdapConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LdapConfig")
            .field("enabled", &self.enabled)
            .field("urls", &self.urls)
            .field("bind_dn", &self.bind_dn)
            .field("bind_password", &if self.bind_password.is_empty() { "" } else { "***" })
            .field("base_dn", &self.base_dn)
            .field("scope", &self.scope)
            .field("filter", &self.filter)
            .field("attributes", &self.attributes)
            .field("multi_valued", &self.multi_valued)
            .field("map", &self.map)
            .field("pool_size", &self.pool_size)
            .field("connect_timeout_ms", &self.connect_timeout_ms)
            .field("timeout_ms", &self.timeout_ms)
            .field("on_unreachable", &self.on_unreachable)
            .field("on_unknown_subscriber", &self.on_unknown_subscriber)
            .field("n7", &self.n7)
            .finish()
    }
}

impl LdapConfig {
    /// Checked only when enabled: a disabled section may be left half written.
    pub fn validate(&self) -> Result<(), String> {
        if !self.enabled {
            return Ok(());
        }
        let err = |m: String| Err(format!("[pcf.ldap] {m}"));
        if self.urls.is_empty() {
            return err("urls must name at least one directory (ldap://host:port)".into());
        }
        for u in &self.urls {
            let Some(rest) = u.strip_prefix("ldap://") else {
                return err(format!(
                    "url {u:?}: only ldap:// is supported (no ldaps:// or StartTLS yet)"
                ));
            };
            if rest.trim_end_matches('/').is_empty() || rest.trim_end_matches('/').contains('/') {
                return err(format!("url {u:?} must be ldap://host[:port]"));
            }
        }
        if self.base_dn.is_empty() {
            return err("base_dn must be set".into());
        }
        let sample = render(&self.filter, |_| Some("0")).map_err(|e| format!("[pcf.ldap] {e}"))?;
        if sample.is_none_or(|f| ldap3::parse_filter(f).is_err()) {
            return err(format!("filter {:?} is not an RFC 4515 filter", self.filter));
        }
        if self.attributes.is_empty() {
            return err("attributes must list what to read".into());
        }
        for a in self.multi_valued.iter().chain(self.map.keys()) {
            if !self.attributes.iter().any(|x| x.eq_ignore_ascii_case(a)) {
                return err(format!("{a:?} (in multi_valued or map) is not in attributes"));
            }
        }
        for (a, path) in &self.map {
            if path.is_empty() || path.split('.').any(str::is_empty) {
                return err(format!("map {a} = {path:?} must be a dotted path (plan.maxDl)"));
            }
        }
        if self.pool_size == 0 || self.connect_timeout_ms == 0 || self.timeout_ms == 0 {
            return err("pool_size, connect_timeout_ms and timeout_ms must be > 0".into());
        }
        Ok(())
    }
}

/// The filter template with each `{name}` replaced by `value(name)`, escaped (RFC 4515 §3:
/// `*`, `(`, `)`, `\` and NUL), so an identity a peer sent cannot change the filter. None from
/// `value`: the session lacks that identity, and so has no entry to find.
pub fn render<'a>(
    template: &str,
    value: impl Fn(&str) -> Option<&'a str>,
) -> Result<Option<String>, String> {
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template;
    while let Some(open) = rest.find(['{', '}']) {
        if rest.as_bytes()[open] == b'}' {
            return Err(format!("filter {template:?}: a '}}' without its '{{'"));
        }
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            return Err(format!("filter {template:?}: a '{{' without its '}}'"));
        };
        let name = &after[..close];
        if !PLACEHOLDERS.contains(&name) {
            return Err(format!(
                "filter {template:?}: {{{name}}} is not one of {{imsi}}, {{msisdn}}, {{supi}}"
            ));
        }
        match value(name) {
            Some(v) => out.push_str(&ldap3::ldap_escape(v)),
            None => return Ok(None),
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on() -> LdapConfig {
        LdapConfig {
            enabled: true,
            urls: vec!["ldap://127.0.0.1:389".into()],
            base_dn: "dc=example,dc=com".into(),
            attributes: vec!["pcrfClass".into()],
            ..LdapConfig::default()
        }
    }

    #[test]
    fn a_filter_is_rendered_with_escaped_identities() {
        let f = render("(|(imsi={imsi})(msisdn={msisdn}))", |n| match n {
            "imsi" => Some("001*)(uid=*"),
            "msisdn" => Some("467"),
            _ => None,
        })
        .unwrap();
        assert_eq!(f.as_deref(), Some(r"(|(imsi=001\2a\29\28uid=\2a)(msisdn=467))"));
        assert_eq!(render("(msisdn={msisdn})", |_| None).unwrap(), None);
        assert!(render("(imsi={imei})", |_| Some("1")).is_err());
        assert!(render("(imsi={imsi)", |_| Some("1")).is_err());
        assert!(render("(imsi=imsi})", |_| Some("1")).is_err());
    }

    #[test]
    fn an_enabled_section_is_checked_and_a_disabled_one_is_not() {
        assert!(LdapConfig::default().validate().is_ok());
        assert!(on().validate().is_ok());
        let bad = |c: LdapConfig| c.validate().unwrap_err();
        assert!(bad(LdapConfig { urls: vec![], ..on() }).contains("urls"));
        assert!(bad(LdapConfig { urls: vec!["ldaps://h:636".into()], ..on() }).contains("ldap://"));
        assert!(bad(LdapConfig { base_dn: String::new(), ..on() }).contains("base_dn"));
        assert!(bad(LdapConfig { filter: "(&(imsi={imsi})".into(), ..on() }).contains("RFC 4515"));
        assert!(bad(LdapConfig { filter: "(imsi={imei})".into(), ..on() }).contains("imei"));
        assert!(bad(LdapConfig { attributes: vec![], ..on() }).contains("attributes"));
        assert!(bad(LdapConfig { multi_valued: vec!["x".into()], ..on() }).contains("\"x\""));
        let map = BTreeMap::from([("pcrfClass".to_string(), "plan..x".to_string())]);
        assert!(bad(LdapConfig { map, ..on() }).contains("dotted"));
        assert!(bad(LdapConfig { pool_size: 0, ..on() }).contains("pool_size"));
        let shown = format!("{:?}", LdapConfig { bind_password: "s3cret".into(), ..on() });
        assert!(!shown.contains("s3cret"), "{shown}");
    }

    #[test]
    fn the_section_parses_from_toml() {
        let c: LdapConfig = toml::from_str(
            "enabled = true\nurls = [\"ldap://a:389\", \"ldap://b:389\"]\nbase_dn = \"dc=x\"\n\
             attributes = [\"pcrfClass\", \"pcrfService\"]\nmulti_valued = [\"pcrfService\"]\n\
             on_unreachable = \"decide\"\nscope = \"one\"\n[map]\npcrfClass = \"plan.class\"\n",
        )
        .unwrap();
        assert_eq!(c.on_unreachable, OnUnreachable::Decide);
        assert_eq!(c.scope, Scope::One);
        assert_eq!(c.map["pcrfClass"], "plan.class");
        assert!(c.validate().is_ok());
        assert!(toml::from_str::<LdapConfig>("filtr = \"x\"").is_err());
    }

    #[test]
    fn the_annotated_example_parses_and_checks() {
        let text = include_str!("../../../../config/fivecore.toml");
        let all: toml::Value = toml::from_str(text).unwrap();
        let section = all["pcf"]["ldap"].clone();
        let c: LdapConfig = section.try_into().unwrap();
        assert!(!c.enabled);
        assert!(LdapConfig { enabled: true, ..c }.validate().is_ok());
    }
}
