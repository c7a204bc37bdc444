//! Nnrf_NFDiscovery (TS 29.510 §5.3, API /nnrf-disc/v1): NFDiscover, served from the in-memory
//! index only. What a profile is matched on is extracted once per write ([`DiscInfo`]), and each
//! profile's JSON is serialised once, so a discovery costs a scan of the target type's entries,
//! a sort of the matches and a byte copy of the chosen profiles.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, HeaderValue, StatusCode};
use sbi::problem::cause;
use sbi::query::Query;
use sbi::{HandlerResult, InvalidParam, ProblemDetails, SbiRequest};
use serde::Deserialize;
use serde_json::Value;

use crate::answers::Answer;
use crate::config::SlfFailure;
use crate::context::{Entry, Nrf};
use crate::forwarding;
use crate::models::{self, NfProfile};
use crate::slf::{self, SlfOutcome};

/// Default and largest `max-payload-size`, kilo-octets (TS 29.510 §6.2.3.2.3.1).
const DEFAULT_MAX_PAYLOAD_KB: usize = 124;
const LARGEST_MAX_PAYLOAD_KB: usize = 2000;

/// A numeric identity range (SupiRange / IdentityRange with start and end). Pattern ranges are
/// not evaluated (see docs/nrf.md).
/// A SupiRange / IdentityRange (TS 29.510 §6.1.6.2.x): numeric `start`..=`end`, or a
/// regular expression `pattern`, matched against the identity as sent or its digits.
#[derive(Debug, Clone)]
pub struct Range {
    pub start: String,
    pub end: String,
    pub pattern: Option<regex::Regex>,
}

impl Range {
    fn contains(&self, raw: &str, digits: &str) -> bool {
        if let Some(p) = &self.pattern {
            return p.is_match(raw) || p.is_match(digits);
        }
        digits.len() == self.start.len()
            && digits.len() == self.end.len()
            && self.start.as_str() <= digits
            && digits <= self.end.as_str()
    }
}

/// Patterns come from registering NFs: bound their compiled size so a hostile profile cannot
/// make the NRF build a huge automaton.
fn pattern(v: Option<&Value>) -> Option<regex::Regex> {
    regex::RegexBuilder::new(v?.as_str()?).size_limit(1 << 20).build().ok()
}

/// A TAI, lower-cased: (mcc, mnc, tac).
type Tai = (String, String, String);

/// What discovery matches a profile on. `None` means the profile does not restrict that
/// dimension (TS 29.510: an absent attribute means "any").
#[derive(Debug, Default, Clone)]
pub struct DiscInfo {
    pub services: Vec<String>,
    pub snssais: Option<Vec<Snssai>>,
    pub dnns: Option<Vec<String>>,
    pub tais: Option<Vec<Tai>>,
    /// (mcc, mnc, start, end) TAC ranges.
    pub tac_ranges: Vec<(String, String, u32, u32)>,
    pub supi_ranges: Option<Vec<Range>>,
    pub gpsi_ranges: Option<Vec<Range>>,
    pub group_ids: Vec<String>,
    pub routing_indicators: Option<Vec<String>>,
    pub set_ids: Vec<String>,
    pub allowed_nf_types: Option<Vec<String>>,
    /// TAC patterns of taiRangeList entries: (mcc, mnc, pattern).
    pub tac_patterns: Vec<(String, String, regex::Regex)>,
    /// amfInfo: guamiList as (mcc, mnc, amfId), amfRegionId, amfSetId (lower case).
    pub guamis: Option<Vec<(String, String, String)>>,
    pub amf_region_ids: Option<Vec<String>>,
    pub amf_set_ids: Option<Vec<String>>,
    /// smfInfo: pgwFqdn and pgwFqdnList.
    pub pgw_fqdns: Option<Vec<String>>,
    /// udrInfo: supportedDataSets.
    pub data_sets: Option<Vec<String>>,
    /// plmnList as (mcc, mnc).
    pub plmns: Option<Vec<(String, String)>>,
    /// allowedNssais and allowedNfDomains (authorisation of the requester).
    pub allowed_nssais: Option<Vec<Snssai>>,
    pub allowed_domains: Option<Vec<regex::Regex>>,
}

