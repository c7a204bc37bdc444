//! The 5G-EIR (TS 29.511): [`n5g_eir_eic`] serves N5g-eir_EquipmentIdentityCheck_Get over the
//! equipment lists kept here (TS 23.003 §6.2): single IMEIs and IMEI ranges, each with a status and
//! optionally bound to subscribers (SUPIs and/or GPSIs), and `[udr.eir]`. [`EirStore`] is the
//! service's store trait, [`sqlite`] its SQLite implementation with the tables.
//!
//! An IMEI is keyed by its first 14 digits (TAC + serial number) as an integer: the 15th digit of
//! an IMEI is a check digit (or the spare `0` a UE sends) and the last two of an IMEISV are the
//! software version, so both forms of the same equipment meet the same key. A lookup is one
//! primary-key read on the single IMEIs and, when that misses, one index seek on the ranges
//! ("greatest start <= IMEI", then "end >= IMEI"): ranges never overlap (checked on every
//! write), so that one row is the only candidate. A single IMEI beats a range that contains
//! it, so a device can be listed apart from its model's range.

pub mod mysql;
pub mod n5g_eir_eic;
pub mod sqlite;

use serde::{Deserialize, Serialize};

use crate::StoreFuture;

/// Most identities bound to one entry, per kind (SUPIs, GPSIs), unless configured
/// (`[udr.provisioning] max_eir_bound_ids`).
pub const MAX_BOUND: usize = 100;

/// Separates bound identities in a column; identities never hold control characters.
const SEP: char = '\n';

/// EquipmentStatus (TS 29.511 §6.1.6.3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EquipmentStatus {
    Whitelisted,
    Blacklisted,
    Greylisted,
}

impl EquipmentStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Whitelisted => "WHITELISTED",
            Self::Blacklisted => "BLACKLISTED",
            Self::Greylisted => "GREYLISTED",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "WHITELISTED" => Some(Self::Whitelisted),
            "BLACKLISTED" => Some(Self::Blacklisted),
            "GREYLISTED" => Some(Self::Greylisted),
            _ => None,
        }
    }

    /// The EirResponseData carrying this status, encoded once for the whole process.
    pub fn response_json(self) -> &'static str {
        match self {
            Self::Whitelisted => r#"{"status":"WHITELISTED"}"#,
            Self::Blacklisted => r#"{"status":"BLACKLISTED"}"#,
            Self::Greylisted => r#"{"status":"GREYLISTED"}"#,
        }
    }

    fn code(self) -> i64 {
        match self {
            Self::Whitelisted => 0,
            Self::Blacklisted => 1,
            Self::Greylisted => 2,
        }
    }

    fn from_code(code: i64) -> store::Result<Self> {
        match code {
            0 => Ok(Self::Whitelisted),
            1 => Ok(Self::Blacklisted),
            2 => Ok(Self::Greylisted),
            other => Err(store::Error::backend_msg(format!("EIR status code {other} unknown"))),
        }
    }

    /// Whitelisted < greylisted < blacklisted: how much the network restricts the device.
    fn severity(self) -> u8 {
        match self {
            Self::Whitelisted => 0,
            Self::Greylisted => 1,
            Self::Blacklisted => 2,
        }
    }

    /// The more restrictive of two statuses.
    pub fn max(self, other: Self) -> Self {
        if other.severity() > self.severity() {
            other
        } else {
            self
        }
    }
}

// ---- IMEI and PEI formats (TS 23.003 §6.2, Annex B; TS 29.571 Pei) ---------------------------

/// The Luhn check digit of the 14 digits (values 0..=9) of an IMEI (TS 23.003 Annex B): from
/// the right, every second digit (D1, D3, ... counting D1 as the rightmost) is doubled and its
/// digits summed.
pub fn check_digit(d14: &[u8]) -> u8 {
    let mut sum = 0u32;
    for (i, d) in d14.iter().rev().enumerate() {
        let mut v = u32::from(*d);
        if i % 2 == 0 {
            v *= 2;
            if v > 9 {
                v -= 9;
            }
        }
        sum += v;
    }
    ((10 - sum % 10) % 10) as u8
}

