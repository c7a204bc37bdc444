//! Entity tags (TS 29.504 §6.1.2.2.4 to 6.1.2.2.5a, RFC 9110 §13): every stored resource has a
//! version, its ETag is that version quoted; `If-Match` makes a write conditional (412 when it
//! does not hold), `If-None-Match` makes a GET conditional (304) or a PUT create-only.
//!
//! Versions come from one clock-seeded counter, so they never repeat: a resource deleted and
//! created again never matches an ETag of its former life.

use std::sync::atomic::{AtomicI64, Ordering};

use http::{header, HeaderMap, HeaderValue, StatusCode};
use sbi::problem::cause;
use sbi::ProblemDetails;

static LAST_VERSION: AtomicI64 = AtomicI64::new(0);

/// A new version, greater than every one handed out by this process and (clock permitting) by
/// any earlier one: microseconds since the epoch, or the last version plus one.
pub fn next_version() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64);
    let mut last = LAST_VERSION.load(Ordering::Relaxed);
    loop {
        let next = now.max(last + 1);
        match LAST_VERSION.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

/// The ETag of a version: `"<hex>"`.
pub fn etag(version: i64) -> String {
    format!("\"{version:x}\"")
}

/// The ETag of a set of resources read together (a UE's whole policy data): a hash of their
/// (part, version) pairs, so any change, removal or addition of one changes it.
pub fn composite_etag<'a>(parts: impl IntoIterator<Item = (&'a str, i64)>) -> String {
    // FNV-1a: stable across runs and builds, unlike std's RandomState.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for (part, v) in parts {
        eat(part.as_bytes());
        eat(&[0]);
        eat(&v.to_le_bytes());
    }
    format!("\"c{h:x}\"")
}

pub fn header_value(etag: &str) -> HeaderValue {
    // An ETag is built from hex digits and quotes only.
    HeaderValue::from_str(etag).unwrap_or_else(|_| HeaderValue::from_static("\"0\""))
}

/// The preconditions of a request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Conditions {
    /// `If-Match`: `None` absent; `Some(vec![])` is `*`.
    pub if_match: Option<Vec<String>>,
    /// `If-None-Match`: `None` absent; `Some(vec![])` is `*`.
    pub if_none_match: Option<Vec<String>>,
}

impl Conditions {
    /// Reads `If-Match` and `If-None-Match`; a malformed one is a 400.
    pub fn from_headers(h: &HeaderMap) -> Result<Conditions, ProblemDetails> {
        Ok(Conditions {
            if_match: list(h, header::IF_MATCH)?,
            if_none_match: list(h, header::IF_NONE_MATCH)?,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.if_match.is_none() && self.if_none_match.is_none()
    }

    /// Whether a write may go ahead on a resource whose current ETag is `current` (`None`: it
    /// does not exist). `If-Match` compares strongly, `If-None-Match` weakly (RFC 9110 §13.1).
    pub fn write_allowed(&self, current: Option<&str>) -> bool {
        if !self.if_match_holds(current) {
            return false;
        }
        if let Some(tags) = &self.if_none_match {
            if let Some(cur) = current {
                if tags.is_empty() || tags.iter().any(|t| weak_eq(t, cur)) {
                    return false;
                }
            }
        }
        true
    }

    /// Whether `If-Match`, when present, holds for a resource whose ETag is `current`.
    pub fn if_match_holds(&self, current: Option<&str>) -> bool {
        match (&self.if_match, current) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(tags), Some(cur)) => tags.is_empty() || tags.iter().any(|t| t == cur),
        }
    }

    /// Whether a GET of a resource with ETag `current` is answered 304 Not Modified.
    pub fn not_modified(&self, current: &str) -> bool {
        self.if_none_match
            .as_ref()
            .is_some_and(|tags| tags.is_empty() || tags.iter().any(|t| weak_eq(t, current)))
    }
}

fn weak_eq(a: &str, b: &str) -> bool {
    a.trim_start_matches("W/") == b.trim_start_matches("W/")
}

fn list(h: &HeaderMap, name: header::HeaderName) -> Result<Option<Vec<String>>, ProblemDetails> {
    let mut values = h.get_all(&name).iter().peekable();
    if values.peek().is_none() {
        return Ok(None);
    }
    let mut tags = Vec::new();
    for v in values {
        let s = v.to_str().map_err(|_| bad(&name))?;
        for t in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            if t == "*" {
                return Ok(Some(Vec::new()));
            }
            let opaque = t.strip_prefix("W/").unwrap_or(t);
            if opaque.len() < 2 || !opaque.starts_with('"') || !opaque.ends_with('"') {
                return Err(bad(&name));
            }
            tags.push(t.to_owned());
        }
    }
    if tags.is_empty() {
        return Err(bad(&name));
    }
    Ok(Some(tags))
}

fn bad(name: &header::HeaderName) -> ProblemDetails {
    ProblemDetails::bad_request(
        cause::UNSPECIFIED_MSG_FAILURE,
        format!("{name} must be * or a list of entity tags (\"...\")"),
    )
}

/// 412 for a write whose precondition does not hold; `current` is the resource's ETag, sent
/// back so the consumer can read again and retry.
pub fn precondition_failed(current: Option<&str>) -> ProblemDetails {
    let detail = match current {
        Some(t) => format!("the resource's current entity tag is {t}"),
        None => "the resource does not exist".to_owned(),
    };
    ProblemDetails::new(StatusCode::PRECONDITION_FAILED, cause::PRECONDITION_FAILED, detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(header::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
        }
        h
    }

    #[test]
    fn versions_only_grow() {
        let a = next_version();
        let b = next_version();
        assert!(b > a);
        assert_ne!(etag(a), etag(b));
        assert_ne!(composite_etag([("a", 1), ("b", 2)]), composite_etag([("a", 1)]));
        assert_eq!(composite_etag([("a", 1)]), composite_etag([("a", 1)]));
    }

    #[test]
    fn if_match_and_if_none_match() {
        let c = Conditions::from_headers(&headers(&[("if-match", "\"1\", \"2\"")])).unwrap();
        assert!(c.write_allowed(Some("\"2\"")));
        assert!(!c.write_allowed(Some("\"3\"")));
        assert!(!c.write_allowed(None));
        let c = Conditions::from_headers(&headers(&[("if-match", "W/\"2\"")])).unwrap();
        assert!(!c.write_allowed(Some("\"2\"")), "If-Match compares strongly");
        let c = Conditions::from_headers(&headers(&[("if-match", "*")])).unwrap();
        assert!(c.write_allowed(Some("\"9\"")) && !c.write_allowed(None));
        let c = Conditions::from_headers(&headers(&[("if-none-match", "*")])).unwrap();
        assert!(c.write_allowed(None) && !c.write_allowed(Some("\"1\"")));
        let c = Conditions::from_headers(&headers(&[("if-none-match", "W/\"5\"")])).unwrap();
        assert!(c.not_modified("\"5\"") && !c.not_modified("\"6\""));
        assert!(Conditions::from_headers(&headers(&[("if-match", "abc")])).is_err());
        assert!(Conditions::from_headers(&headers(&[])).unwrap().is_empty());
    }
}