/// An S-NSSAI of a query or a profile (ExtSnssai: sd, wildcardSd).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Snssai {
    pub sst: u8,
    #[serde(default)]
    pub sd: Option<String>,
    #[serde(default)]
    pub wildcard_sd: Option<bool>,
}

impl Snssai {
    fn serves(&self, wanted: &Snssai) -> bool {
        self.sst == wanted.sst
            && (self.wildcard_sd == Some(true)
                || match (&self.sd, &wanted.sd) {
                    (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
                    (None, None) => true,
                    _ => false,
                })
    }
}

fn strings(v: Option<&Value>) -> impl Iterator<Item = String> + '_ {
    v.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_owned)
}

fn ranges(v: Option<&Value>) -> Vec<Range> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let str_of = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_owned);
            match pattern(r.get("pattern")) {
                Some(p) => {
                    Some(Range { start: String::new(), end: String::new(), pattern: Some(p) })
                }
                None => Some(Range { start: str_of("start")?, end: str_of("end")?, pattern: None }),
            }
        })
        .collect()
}

fn plmn_of(v: &Value) -> Option<(String, String)> {
    Some((
        v.get("mcc")?.as_str()?.to_ascii_lowercase(),
        v.get("mnc")?.as_str()?.to_ascii_lowercase(),
    ))
}

fn guami_of(v: &Value) -> Option<(String, String, String)> {
    let (mcc, mnc) = plmn_of(v.get("plmnId")?)?;
    Some((mcc, mnc, v.get("amfId")?.as_str()?.to_ascii_lowercase()))
}

fn tai_of(v: &Value) -> Option<Tai> {
    let plmn = v.get("plmnId")?;
    Some((
        plmn.get("mcc")?.as_str()?.to_ascii_lowercase(),
        plmn.get("mnc")?.as_str()?.to_ascii_lowercase(),
        v.get("tac")?.as_str()?.to_ascii_lowercase(),
    ))
}

fn push_opt<T>(slot: &mut Option<Vec<T>>, items: impl IntoIterator<Item = T>) {
    let mut items = items.into_iter().peekable();
    if items.peek().is_some() {
        slot.get_or_insert_with(Vec::new).extend(items);
    }
}

