//! Request templates: text with `{generator}` placeholders.
//!
//! | placeholder | value |
//! |---|---|
//! | `{seq}` | the request's sequence number |
//! | `{i}` | index within a preload set (subscriptions) |
//! | `{uuid}` | a random UUID v4, the same everywhere in one request |
//! | `{supi}` | `imsi-` + a random SUPI of the scenario's range (one draw per request) |
//! | `{gpsi}` | `msisdn-` + the GPSI of the same subscriber as `{supi}` |
//! | `{imei}` | `imei-` + the IMEI of the same subscriber as `{supi}` (spare digit 0) |
//! | `{ue_ipv4}` | `[generators] ue_ipv4_first` + `{i}`, for preloaded SM associations an Rx load addresses; its SUPI, GPSI and IMEI are then subscriber `supi_first + i % supi_count` |
//! | `{rand:A:B}` | a random integer in A..=B |
//! | `{instance:LABEL}` | a random preloaded NF instance id of that profile set (`ANY`: any set) |
//! | `{take:POOL}` / `{peek:POOL}` | an id created earlier in the run, removed / left in the pool (the request is skipped when the pool is empty) |
//! | `{taken:POOL}` | the id this request took from POOL with `{take:POOL}` earlier in its templates (a SOAP body naming one subscriber twice) |
//! | `{pick:a|b|c}` | one of the listed values, uniformly |
//! | `{sim:NAME}` | base URL of a peer simulator (`http://127.0.0.1:PORT`) |
//!
//! A `{` not followed by a lower-case name and `}` is literal, so JSON bodies need no escaping.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Mutex;

use anyhow::{bail, Result};

use crate::sched::Rng;

