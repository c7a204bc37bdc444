//! The filter transform: which copies a feed (or a correlation) gets. [`config`] is the JSON a
//! filter is written in; [`Filter::compile`] checks it once and builds a tree of matchers;
//! [`Filter::matches`] answers per copy.
//!
//! A feed filters every copy of MAIN it reads, so the metadata conditions read the envelope's
//! fixed fields and strings in place (no allocation, no decoding beyond what `Copy::decode`
//! did): a filter on NF type, status and SUPI costs tens of nanoseconds (`cargo bench -p
//! fivecore-dd --bench filter`, figures in docs/dd.md). Within `all` and `any` the conditions are
//! tried cheapest first, so the JSON body is parsed only for copies that got that far, and once.

pub mod config;

use std::cell::{Cell, OnceCell};

use dd_client::envelope::{Copy, Protocol, TriggerPoint};
use regex::Regex;
use rustc_hash::FxHashSet;
use sbi::InvalidParam;
use serde_json::Value;

pub use config::{
    BodyMatch, Condition, FilterConfig, GpsiMatch, ImsiRange, OneOrMany, SampleBy, SampleSpec,
    StatusSpec, SupiMatch,
};

/// A compiled filter. Cheap to share behind an `Arc`; [`Filter::matches`] takes `&self`.
#[derive(Debug)]
pub struct Filter {
    root: Node,
}

impl Filter {
    /// Checks `config` and builds the matcher; on failure, every wrong field, named by its JSON
    /// pointer (`/conditions/2/status`), with the reason.
    pub fn compile(config: &FilterConfig) -> Result<Filter, Vec<InvalidParam>> {
        let mut errors = Vec::new();
        let children: Vec<Node> = config
            .conditions
            .iter()
            .enumerate()
            .map(|(i, c)| compile(c, &format!("/conditions/{i}"), &mut errors))
            .collect();
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Filter { root: Node::all(children) })
    }

    /// A filter every copy passes.
    pub fn pass_all() -> Filter {
        Filter { root: Node::all(Vec::new()) }
    }

    /// Whether `copy` passes.
    pub fn matches(&self, copy: &Copy) -> bool {
        let cx = Cx { copy, body: OnceCell::new() };
        self.root.eval(&cx)
    }

    /// Whether some condition reads the body (such a filter parses the JSON of the copies that
    /// reach that condition).
    pub fn reads_body(&self) -> bool {
        self.root.cost() >= BODY_COST
    }
}

/// What one evaluation knows: the copy and, once a body condition asked, its parsed body.
struct Cx<'a> {
    copy: &'a Copy,
    body: OnceCell<Option<Value>>,
}

impl Cx<'_> {
    fn body(&self) -> Option<&Value> {
        self.body.get_or_init(|| serde_json::from_slice(&self.copy.body()).ok()).as_ref()
    }
}

const BODY_COST: u32 = 1000;

#[derive(Debug)]
enum Node {
    NfType(StrSet),
    Service(StrSet),
    Operation(StrSet),
    /// Inclusive ranges.
    Status(Vec<(u32, u32)>),
    /// Bit `1 << trigger point`.
    Trigger(u8),
    /// Bit `1 << protocol`.
    Protocol(u8),
    Supi {
        prefixes: Vec<Prefix>,
        ranges: Vec<MsinRange>,
    },
    Gpsi(Vec<Prefix>),
    Body {
        pointer: String,
        test: BodyTest,
    },
    Sample {
        by: SampleBy,
        below: u64,
        seed: u64,
    },
    All(Vec<Node>),
    Any(Vec<Node>),
    Not(Box<Node>),
}

#[derive(Debug)]
enum BodyTest {
    Equals(Value),
    Exists(bool),
    Regex(Regex),
}

/// A set of names: a short list is scanned (faster than hashing for the usual one to four
/// names), a long one hashed.
#[derive(Debug)]
enum StrSet {
    Few { names: Vec<Box<str>>, fold_case: bool },
    Many { names: FxHashSet<Box<str>>, fold_case: bool },
}

const FEW: usize = 8;

impl StrSet {
    fn new(names: Vec<String>, fold_case: bool) -> StrSet {
        let norm = |s: String| if fold_case { s.to_ascii_uppercase() } else { s }.into_boxed_str();
        if names.len() <= FEW {
            StrSet::Few { names: names.into_iter().map(norm).collect(), fold_case }
        } else {
            StrSet::Many { names: names.into_iter().map(norm).collect(), fold_case }
        }
    }

    fn contains(&self, s: &str) -> bool {
        match self {
            StrSet::Few { names, fold_case: false } => names.iter().any(|n| **n == *s),
            StrSet::Few { names, fold_case: true } => {
                names.iter().any(|n| n.eq_ignore_ascii_case(s))
            }
            StrSet::Many { names, fold_case: false } => names.contains(s),
            StrSet::Many { names, fold_case: true } => {
                names.contains(s.to_ascii_uppercase().as_str())
            }
        }
    }
}

