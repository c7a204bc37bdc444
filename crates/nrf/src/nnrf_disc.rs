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

use crate::allowed::{Allowed, Plmn, Requester};
use crate::answers::{Answer, Chosen};
use crate::config::SlfFailure;
use crate::context::{Entry, Nrf};
use crate::forwarding;
use crate::models;
use crate::slf::{self, SlfOutcome};
use crate::view::{self, ServiceForm};

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
pub(crate) fn pattern(v: Option<&Value>) -> Option<regex::Regex> {
    regex::RegexBuilder::new(v?.as_str()?).size_limit(1 << 20).build().ok()
}

/// A TAI, lower-cased: (mcc, mnc, tac).
type Tai = (String, String, String);

/// What discovery matches a profile on. `None` means the profile does not restrict that
/// dimension (TS 29.510: an absent attribute means "any").
#[derive(Debug, Default, Clone)]
pub struct DiscInfo {
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
    /// TAC patterns of taiRangeList entries: (mcc, mnc, pattern).
    pub tac_patterns: Vec<(String, String, regex::Regex)>,
    /// amfInfo: guamiList as (mcc, mnc, amfId), amfRegionId, amfSetId (lower case).
    pub guamis: Option<Vec<(String, String, String)>>,
    pub amf_region_ids: Option<Vec<String>>,
    pub amf_set_ids: Option<Vec<String>>,
    /// smfInfo / smfInfoList: pgwFqdn and pgwFqdnList.
    pub pgw_fqdns: Option<Vec<String>>,
    /// A combined PGW-C+SMF: its smfInfo names a PGW (FQDN or IP address).
    pub pgw: bool,
    /// upfInfo: the IPv4 indexes of its DNNs, as (dnn, index); an index is an integer or a
    /// string (IpIndex), compared as text.
    pub ipv4_indexes: Vec<(String, String)>,
    /// udrInfo: supportedDataSets.
    pub data_sets: Option<Vec<String>>,
    /// plmnList as (mcc, mnc).
    pub plmns: Option<Vec<(String, String)>>,
    /// The profile's allowed* attributes (its services' are in the entry's view).
    pub allowed: Allowed,
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
    pub(crate) fn serves(&self, wanted: &Snssai) -> bool {
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

pub(crate) fn plmn_of(v: &Value) -> Option<(String, String)> {
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

/// An IpIndex (TS 29.503: an integer or a string) as text, so `3` and `"3"` are one index.
fn ip_index(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

fn push_opt<T>(slot: &mut Option<Vec<T>>, items: impl IntoIterator<Item = T>) {
    let mut items = items.into_iter().peekable();
    if items.peek().is_some() {
        slot.get_or_insert_with(Vec::new).extend(items);
    }
}

impl DiscInfo {
    pub fn from_profile(v: &Value) -> DiscInfo {
        let mut d = DiscInfo { allowed: Allowed::of(v), ..DiscInfo::default() };
        if let Some(list) = v.get("sNssais").and_then(Value::as_array) {
            d.snssais =
                Some(list.iter().filter_map(|s| serde_json::from_value(s.clone()).ok()).collect());
        }
        d.set_ids = strings(v.get("nfSetIdList")).collect();
        d.plmns = v
            .get("plmnList")
            .and_then(Value::as_array)
            .map(|l| l.iter().filter_map(plmn_of).collect());
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
        let smf_infos = v.get("smfInfo").into_iter().chain(
            v.get("smfInfoList").and_then(Value::as_object).into_iter().flat_map(|m| m.values()),
        );
        let mut fqdns: Vec<String> = Vec::new();
        for smf in smf_infos {
            fqdns.extend(strings(smf.get("pgwFqdnList")));
            fqdns.extend(smf.get("pgwFqdn").and_then(Value::as_str).map(str::to_owned));
            d.pgw |=
                smf.get("pgwIpAddrList").and_then(Value::as_array).is_some_and(|a| !a.is_empty());
        }
        d.pgw |= !fqdns.is_empty();
        if !fqdns.is_empty() {
            d.pgw_fqdns = Some(fqdns.iter().map(|f| f.to_ascii_lowercase()).collect());
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
                            dnns.clone().filter_map(|x| x.get("dnn")?.as_str().map(str::to_owned)),
                        );
                        for item in dnns {
                            let dnn = item.get("dnn").and_then(Value::as_str).unwrap_or("");
                            let list = item.get("ipv4IndexList").and_then(Value::as_array);
                            d.ipv4_indexes.extend(
                                list.into_iter()
                                    .flatten()
                                    .filter_map(ip_index)
                                    .map(|i| (dnn.to_owned(), i)),
                            );
                        }
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
    preferred_tai: Option<Tai>,
    ipv4_index: Option<String>,
    /// `requester-plmn-list`; the NRF's own PLMNs stand in when absent.
    requester_plmns: Option<Vec<Plmn>>,
    /// The NRF's own PLMNs (`plmn_list`), when it has any: the defaults of both PLMN lists.
    serving: Option<&'q [Plmn]>,
    /// Services as the requester reads them (requester-features, Service-Map).
    form: ServiceForm,
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
    PreferredTai = "preferred-tai",
    Ipv4Index = "ipv4-index",
    RequesterPlmnList = "requester-plmn-list",
    RequesterFeatures = "requester-features",
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
        let plmns = |p: P| -> Result<Option<Vec<Plmn>>, ProblemDetails> {
            match q.json::<Vec<Value>>(p)? {
                Some(l) if l.is_empty() => Err(invalid(p.name(), "an empty PlmnId list")),
                Some(l) => Ok(Some(
                    l.iter()
                        .map(|x| plmn_of(x).ok_or_else(|| invalid(p.name(), "not a PlmnId list")))
                        .collect::<Result<Vec<_>, _>>()?,
                )),
                None => Ok(None),
            }
        };
        let target_plmns = plmns(P::TargetPlmnList)?;
        let requester_plmns = plmns(P::RequesterPlmnList)?;
        let preferred_tai = match q.json::<Value>(P::PreferredTai)? {
            Some(v) => Some(tai_of(&v).ok_or_else(|| invalid("preferred-tai", "not a Tai"))?),
            None => None,
        };
        // IpIndex is JSON (an integer or a string); a bare word is taken as the string.
        let ipv4_index = match q.get(P::Ipv4Index)? {
            Some(raw) => Some(
                serde_json::from_str::<Value>(raw)
                    .ok()
                    .map_or_else(|| Some(raw.to_owned()), |v| ip_index(&v))
                    .ok_or_else(|| invalid("ipv4-index", "not an IpIndex"))?,
            ),
            None => None,
        };
        let form = match q.get(P::RequesterFeatures)? {
            Some(f) => ServiceForm::asked(Some(f), view::DISC_SERVICE_MAP).ok_or_else(|| {
                invalid("requester-features", "not a SupportedFeatures hexadecimal string")
            })?,
            None => ServiceForm::Array,
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
            preferred_tai,
            ipv4_index,
            requester_plmns,
            serving: None,
            form,
            limit,
            max_payload: max_payload * 1000,
        })
    }

    /// Whether `e` answers the request and, if so, which of its services (a mask over its
    /// view's services): the REGISTERED ones named in `service-names` (all without it) that
    /// the requester may see. A profile with services but none left for this requester is no answer.
    fn matches(&self, e: &Entry, requester: &Requester<'_>) -> Option<u64> {
        let d = &e.disc;
        if self.instance.as_ref().is_some_and(|i| *i != e.key) {
            return None;
        }
        if !d.allowed.allows(requester) {
            return None;
        }
        let selected = self.services_of(e, requester)?;
        if let (Some(want), Some(have)) = (&self.snssais, &d.snssais) {
            if !want.iter().any(|w| have.iter().any(|h| h.serves(w))) {
                return None;
            }
        }
        if let (Some(dnn), Some(dnns)) = (self.dnn, &d.dnns) {
            if !dnns.iter().any(|x| x == dnn) {
                return None;
            }
        }
        if self.tai.as_ref().is_some_and(|t| !d.serves_tai(t)) {
            return None;
        }
        let in_ranges =
            |raw: Option<&str>, id: Option<&str>, r: &Option<Vec<Range>>| match (raw, id, r) {
                (Some(raw), Some(id), Some(r)) => r.iter().any(|x| x.contains(raw, id)),
                _ => true,
            };
        if !in_ranges(self.supi_raw, self.supi, &d.supi_ranges)
            || !in_ranges(self.gpsi_raw, self.gpsi, &d.gpsi_ranges)
        {
            return None;
        }
        if !self.matches_more(d) {
            return None;
        }
        if !self.groups.is_empty() && !d.group_ids.iter().any(|g| self.groups.contains(&g.as_str()))
        {
            return None;
        }
        if let (Some(ri), Some(ris)) = (self.routing_indicator, &d.routing_indicators) {
            if !ris.iter().any(|x| x == ri) {
                return None;
            }
        }
        if self.set_id.is_some_and(|s| !d.set_ids.iter().any(|x| x == s)) {
            return None;
        }
        Some(selected)
    }

    /// The services of `e` this answer keeps (see [`Request::matches`]).
    fn services_of(&self, e: &Entry, requester: &Requester<'_>) -> Option<u64> {
        let services = &e.view.services;
        if services.is_empty() {
            // Nothing to match a service name against.
            return self.services.is_empty().then_some(0);
        }
        let mut selected = 0u64;
        for (i, s) in services.iter().enumerate() {
            let named = self.services.is_empty() || self.services.contains(&s.name.as_str());
            if named && s.registered && s.allowed.allows(requester) {
                selected |= 1 << i;
            }
        }
        (selected != 0).then_some(selected)
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
        // pgw-ind: true asks for a combined PGW-C+SMF, false for a standalone SMF.
        if self.pgw_ind.is_some_and(|combined| combined != d.pgw) {
            return false;
        }
        if let Some(index) = &self.ipv4_index {
            let dnn_ok = |dnn: &str| self.dnn.is_none_or(|want| want == dnn);
            if !d.ipv4_indexes.iter().any(|(dnn, i)| i == index && dnn_ok(dnn)) {
                return false;
            }
        }
        if let (Some(ds), Some(sets)) = (self.data_set, &d.data_sets) {
            if !sets.iter().any(|s| s == ds) {
                return false;
            }
        }
        // A profile without plmnList is in the NRF's own PLMN(s), when it has any.
        let have = d.plmns.as_deref().or(self.serving);
        if let (Some(want), Some(have)) = (self.target_plmns.as_deref().or(self.serving), have) {
            if !want.iter().any(|w| have.contains(w)) {
                return false;
            }
        }
        true
    }

    /// The requester as the allowed* attributes see it.
    fn requester(&self) -> Requester<'_> {
        Requester {
            // Checked by `Request::parse`: always one of NF_TYPES.
            nf_type: models::nf_type_bit(self.requester).unwrap_or(0),
            plmns: self.requester_plmns.as_deref().or(self.serving),
            fqdn: self.requester_fqdn,
            snssais: self.requester_snssais.as_deref(),
        }
    }

    /// The answer order as one integer, computed once per match (a comparison sort would
    /// otherwise re-read each profile's locality, priority, capacity and load per comparison):
    /// preferred locality first, then NFs serving the preferred TAI, then priority (lower
    /// first), capacity (higher first), load (lower first). Equal keys stay in nfInstanceId
    /// order (the caller's sort is stable). The bits above 64 are the preference tier (see
    /// [`tier`]).
    fn order_key(&self, e: &Entry, preferences: Option<&[String]>) -> u128 {
        // Extended preferred locality: the rank of a profile's locality in the configured list
        // for the asked locality; without a list, the asked locality itself ranks first.
        let rank = match (self.locality, e.profile.locality.as_deref()) {
            (Some(asked), Some(loc)) => match preferences {
                Some(list) => list.iter().position(|l| l == loc).unwrap_or(usize::MAX),
                None if loc == asked => 0,
                None => usize::MAX,
            },
            (Some(_), None) => usize::MAX,
            (None, _) => 0,
        };
        let rank = u32::try_from(rank).unwrap_or(u32::MAX);
        let tai_miss = self.preferred_tai.as_ref().is_some_and(|t| !e.disc.serves_tai(t));
        let priority = e.profile.priority.unwrap_or(u16::MAX);
        let capacity = u16::MAX - e.profile.capacity.unwrap_or(0);
        let load = e.profile.load.unwrap_or(0);
        u128::from(rank) << 96
            | u128::from(tai_miss) << 64
            | u128::from(priority) << 32
            | u128::from(capacity) << 16
            | u128::from(load)
    }
}

/// The preference tier of an order key: profiles of a later tier have their priorities raised
/// above those of the earlier ones in the answer (TS 29.510 §6.2.3.2.3.1, preferred-locality:
/// the NRF "should set a lower priority" for NFs outside it).
fn tier(key: u128) -> u64 {
    (key >> 64) as u64
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
    r.serving = (!nrf.serving_plmns.is_empty()).then_some(&nrf.serving_plmns[..]);
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
        let requester = r.requester();
        let with_status = |status: &'static str| {
            candidates.iter().filter(move |e| e.profile.nf_status == status).filter_map(|e| {
                let selected = r.matches(e, &requester)?;
                Some(Found { key: r.order_key(e, preferences), entry: e, selected })
            })
        };
        let mut found: Vec<Found<'_>> = with_status(models::REGISTERED).collect();
        if found.is_empty() && nrf.config.discovery.suspended_when_empty {
            found.extend(with_status(models::SUSPENDED));
        }
        if found.is_empty() && forwarding::applies(nrf, r.target, req) {
            None
        } else {
            // Stable: the candidates come in nfInstanceId order, which thereby breaks ties
            // without comparing the ids (the SMF and AMF lists are long, their ids alike).
            found.sort_by_key(|f| f.key);
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

/// A matching profile: its order key, and the services the answer keeps.
struct Found<'a> {
    key: u128,
    entry: &'a Arc<Entry>,
    selected: u64,
}

/// The end of every SearchResult: `nrfSupportedFeatures` names feature 6, Service-Map
/// (TS 29.510 §6.2.9), the one optional discovery feature this NRF implements whole.
const TAIL: &[u8] = b"],\"nrfSupportedFeatures\":\"20\"}";

/// The SearchResult, assembled from the profiles' pre-serialised consumer views, or the body
/// assembled earlier for the same choice when `generation` (the index's, read lock held) is
/// given. Profiles are taken in order until `limit`, or until the next would take the body
/// over `max-payload-size`.
fn answer(
    nrf: &Nrf,
    r: &Request<'_>,
    found: &[Found<'_>],
    generation: Option<u64>,
) -> HandlerResult {
    let validity = nrf.config.validity_period(r.target);
    let head = |out: &mut Vec<u8>| {
        use std::io::Write as _;
        let _ = write!(out, "{{\"validityPeriod\":{validity},\"nfInstances\":[");
    };
    let mut len = {
        let mut h = Vec::with_capacity(48);
        head(&mut h);
        h.len() + TAIL.len()
    };
    // Priority offsets: a later preference tier starts above the largest priority written in
    // the earlier ones, so consumers choosing by priority pick the preferred NFs.
    let mut chosen: Vec<Chosen<'_>> = Vec::with_capacity(found.len().min(r.limit));
    let (mut tier_now, mut offset, mut highest) = (found.first().map(|f| tier(f.key)), 0u32, 0u32);
    for f in found.iter().take(r.limit) {
        if Some(tier(f.key)) != tier_now {
            tier_now = Some(tier(f.key));
            offset = highest + 1;
        }
        let size = f.entry.view.len(r.form, f.selected, offset) + usize::from(!chosen.is_empty());
        if len + size > r.max_payload {
            break;
        }
        len += size;
        highest = highest.max(f.entry.view.max_priority(f.selected, offset));
        chosen.push(Chosen { entry: f.entry, selected: f.selected, offset });
    }
    let build = || {
        let mut out = Vec::with_capacity(len);
        head(&mut out);
        for (i, c) in chosen.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            c.entry.view.write(&mut out, r.form, c.selected, c.offset);
        }
        out.extend_from_slice(TAIL);
        Answer {
            body: Bytes::from(out),
            cache_control: HeaderValue::from_str(&format!("max-age={validity}"))
                .unwrap_or(HeaderValue::from_static("no-cache")),
        }
    };
    let Answer { body, cache_control } = match generation {
        Some(g) => nrf.answers.get_or_build(g, validity, r.form, &chosen, build),
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
