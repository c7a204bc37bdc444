// Probes: (1) Rhai size limits on map growth; (2) operations each workload expression needs.
use std::sync::atomic::{AtomicU64, Ordering};
static OPS: AtomicU64 = AtomicU64::new(0);
fn main() {
    let mut e = rhai::Engine::new();
    e.set_max_map_size(10_000).set_max_array_size(10_000).set_max_string_size(65536).set_max_operations(0);
    for src in [
        r#"let m = #{}; for i in 0..20000 { m["k" + i] = i; } m.len()"#,
        r#"let m = #{}; for i in 0..20000 { m["k" + i] = i; } 1"#,
        r#"let a = []; for i in 0..20000 { a.push(i); } a.len()"#,
    ] {
        println!("{src}\n   -> {:?}", e.eval::<rhai::Dynamic>(src).map_err(|e| e.to_string()));
    }
    e.on_progress(|ops| { OPS.store(ops, Ordering::Relaxed); None });
    let req = serde_json::json!({"supi": "imsi-001010000000123", "dnn": "internet", "ambr": {"uplink": 100000000}});
    let sub = serde_json::json!({"tier": "gold", "allowedDnns": ["ims", "internet", "iot"]});
    for (n, src) in [
        ("a", r#"req.dnn == "internet" && sub.tier == "gold""#),
        ("b", r#"if sub.tier == "gold" { min(req.ambr.uplink * 2, 1000000000) } else { req.ambr.uplink / 2 }"#),
        ("c", r#"req.supi.starts_with("imsi-00101") && req.supi.contains("0000") && req.dnn in sub.allowedDnns"#),
        ("d", r#"let mbr = if sub.tier == "gold" { min(req.ambr.uplink * 2, 1000000000) } else { req.ambr.uplink / 2 };
#{ qos: #{ "5qi": 9, arp: #{ priorityLevel: 8 } }, mbrUl: `${mbr} bps` }"#),
    ] {
        let mut scope = rhai::Scope::new();
        scope.push_constant_dynamic("req", rhai::serde::to_dynamic(&req).unwrap());
        scope.push_constant_dynamic("sub", rhai::serde::to_dynamic(&sub).unwrap());
        OPS.store(0, Ordering::Relaxed);
        let r = e.eval_with_scope::<rhai::Dynamic>(&mut scope, src).unwrap();
        println!("OPS rhai {n}: {} operations -> {r}", OPS.load(Ordering::Relaxed));
    }
}