#[derive(Debug, Clone, PartialEq)]
pub enum Gen {
    Seq,
    Index,
    Uuid,
    Supi,
    Gpsi,
    Imei,
    /// The UE address of index `{i}` (`Env::ue_ipv4_first` + index).
    UeIpv4,
    Rand(u64, u64),
    Instance(String),
    Take(String),
    /// The id the same request already took from the pool.
    Taken(String),
    Peek(String),
    Sim(String),
    Pick(Vec<String>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Seg {
    Lit(String),
    Gen(Gen),
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Template {
    pub segs: Vec<Seg>,
}

/// Ids created during the run (`produces`), by pool name.
#[derive(Debug, Default)]
pub struct Pools {
    inner: Mutex<HashMap<String, VecDeque<String>>>,
}

impl Pools {
    pub fn push(&self, pool: &str, id: String) {
        self.inner.lock().unwrap().entry(pool.to_string()).or_default().push_back(id);
    }
    fn take(&self, pool: &str) -> Option<String> {
        self.inner.lock().unwrap().get_mut(pool)?.pop_front()
    }
    fn peek(&self, pool: &str, rng: &mut Rng) -> Option<String> {
        let g = self.inner.lock().unwrap();
        let q = g.get(pool)?;
        if q.is_empty() {
            return None;
        }
        q.get(rng.below(q.len() as u64) as usize).cloned()
    }
    pub fn len(&self, pool: &str) -> usize {
        self.inner.lock().unwrap().get(pool).map_or(0, VecDeque::len)
    }
}

/// What generators draw from.
pub struct Env<'a> {
    pub supi_prefix: &'a str,
    pub supi_first: u64,
    pub supi_count: u64,
    pub gpsi_prefix: &'a str,
    pub imei_first: u64,
    pub ue_ipv4_first: std::net::Ipv4Addr,
    /// Preloaded instance ids by profile-set label.
    pub instances: &'a HashMap<String, Vec<String>>,
    pub pools: &'a Pools,
    pub sims: &'a HashMap<String, String>,
}

/// Per-request values shared by all templates of one request.
pub struct ReqCtx {
    pub seq: u64,
    pub index: u64,
    pub uuid: Option<String>,
    /// The subscriber (MSIN) `{supi}`, `{gpsi}` and `{imei}` name in this request.
    pub subscriber: Option<u64>,
    pub taken: Vec<(String, String)>,
}

impl ReqCtx {
    pub fn new(seq: u64, index: u64) -> Self {
        Self { seq, index, uuid: None, subscriber: None, taken: Vec::new() }
    }
    pub fn uuid(&mut self, rng: &mut Rng) -> String {
        self.uuid.get_or_insert_with(|| rng.uuid()).clone()
    }
    fn subscriber(&mut self, env: &Env, rng: &mut Rng) -> u64 {
        *self.subscriber.get_or_insert_with(|| env.supi_first + rng.below(env.supi_count.max(1)))
    }
}

impl Template {
    pub fn parse(text: &str) -> Result<Self> {
        let mut segs = Vec::new();
        let mut lit = String::new();
        let mut rest = text;
        while let Some(pos) = rest.find('{') {
            lit.push_str(&rest[..pos]);
            let after = &rest[pos + 1..];
            let is_gen = after.starts_with(|c: char| c.is_ascii_lowercase());
            let end = after.find('}');
            match (is_gen, end) {
                (true, Some(end)) if !after[..end].contains(['{', '"', ' ', '\n']) => {
                    if !lit.is_empty() {
                        segs.push(Seg::Lit(std::mem::take(&mut lit)));
                    }
                    segs.push(Seg::Gen(parse_gen(&after[..end])?));
                    rest = &after[end + 1..];
                }
                _ => {
                    lit.push('{');
                    rest = after;
                }
            }
        }
        lit.push_str(rest);
        if !lit.is_empty() {
            segs.push(Seg::Lit(lit));
        }
        Ok(Template { segs })
    }

    /// Checks that every referenced profile set, pool and simulator exists.
    pub fn check(
        &self,
        labels: &BTreeSet<String>,
        pools: &BTreeSet<String>,
        sims: &BTreeSet<&str>,
    ) -> Result<()> {
        for s in &self.segs {
            match s {
                Seg::Gen(Gen::Instance(l)) if l != "ANY" && !labels.contains(l) => {
                    bail!("no profile set {l}")
                }
                Seg::Gen(Gen::Take(p) | Gen::Taken(p) | Gen::Peek(p)) if !pools.contains(p) => {
                    bail!("no pool {p} is produced")
                }
                Seg::Gen(Gen::Sim(n)) if !sims.contains(n.as_str()) => bail!("no simulator {n}"),
                _ => {}
            }
        }
        Ok(())
    }

    /// Whether it gives a UE `{ue_ipv4}` (then the request's subscriber is the index's).
    pub fn uses_ue_ipv4(&self) -> bool {
        self.segs.iter().any(|s| matches!(s, Seg::Gen(Gen::UeIpv4)))
    }

    pub fn is_literal(&self) -> bool {
        self.segs.iter().all(|s| matches!(s, Seg::Lit(_)))
    }

    /// Renders; `None` when a `{take:..}`/`{peek:..}` pool is empty. `encode` percent-encodes
    /// generated values (for paths and queries).
    pub fn render(
        &self,
        env: &Env,
        ctx: &mut ReqCtx,
        rng: &mut Rng,
        encode: bool,
    ) -> Option<String> {
        let mut out = String::with_capacity(128);
        self.render_into(env, ctx, rng, encode, &mut out)?;
        Some(out)
    }

    /// Appends the rendering to `out`. A request renders several templates, about 15K a second
    /// in the NRF mixes: generated values are written in place, not formatted into strings of
    /// their own.
    pub fn render_into(
        &self,
        env: &Env,
        ctx: &mut ReqCtx,
        rng: &mut Rng,
        encode: bool,
        out: &mut String,
    ) -> Option<()> {
        use std::fmt::Write;
        let mut tmp = String::new();
        for s in &self.segs {
            let Seg::Gen(g) = s else {
                if let Seg::Lit(l) = s {
                    out.push_str(l);
                }
                continue;
            };
            tmp.clear();
            let v: &str = match g {
                Gen::Seq => {
                    let _ = write!(tmp, "{}", ctx.seq);
                    &tmp
                }
                Gen::Index => {
                    let _ = write!(tmp, "{}", ctx.index);
                    &tmp
                }
                Gen::Uuid => {
                    ctx.uuid.get_or_insert_with(|| rng.uuid());
                    ctx.uuid.as_deref().expect("just set")
                }
                Gen::Supi => {
                    let msin = ctx.subscriber(env, rng);
                    let _ = write!(tmp, "imsi-{}{msin:010}", env.supi_prefix);
                    &tmp
                }
                Gen::Gpsi => {
                    let msin = ctx.subscriber(env, rng);
                    let _ = write!(tmp, "msisdn-{}{msin:010}", env.gpsi_prefix);
                    &tmp
                }
                Gen::Imei => {
                    let _ = write!(tmp, "imei-{:014}0", env.imei_first + ctx.subscriber(env, rng));
                    &tmp
                }
                Gen::UeIpv4 => {
                    let a = u32::from(env.ue_ipv4_first).wrapping_add(ctx.index as u32);
                    let _ = write!(tmp, "{}", std::net::Ipv4Addr::from(a));
                    &tmp
                }
                Gen::Rand(a, b) => {
                    let _ = write!(tmp, "{}", a + rng.below(b - a + 1));
                    &tmp
                }
                Gen::Instance(l) => {
                    let v = if l == "ANY" {
                        let all: Vec<&Vec<String>> =
                            env.instances.values().filter(|v| !v.is_empty()).collect();
                        if all.is_empty() {
                            return None;
                        }
                        all[rng.below(all.len() as u64) as usize]
                    } else {
                        env.instances.get(l).filter(|v| !v.is_empty())?
                    };
                    &v[rng.below(v.len() as u64) as usize]
                }
                Gen::Take(p) => {
                    let id = env.pools.take(p)?;
                    ctx.taken.push((p.clone(), id));
                    &ctx.taken.last().expect("just pushed").1
                }
                Gen::Taken(p) => &ctx.taken.iter().rev().find(|(q, _)| q == p)?.1,
                Gen::Peek(p) => {
                    tmp = env.pools.peek(p, rng)?;
                    &tmp
                }
                Gen::Sim(n) => env.sims.get(n)?,
                Gen::Pick(v) => &v[rng.below(v.len() as u64) as usize],
            };
            if encode {
                percent_encode_into(v, out);
            } else {
                out.push_str(v);
            }
        }
        Some(())
    }
}

fn parse_gen(spec: &str) -> Result<Gen> {
    let mut parts = spec.split(':');
    let name = parts.next().unwrap_or_default();
    let args: Vec<&str> = parts.collect();
    let one = |args: &[&str]| -> Result<String> {
        match args {
            [a] if !a.is_empty() => Ok(a.to_string()),
            _ => bail!("{{{name}:..}} takes one argument"),
        }
    };
    Ok(match name {
        "seq" if args.is_empty() => Gen::Seq,
        "i" if args.is_empty() => Gen::Index,
        "uuid" if args.is_empty() => Gen::Uuid,
        "supi" if args.is_empty() => Gen::Supi,
        "gpsi" if args.is_empty() => Gen::Gpsi,
        "imei" if args.is_empty() => Gen::Imei,
        "ue_ipv4" if args.is_empty() => Gen::UeIpv4,
        "rand" => match args.as_slice() {
            [a, b] => {
                let (a, b): (u64, u64) = (a.parse()?, b.parse()?);
                if a > b {
                    bail!("{{rand:A:B}} needs A <= B");
                }
                Gen::Rand(a, b)
            }
            _ => bail!("{{rand:A:B}} takes two integers"),
        },
        "instance" => Gen::Instance(one(&args)?),
        "take" => Gen::Take(one(&args)?),
        "taken" => Gen::Taken(one(&args)?),
        "peek" => Gen::Peek(one(&args)?),
        "sim" => Gen::Sim(one(&args)?),
        "pick" => Gen::Pick(one(&args)?.split('|').map(str::to_string).collect()),
        _ => bail!("unknown generator {{{spec}}}"),
    })
}

/// Percent-encodes everything but RFC 3986 unreserved characters and `,` (TS 29.500 arrays).
///
/// Copies runs of bytes that stay as they are in one piece: a discovery query is mostly such
/// runs, and pushing it a `char` at a time was most of the cost of rendering it.
pub fn percent_encode_into(v: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let bytes = v.as_bytes();
    let mut run = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b.is_ascii_alphanumeric() || b"-._~,".contains(&b) {
            continue;
        }
        // A kept run is ASCII and ends at a byte that is encoded, so a non-empty run is a
        // whole slice of characters (inside a multi-byte character every byte is encoded and
        // the run between two of them is empty, at no character boundary).
        if run < i {
            out.push_str(&v[run..i]);
        }
        let esc = [b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]];
        out.push_str(std::str::from_utf8(&esc).expect("ASCII"));
        run = i + 1;
    }
    out.push_str(&v[run..]);
}

