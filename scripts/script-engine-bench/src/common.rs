//! Shared inputs, expressions, timing and memory helpers.
use serde_json::{json, Value as J};
use std::time::{Duration, Instant};

/// A policy request similar to an Npcf_SMPolicyControl create (~20 top-level fields).
pub fn req_json() -> J {
    json!({
        "supi": "imsi-001010000000123",
        "gpsi": "msisdn-491711234567",
        "pei": "imeisv-3520990017614823",
        "dnn": "internet",
        "snssai": {"sst": 1, "sd": "000001"},
        "ratType": "NR",
        "accessType": "3GPP_ACCESS",
        "pduSessionId": 5,
        "pduSessionType": "IPV4",
        "ipv4Address": "10.45.0.7",
        "servingNetwork": {"mcc": "001", "mnc": "01"},
        "userLocationInfo": {"nrLocation": {
            "tai": {"plmnId": {"mcc": "001", "mnc": "01"}, "tac": "000001"},
            "ncgi": {"plmnId": {"mcc": "001", "mnc": "01"}, "nrCellId": "000000010"}}},
        "ueTimeZone": "+01:00",
        "ambr": {"uplink": 100000000, "downlink": 200000000},
        "subsDefQos": {"5qi": 9, "arp": {"priorityLevel": 8, "preemptCap": "NOT_PREEMPT",
                       "preemptVuln": "PREEMPTABLE"}, "priorityLevel": 8},
        "notificationUri": "http://smf.example/npcf-callback/v1/5",
        "suppFeat": "000f",
        "smfId": "a1b2c3d4-0000-4000-8000-000000000001",
        "chargingCharacteristics": "0800",
        "online": true
    })
}

/// Subscription data (~10 fields).
pub fn sub_json() -> J {
    json!({
        "tier": "gold",
        "usage": 123456789,
        "quota": 10000000000u64,
        "allowedDnns": ["ims", "internet", "iot"],
        "roamingAllowed": false,
        "msisdn": "491711234567",
        "plan": {"name": "gold-5g", "maxBitrate": 1000000000},
        "barred": false,
        "groups": ["enterprise", "vip"],
        "since": "2024-01-01"
    })
}

/// Expected results of the workload (checked once before timing).
pub fn expected(name: &str) -> J {
    match name {
        "trivial" | "trivial_noinput" => json!(true),
        "a" => json!(true),
        "b" => json!(200000000),
        "c" => json!(true),
        "d" => json!({"qos": {"5qi": 9, "arp": {"priorityLevel": 8}}, "mbrUl": "200000000 bps"}),
        _ => unreachable!(),
    }
}

pub const NAMES: [&str; 5] = ["trivial", "a", "b", "c", "d"];

/// Rhai sources (evaluated as a script with `req` and `sub` in the Scope).
pub fn rhai_src(name: &str) -> &'static str {
    match name {
        "trivial" | "trivial_noinput" => "true",
        "a" => r#"req.dnn == "internet" && sub.tier == "gold""#,
        "b" => r#"if sub.tier == "gold" { min(req.ambr.uplink * 2, 1000000000) } else { req.ambr.uplink / 2 }"#,
        "c" => r#"req.supi.starts_with("imsi-00101") && req.supi.contains("0000") && req.dnn in sub.allowedDnns"#,
        "d" => r#"let mbr = if sub.tier == "gold" { min(req.ambr.uplink * 2, 1000000000) } else { req.ambr.uplink / 2 };
#{ qos: #{ "5qi": 9, arp: #{ priorityLevel: 8 } }, mbrUl: `${mbr} bps` }"#,
        _ => unreachable!(),
    }
}

/// JavaScript expression bodies (wrapped as `(function(req, sub) { return (<expr>); })`).
pub fn js_src(name: &str) -> &'static str {
    match name {
        "trivial" | "trivial_noinput" => "true",
        "a" => r#"req.dnn == "internet" && sub.tier == "gold""#,
        "b" => r#"sub.tier == "gold" ? Math.min(req.ambr.uplink * 2, 1e9) : req.ambr.uplink / 2"#,
        "c" => r#"req.supi.startsWith("imsi-00101") && req.supi.includes("0000") && sub.allowedDnns.includes(req.dnn)"#,
        "d" => r#"{ qos: { "5qi": 9, arp: { priorityLevel: 8 } }, mbrUl: (sub.tier == "gold" ? Math.min(req.ambr.uplink * 2, 1e9) : req.ambr.uplink / 2) + " bps" }"#,
        _ => unreachable!(),
    }
}

pub fn js_fn_src(name: &str) -> String {
    format!("(function(req, sub) {{ return ({}); }})", js_src(name))
}

/// CEL sources. JSON numbers >= 0 arrive as CEL `uint`, so literals are `u`.
pub fn cel_src(name: &str) -> &'static str {
    match name {
        "trivial" | "trivial_noinput" => "true",
        "a" => r#"req.dnn == "internet" && sub.tier == "gold""#,
        "b" => r#"sub.tier == "gold" ? (req.ambr.uplink * 2u < 1000000000u ? req.ambr.uplink * 2u : 1000000000u) : req.ambr.uplink / 2u"#,
        "c" => r#"req.supi.startsWith("imsi-00101") && req.supi.contains("0000") && req.dnn in sub.allowedDnns"#,
        "d" => r#"{"qos": {"5qi": 9, "arp": {"priorityLevel": 8}}, "mbrUl": string(sub.tier == "gold" ? (req.ambr.uplink * 2u < 1000000000u ? req.ambr.uplink * 2u : 1000000000u) : req.ambr.uplink / 2u) + " bps"}"#,
        _ => unreachable!(),
    }
}

/// Median ns per call of `f`: calibrates a batch of ~10 ms, warms up ~100 ms,
/// then times `batches` batches and returns (median, min, max) ns/iter.
pub fn measure<R>(mut f: impl FnMut() -> R) -> (f64, f64, f64) {
    // calibrate
    let mut iters: u64 = 1;
    loop {
        let t = Instant::now();
        for _ in 0..iters {
            std::hint::black_box(f());
        }
        let el = t.elapsed();
        if el >= Duration::from_millis(10) {
            break;
        }
        iters *= 2;
    }
    // warm-up
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(100) {
        for _ in 0..iters {
            std::hint::black_box(f());
        }
    }
    let batches = 21;
    let mut v = Vec::with_capacity(batches);
    for _ in 0..batches {
        let t = Instant::now();
        for _ in 0..iters {
            std::hint::black_box(f());
        }
        v.push(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[batches / 2], v[0], v[batches - 1])
}

/// (VmRSS, VmHWM) in KiB from /proc/self/status.
pub fn rss_kib() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let get = |key: &str| {
        s.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (get("VmRSS:"), get("VmHWM:"))
}

/// Compile-time check that prints whether a concrete type is Send / Sync
/// (inherent impl with a bound takes precedence over the trait fallback).
#[macro_export]
macro_rules! impls {
    ($t:ty : $tr:path) => {{
        struct Check<T: ?Sized>(core::marker::PhantomData<T>);
        #[allow(dead_code)]
        trait Fallback {
            fn get(&self) -> bool {
                false
            }
        }
        impl<T: ?Sized> Fallback for Check<T> {}
        #[allow(dead_code)]
        impl<T: ?Sized + $tr> Check<T> {
            fn get(&self) -> bool {
                true
            }
        }
        Check::<$t>(core::marker::PhantomData).get()
    }};
}
