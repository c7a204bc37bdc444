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

impl Query {
    pub fn parse(raw: Option<&str>) -> Self {
        let Some(q) = raw.filter(|q| !q.is_empty()) else {
            return Query::default();
        };
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