impl DiscInfo {
    pub fn from_profile(p: &NfProfile, v: &Value) -> DiscInfo {
        let mut d = DiscInfo {
            services: p.nf_services.iter().flatten().map(|s| s.service_name.clone()).collect(),
            ..DiscInfo::default()
        };
        if let Some(list) = v.get("sNssais").and_then(Value::as_array) {
            d.snssais =
                Some(list.iter().filter_map(|s| serde_json::from_value(s.clone()).ok()).collect());
        }
        d.set_ids = strings(v.get("nfSetIdList")).collect();
        d.allowed_nf_types = v.get("allowedNfTypes").map(|a| strings(Some(a)).collect());
        d.plmns = v
            .get("plmnList")
            .and_then(Value::as_array)
            .map(|l| l.iter().filter_map(plmn_of).collect());
        d.allowed_nssais = v
            .get("allowedNssais")
            .and_then(Value::as_array)
            .map(|l| l.iter().filter_map(|s| serde_json::from_value(s.clone()).ok()).collect());
        d.allowed_domains = v
            .get("allowedNfDomains")
            .and_then(Value::as_array)
            .map(|l| l.iter().filter_map(|p| pattern(Some(p))).collect());
        if let Some(amf) = v.get("amfInfo") {
            let lower =
                |k: &str| amf.get(k).and_then(Value::as_str).map(|s| vec![s.to_ascii_lowercase()]);
            d.amf_region_ids = lower("amfRegionId");
            d.amf_set_ids = lower("amfSetId");
            d.guamis = amf
                .get("guamiList")
                .and_then(Value::as_array)
                .map(|l| l.iter().filter_map(guami_of).collect());
        }
        if let Some(smf) = v.get("smfInfo") {
            let mut fqdns: Vec<String> = strings(smf.get("pgwFqdnList")).collect();
            fqdns.extend(smf.get("pgwFqdn").and_then(Value::as_str).map(str::to_owned));
            if !fqdns.is_empty() {
                d.pgw_fqdns = Some(fqdns.iter().map(|f| f.to_ascii_lowercase()).collect());
            }
        }
        if let Some(udr) = v.get("udrInfo") {
            d.data_sets = udr.get("supportedDataSets").map(|a| strings(Some(a)).collect());
        }
        // Every xxxInfo object and every value of every xxxInfoList map.
        let Some(obj) = v.as_object() else { return d };
        let mut infos: Vec<&Value> = Vec::new();
        for (k, val) in obj {
            if k.ends_with("InfoList") {
                if let Some(m) = val.as_object() {
                    infos.extend(m.values());
                }
            } else if k.ends_with("Info") && val.is_object() {
                infos.push(val);
            }
        }
        for info in infos {
            if let Some(g) = info.get("groupId").and_then(Value::as_str) {
                d.group_ids.push(g.to_owned());
            }
            push_opt(&mut d.supi_ranges, ranges(info.get("supiRanges")));
            push_opt(&mut d.gpsi_ranges, ranges(info.get("gpsiRanges")));
            push_opt(&mut d.routing_indicators, strings(info.get("routingIndicators")));
            push_opt(&mut d.dnns, strings(info.get("dnnList")));
            for key in ["sNssaiSmfInfoList", "sNssaiUpfInfoList"] {
                for s in info.get(key).and_then(Value::as_array).into_iter().flatten() {
                    for dl in ["dnnSmfInfoList", "dnnUpfInfoList"] {
                        let dnns = s.get(dl).and_then(Value::as_array).into_iter().flatten();
                        push_opt(
                            &mut d.dnns,
                            dnns.filter_map(|x| x.get("dnn")?.as_str().map(str::to_owned)),
                        );
                    }
                }
            }
            push_opt(
                &mut d.tais,
                info.get("taiList")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(tai_of),
            );
            for tr in info.get("taiRangeList").and_then(Value::as_array).into_iter().flatten() {
                let Some(plmn) = tr.get("plmnId") else { continue };
                let (Some(mcc), Some(mnc)) = (
                    plmn.get("mcc").and_then(Value::as_str),
                    plmn.get("mnc").and_then(Value::as_str),
                ) else {
                    continue;
                };
                for r in tr.get("tacRangeList").and_then(Value::as_array).into_iter().flatten() {
                    if let Some(p) = pattern(r.get("pattern")) {
                        d.tac_patterns.push((
                            mcc.to_ascii_lowercase(),
                            mnc.to_ascii_lowercase(),
                            p,
                        ));
                        continue;
                    }
                    let hex = |k: &str| {
                        r.get(k)
                            .and_then(Value::as_str)
                            .and_then(|s| u32::from_str_radix(s, 16).ok())
                    };
                    if let (Some(a), Some(b)) = (hex("start"), hex("end")) {
                        d.tac_ranges.push((
                            mcc.to_ascii_lowercase(),
                            mnc.to_ascii_lowercase(),
                            a,
                            b,
                        ));
                    }
                }
            }
        }
        d
    }

    fn serves_tai(&self, t: &Tai) -> bool {
        if self.tais.is_none() && self.tac_ranges.is_empty() && self.tac_patterns.is_empty() {
            return true;
        }
        if self
            .tac_patterns
            .iter()
            .any(|(mcc, mnc, p)| *mcc == t.0 && *mnc == t.1 && p.is_match(&t.2))
        {
            return true;
        }
        self.tais.iter().flatten().any(|x| x == t)
            || u32::from_str_radix(&t.2, 16).is_ok_and(|tac| {
                self.tac_ranges
                    .iter()
                    .any(|(mcc, mnc, a, b)| *mcc == t.0 && *mnc == t.1 && (*a..=*b).contains(&tac))
            })
    }
}

/// A parsed discovery request: the filters present, each once.
struct Request<'q> {
    target: &'q str,
    requester: &'q str,
    services: Vec<&'q str>,
    instance: Option<String>,
    snssais: Option<Vec<Snssai>>,
    dnn: Option<&'q str>,
    tai: Option<Tai>,
    supi: Option<&'q str>,
    gpsi: Option<&'q str>,
    supi_raw: Option<&'q str>,
    gpsi_raw: Option<&'q str>,
    guami: Option<(String, String, String)>,
    amf_region_id: Option<String>,
    amf_set_id: Option<String>,
    pgw: Option<String>,
    pgw_ind: Option<bool>,
    data_set: Option<&'q str>,
    target_plmns: Option<Vec<(String, String)>>,
    requester_snssais: Option<Vec<Snssai>>,
    requester_fqdn: Option<&'q str>,
    groups: Vec<&'q str>,
    routing_indicator: Option<&'q str>,
    set_id: Option<&'q str>,
    locality: Option<&'q str>,
    limit: usize,
    max_payload: usize,
}

