//! Small helpers for building requests and reading answers in tests.

use serde_json::Value;

/// The `param`s of a ProblemDetails' invalidParams, in order.
pub fn params(v: &Value) -> Vec<String> {
    v["invalidParams"]
        .as_array()
        .map(|a| a.iter().map(|p| p["param"].as_str().unwrap_or("").to_owned()).collect())
        .unwrap_or_default()
}

/// Percent-encodes a query value (everything but RFC 3986 unreserved characters).
pub fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_and_reads_params() {
        assert_eq!(enc(r#"{"sst":1}"#), "%7B%22sst%22%3A1%7D");
        let v = serde_json::json!({"invalidParams": [{"param": "a"}, {"param": "b"}]});
        assert_eq!(params(&v), ["a", "b"]);
        assert!(params(&Value::Null).is_empty());
    }
}
