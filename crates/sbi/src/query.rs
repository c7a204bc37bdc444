//! Query parameters as TS 29.501 §5.2.3 (and TS 29.500 §5.2.2) encode them: scalars, arrays in
//! form style (`service-names=nnrf-disc,nnrf-nfm`, or the key repeated), and structured values as
//! URL-encoded JSON (`snssais=[{"sst":1,"sd":"000001"}]`). Every parse failure is a 400 with
//! `invalidParams` naming the parameter.

use std::str::FromStr;

use serde::de::DeserializeOwned;

use crate::problem::{cause, InvalidParam, ProblemDetails};

/// The decoded parameters of one query. Every request of a discovery-heavy NF parses one, so
/// the names and values are decoded back to back into one string (two allocations per query,
/// not two per parameter).
#[derive(Debug, Default, Clone)]
pub struct Query {
    text: String,
    /// Per parameter, in order: its name is `text[.0...1]`, its value `text[.1...2]`.
    pairs: Vec<(usize, usize, usize)>,
}

/// `+` is a space, `%XX` a byte; a `%` not followed by two hex digits stays as it is (as the
/// WHATWG URL standard and `form_urlencoded` decode). Runs of plain bytes are copied whole.
fn form_decode_into(out: &mut Vec<u8>, mut s: &[u8]) {
    fn hex(b: Option<&u8>) -> Option<u8> {
        (*b? as char).to_digit(16).map(|d| d as u8)
    }
    while let Some(i) = s.iter().position(|b| *b == b'+' || *b == b'%') {
        out.extend_from_slice(&s[..i]);
        if s[i] == b'+' {
            out.push(b' ');
            s = &s[i + 1..];
            continue;
        }
        match (hex(s.get(i + 1)), hex(s.get(i + 2))) {
            (Some(h), Some(l)) => {
                out.push(h << 4 | l);
                s = &s[i + 3..];
            }
            _ => {
                out.push(b'%');
                s = &s[i + 1..];
            }
        }
    }
    out.extend_from_slice(s);
}

impl Query {
    pub fn parse(raw: Option<&str>) -> Self {
        let Some(q) = raw.filter(|q| !q.is_empty()) else {
            return Query::default();
        };
        Self::decode_utf8(q).unwrap_or_else(|| Self::decode_lossy(q))
    }

    /// application/x-www-form-urlencoded decoding done by hand, bytes straight into the text:
    /// `form_urlencoded` makes a `Cow` per name and value and checks each for UTF-8 apart (about
    /// two thirds of a discovery query's parse). `None` when a decoded name or value is not
    /// UTF-8, which [`Query::decode_lossy`] answers as before (U+FFFD).
    fn decode_utf8(q: &str) -> Option<Self> {
        let mut text = Vec::with_capacity(q.len());
        let mut pairs = Vec::with_capacity(q.bytes().filter(|b| *b == b'&').count() + 1);
        for pair in q.as_bytes().split(|b| *b == b'&').filter(|p| !p.is_empty()) {
            let (name, value) = match pair.iter().position(|b| *b == b'=') {
                Some(i) => (&pair[..i], &pair[i + 1..]),
                None => (pair, &pair[pair.len()..]),
            };
            let start = text.len();
            form_decode_into(&mut text, name);
            let mid = text.len();
            form_decode_into(&mut text, value);
            pairs.push((start, mid, text.len()));
        }
        let text = String::from_utf8(text).ok()?;
        // Valid as a whole is not enough: each name and value must be valid on its own.
        let bounded =
            pairs.iter().all(|&(a, b, _)| text.is_char_boundary(a) && text.is_char_boundary(b));
        bounded.then_some(Query { text, pairs })
    }

    fn decode_lossy(q: &str) -> Self {
        let mut text = String::with_capacity(q.len());
        let mut pairs = Vec::with_capacity(q.bytes().filter(|b| *b == b'&').count() + 1);
        for (name, value) in form_urlencoded::parse(q.as_bytes()) {
            let start = text.len();
            text.push_str(&name);
            let mid = text.len();
            text.push_str(&value);
            pairs.push((start, mid, text.len()));
        }
        Query { text, pairs }
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter().map(|&(a, b, c)| (&self.text[a..b], &self.text[b..c]))
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.pairs().map(|(k, _)| k)
    }

