//! The 3GPP custom HTTP headers of TS 29.500 §5.2.3.2 that fivecore reads and writes.

use std::time::{Duration, SystemTime};

use chrono::{DateTime, NaiveDateTime, Utc};
use http::header::HeaderName;
use http::HeaderMap;

pub static TARGET_API_ROOT: HeaderName = HeaderName::from_static("3gpp-sbi-target-apiroot");
pub static CALLBACK: HeaderName = HeaderName::from_static("3gpp-sbi-callback");
pub static CORRELATION_INFO: HeaderName = HeaderName::from_static("3gpp-sbi-correlation-info");
pub static SENDER_TIMESTAMP: HeaderName = HeaderName::from_static("3gpp-sbi-sender-timestamp");
pub static MAX_RSP_TIME: HeaderName = HeaderName::from_static("3gpp-sbi-max-rsp-time");
pub static MESSAGE_PRIORITY: HeaderName = HeaderName::from_static("3gpp-sbi-message-priority");
pub static LCI: HeaderName = HeaderName::from_static("3gpp-sbi-lci");
pub static OCI: HeaderName = HeaderName::from_static("3gpp-sbi-oci");
pub static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// TS 29.500 §6.8: a request without 3gpp-Sbi-Message-Priority has priority 24 (0 is highest).
pub const DEFAULT_MESSAGE_PRIORITY: u8 = 24;

/// The `<NF type>-<NF instance id>` User-Agent of TS 29.500 §5.2.2.2 (e.g. `PCF-5a3c...`).
pub fn user_agent(nf_type: &str, instance_id: &str) -> String {
    format!("{nf_type}-{instance_id}")
}

/// 3gpp-Sbi-Sender-Timestamp: an IMF-fixdate with milliseconds, `Sun, 04 Aug 2019 08:49:37.845 GMT`.
pub fn format_sender_timestamp(t: SystemTime) -> String {
    let dt: DateTime<Utc> = t.into();
    dt.format("%a, %d %b %Y %H:%M:%S%.3f GMT").to_string()
}

pub fn parse_sender_timestamp(s: &str) -> Option<SystemTime> {
    let naive = NaiveDateTime::parse_from_str(s.trim(), "%a, %d %b %Y %H:%M:%S%.3f GMT").ok()?;
    Some(naive.and_utc().into())
}

/// 3gpp-Sbi-Max-Rsp-Time: the time, in milliseconds, the sender waits for an answer.
pub fn max_rsp_time(headers: &HeaderMap) -> Option<Duration> {
    let ms: u64 = headers.get(&MAX_RSP_TIME)?.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_millis(ms))
}

/// 3gpp-Sbi-Message-Priority (0..=31, lower is more important); absent means the default 24,
/// an unreadable value is treated as absent rather than failing the request.
pub fn message_priority(headers: &HeaderMap) -> u8 {
    headers
        .get(&MESSAGE_PRIORITY)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u8>().ok())
        .filter(|p| *p <= 31)
        .unwrap_or(DEFAULT_MESSAGE_PRIORITY)
}

/// 3gpp-Sbi-Oci (TS 29.500 §5.2.3.2.11) for an NF instance:
/// `Timestamp: "<date>"; Period-of-Validity: 30s; Overload-Reduction-Metric: 50%; NF-Instance: <id>`.
pub fn format_oci(
    now: SystemTime,
    validity: Duration,
    reduction_pct: u8,
    nf_instance: &str,
) -> String {
    format!(
        "Timestamp: \"{}\"; Period-of-Validity: {}s; Overload-Reduction-Metric: {}%; NF-Instance: {}",
        format_sender_timestamp(now),
        validity.as_secs(),
        reduction_pct.min(100),
        nf_instance
    )
}

/// 3gpp-Sbi-Lci (TS 29.500 §5.2.3.2.10): `Timestamp: "<date>"; Load-Metric: 35%; NF-Instance: <id>`.
pub fn format_lci(now: SystemTime, load_pct: u8, nf_instance: &str) -> String {
    format!(
        "Timestamp: \"{}\"; Load-Metric: {}%; NF-Instance: {}",
        format_sender_timestamp(now),
        load_pct.min(100),
        nf_instance
    )
}

/// Reads one `Name: value` field of an Lci/Oci header (used by clients honouring them).
pub fn lci_oci_field<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|part| {
        let (k, v) = part.split_once(':')?;
        (k.trim().eq_ignore_ascii_case(name)).then(|| v.trim().trim_matches('"'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sender_timestamp_round_trips_with_millis() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_564_908_577_845);
        let s = format_sender_timestamp(t);
        assert_eq!(s, "Sun, 04 Aug 2019 08:49:37.845 GMT");
        assert_eq!(parse_sender_timestamp(&s), Some(t));
    }

    #[test]
    fn priority_defaults_and_bounds() {
        let mut h = HeaderMap::new();
        assert_eq!(message_priority(&h), 24);
        h.insert(&MESSAGE_PRIORITY, "3".parse().unwrap());
        assert_eq!(message_priority(&h), 3);
        h.insert(&MESSAGE_PRIORITY, "99".parse().unwrap());
        assert_eq!(message_priority(&h), 24);
    }

    #[test]
    fn oci_fields_are_readable() {
        let oci = format_oci(SystemTime::now(), Duration::from_secs(5), 40, "nf-1");
        assert_eq!(lci_oci_field(&oci, "Overload-Reduction-Metric"), Some("40%"));
        assert_eq!(lci_oci_field(&oci, "NF-Instance"), Some("nf-1"));
        assert_eq!(lci_oci_field(&oci, "Period-of-Validity"), Some("5s"));
    }
}