/// `s` as decimal digit values, when it is `n` ASCII digits.
fn digits<const N: usize>(s: &str) -> Option<[u8; N]> {
    let b = s.as_bytes();
    if b.len() != N || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut out = [0u8; N];
    for (o, c) in out.iter_mut().zip(b) {
        *o = c - b'0';
    }
    Some(out)
}

fn key_of(d: &[u8]) -> u64 {
    d.iter().take(14).fold(0u64, |k, d| k * 10 + u64::from(*d))
}

/// An IMEI key (TAC + SNR) as its 14 digits.
pub fn format_imei(key: u64) -> String {
    format!("{key:014}")
}

/// A PEI as the EIR reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pei {
    /// `imei-` or `imeisv-`: the 14-digit key.
    Imei(u64),
    /// A well-formed MAC (`mac-`) or EUI-64 (`eui-`) PEI of wireline access: no list holds them.
    Other,
}

/// Parses a PEI of a GetEquipmentStatus query (TS 29.571 Pei): `imei-` + 15 digits whose last
/// is the Luhn check digit or `0` (TS 23.003 §6.2.1: the check digit is not sent over the
/// network, a UE sends a spare 0 in its place), `imeisv-` + 16 digits, `mac-xx-xx-xx-xx-xx-xx`
/// (optionally `-untrusted`) or `eui-` + eight hex pairs.
pub fn parse_pei(pei: &str) -> Result<Pei, String> {
    if let Some(rest) = pei.strip_prefix("imei-") {
        let d = digits::<15>(rest).ok_or("imei- must be followed by 15 digits")?;
        let cd = check_digit(&d[..14]);
        if d[14] != cd && d[14] != 0 {
            return Err(format!(
                "the 15th digit of the IMEI must be its check digit ({cd}) or 0, not {}",
                d[14]
            ));
        }
        return Ok(Pei::Imei(key_of(&d)));
    }
    if let Some(rest) = pei.strip_prefix("imeisv-") {
        let d = digits::<16>(rest).ok_or("imeisv- must be followed by 16 digits")?;
        return Ok(Pei::Imei(key_of(&d)));
    }
    let hex_pairs = |s: &str, n: usize| {
        let parts: Vec<&str> = s.split('-').collect();
        parts.len() == n
            && parts.iter().all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    if let Some(rest) = pei.strip_prefix("mac-") {
        if hex_pairs(rest.strip_suffix("-untrusted").unwrap_or(rest), 6) {
            return Ok(Pei::Other);
        }
        return Err("mac- must be followed by six hex pairs (xx-xx-xx-xx-xx-xx)".into());
    }
    if let Some(rest) = pei.strip_prefix("eui-") {
        if hex_pairs(rest, 8) {
            return Ok(Pei::Other);
        }
        return Err("eui- must be followed by eight hex pairs".into());
    }
    Err("a PEI is imei-<15 digits>, imeisv-<16 digits>, mac-<MAC> or eui-<EUI-64>".into())
}

/// Parses a provisioned IMEI: its 14 digits (TAC + SNR), or 15 whose last is the correct check
/// digit (entered by hand, the check digit is what catches a typo, so `0` is not accepted here).
pub fn parse_imei(s: &str) -> Result<u64, String> {
    if let Some(d) = digits::<14>(s) {
        return Ok(key_of(&d));
    }
    if let Some(d) = digits::<15>(s) {
        let cd = check_digit(&d[..14]);
        if d[14] != cd {
            return Err(format!("{s:?}: wrong check digit {} (expected {cd})", d[14]));
        }
        return Ok(key_of(&d));
    }
    Err(format!("{s:?}: an IMEI is 14 digits (TAC + serial number) or 15 with the check digit"))
}

/// A SUPI as TS 29.571 spells it: `imsi-` + 5..15 digits, `nai-`, `gci-`, `gli-`.
pub fn check_supi(s: &str) -> bool {
    if s.len() > 255 || s.chars().any(char::is_control) {
        return false;
    }
    if let Some(imsi) = s.strip_prefix("imsi-") {
        return (5..=15).contains(&imsi.len()) && imsi.bytes().all(|b| b.is_ascii_digit());
    }
    ["nai-", "gci-", "gli-"].iter().any(|p| s.strip_prefix(p).is_some_and(|r| !r.is_empty()))
}

/// A GPSI as TS 29.571 spells it: `msisdn-` + 5..15 digits or `extid-<local>@<domain>`.
pub fn check_gpsi(s: &str) -> bool {
    if s.len() > 255 || s.chars().any(char::is_control) {
        return false;
    }
    if let Some(msisdn) = s.strip_prefix("msisdn-") {
        return (5..=15).contains(&msisdn.len()) && msisdn.bytes().all(|b| b.is_ascii_digit());
    }
    if let Some(ext) = s.strip_prefix("extid-") {
        let mut it = ext.split('@');
        return matches!((it.next(), it.next(), it.next()),
            (Some(l), Some(d), None) if !l.is_empty() && !d.is_empty());
    }
    false
}

// ---- entries ---------------------------------------------------------------------------------

/// The subscribers an entry is bound to; empty lists: not bound.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Binding {
    pub supis: Vec<String>,
    pub gpsis: Vec<String>,
}