    fn values<'a, 'b>(&'a self, name: &'b str) -> impl Iterator<Item = &'a str> + use<'a, 'b> {
        self.pairs().filter(move |(k, _)| *k == name).map(|(_, v)| v)
    }

    /// A scalar parameter; present twice is an error, since the two could disagree.
    pub fn get(&self, name: &str) -> Result<Option<&str>, ProblemDetails> {
        let mut it = self.values(name);
        let first = it.next();
        if it.next().is_some() {
            return Err(invalid(name, "must appear at most once"));
        }
        Ok(first)
    }

    pub fn required(&self, name: &str) -> Result<&str, ProblemDetails> {
        self.get(name)?.ok_or_else(|| {
            ProblemDetails::invalid_params(
                cause::MANDATORY_QUERY_PARAM_MISSING,
                vec![InvalidParam::new(name, "mandatory query parameter is missing")],
            )
        })
    }

    /// A scalar parsed with `FromStr` (numbers, booleans, enumerations).
    pub fn parse_as<T: FromStr>(&self, name: &str) -> Result<Option<T>, ProblemDetails> {
        match self.get(name)? {
            None => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|_| invalid(name, &format!("'{v}' is not a valid value"))),
        }
    }

    /// An array of plain strings: comma-separated (explode=false) and/or a repeated key
    /// (explode=true) are both accepted, as producers meet both in the field.
    pub fn array(&self, name: &str) -> Vec<&str> {
        self.values(name).flat_map(|v| v.split(',')).filter(|s| !s.is_empty()).collect()
    }

    /// A structured value encoded as JSON in the query (content `application/json`).
    pub fn json<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>, ProblemDetails> {
        match self.get(name)? {
            None => Ok(None),
            Some(v) => serde_json::from_str(v)
                .map(Some)
                .map_err(|e| invalid(name, &format!("invalid JSON value: {e}"))),
        }
    }

    /// 400 INVALID_QUERY_PARAM for every parameter not in `known`, for operations whose API
    /// defines a closed set.
    pub fn deny_unknown(&self, known: &[&str]) -> Result<(), ProblemDetails> {
        let bad: Vec<InvalidParam> = self
            .names()
            .filter(|n| !known.contains(n))
            .map(|n| InvalidParam::new(n, "unknown query parameter"))
            .collect();
        if bad.is_empty() {
            Ok(())
        } else {
            Err(ProblemDetails::invalid_params(cause::INVALID_QUERY_PARAM, bad))
        }
    }
}

fn invalid(name: &str, reason: &str) -> ProblemDetails {
    ProblemDetails::invalid_params(
        cause::INVALID_QUERY_PARAM,
        vec![InvalidParam::new(name, reason)],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, Debug, PartialEq)]
    struct Snssai {
        sst: u8,
        sd: Option<String>,
    }

    #[test]
    fn arrays_and_json_objects() {
        let q = Query::parse(Some(
            "target-nf-type=SMF&service-names=nsmf-pdusession,nsmf-event-exposure&service-names=x\
             &snssais=%5B%7B%22sst%22%3A1%2C%22sd%22%3A%22000001%22%7D%5D&limit=5",
        ));
        assert_eq!(q.required("target-nf-type").unwrap(), "SMF");
        assert_eq!(q.array("service-names"), ["nsmf-pdusession", "nsmf-event-exposure", "x"]);
        let s: Vec<Snssai> = q.json("snssais").unwrap().unwrap();
        assert_eq!(s, [Snssai { sst: 1, sd: Some("000001".into()) }]);
        assert_eq!(q.parse_as::<u32>("limit").unwrap(), Some(5));
    }

    #[test]
    fn names_and_values_are_decoded_in_order() {
        let q = Query::parse(Some("a=1&b%20c=x+y%2Cz&&a=%E2%82%AC&empty=&flag&a"));
        assert_eq!(q.names().collect::<Vec<_>>(), ["a", "b c", "a", "empty", "flag", "a"]);
        assert_eq!(q.values("a").collect::<Vec<_>>(), ["1", "\u{20ac}", ""]);
        assert_eq!(q.get("b c").unwrap(), Some("x y,z"));
        assert_eq!(q.array("b c"), ["x y", "z"]);
        assert_eq!(q.get("empty").unwrap(), Some(""));
        assert_eq!(q.get("flag").unwrap(), Some(""));
        assert_eq!(q.get("nope").unwrap(), None);
        assert!(Query::parse(Some("")).is_empty() && Query::parse(None).is_empty());
        // Bytes that are not UTF-8 once decoded become U+FFFD, as before.
        assert_eq!(Query::parse(Some("s=%FF")).get("s").unwrap(), Some("\u{fffd}"));
    }

    #[test]
    fn hand_decoding_agrees_with_form_urlencoded() {
        let cases = [
            "a=1&b=2",
            "a=%41%42c&%62=%2b+x",
            "%&%4&%zz=%4g%&a=%",
            "a%3Db=c&==&a==b&&&=v&k=",
            "snssais=%5B%7B%22sst%22%3A1%2C%22sd%22%3A%22000001%22%7D%5D&tai={\"tac\":\"01\"}",
            "e=%E2%82%AC&f=%e2%82%ac&raw=\u{20ac}",
            // Not UTF-8 once decoded, whole or per name / value: the lossy path.
            "s=%FF",
            "x=%E2%82",
            "%E2%82=%AC",
            "%E2=%82%AC&b=1",
        ];
        for q in cases {
            let fast = Query::parse(Some(q));
            let reference = Query::decode_lossy(q);
            assert_eq!(
                fast.pairs().collect::<Vec<_>>(),
                reference.pairs().collect::<Vec<_>>(),
                "{q}"
            );
        }
        assert!(Query::decode_utf8("a=%41").is_some());
        assert!(Query::decode_utf8("s=%FF").is_none());
        assert!(Query::decode_utf8("%E2%82=%AC").is_none(), "a character split by '='");
    }

    #[test]
    fn errors_name_the_parameter() {
        let q = Query::parse(Some("limit=abc&a=1&a=2&snssais=%7B"));
        let e = q.parse_as::<u32>("limit").unwrap_err();
        assert_eq!(e.invalid_params[0].param, "limit");
        assert_eq!(e.cause.as_deref(), Some(cause::INVALID_QUERY_PARAM));
        assert!(q.get("a").is_err());
        assert!(q.json::<Vec<Snssai>>("snssais").is_err());
        let e = q.required("target-nf-type").unwrap_err();
        assert_eq!(e.cause.as_deref(), Some(cause::MANDATORY_QUERY_PARAM_MISSING));
        assert!(q.deny_unknown(&["limit", "a"]).is_err());
    }
}
