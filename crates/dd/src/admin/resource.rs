//! The admin API's resources: their kinds, paths and bodies.

use sbi::problem::cause;
use sbi::{InvalidParam, ProblemDetails};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::pipeline::Start;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Feed,
    Filter,
    Correlation,
}

pub struct Operations {
    pub create: &'static str,
    pub list: &'static str,
    pub get: &'static str,
    pub replace: &'static str,
    pub delete: &'static str,
}

impl Kind {
    /// The store collection.
    pub fn collection(self) -> &'static str {
        match self {
            Kind::Feed => "dd_feeds",
            Kind::Filter => "dd_filters",
            Kind::Correlation => "dd_correlations",
        }
    }

    /// The kind whose store collection is `collection`.
    pub fn of_collection(collection: &str) -> Option<Kind> {
        [Kind::Filter, Kind::Feed, Kind::Correlation]
            .into_iter()
            .find(|k| k.collection() == collection)
    }

    /// The path segment.
    pub fn path(self) -> &'static str {
        match self {
            Kind::Feed => "feeds",
            Kind::Filter => "filters",
            Kind::Correlation => "correlations",
        }
    }

    pub fn singular(self) -> &'static str {
        match self {
            Kind::Feed => "feed",
            Kind::Filter => "filter",
            Kind::Correlation => "correlation",
        }
    }

    /// The collection's and an item's route templates.
    pub fn templates(self) -> (&'static str, &'static str) {
        match self {
            Kind::Feed => ("/dd-admin/v1/feeds", "/dd-admin/v1/feeds/{name}"),
            Kind::Filter => ("/dd-admin/v1/filters", "/dd-admin/v1/filters/{name}"),
            Kind::Correlation => ("/dd-admin/v1/correlations", "/dd-admin/v1/correlations/{name}"),
        }
    }

    pub fn operation(self) -> Operations {
        match self {
            Kind::Feed => Operations {
                create: "DD_Admin_CreateFeed",
                list: "DD_Admin_ListFeeds",
                get: "DD_Admin_GetFeed",
                replace: "DD_Admin_ReplaceFeed",
                delete: "DD_Admin_DeleteFeed",
            },
            Kind::Filter => Operations {
                create: "DD_Admin_CreateFilter",
                list: "DD_Admin_ListFilters",
                get: "DD_Admin_GetFilter",
                replace: "DD_Admin_ReplaceFilter",
                delete: "DD_Admin_DeleteFilter",
            },
            Kind::Correlation => Operations {
                create: "DD_Admin_CreateCorrelation",
                list: "DD_Admin_ListCorrelations",
                get: "DD_Admin_GetCorrelation",
                replace: "DD_Admin_ReplaceCorrelation",
                delete: "DD_Admin_DeleteCorrelation",
            },
        }
    }
}

/// A feed: where MAIN's copies go, which of them, from where.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedSpec {
    pub name: String,
    /// The sink's configuration (TCP, HTTP/2, Kafka), checked by the sink.
    pub sink: Value,
    /// The name of a filter; none: every copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// Where a new feed starts reading MAIN. Default latest.
    #[serde(default)]
    pub start: Start,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterSpec {
    pub name: String,
    /// The filter's configuration, checked by the filter.
    pub filter: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CorrelationSpec {
    pub name: String,
    /// The correlation's configuration, checked by the correlator.
    pub correlation: Value,
}

/// A dotted path (`conditions[2].status`, serde's) as the JSON pointer `invalidParams` carry
/// (`/conditions/2/status`); a pointer stays as it is.
pub fn pointer(path: &str) -> String {
    if path.is_empty() || path.starts_with('/') {
        return path.to_string();
    }
    let mut out = String::with_capacity(path.len() + 2);
    for part in path.split('.') {
        for piece in part.split('[') {
            let piece = piece.trim_end_matches(']');
            if !piece.is_empty() {
                out.push('/');
                out.push_str(piece);
            }
        }
    }
    out
}

/// A resource name: what goes in a path segment and a consumer name, nothing to escape.
pub fn check_name(name: &str) -> Result<String, Vec<InvalidParam>> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if ok {
        Ok(name.to_string())
    } else {
        Err(vec![InvalidParam::new(
            "/name",
            "1 to 64 characters of A-Z, a-z, 0-9, '-', '_' and '.'",
        )])
    }
}

/// The `name` of a body.
pub fn name_of(body: &Value) -> Result<String, ProblemDetails> {
    match body.get("name") {
        Some(Value::String(n)) => {
            check_name(n).map_err(|p| ProblemDetails::invalid_params(cause::INVALID_MSG_FORMAT, p))
        }
        Some(_) => Err(ProblemDetails::invalid_params(
            cause::INVALID_MSG_FORMAT,
            vec![InvalidParam::new("/name", "must be a string")],
        )),
        None => Err(ProblemDetails::invalid_params(
            cause::MANDATORY_IE_MISSING,
            vec![InvalidParam::new("/name", "is missing")],
        )),
    }
}

/// `body` as a `T` named `name`; serde's refusal names the field.
pub fn parse<T: DeserializeOwned>(name: &str, body: Value) -> Result<T, ProblemDetails> {
    check_name(name).map_err(|p| ProblemDetails::invalid_params(cause::INVALID_MSG_FORMAT, p))?;
    serde_path_to_error::deserialize::<_, T>(body).map_err(|e| {
        let path = e.path().to_string();
        let param = if path == "." { String::new() } else { pointer(&path) };
        ProblemDetails::invalid_params(
            cause::INVALID_MSG_FORMAT,
            vec![InvalidParam::new(param, e.into_inner().to_string())],
        )
    })
}

/// A component's configuration inside a resource, its refusal as pointers into the component.
pub fn parse_part<T: DeserializeOwned>(cfg: &Value) -> Result<T, Vec<InvalidParam>> {
    serde_path_to_error::deserialize::<_, T>(cfg.clone()).map_err(|e| {
        let path = e.path().to_string();
        let param = if path == "." { String::new() } else { pointer(&path) };
        vec![InvalidParam::new(param, e.into_inner().to_string())]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_are_checked_and_bodies_refused_by_field() {
        assert!(check_name("tcp-feed_1.a").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name("a/b").is_err());
        assert!(check_name(&"x".repeat(65)).is_err());
        let p = parse::<FeedSpec>("f", json!({"name": "f", "sink": {}, "start": "middle"}))
            .unwrap_err();
        assert_eq!(p.invalid_params[0].param, "/start");
        assert_eq!(pointer("conditions[2].status"), "/conditions/2/status");
        assert_eq!(pointer("/a/b"), "/a/b");
        let p = parse::<FeedSpec>("f", json!({"name": "f", "sink": {}, "sinc": 1})).unwrap_err();
        assert!(p.invalid_params[0].reason.as_ref().unwrap().contains("sinc"));
        let p = name_of(&json!({"sink": {}})).unwrap_err();
        assert_eq!(p.cause.as_deref(), Some("MANDATORY_IE_MISSING"));
    }
}