/// One provisioned IMEI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImeiEntry {
    /// TAC + SNR.
    pub imei: u64,
    pub status: EquipmentStatus,
    pub binding: Binding,
}

/// A provisioned range of IMEIs, both ends included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeEntry {
    pub start: u64,
    pub end: u64,
    pub status: EquipmentStatus,
    pub binding: Binding,
}

/// What a lookup found: the entry's status and its binding as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub status: EquipmentStatus,
    supis: Option<String>,
    gpsis: Option<String>,
}

impl Found {
    /// The answer for a request carrying `supi` / `gpsi`: the entry's status, or, when the entry
    /// is bound to SUPIs (GPSIs) and the request names another one, the more restrictive of the
    /// entry's status and `on_mismatch` (a mismatch never makes a device more welcome). An
    /// identity the request does not carry cannot mismatch.
    pub fn answer(
        &self,
        supi: Option<&str>,
        gpsi: Option<&str>,
        on_mismatch: EquipmentStatus,
    ) -> EquipmentStatus {
        let mismatch = |bound: &Option<String>, given: Option<&str>| match (bound, given) {
            (Some(list), Some(id)) => !list.split(SEP).any(|b| b == id),
            _ => false,
        };
        if mismatch(&self.supis, supi) || mismatch(&self.gpsis, gpsi) {
            self.status.max(on_mismatch)
        } else {
            self.status
        }
    }
}

/// Why a range write was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeConflict {
    /// No range starts there (update).
    NotFound,
    /// A range starts there already (create).
    Exists,
    /// It would overlap this existing range (start, end).
    Overlaps(u64, u64),
}

/// What a bulk load of EIR rows did ([`EirStore::put`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Loaded {
    /// Single IMEIs and ranges written.
    pub imeis: u64,
    pub ranges: u64,
    /// Rows refused (their tag, e.g. the input line, and why): a range overlapping another.
    pub refused: Vec<(u64, RangeConflict)>,
}

/// One row of a bulk load or of the provisioning API: an EirImeiEntry or an EirImeiRange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EirItem {
    Imei(ImeiEntry),
    Range(RangeEntry),
}

