//! Query parameters as TS 29.501 §5.2.3 (and TS 29.500 §5.2.2) encode them: scalars, arrays in
//! form style (`service-names=nnrf-disc,nnrf-nfm`, or the key repeated), and structured values as
//! URL-encoded JSON (`snssais=[{"sst":1,"sd":"000001"}]`). Every parse failure is a 400 with
//! `invalidParams` naming the parameter.

use std::str::FromStr;

use serde::de::DeserializeOwned;

use crate::problem::{cause, InvalidParam, ProblemDetails};

#[derive(Debug, Default, Clone)]
pub struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    pub fn parse(raw: Option<&str>) -> Self {
        let pairs = raw
            .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
            .unwrap_or_default();
        Query { pairs }
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.pairs.iter().map(|(k, _)| k.as_str())
    }

    fn values<'a, 'b>(&'a self, name: &'b str) -> impl Iterator<Item = &'a str> + use<'a, 'b> {
        self.pairs.iter().filter(move |(k, _)| k == name).map(|(_, v)| v.as_str())
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