/// An identity prefix: on the digits after the type prefix (`imsi-`, `msisdn-`) when it starts
/// with a digit, on the whole identity otherwise.
#[derive(Debug)]
struct Prefix {
    text: Box<str>,
    digits: bool,
}

impl Prefix {
    fn matches(&self, id: &str) -> bool {
        let subject = if self.digits { digits_of(id) } else { id };
        subject.starts_with(&*self.text)
    }
}

#[derive(Debug)]
struct MsinRange {
    plmn: Box<str>,
    len: usize,
    from: u64,
    to: u64,
}

impl MsinRange {
    fn matches(&self, id: &str) -> bool {
        let Some(msin) = digits_of(id).strip_prefix(&*self.plmn) else { return false };
        msin.len() == self.len
            && parse_digits(msin).is_some_and(|n| (self.from..=self.to).contains(&n))
    }
}

/// The identity without its type prefix (`imsi-`, `msisdn-`, ...): the digits a Diameter copy
/// carries bare.
fn digits_of(id: &str) -> &str {
    match id.split_once('-') {
        Some((kind, rest)) if kind.bytes().all(|b| b.is_ascii_lowercase()) => rest,
        _ => id,
    }
}

/// A string of 1 to 19 ASCII digits as a number.
fn parse_digits(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 19 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

impl Node {
    /// `all` of the children, cheapest first.
    fn all(mut children: Vec<Node>) -> Node {
        children.sort_by_key(Node::cost);
        Node::All(children)
    }

    fn any(mut children: Vec<Node>) -> Node {
        children.sort_by_key(Node::cost);
        Node::Any(children)
    }

    /// A rough relative cost, to try cheap conditions first.
    fn cost(&self) -> u32 {
        match self {
            Node::Trigger(_) | Node::Protocol(_) | Node::Status(_) => 1,
            Node::NfType(_) | Node::Service(_) | Node::Operation(_) => 2,
            Node::Supi { .. } | Node::Gpsi(_) => 3,
            Node::Sample { .. } => 4,
            Node::Body { .. } => BODY_COST,
            Node::All(c) | Node::Any(c) => c.iter().map(Node::cost).sum(),
            Node::Not(c) => c.cost(),
        }
    }

    fn eval(&self, cx: &Cx<'_>) -> bool {
        let c = cx.copy;
        match self {
            Node::NfType(set) => set.contains(c.nf_type()),
            Node::Service(set) => set.contains(c.service()),
            Node::Operation(set) => set.contains(c.operation()),
            Node::Status(ranges) => {
                !c.trigger.is_request()
                    && ranges.iter().any(|&(lo, hi)| lo <= c.status && c.status <= hi)
            }
            Node::Trigger(mask) => mask & (1 << c.trigger as u8) != 0,
            Node::Protocol(mask) => mask & (1 << c.protocol as u8) != 0,
            Node::Supi { prefixes, ranges } => {
                let supi = c.supi();
                !supi.is_empty()
                    && (prefixes.iter().any(|p| p.matches(supi))
                        || ranges.iter().any(|r| r.matches(supi)))
            }
            Node::Gpsi(prefixes) => {
                let gpsi = c.gpsi();
                !gpsi.is_empty() && prefixes.iter().any(|p| p.matches(gpsi))
            }
            Node::Body { pointer, test } => {
                let field = cx.body().and_then(|b| b.pointer(pointer));
                match test {
                    BodyTest::Exists(want) => field.is_some() == *want,
                    BodyTest::Equals(v) => field == Some(v),
                    BodyTest::Regex(re) => match field {
                        Some(Value::String(s)) => re.is_match(s),
                        Some(v @ (Value::Number(_) | Value::Bool(_))) => {
                            re.is_match(&v.to_string())
                        }
                        _ => false,
                    },
                }
            }
            Node::Sample { by, below, seed } => {
                let h = match by {
                    SampleBy::Random => random_u64(),
                    SampleBy::Supi => sample_hash(c, *seed, true),
                    SampleBy::Session => sample_hash(c, *seed, false),
                    SampleBy::Transaction => transaction_hash(c, *seed),
                };
                h < *below
            }
            Node::All(children) => children.iter().all(|n| n.eval(cx)),
            Node::Any(children) => children.iter().any(|n| n.eval(cx)),
            Node::Not(child) => !child.eval(cx),
        }
    }
}

/// The subscriber's (or session's) hash; a copy without one falls back to the next key, down to
/// the transaction, so it is still sampled at the configured rate.
fn sample_hash(c: &Copy, seed: u64, by_supi: bool) -> u64 {
    if by_supi && !c.supi().is_empty() {
        // `imsi-00101...` (SBI) and `00101...` (Diameter) are one subscriber.
        return hash64(seed, digits_of(c.supi()).as_bytes());
    }
    if !c.session_id().is_empty() {
        return hash64(seed ^ 0x5e55_1011, c.session_id().as_bytes());
    }
    transaction_hash(c, seed)
}

fn transaction_hash(c: &Copy, seed: u64) -> u64 {
    fmix64(
        hash64(seed, c.nf_instance().as_bytes())
            ^ c.transaction.wrapping_mul(0x9E37_79B9_7F4A_7C15),
    )
}

/// FNV-1a, finished with MurmurHash3's mixer so that every output bit depends on every input
/// bit: the sample compares the whole value with a threshold. Fixed, so every instance and
/// every restart samples the same subscribers.
fn hash64(seed: u64, bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    fmix64(h)
}

fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

thread_local! {
    static RNG: Cell<u64> = Cell::new({
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let here = &t as *const u64 as u64;
        fmix64(t ^ here.rotate_left(32)) | 1
    });
}

/// xorshift64*: a sample needs an even spread, not unpredictability.
fn random_u64() -> u64 {
    RNG.with(|s| {
        let mut x = s.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    })
}

// === compile ===

fn compile(c: &Condition, at: &str, errors: &mut Vec<InvalidParam>) -> Node {
    match c {
        Condition::NfType(v) => Node::NfType(names(v, &format!("{at}/nf_type"), errors, true)),
        Condition::Service(v) => Node::Service(names(v, &format!("{at}/service"), errors, false)),
        Condition::Operation(v) => {
            Node::Operation(names(v, &format!("{at}/operation"), errors, false))
        }
        Condition::Status(v) => Node::Status(statuses(v, &format!("{at}/status"), errors)),
        Condition::TriggerPoint(v) => {
            let at = format!("{at}/trigger_point");
            Node::Trigger(mask(
                v,
                &at,
                errors,
                |s| TriggerPoint::parse(s).map(|t| t as u8),
                TRIGGERS,
            ))
        }
        Condition::Protocol(v) => {
            let parse = |s: &str| match s {
                "http2" => Some(Protocol::Http2 as u8),
                "diameter" => Some(Protocol::Diameter as u8),
                _ => None,
            };
            Node::Protocol(mask(v, &format!("{at}/protocol"), errors, parse, "http2, diameter"))
        }
        Condition::Supi(m) => supi(m, &format!("{at}/supi"), errors),
        Condition::Gpsi(m) => {
            let at = format!("{at}/gpsi/prefixes");
            if m.prefixes.is_empty() {
                errors.push(InvalidParam::new(at.clone(), "give at least one prefix"));
            }
            Node::Gpsi(prefixes(&m.prefixes, &at, errors))
        }
        Condition::Body(m) => body(m, &format!("{at}/body"), errors),
        Condition::Sample(s) => sample(s, &format!("{at}/sample"), errors),
        Condition::All(cs) => Node::all(children(cs, &format!("{at}/all"), errors)),
        Condition::Any(cs) => Node::any(children(cs, &format!("{at}/any"), errors)),
        Condition::Not(inner) => Node::Not(Box::new(compile(inner, &format!("{at}/not"), errors))),
    }
}

const TRIGGERS: &str = "ingress_request, ingress_response, egress_request, egress_response";

fn children(cs: &[Condition], at: &str, errors: &mut Vec<InvalidParam>) -> Vec<Node> {
    cs.iter().enumerate().map(|(i, c)| compile(c, &format!("{at}/{i}"), errors)).collect()
}

fn item_at(at: &str, i: Option<usize>) -> String {
    match i {
        Some(i) => format!("{at}/{i}"),
        None => at.to_owned(),
    }
}

fn names(
    v: &OneOrMany<String>,
    at: &str,
    errors: &mut Vec<InvalidParam>,
    fold_case: bool,
) -> StrSet {
    let items = v.items();
    if items.is_empty() {
        errors.push(InvalidParam::new(at, "give at least one name"));
    }
    for (i, s) in &items {
        if s.is_empty() {
            errors.push(InvalidParam::new(item_at(at, *i), "a name is not empty"));
        }
    }
    StrSet::new(items.into_iter().map(|(_, s)| s.clone()).collect(), fold_case)
}

fn mask(
    v: &OneOrMany<String>,
    at: &str,
    errors: &mut Vec<InvalidParam>,
    parse: impl Fn(&str) -> Option<u8>,
    known: &str,
) -> u8 {
    let items = v.items();
    if items.is_empty() {
        errors.push(InvalidParam::new(at, format!("give at least one of {known}")));
    }
    let mut m = 0u8;
    for (i, s) in items {
        match parse(s) {
            Some(bit) => m |= 1 << bit,
            None => errors.push(InvalidParam::new(
                item_at(at, i),
                format!("unknown value {s:?}; known: {known}"),
            )),
        }
    }
    m
}

fn statuses(
    v: &OneOrMany<StatusSpec>,
    at: &str,
    errors: &mut Vec<InvalidParam>,
) -> Vec<(u32, u32)> {
    let items = v.items();
    if items.is_empty() {
        errors.push(InvalidParam::new(at, "give at least one status"));
    }
    let mut out = Vec::new();
    for (i, s) in items {
        match status_range(s) {
            Ok(r) => out.push(r),
            Err(why) => errors.push(InvalidParam::new(item_at(at, i), why)),
        }
    }
    out
}

/// `201`, `"201"`, `"2xx"` / `"5xxx"` (a class: digits then `x`s), `"400-499"`.
fn status_range(s: &StatusSpec) -> Result<(u32, u32), String> {
    const HINT: &str = "a status is a code (201), a class (2xx, 5xxx) or a range (400-499)";
    let text = match s {
        StatusSpec::Code(0) => return Err(format!("0 is no status; {HINT}")),
        StatusSpec::Code(c) => return Ok((*c, *c)),
        StatusSpec::Pattern(p) => p.trim(),
    };
    let num = |t: &str| {
        t.trim()
            .parse::<u32>()
            .ok()
            .filter(|n| *n > 0 && t.trim().bytes().all(|b| b.is_ascii_digit()))
    };
    if let Some((lo, hi)) = text.split_once('-') {
        return match (num(lo), num(hi)) {
            (Some(lo), Some(hi)) if lo <= hi => Ok((lo, hi)),
            (Some(_), Some(_)) => Err(format!("{text:?}: the range's first code exceeds its last")),
            _ => Err(format!("{text:?} is not a range; {HINT}")),
        };
    }
    let x = text.bytes().rev().take_while(|b| b.eq_ignore_ascii_case(&b'x')).count();
    let head = &text[..text.len() - x];
    match num(head) {
        Some(n) if x == 0 => Ok((n, n)),
        Some(n) if x <= 6 => {
            let scale = 10u32.pow(x as u32);
            Ok((n * scale, n * scale + scale - 1))
        }
        _ => Err(format!("{text:?} is not a status; {HINT}")),
    }
}

fn prefixes(list: &[String], at: &str, errors: &mut Vec<InvalidParam>) -> Vec<Prefix> {
    list.iter()
        .enumerate()
        .map(|(i, p)| {
            if p.is_empty() {
                errors.push(InvalidParam::new(format!("{at}/{i}"), "a prefix is not empty"));
            }
            Prefix { digits: p.starts_with(|c: char| c.is_ascii_digit()), text: p.as_str().into() }
        })
        .collect()
}

fn supi(m: &SupiMatch, at: &str, errors: &mut Vec<InvalidParam>) -> Node {
    if m.prefixes.is_empty() && m.ranges.is_empty() {
        errors.push(InvalidParam::new(at, "give prefixes, ranges or both"));
    }
    let prefixes = prefixes(&m.prefixes, &format!("{at}/prefixes"), errors);
    let mut ranges = Vec::new();
    for (i, r) in m.ranges.iter().enumerate() {
        let at = format!("{at}/ranges/{i}");
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !(digits(&r.plmn) && (5..=6).contains(&r.plmn.len())) {
            errors.push(InvalidParam::new(format!("{at}/plmn"), "MCC and MNC: 5 or 6 digits"));
            continue;
        }
        let max = 15 - r.plmn.len();
        let (from, to) = (&r.msin_from, &r.msin_to);
        let mut ok = true;
        for (name, v) in [("msin_from", from), ("msin_to", to)] {
            if !digits(v) || v.len() > max {
                errors.push(InvalidParam::new(
                    format!("{at}/{name}"),
                    format!("an MSIN is 1 to {max} digits after a {}-digit PLMN", r.plmn.len()),
                ));
                ok = false;
            }
        }
        if !ok {
            continue;
        }
        if from.len() != to.len() {
            errors.push(InvalidParam::new(
                format!("{at}/msin_to"),
                "msin_from and msin_to have the same number of digits",
            ));
            continue;
        }
        let (lo, hi) = (parse_digits(from).unwrap_or(0), parse_digits(to).unwrap_or(0));
        if lo > hi {
            errors.push(InvalidParam::new(format!("{at}/msin_to"), "msin_to is below msin_from"));
            continue;
        }
        ranges.push(MsinRange { plmn: r.plmn.as_str().into(), len: from.len(), from: lo, to: hi });
    }
    Node::Supi { prefixes, ranges }
}

/// A dotted path (`a.b[0].c`, `a.b.0.c`) or a JSON pointer (`/a/b/0/c`) as a JSON pointer.
fn json_pointer(path: &str) -> Result<String, String> {
    if path.starts_with('/') {
        return Ok(path.to_owned());
    }
    if path.is_empty() {
        return Err("a path names a field: a JSON pointer (/a/b) or a dotted path (a.b)".into());
    }
    let mut out = String::new();
    for part in path.split('.') {
        if part.is_empty() {
            return Err(format!("{path:?} has an empty segment"));
        }
        let (name, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !name.is_empty() {
            out.push('/');
            out.push_str(&name.replace('~', "~0").replace('/', "~1"));
        }
        while !rest.is_empty() {
            let Some(close) = rest.find(']') else {
                return Err(format!("{path:?}: a [ without its ]"));
            };
            let index = &rest[1..close];
            if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("{path:?}: [{index}] is not an array index"));
            }
            out.push('/');
            out.push_str(index);
            rest = &rest[close + 1..];
            if !rest.is_empty() && !rest.starts_with('[') {
                return Err(format!("{path:?}: text after ] must start a new segment"));
            }
        }
    }
    Ok(out)
}