fn invalid(name: &str, reason: &str) -> ProblemDetails {
    ProblemDetails::invalid_params(
        cause::INVALID_QUERY_PARAM,
        vec![InvalidParam::new(name, reason)],
    )
}

/// Declares the query parameters NFDiscover reads, so one pass over the query's names tells
/// which are present and only those are looked up (a lookup scans every parameter).
macro_rules! params {
    ($($id:ident = $name:literal),* $(,)?) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum P { $($id),* }
        impl P {
            fn name(self) -> &'static str {
                match self { $(P::$id => $name),* }
            }
            fn of(name: &str) -> Option<P> {
                match name { $($name => Some(P::$id),)* _ => None }
            }
        }
    };
}

params! {
    TargetNfType = "target-nf-type",
    RequesterNfType = "requester-nf-type",
    Tai = "tai",
    Limit = "limit",
    MaxPayloadSize = "max-payload-size",
    Supi = "supi",
    Gpsi = "gpsi",
    Guami = "guami",
    TargetPlmnList = "target-plmn-list",
    AmfRegionId = "amf-region-id",
    AmfSetId = "amf-set-id",
    Pgw = "pgw",
    PgwInd = "pgw-ind",
    DataSet = "data-set",
    RequesterFqdn = "requester-nf-instance-fqdn",
    ServiceNames = "service-names",
    TargetNfInstanceId = "target-nf-instance-id",
    Snssais = "snssais",
    Dnn = "dnn",
    RequesterSnssais = "requester-snssais",
    GroupIdList = "group-id-list",
    RoutingIndicator = "routing-indicator",
    TargetNfSetId = "target-nf-set-id",
    PreferredLocality = "preferred-locality",
}

/// The query, with the parameters of [`P`] it holds.
struct Params<'q> {
    q: &'q Query,
    present: u32,
}

impl<'q> Params<'q> {
    fn new(q: &'q Query) -> Params<'q> {
        let present = q.names().filter_map(P::of).fold(0, |m, p| m | (1u32 << p as u32));
        Params { q, present }
    }

    fn has(&self, p: P) -> bool {
        self.present & (1 << p as u32) != 0
    }

    fn get(&self, p: P) -> Result<Option<&'q str>, ProblemDetails> {
        if !self.has(p) {
            return Ok(None);
        }
        self.q.get(p.name())
    }

    fn required(&self, p: P) -> Result<&'q str, ProblemDetails> {
        // Absent: the query's own answer names the missing parameter.
        self.q.required(p.name())
    }

    fn parse_as<T: std::str::FromStr>(&self, p: P) -> Result<Option<T>, ProblemDetails> {
        if !self.has(p) {
            return Ok(None);
        }
        self.q.parse_as(p.name())
    }

    fn json<T: serde::de::DeserializeOwned>(&self, p: P) -> Result<Option<T>, ProblemDetails> {
        if !self.has(p) {
            return Ok(None);
        }
        self.q.json(p.name())
    }

    fn array(&self, p: P) -> Vec<&'q str> {
        if !self.has(p) {
            return Vec::new();
        }
        self.q.array(p.name())
    }
}

fn nf_type<'q>(q: &Params<'q>, p: P, required: bool) -> Result<Option<&'q str>, ProblemDetails> {
    let v = if required { Some(q.required(p)?) } else { q.get(p)? };
    match v {
        Some(t) if !models::is_nf_type(t) => Err(invalid(p.name(), "unknown NF type")),
        v => Ok(v),
    }
}