/// Encodes the values of a rendered `k=v&k=v` query (written unencoded in scenario files).
pub fn encode_query(q: &str) -> String {
    let mut out = String::with_capacity(q.len() + 16);
    encode_query_into(q, &mut out);
    out
}

/// [`encode_query`], appended to `out`.
pub fn encode_query_into(q: &str, out: &mut String) {
    for (n, pair) in q.split('&').enumerate() {
        if n > 0 {
            out.push('&');
        }
        match pair.split_once('=') {
            Some((k, v)) => {
                out.push_str(k);
                out.push('=');
                percent_encode_into(v, out);
            }
            None => out.push_str(pair),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ue_ipv4_counts_from_the_first_address_by_index() {
        let t = Template::parse(r#"{"ip":"{ue_ipv4}"}"#).unwrap();
        assert!(t.uses_ue_ipv4() && !Template::parse("{supi}").unwrap().uses_ue_ipv4());
        let (instances, pools, sims) = (HashMap::new(), Pools::default(), HashMap::new());
        let env = Env {
            supi_prefix: "00101",
            supi_first: 0,
            supi_count: 10,
            gpsi_prefix: "33",
            imei_first: 1,
            ue_ipv4_first: std::net::Ipv4Addr::new(100, 64, 0, 254),
            instances: &instances,
            pools: &pools,
            sims: &sims,
        };
        let mut rng = Rng::new(1);
        let at =
            |i: u64, rng: &mut Rng| t.render(&env, &mut ReqCtx::new(0, i), rng, false).unwrap();
        assert_eq!(at(0, &mut rng), r#"{"ip":"100.64.0.254"}"#);
        // Carries into the next octet: index i is always the same address, whatever the seed.
        assert_eq!(at(3, &mut rng), r#"{"ip":"100.64.1.1"}"#);
    }

    #[test]
    fn json_braces_are_literal_and_generators_render() {
        let t = Template::parse(r#"{"id":"{uuid}","n":{rand:5:5},"again":"{uuid}","s":"{seq}"}"#)
            .unwrap();
        let instances = HashMap::new();
        let pools = Pools::default();
        let sims = HashMap::from([("sink".to_string(), "http://h:1".to_string())]);
        let env = Env {
            supi_prefix: "00101",
            supi_first: 7,
            supi_count: 1,
            gpsi_prefix: "33",
            imei_first: 35_209_900_000_000,
            ue_ipv4_first: std::net::Ipv4Addr::new(100, 64, 0, 1),
            instances: &instances,
            pools: &pools,
            sims: &sims,
        };
        let mut rng = Rng::new(1);
        let mut ctx = ReqCtx::new(42, 0);
        let out = t.render(&env, &mut ctx, &mut rng, false).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["n"], 5);
        assert_eq!(v["id"], v["again"]);
        assert_eq!(v["s"], "42");
        assert_eq!(v["id"].as_str().unwrap().len(), 36);
        let ids = Template::parse("{supi} {gpsi} {imei}").unwrap();
        assert_eq!(
            ids.render(&env, &mut ReqCtx::new(1, 0), &mut rng, false).unwrap(),
            "imsi-001010000000007 msisdn-330000000007 imei-352099000000070"
        );
        assert_eq!(
            Template::parse("{pick:x|x}").unwrap().render(&env, &mut ctx, &mut rng, false).unwrap(),
            "x"
        );
        let s = Template::parse("{supi}|{sim:sink}")
            .unwrap()
            .render(&env, &mut ctx, &mut rng, false)
            .unwrap();
        assert_eq!(s, "imsi-001010000000007|http://h:1");
        assert!(Template::parse("{nope}").is_err());
        assert!(Template::parse("{take:p}")
            .unwrap()
            .render(&env, &mut ctx, &mut rng, false)
            .is_none());
        pools.push("p", "a".into());
        assert_eq!(
            Template::parse("{take:p}").unwrap().render(&env, &mut ctx, &mut rng, false).unwrap(),
            "a"
        );
        assert_eq!(pools.len("p"), 0);
        // `{taken:p}` repeats what this request took, and takes nothing more.
        pools.push("p", "b".into());
        pools.push("p", "c".into());
        let mut ctx = ReqCtx::new(2, 0);
        let t = Template::parse("<k>{take:p}</k><i>sip:+{taken:p}@x</i>").unwrap();
        assert_eq!(t.render(&env, &mut ctx, &mut rng, false).unwrap(), "<k>b</k><i>sip:+b@x</i>");
        assert_eq!(pools.len("p"), 1);
        let nothing_taken = Template::parse("{taken:p}").unwrap();
        assert!(nothing_taken.render(&env, &mut ReqCtx::new(3, 0), &mut rng, false).is_none());
    }

    #[test]
    fn query_values_are_encoded() {
        assert_eq!(
            encode_query(r#"snssai={"sst":1}&service-names=a,b"#),
            "snssai=%7B%22sst%22%3A1%7D&service-names=a,b"
        );
        // Every byte of a multi-byte character, upper-case hex; a key without a value as is.
        assert_eq!(encode_query("a=é /&flag"), "a=%C3%A9%20%2F&flag");
        let mut url = String::from("/x?");
        encode_query_into("k=v w", &mut url);
        assert_eq!(url, "/x?k=v%20w");
    }

    #[test]
    fn encoded_rendering_encodes_generated_values_not_literals() {
        let instances = HashMap::from([("AMF".to_string(), vec!["i d/1".to_string()])]);
        let pools = Pools::default();
        pools.push("q", "p q".into());
        let sims = HashMap::new();
        let env = Env {
            supi_prefix: "00101",
            supi_first: 3,
            supi_count: 1,
            gpsi_prefix: "33",
            imei_first: 0,
            ue_ipv4_first: std::net::Ipv4Addr::new(100, 64, 0, 1),
            instances: &instances,
            pools: &pools,
            sims: &sims,
        };
        let t = Template::parse("/a b/{instance:AMF}/{supi}/{peek:q}/{seq}/{rand:9:9}").unwrap();
        let mut out = String::from(">");
        t.render_into(&env, &mut ReqCtx::new(12, 0), &mut Rng::new(1), true, &mut out).unwrap();
        assert_eq!(out, ">/a b/i%20d%2F1/imsi-001010000000003/p%20q/12/9");
    }
}