/// The 5G-EIR's persistence: its lists of single IMEIs and IMEI ranges. No cache in front: every
/// lookup reads the store, so a write or a bulk import is seen by the next lookup.
pub trait EirStore: Send + Sync + 'static {
    /// The entry deciding the status of `imei`: the single IMEI, else the range holding it.
    fn lookup(&self, imei: u64) -> StoreFuture<'_, Option<Found>>;
    fn get_imei(&self, imei: u64) -> StoreFuture<'_, Option<ImeiEntry>>;
    /// Creates an IMEI entry; `false` when it exists already.
    fn create_imei(&self, e: ImeiEntry) -> StoreFuture<'_, bool>;
    /// Replaces an IMEI entry; `false` when there is none.
    fn update_imei(&self, e: ImeiEntry) -> StoreFuture<'_, bool>;
    /// Removes an IMEI entry; `false` when there is none.
    fn delete_imei(&self, imei: u64) -> StoreFuture<'_, bool>;
    fn get_range(&self, start: u64) -> StoreFuture<'_, Option<RangeEntry>>;
    /// Creates a range unless one starts at the same IMEI or it overlaps another.
    fn create_range(&self, e: RangeEntry) -> StoreFuture<'_, Result<(), RangeConflict>>;
    /// Replaces the range starting at `e.start` (its end may change) unless it would overlap
    /// another.
    fn update_range(&self, e: RangeEntry) -> StoreFuture<'_, Result<(), RangeConflict>>;
    /// Removes the range starting at `start`; `false` when there is none.
    fn delete_range(&self, start: u64) -> StoreFuture<'_, bool>;
    /// Bulk load in one transaction: upserts each `(tag, row)` (an IMEI replaces the IMEI, a
    /// range the range starting at the same IMEI); a range that would overlap another is refused
    /// and, with `stop_on_refused`, ends the batch. The rows come back for the caller to free.
    fn put(
        &self,
        rows: Vec<(u64, EirItem)>,
        stop_on_refused: bool,
    ) -> StoreFuture<'_, (Loaded, Vec<(u64, EirItem)>)>;
}

// ---- configuration ---------------------------------------------------------------------------

/// The answer for equipment no list holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub enum UnknownEquipment {
    /// 404 ProblemDetails with cause ERROR_EQUIPMENT_UNKNOWN (TS 29.511 §6.1.7.3).
    #[default]
    #[serde(rename = "EQUIPMENT_UNKNOWN")]
    EquipmentUnknown,
    /// 200 with this status.
    #[serde(rename = "WHITELISTED")]
    Whitelisted,
    #[serde(rename = "GREYLISTED")]
    Greylisted,
    #[serde(rename = "BLACKLISTED")]
    Blacklisted,
}

impl UnknownEquipment {
    /// The status answered, or `None` for the 404.
    pub fn status(self) -> Option<EquipmentStatus> {
        match self {
            Self::EquipmentUnknown => None,
            Self::Whitelisted => Some(EquipmentStatus::Whitelisted),
            Self::Greylisted => Some(EquipmentStatus::Greylisted),
            Self::Blacklisted => Some(EquipmentStatus::Blacklisted),
        }
    }
}

/// `[udr.eir]`: the 5G-EIR role (docs/udr.md).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EirConfig {
    /// Answer for equipment no list holds: `EQUIPMENT_UNKNOWN` (404, the spec's answer and the
    /// default) or a status.
    #[serde(default)]
    pub unknown_equipment: UnknownEquipment,
    /// Status for a device used by a subscriber its entry is not bound to (never more
    /// permissive than the entry's own status). Default BLACKLISTED.
    #[serde(default = "default_mismatch")]
    pub binding_mismatch: EquipmentStatus,
    /// Register a second NF profile, of type 5G_EIR with the n5g-eir-eic service, with the NRF
    /// of `[udr.nrf]`, so AMFs discover this UDR as their 5G-EIR. Default false.
    #[serde(default)]
    pub register_nrf: bool,
    /// nfInstanceId (a UUID) of that 5G_EIR profile; generated at start when absent.
    #[serde(default)]
    pub nf_instance_id: Option<String>,
}

impl Default for EirConfig {
    fn default() -> Self {
        EirConfig {
            unknown_equipment: UnknownEquipment::default(),
            binding_mismatch: default_mismatch(),
            register_nrf: false,
            nf_instance_id: None,
        }
    }
}

fn default_mismatch() -> EquipmentStatus {
    EquipmentStatus::Blacklisted
}