impl<'q> Request<'q> {
    fn parse(q: &'q Query, max_profiles: usize) -> Result<Request<'q>, ProblemDetails> {
        let q = Params::new(q);
        let target = nf_type(&q, P::TargetNfType, true)?.unwrap_or_default();
        let requester = nf_type(&q, P::RequesterNfType, true)?.unwrap_or_default();
        let tai = match q.json::<Value>(P::Tai)? {
            Some(v) => Some(tai_of(&v).ok_or_else(|| invalid("tai", "not a Tai"))?),
            None => None,
        };
        let limit = match q.parse_as::<usize>(P::Limit)? {
            Some(0) => return Err(invalid("limit", "must be at least 1")),
            Some(n) => n.min(max_profiles),
            None => max_profiles,
        };
        let max_payload = match q.parse_as::<usize>(P::MaxPayloadSize)? {
            Some(n) if (1..=LARGEST_MAX_PAYLOAD_KB).contains(&n) => n,
            Some(_) => return Err(invalid("max-payload-size", "must be 1..=2000")),
            None => DEFAULT_MAX_PAYLOAD_KB,
        };
        let supi_raw = q.get(P::Supi)?;
        let gpsi_raw = q.get(P::Gpsi)?;
        let supi = supi_raw.map(|s| s.strip_prefix("imsi-").unwrap_or(s));
        let gpsi = gpsi_raw.map(|s| s.strip_prefix("msisdn-").unwrap_or(s));
        let guami = match q.json::<Value>(P::Guami)? {
            Some(v) => Some(guami_of(&v).ok_or_else(|| invalid("guami", "not a Guami"))?),
            None => None,
        };
        let target_plmns = match q.json::<Vec<Value>>(P::TargetPlmnList)? {
            Some(l) => Some(
                l.iter()
                    .map(|p| {
                        plmn_of(p).ok_or_else(|| invalid("target-plmn-list", "not a PlmnId list"))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            None => None,
        };
        let lower = |p: P| -> Result<Option<String>, ProblemDetails> {
            Ok(q.get(p)?.map(str::to_ascii_lowercase))
        };
        Ok(Request {
            target,
            requester,
            services: q.array(P::ServiceNames),
            instance: q.get(P::TargetNfInstanceId)?.map(str::to_ascii_lowercase),
            snssais: q.json(P::Snssais)?,
            dnn: q.get(P::Dnn)?,
            tai,
            supi,
            gpsi,
            supi_raw,
            gpsi_raw,
            guami,
            amf_region_id: lower(P::AmfRegionId)?,
            amf_set_id: lower(P::AmfSetId)?,
            pgw: lower(P::Pgw)?,
            pgw_ind: q.parse_as(P::PgwInd)?,
            data_set: q.get(P::DataSet)?,
            target_plmns,
            requester_snssais: q.json(P::RequesterSnssais)?,
            requester_fqdn: q.get(P::RequesterFqdn)?,
            groups: q.array(P::GroupIdList),
            routing_indicator: q.get(P::RoutingIndicator)?,
            set_id: q.get(P::TargetNfSetId)?,
            locality: q.get(P::PreferredLocality)?,
            limit,
            max_payload: max_payload * 1000,
        })
    }

    fn matches(&self, e: &Entry) -> bool {
        let d = &e.disc;
        if self.instance.as_ref().is_some_and(|i| *i != e.key) {
            return false;
        }
        if d.allowed_nf_types.as_ref().is_some_and(|a| !a.iter().any(|t| t == self.requester)) {
            return false;
        }
        if !self.services.is_empty()
            && !self.services.iter().any(|s| d.services.iter().any(|x| x == s))
        {
            return false;
        }
        if let (Some(want), Some(have)) = (&self.snssais, &d.snssais) {
            if !want.iter().any(|w| have.iter().any(|h| h.serves(w))) {
                return false;
            }
        }
        if let (Some(dnn), Some(dnns)) = (self.dnn, &d.dnns) {
            if !dnns.iter().any(|x| x == dnn) {
                return false;
            }
        }
        if self.tai.as_ref().is_some_and(|t| !d.serves_tai(t)) {
            return false;
        }
        let in_ranges =
            |raw: Option<&str>, id: Option<&str>, r: &Option<Vec<Range>>| match (raw, id, r) {
                (Some(raw), Some(id), Some(r)) => r.iter().any(|x| x.contains(raw, id)),
                _ => true,
            };
        if !in_ranges(self.supi_raw, self.supi, &d.supi_ranges)
            || !in_ranges(self.gpsi_raw, self.gpsi, &d.gpsi_ranges)
        {
            return false;
        }
        if !self.matches_more(d) {
            return false;
        }
        if !self.groups.is_empty() && !d.group_ids.iter().any(|g| self.groups.contains(&g.as_str()))
        {
            return false;
        }
        if let (Some(ri), Some(ris)) = (self.routing_indicator, &d.routing_indicators) {
            if !ris.iter().any(|x| x == ri) {
                return false;
            }
        }
        if self.set_id.is_some_and(|s| !d.set_ids.iter().any(|x| x == s)) {
            return false;
        }
        true
    }

    /// The AMF, SMF, UDR, PLMN and authorisation filters.
    fn matches_more(&self, d: &DiscInfo) -> bool {
        fn listed<T: PartialEq>(want: &Option<T>, have: &Option<Vec<T>>) -> bool {
            match (want, have) {
                (Some(w), Some(h)) => h.contains(w),
                _ => true,
            }
        }
        if !listed(&self.guami, &d.guamis)
            || !listed(&self.amf_region_id, &d.amf_region_ids)
            || !listed(&self.amf_set_id, &d.amf_set_ids)
        {
            return false;
        }
        // A PGW-C+SMF is asked for: a profile without a PGW FQDN cannot be one.
        if let Some(pgw) = &self.pgw {
            if !d.pgw_fqdns.as_ref().is_some_and(|l| l.contains(pgw)) {
                return false;
            }
        }
        if self.pgw_ind == Some(true) && d.pgw_fqdns.is_none() {
            return false;
        }
        if let (Some(ds), Some(sets)) = (self.data_set, &d.data_sets) {
            if !sets.iter().any(|s| s == ds) {
                return false;
            }
        }
        if let (Some(want), Some(have)) = (&self.target_plmns, &d.plmns) {
            if !want.iter().any(|w| have.contains(w)) {
                return false;
            }
        }
        if let (Some(want), Some(allowed)) = (&self.requester_snssais, &d.allowed_nssais) {
            if !want.iter().any(|w| allowed.iter().any(|a| a.serves(w))) {
                return false;
            }
        }
        if let (Some(fqdn), Some(domains)) = (self.requester_fqdn, &d.allowed_domains) {
            if !domains.iter().any(|p| p.is_match(fqdn)) {
                return false;
            }
        }
        true
    }

    /// The answer order as one integer, computed once per match (a comparison sort would
    /// otherwise re-read each profile's locality, priority, capacity and load per comparison):
    /// preferred locality first, then priority (lower first), capacity (higher first), load
    /// (lower first). Equal keys stay in nfInstanceId order (the caller's sort is stable).
    fn order_key(&self, e: &Entry, preferences: Option<&[String]>) -> u128 {
        // Extended preferred locality: the rank of a profile's locality in the configured list
        // for the asked locality; without a list, the asked locality itself ranks first.
        let rank = match (self.locality, e.profile.locality.as_deref()) {
            (Some(asked), Some(loc)) => match preferences {
                Some(list) => list.iter().position(|l| l == loc).unwrap_or(usize::MAX),
                None if loc == asked => 0,
                None => usize::MAX,
            },
            _ => usize::MAX,
        };
        let priority = e.profile.priority.unwrap_or(u16::MAX);
        let capacity = u16::MAX - e.profile.capacity.unwrap_or(0);
        let load = e.profile.load.unwrap_or(0);
        (rank as u64 as u128) << 64
            | u128::from(priority) << 32
            | u128::from(capacity) << 16
            | u128::from(load)
    }
}

/// GET /nf-instances: NFDiscover.
pub async fn search(nrf: Arc<Nrf>, req: SbiRequest) -> HandlerResult {
    // The SLF's and the peer NRFs' answer times are theirs: the answer is marked with them so
    // that the NRF's own latency can be told apart (sbi::router::UpstreamWait).
    let mut waited = Duration::ZERO;
    let result = discover(&nrf, &req, &mut waited).await;
    req.with_upstream_wait(result, waited)
}

async fn discover(nrf: &Nrf, req: &SbiRequest, waited: &mut Duration) -> HandlerResult {
    let q = req.query();
    let slf_group: String;
    let mut r = Request::parse(&q, nrf.config.discovery.max_profiles)?;
    // The SLF wants the subscriber as sent (`imsi-...`, `msisdn-...`), not the digits the
    // range matching uses.
    if let Some(subscriber) =
        slf::subscriber(nrf, r.target, r.supi_raw, r.gpsi_raw, !r.groups.is_empty())
    {
        let asked = Instant::now();
        let outcome = slf::group_for(nrf, r.target, subscriber).await;
        *waited += asked.elapsed();
        match outcome {
            SlfOutcome::Group(g) => {
                slf_group = g;
                r.groups.push(&slf_group);
            }
            // The SLF knows the subscriber in no group of this type: nothing can serve it.
            SlfOutcome::Unknown => return answer(nrf, &r, &[], None),
            SlfOutcome::Unavailable(why) => match nrf.config.slf.on_failure {
                SlfFailure::Reject => {
                    return Err(ProblemDetails::new(
                        StatusCode::GATEWAY_TIMEOUT,
                        "TARGET_NF_NOT_REACHABLE",
                        format!("SLF query failed: {why}"),
                    ))
                }
                SlfFailure::Skip => {
                    tracing::warn!(%why, "SLF query failed; discovering without it")
                }
            },
        }
    }
    // The answer is assembled under the index's read lock (a scan, a sort and a byte copy; no
    // await), so the matches are borrowed rather than each Arc cloned and dropped.
    let local = {
        let index = nrf.read_index();
        let candidates = index.of_type(r.target);
        let preferences = r
            .locality
            .and_then(|l| nrf.config.discovery.locality_preferences.get(l))
            .map(Vec::as_slice);
        let mut found: Vec<(u128, &Arc<Entry>)> = candidates
            .iter()
            .filter(|e| e.profile.nf_status == models::REGISTERED && r.matches(e))
            .map(|e| (r.order_key(e, preferences), e))
            .collect();
        if found.is_empty() && nrf.config.discovery.suspended_when_empty {
            found.extend(
                candidates
                    .iter()
                    .filter(|e| e.profile.nf_status == models::SUSPENDED && r.matches(e))
                    .map(|e| (r.order_key(e, preferences), e)),
            );
        }
        if found.is_empty() && forwarding::applies(nrf, r.target, req) {
            None
        } else {
            // Stable: the candidates come in nfInstanceId order, which thereby breaks ties
            // without comparing the ids (the SMF and AMF lists are long, their ids alike).
            found.sort_by_key(|(key, _)| *key);
            let found: Vec<&Arc<Entry>> = found.into_iter().map(|(_, e)| e).collect();
            Some(answer(nrf, &r, &found, Some(index.generation())))
        }
    };
    if let Some(answer) = local {
        return answer;
    }
    // Nothing here and forwarding applies: ask the peers, else answer the empty local result.
    let asked = Instant::now();
    let forwarded = forwarding::forward(nrf, req).await;
    *waited += asked.elapsed();
    if let Some(answer) = forwarded {
        return answer;
    }
    answer(nrf, &r, &[], None)
}

/// The SearchResult, assembled from the profiles' pre-serialised consumer views, or the body
/// assembled earlier for the same profiles when `generation` (the index's, read lock held) is
/// given.
fn answer(
    nrf: &Nrf,
    r: &Request<'_>,
    found: &[&Arc<Entry>],
    generation: Option<u64>,
) -> HandlerResult {
    let validity = nrf.config.validity_period(r.target);
    let head = |out: &mut Vec<u8>| {
        use std::io::Write as _;
        let _ = write!(out, "{{\"validityPeriod\":{validity},\"nfInstances\":[");
    };
    // limit, then max-payload-size: stop before a profile that would take the answer over it.
    let mut len = {
        let mut h = Vec::with_capacity(48);
        head(&mut h);
        h.len()
    };
    let mut n = 0;
    for e in found.iter().take(r.limit) {
        if len + e.public_json.len() + 2 > r.max_payload {
            break;
        }
        len += e.public_json.len() + usize::from(n > 0);
        n += 1;
    }
    let chosen = &found[..n];
    let build = || {
        let mut out = Vec::with_capacity(len + 2);
        head(&mut out);
        for (i, e) in chosen.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(&e.public_json);
        }
        out.extend_from_slice(b"]}");
        Answer {
            body: Bytes::from(out),
            cache_control: HeaderValue::from_str(&format!("max-age={validity}"))
                .unwrap_or(HeaderValue::from_static("no-cache")),
        }
    };
    let Answer { body, cache_control } = match generation {
        Some(g) => nrf.answers.get_or_build(g, validity, chosen, build),
        None => build(),
    };
    let mut resp = http::Response::new(sbi::Body::from(body));
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(sbi::body::JSON));
    resp.headers_mut().insert(header::CACHE_CONTROL, cache_control);
    *resp.status_mut() = StatusCode::OK;
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(n: u32, attrs: Value) -> Arc<Entry> {
        let id = format!("{n:08x}-0000-4000-8000-000000000000");
        let mut v =
            serde_json::json!({"nfInstanceId": id, "nfType": "UDM", "nfStatus": "REGISTERED"});
        v.as_object_mut().unwrap().extend(attrs.as_object().unwrap().clone());
        Arc::new(Entry::new(id, serde_json::from_value(v.clone()).unwrap(), v, 1))
    }

    #[test]
    fn order_key_sorts_locality_priority_capacity_load_and_keeps_ties_in_id_order() {
        use serde_json::json;
        let entries = [
            entry(1, json!({})),
            entry(2, json!({"priority": 5, "capacity": 10, "load": 50})),
            entry(3, json!({"priority": 5, "capacity": 10, "load": 20})),
            entry(4, json!({"priority": 5, "capacity": 90, "load": 90})),
            entry(5, json!({"priority": 1, "locality": "b"})),
            entry(6, json!({"priority": 9, "locality": "a"})),
            entry(7, json!({})),
            entry(8, json!({"priority": 5, "capacity": 0, "load": 0})),
        ];
        let q = Query::parse(Some("target-nf-type=UDM&requester-nf-type=AMF"));
        let order = |r: &Request<'_>, prefs: Option<&[String]>| {
            let mut keyed: Vec<(u128, &Arc<Entry>)> =
                entries.iter().map(|e| (r.order_key(e, prefs), e)).collect();
            keyed.sort_by_key(|(k, _)| *k);
            keyed.iter().map(|(_, e)| e.key[..8].to_owned()).collect::<Vec<_>>().join(" ")
        };
        let plain = Request::parse(&q, 12).unwrap();
        // Priority; then capacity, higher first (absent = 0); then load; ties by id; absent
        // priority last.
        let expect = "00000005 00000004 00000003 00000002 00000008 00000006 00000001 00000007";
        assert_eq!(order(&plain, None), expect);
        let q = Query::parse(Some("target-nf-type=UDM&requester-nf-type=AMF&preferred-locality=a"));
        let local = Request::parse(&q, 12).unwrap();
        assert!(order(&local, None).starts_with("00000006 00000005 00000004"));
        let prefs = ["b".to_owned(), "a".to_owned()];
        assert!(order(&local, Some(&prefs)).starts_with("00000005 00000006 00000004"));
    }

    #[test]
    fn only_present_parameters_are_read_and_each_still_checked() {
        let q = Query::parse(Some("supi=imsi-1&dnn=internet&supi=imsi-2&service-names=a,b"));
        let p = Params::new(&q);
        assert!(p.has(P::Supi) && p.has(P::Dnn) && p.has(P::ServiceNames));
        assert!(!p.has(P::Gpsi) && !p.has(P::TargetNfType));
        assert!(p.get(P::Supi).is_err(), "a repeated scalar is refused");
        assert_eq!(p.get(P::Dnn).unwrap(), Some("internet"));
        assert_eq!(p.get(P::Gpsi).unwrap(), None);
        assert_eq!(p.array(P::ServiceNames), ["a", "b"]);
        assert!(p.array(P::GroupIdList).is_empty());
        let missing = p.required(P::TargetNfType).unwrap_err();
        assert_eq!(missing.cause.as_deref(), Some(cause::MANDATORY_QUERY_PARAM_MISSING));
        for name in ["target-nf-type", "requester-nf-instance-fqdn", "preferred-locality"] {
            assert_eq!(P::of(name).map(P::name), Some(name));
        }
        assert_eq!(P::of("Target-Nf-Type"), None);
    }
}