fn body(m: &BodyMatch, at: &str, errors: &mut Vec<InvalidParam>) -> Node {
    let pointer = json_pointer(&m.path).unwrap_or_else(|why| {
        errors.push(InvalidParam::new(format!("{at}/path"), why));
        String::new()
    });
    let given = [m.equals.is_some(), m.exists.is_some(), m.regex.is_some()];
    let test = if given.iter().filter(|g| **g).count() != 1 {
        errors.push(InvalidParam::new(at, "give exactly one of equals, exists, regex"));
        BodyTest::Exists(true)
    } else if let Some(v) = &m.equals {
        BodyTest::Equals(v.clone())
    } else if let Some(e) = m.exists {
        BodyTest::Exists(e)
    } else {
        let re = m.regex.as_deref().unwrap_or_default();
        match regex::RegexBuilder::new(re).size_limit(1 << 20).build() {
            Ok(re) => BodyTest::Regex(re),
            Err(e) => {
                errors.push(InvalidParam::new(format!("{at}/regex"), e.to_string()));
                BodyTest::Exists(true)
            }
        }
    };
    Node::Body { pointer, test }
}

fn sample(s: &SampleSpec, at: &str, errors: &mut Vec<InvalidParam>) -> Node {
    let p = s.percent;
    if !(p > 0.0 && p <= 100.0) {
        errors.push(InvalidParam::new(format!("{at}/percent"), "a share: 0 < percent <= 100"));
    }
    if p >= 100.0 {
        // Nothing is left out: no need to hash.
        return Node::All(Vec::new());
    }
    // h < below keeps percent % of uniformly spread 64-bit hashes.
    let below = (p / 100.0 * u64::MAX as f64) as u64;
    Node::Sample { by: s.by, below, seed: s.seed }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use dd_client::envelope::{encode, CopyMeta};
    use serde_json::json;

    fn meta() -> CopyMeta<'static> {
        CopyMeta {
            trigger: TriggerPoint::IngressResponse,
            protocol: Protocol::Http2,
            timestamp_ns: 1_790_000_000_000_000_000,
            sequence: 1,
            transaction: 7,
            stream_id: 1,
            status: 201,
            nf_type: "PCF",
            nf_instance: "pcf-1",
            service: "npcf-smpolicycontrol",
            operation: "Npcf_SMPolicyControl_Create",
            method: "POST",
            path: "/npcf-smpolicycontrol/v1/sm-policies",
            peer: "127.0.0.1:40000",
            supi: "imsi-001010000000042",
            gpsi: "msisdn-33612345678",
            session_id: "sm-1",
        }
    }

    fn copy_with(f: impl FnOnce(&mut CopyMeta<'static>), body: &[u8]) -> Copy {
        let mut m = meta();
        f(&mut m);
        let mut out = BytesMut::new();
        encode(&m, [], body, &mut out).unwrap();
        Copy::decode(out.freeze()).unwrap()
    }

    fn copy() -> Copy {
        copy_with(|_| {}, br#"{"sliceInfo":{"sst":1,"sd":"000001"},"dnn":"ims.example","pduSessionId":5,"list":[{"id":"a"},{"id":"b"}]}"#)
    }

    fn filter(conditions: serde_json::Value) -> Filter {
        let config: FilterConfig =
            serde_json::from_value(json!({ "conditions": conditions })).unwrap();
        Filter::compile(&config).unwrap()
    }

    fn errors(conditions: serde_json::Value) -> Vec<(String, String)> {
        let config: FilterConfig =
            serde_json::from_value(json!({ "conditions": conditions })).unwrap();
        Filter::compile(&config)
            .unwrap_err()
            .into_iter()
            .map(|p| (p.param, p.reason.unwrap_or_default()))
            .collect()
    }

    fn params(conditions: serde_json::Value) -> Vec<String> {
        errors(conditions).into_iter().map(|(p, _)| p).collect()
    }

    #[test]
    fn no_condition_passes_everything() {
        assert!(Filter::compile(&FilterConfig::default()).unwrap().matches(&copy()));
        assert!(Filter::pass_all().matches(&copy()));
    }

    #[test]
    fn nf_type_service_and_operation_match_names() {
        let c = copy();
        assert!(filter(json!([{"nf_type": "pcf"}])).matches(&c), "NF types ignore case");
        assert!(filter(json!([{"nf_type": ["BSF", "PCF"]}])).matches(&c));
        assert!(!filter(json!([{"nf_type": ["BSF", "NRF"]}])).matches(&c));
        assert!(filter(json!([{"service": "npcf-smpolicycontrol"}])).matches(&c));
        assert!(!filter(json!([{"service": "Npcf-SMPolicyControl"}])).matches(&c));
        assert!(
            filter(json!([{"operation": ["CCR-I", "Npcf_SMPolicyControl_Create"]}])).matches(&c)
        );
        assert!(!filter(json!([{"operation": "Npcf_SMPolicyControl_Delete"}])).matches(&c));
        let many: Vec<String> = (0..20).map(|i| format!("NF{i}")).chain(["pcf".into()]).collect();
        assert!(
            filter(json!([{"nf_type": many}])).matches(&c),
            "a long list is hashed, case folded"
        );
        assert!(!filter(
            json!([{"nf_type": (0..20).map(|i| format!("NF{i}")).collect::<Vec<_>>()}])
        )
        .matches(&c));
        assert_eq!(params(json!([{"nf_type": []}])), ["/conditions/0/nf_type"]);
        assert_eq!(params(json!([{"service": ["a", ""]}])), ["/conditions/0/service/1"]);
    }

    #[test]
    fn status_matches_codes_classes_and_ranges_of_answers_only() {
        let c = copy();
        for ok in [json!(201), json!("201"), json!("2xx"), json!(["404", "200-299"]), json!("2XX")]
        {
            assert!(filter(json!([{"status": ok}])).matches(&c), "{ok}");
        }
        for no in [json!(200), json!("4xx"), json!(["5xx", "202-299"])] {
            assert!(!filter(json!([{"status": no}])).matches(&c), "{no}");
        }
        let cca = copy_with(
            |m| {
                m.protocol = Protocol::Diameter;
                m.status = 5030;
            },
            b"",
        );
        assert!(filter(json!([{"status": "5xxx"}])).matches(&cca));
        assert!(!filter(json!([{"status": "5xx"}])).matches(&cca));
        let request = copy_with(
            |m| {
                m.trigger = TriggerPoint::IngressRequest;
                m.status = 0;
            },
            b"",
        );
        assert!(!filter(json!([{"status": "1-999"}])).matches(&request), "a request has no status");
        assert_eq!(
            params(
                json!([{"nf_type": "PCF"}, {"nf_type": "BSF"}, {"status": ["2xx", "abc", "500-400", 0, "4x4"]}])
            ),
            [
                "/conditions/2/status/1",
                "/conditions/2/status/2",
                "/conditions/2/status/3",
                "/conditions/2/status/4"
            ]
        );
        assert_eq!(params(json!([{"status": "9-"}])), ["/conditions/0/status"]);
    }

    #[test]
    fn trigger_point_and_protocol_match_their_names() {
        let c = copy();
        assert!(filter(json!([{"trigger_point": "ingress_response"}])).matches(&c));
        assert!(
            !filter(json!([{"trigger_point": ["egress_request", "egress_response"]}])).matches(&c)
        );
        assert!(filter(json!([{"protocol": "http2"}])).matches(&c));
        assert!(!filter(json!([{"protocol": ["diameter"]}])).matches(&c));
        let e =
            errors(json!([{"trigger_point": ["ingress", "egress_request"]}, {"protocol": "h2"}]));
        assert_eq!(e[0].0, "/conditions/0/trigger_point/0");
        assert!(e[0].1.contains("ingress_request"), "{}", e[0].1);
        assert_eq!(e[1].0, "/conditions/1/protocol");
    }

    #[test]
    fn supi_prefixes_and_msin_ranges() {
        let c = copy(); // imsi-001010000000042
        let diameter = copy_with(|m| m.supi = "001010000000042", b"");
        for f in [
            json!([{"supi": {"prefixes": ["00101"]}}]),
            json!([{"supi": {"ranges": [{"plmn": "00101", "msin_from": "0000000000", "msin_to": "0000000042"}]}}]),
            json!([{"supi": {"prefixes": ["999"], "ranges": [{"plmn": "00101", "msin_from": "0000000040", "msin_to": "0000000049"}]}}]),
        ] {
            assert!(filter(f.clone()).matches(&c), "{f}");
            assert!(filter(f.clone()).matches(&diameter), "{f} on the bare IMSI");
        }
        for f in [
            json!([{"supi": {"prefixes": ["00102", "imsi-2"]}}]),
            json!([{"supi": {"prefixes": ["nai-"]}}]),
            json!([{"supi": {"ranges": [{"plmn": "00101", "msin_from": "0000000043", "msin_to": "0000009999"}]}}]),
            json!([{"supi": {"ranges": [{"plmn": "001011", "msin_from": "000000000", "msin_to": "999999999"}]}}]),
        ] {
            assert!(!filter(f.clone()).matches(&c), "{f}");
        }
        let typed = filter(json!([{"supi": {"prefixes": ["imsi-0010100"]}}]));
        assert!(typed.matches(&c));
        assert!(!typed.matches(&diameter), "a typed prefix compares the identity as carried");
        let nosupi = copy_with(|m| m.supi = "", b"");
        assert!(!filter(json!([{"supi": {"prefixes": ["0"]}}])).matches(&nosupi));
        assert_eq!(
            params(json!([{"supi": {}}, {"supi": {"ranges": [
                {"plmn": "0010", "msin_from": "1", "msin_to": "2"},
                {"plmn": "00101", "msin_from": "12", "msin_to": "123"},
                {"plmn": "00101", "msin_from": "9", "msin_to": "1"},
                {"plmn": "00101", "msin_from": "a", "msin_to": "12345678901"}
            ]}}])),
            [
                "/conditions/0/supi",
                "/conditions/1/supi/ranges/0/plmn",
                "/conditions/1/supi/ranges/1/msin_to",
                "/conditions/1/supi/ranges/2/msin_to",
                "/conditions/1/supi/ranges/3/msin_from",
                "/conditions/1/supi/ranges/3/msin_to",
            ]
        );
    }

    #[test]
    fn gpsi_prefixes() {
        let c = copy(); // msisdn-33612345678
        assert!(filter(json!([{"gpsi": {"prefixes": ["336"]}}])).matches(&c));
        assert!(filter(json!([{"gpsi": {"prefixes": ["msisdn-3361"]}}])).matches(&c));
        assert!(!filter(json!([{"gpsi": {"prefixes": ["337", "extid-"]}}])).matches(&c));
        assert_eq!(params(json!([{"gpsi": {"prefixes": []}}])), ["/conditions/0/gpsi/prefixes"]);
    }

    #[test]
    fn body_fields_by_pointer_or_dotted_path() {
        let c = copy();
        for f in [
            json!({"path": "/sliceInfo/sst", "equals": 1}),
            json!({"path": "sliceInfo.sd", "equals": "000001"}),
            json!({"path": "list[1].id", "equals": "b"}),
            json!({"path": "list.0.id", "exists": true}),
            json!({"path": "ueAmbr.uplink", "exists": false}),
            json!({"path": "dnn", "regex": "^ims\\."}),
            json!({"path": "pduSessionId", "regex": "^5$"}),
            json!({"path": "sliceInfo", "equals": {"sd": "000001", "sst": 1}}),
        ] {
            assert!(filter(json!([{"body": f}])).matches(&c), "{f}");
        }
        for f in [
            json!({"path": "/sliceInfo/sst", "equals": 2}),
            json!({"path": "list[2].id", "exists": true}),
            json!({"path": "dnn", "regex": "^internet"}),
            json!({"path": "sliceInfo", "regex": "."}),
            json!({"path": "dnn", "equals": null}),
        ] {
            assert!(!filter(json!([{"body": f}])).matches(&c), "{f}");
        }
        let not_json = copy_with(|_| {}, b"\x01\x00\x00\x14binary diameter");
        assert!(filter(json!([{"body": {"path": "a", "exists": false}}])).matches(&not_json));
        assert!(!filter(json!([{"body": {"path": "a", "regex": ""}}])).matches(&not_json));
        assert_eq!(
            params(json!([
                {"body": {"path": "a"}},
                {"body": {"path": "a", "exists": true, "equals": 1}},
                {"body": {"path": "a", "regex": "("}},
                {"body": {"path": "a..b", "exists": true}},
                {"body": {"path": "a[x]", "exists": true}},
                {"body": {"path": "", "exists": true}}
            ])),
            [
                "/conditions/0/body",
                "/conditions/1/body",
                "/conditions/2/body/regex",
                "/conditions/3/body/path",
                "/conditions/4/body/path",
                "/conditions/5/body/path",
            ]
        );
    }

    #[test]
    fn dotted_paths_become_pointers() {
        assert_eq!(json_pointer("a.b[0].c").unwrap(), "/a/b/0/c");
        assert_eq!(json_pointer("a[1][2]").unwrap(), "/a/1/2");
        assert_eq!(json_pointer("a/b.c~d").unwrap(), "/a~1b/c~0d");
        assert_eq!(json_pointer("/x/y").unwrap(), "/x/y");
        assert!(json_pointer("a[1]b").is_err());
        assert!(json_pointer("a[").is_err());
    }

    /// Counts the body parses of one evaluation through the same cell `matches` uses.
    #[test]
    fn the_body_is_parsed_once_and_only_when_reached() {
        let c = copy();
        let f = filter(json!([
            {"body": {"path": "dnn", "exists": true}},
            {"nf_type": "BSF"},
            {"body": {"path": "sliceInfo.sst", "equals": 1}}
        ]));
        let cx = Cx { copy: &c, body: OnceCell::new() };
        assert!(!f.root.eval(&cx));
        assert!(cx.body.get().is_none(), "the NF type failed first: the body was never parsed");
        let f = filter(json!([
            {"body": {"path": "dnn", "exists": true}},
            {"any": [{"body": {"path": "nothing", "exists": true}}, {"body": {"path": "sliceInfo.sst", "equals": 1}}]}
        ]));
        assert!(f.reads_body());
        let cx = Cx { copy: &c, body: OnceCell::new() };
        assert!(f.root.eval(&cx));
        assert!(cx.body.get().is_some());
        assert!(!filter(json!([{"nf_type": "PCF"}])).reads_body());
    }

    #[test]
    fn all_any_and_not_combine() {
        let c = copy();
        assert!(filter(json!([{"any": [{"nf_type": "BSF"}, {"status": "2xx"}]}])).matches(&c));
        assert!(!filter(json!([{"any": []}])).matches(&c));
        assert!(filter(json!([{"all": []}])).matches(&c));
        assert!(!filter(json!([{"all": [{"nf_type": "PCF"}, {"status": "4xx"}]}])).matches(&c));
        assert!(filter(json!([{"not": {"status": "4xx"}}])).matches(&c));
        assert!(!filter(json!([{"not": {"any": [{"nf_type": "PCF"}]}}])).matches(&c));
        assert_eq!(
            params(json!([{"any": [{"nf_type": "PCF"}, {"not": {"status": "boom"}}]}])),
            ["/conditions/0/any/1/not/status"]
        );
    }

    fn subscriber(n: u64) -> Copy {
        let supi = format!("imsi-00101{n:010}");
        let supi: &'static str = Box::leak(supi.into_boxed_str());
        copy_with(
            |m| {
                m.supi = supi;
                m.transaction = n * 7
            },
            b"",
        )
    }

    #[test]
    fn sampling_by_supi_is_deterministic_per_subscriber_and_near_the_rate() {
        let f = filter(json!([{"sample": {"percent": 10}}]));
        let kept: Vec<u64> = (0..20_000).filter(|n| f.matches(&subscriber(*n))).collect();
        assert!((1_700..2_300).contains(&kept.len()), "{} of 20,000 kept at 10 %", kept.len());
        for n in kept.iter().take(50) {
            // Every message of a kept subscriber passes, whatever else differs.
            let other = copy_with(
                |m| {
                    m.supi = Box::leak(format!("{:015}", 1_010_000_000_000 + n).into_boxed_str());
                    m.trigger = TriggerPoint::EgressRequest;
                    m.transaction = 999;
                },
                b"",
            );
            assert!(f.matches(&other), "subscriber {n} as a bare IMSI");
        }
        let again = filter(json!([{"sample": {"percent": 10, "by": "supi"}}]));
        assert!((0..2_000).all(|n| f.matches(&subscriber(n)) == again.matches(&subscriber(n))));
        let seeded = filter(json!([{"sample": {"percent": 10, "seed": 7}}]));
        let differ = (0..2_000)
            .filter(|n| f.matches(&subscriber(*n)) != seeded.matches(&subscriber(*n)))
            .count();
        assert!(differ > 100, "another seed, another sample ({differ} differ)");
    }

    #[test]
    fn sampling_by_transaction_session_and_random() {
        let by_tx = filter(json!([{"sample": {"percent": 50, "by": "transaction"}}]));
        for n in 0..200 {
            let req = copy_with(
                |m| {
                    m.transaction = n;
                    m.trigger = TriggerPoint::IngressRequest
                },
                b"",
            );
            let ans = copy_with(
                |m| {
                    m.transaction = n;
                    m.supi = "imsi-999"
                },
                b"",
            );
            assert_eq!(
                by_tx.matches(&req),
                by_tx.matches(&ans),
                "a request and its answer go together"
            );
        }
        let by_session = filter(json!([{"sample": {"percent": 50, "by": "session"}}]));
        let kept = (0..2_000u64)
            .filter(|n| {
                let s: &'static str = Box::leak(format!("sess-{n}").into_boxed_str());
                by_session.matches(&copy_with(|m| m.session_id = s, b""))
            })
            .count();
        assert!((850..1_150).contains(&kept), "{kept}");
        let random = filter(json!([{"sample": {"percent": 25, "by": "random"}}]));
        let c = copy();
        let kept = (0..20_000).filter(|_| random.matches(&c)).count();
        assert!((4_500..5_500).contains(&kept), "{kept} of 20,000 at 25 %");
        assert!(filter(json!([{"sample": {"percent": 100}}])).matches(&c));
        assert_eq!(
            params(json!([{"sample": {"percent": 0}}, {"sample": {"percent": 100.5}}])),
            ["/conditions/0/sample/percent", "/conditions/1/sample/percent"]
        );
    }

    #[test]
    fn a_copy_without_a_supi_is_sampled_by_its_session_then_transaction() {
        let f = filter(json!([{"sample": {"percent": 50}}]));
        let kept = (0..2_000u64)
            .filter(|n| {
                f.matches(&copy_with(
                    |m| {
                        m.supi = "";
                        m.session_id = "";
                        m.transaction = *n
                    },
                    b"",
                ))
            })
            .count();
        assert!((850..1_150).contains(&kept), "{kept}");
    }
}