impl EirConfig {
    /// What serde cannot check; `nrf` tells whether `[udr.nrf]` is configured.
    pub fn validate(&self, nrf: bool) -> Result<(), String> {
        if let Some(id) = &self.nf_instance_id {
            if uuid::Uuid::parse_str(id).is_err() {
                return Err(format!("udr.eir.nf_instance_id {id:?} is not a UUID"));
            }
        }
        if self.register_nrf && !nrf {
            return Err("udr.eir.register_nrf needs [udr.nrf] (the NRF to register with)".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn luhn_check_digits() {
        // TS 23.003 examples and well-known IMEIs: 49015420323751 8, 35209900176148 1.
        let d = |s: &str| digits::<14>(s).unwrap();
        assert_eq!(check_digit(&d("49015420323751")), 8);
        assert_eq!(check_digit(&d("35209900176148")), 1);
        assert_eq!(check_digit(&d("35780502398494")), 2);
        assert_eq!(check_digit(&d("00000000000000")), 0);
    }

    #[test]
    fn peis() {
        let k = 35209900176148;
        assert_eq!(parse_pei("imei-352099001761481"), Ok(Pei::Imei(k)));
        assert_eq!(parse_pei("imei-352099001761480"), Ok(Pei::Imei(k)), "spare digit 0");
        assert!(parse_pei("imei-352099001761482").unwrap_err().contains("check digit (1)"));
        assert_eq!(parse_pei("imeisv-3520990017614823"), Ok(Pei::Imei(k)));
        assert!(parse_pei("imei-35209900176148").is_err());
        assert!(parse_pei("imeisv-35209900176148").is_err());
        assert!(parse_pei("imei-35209900176148x").is_err());
        assert_eq!(parse_pei("mac-00-1A-2b-3c-4d-5e"), Ok(Pei::Other));
        assert_eq!(parse_pei("mac-00-1a-2b-3c-4d-5e-untrusted"), Ok(Pei::Other));
        assert_eq!(parse_pei("eui-00-1a-2b-3c-4d-5e-6f-70"), Ok(Pei::Other));
        assert!(parse_pei("mac-00-1a-2b").is_err());
        assert!(parse_pei("352099001761481").is_err());
        assert!(parse_pei("").is_err());
        assert_eq!(format_imei(1), "00000000000001");
    }

    #[test]
    fn provisioned_imeis() {
        assert_eq!(parse_imei("35209900176148"), Ok(35209900176148));
        assert_eq!(parse_imei("352099001761481"), Ok(35209900176148));
        assert!(parse_imei("352099001761480").unwrap_err().contains("check digit"));
        assert!(parse_imei("3520990017614").is_err());
        assert!(parse_imei("3520990017614823").is_err());
    }

    #[test]
    fn binding_mismatch_is_never_more_permissive() {
        let found = |status, supis: Option<&str>, gpsis: Option<&str>| Found {
            status,
            supis: supis.map(str::to_owned),
            gpsis: gpsis.map(str::to_owned),
        };
        use EquipmentStatus::*;
        let f = found(Whitelisted, Some("imsi-001010000000001\nimsi-001010000000002"), None);
        assert_eq!(f.answer(Some("imsi-001010000000002"), None, Blacklisted), Whitelisted);
        assert_eq!(f.answer(Some("imsi-001010000000003"), None, Blacklisted), Blacklisted);
        assert_eq!(f.answer(None, Some("msisdn-1234567"), Blacklisted), Whitelisted);
        assert_eq!(f.answer(None, None, Greylisted), Whitelisted);
        let f = found(Blacklisted, None, Some("msisdn-1234567"));
        assert_eq!(f.answer(None, Some("msisdn-7654321"), Greylisted), Blacklisted);
        let f = found(Greylisted, Some("imsi-001010000000001"), Some("msisdn-1234567"));
        assert_eq!(
            f.answer(Some("imsi-001010000000001"), Some("msisdn-1"), Blacklisted),
            Blacklisted
        );
        assert_eq!(
            f.answer(Some("imsi-001010000000001"), Some("msisdn-1234567"), Blacklisted),
            Greylisted
        );
    }
}
