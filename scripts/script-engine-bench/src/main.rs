//! Script-engine benchmark for fivecore issue #21.
//! Usage:
//!   script-bench check                 # verify each workload result in each engine
//!   script-bench bench <rhai|qjs|qjs-text|cel>
//!   script-bench compile <rhai|qjs|cel>
//!   script-bench mem <rhai|qjs|cel> [N]
//!   script-bench sandbox <rhai|qjs|cel> <test>
//!   script-bench access
//!   script-bench threads
mod cel_eng;
mod common;
mod qjs_eng;
mod rhai_eng;

use common::*;
use serde_json::Value as J;
use std::sync::Arc;
use std::time::{Duration, Instant};

const BUDGET: Duration = Duration::from_millis(1);
const QJS_MEM: usize = 16 * 1024 * 1024;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let a = |i: usize| args.get(i).map(|s| s.as_str()).unwrap_or("");
    match a(1) {
        "check" => check(),
        "bench" => bench(a(2)),
        "compile" => compile(a(2)),
        "mem" => mem(a(2), a(3).parse().unwrap_or(200)),
        "sandbox" => sandbox(a(2), a(3)),
        "access" => access(),
        "threads" => threads(),
        _ => eprintln!("see src/main.rs for usage"),
    }
}

fn check() {
    let (req, sub) = (req_json(), sub_json());
    let e = rhai_eng::engine(&rhai_eng::DEFAULT_LIMITS);
    let q = qjs_eng::Qjs::new(QJS_MEM);
    let env = cel_eng::env();
    let root = cel::Context::with_env(env.clone());
    for n in NAMES {
        let exp = expected(n);
        let r = rhai_eng::eval_json(&e, &rhai_eng::compile(&e, n), &req, &sub, BUDGET);
        let f = q.compile(n);
        let j = q.eval_json(&f, &req, &sub, BUDGET);
        let jt = q.eval_json_text(&f, &req, &sub, BUDGET);
        let c = cel_eng::eval_json(&root, &cel_eng::compile(&env, n), &req, &sub);
        for (eng, got) in [("rhai", r), ("qjs", j), ("qjs-text", jt), ("cel", c)] {
            let ok = got.as_ref().map(|g| g == &exp).unwrap_or(false);
            println!("CHECK {eng:8} {n:8} {} {:?}", if ok { "ok  " } else { "FAIL" }, got);
        }
    }
}

fn report(engine: &str, expr: &str, variant: &str, m: (f64, f64, f64)) {
    println!(
        "RESULT {engine:8} {expr:16} {variant:7} median_ns={:.0} min_ns={:.0} max_ns={:.0}",
        m.0, m.1, m.2
    );
}

fn bench(engine: &str) {
    let (req, sub) = (req_json(), sub_json());
    match engine {
        "rhai" => {
            let e = rhai_eng::engine(&rhai_eng::DEFAULT_LIMITS);
            let t = rhai_eng::compile(&e, "trivial");
            report("rhai", "trivial_noinput", "full", measure(|| rhai_eng::eval_noinput(&e, &t)));
            for n in NAMES {
                let ast = rhai_eng::compile(&e, n);
                report("rhai", n, "full", measure(|| rhai_eng::eval_json(&e, &ast, &req, &sub, BUDGET).unwrap()));
                let mut scope = rhai_eng::native_scope(&req, &sub);
                report("rhai", n, "native", measure(|| rhai_eng::eval_native(&e, &ast, &mut scope)));
            }
            // conversion costs alone
            report("rhai", "json->dyn(req+sub)", "conv", measure(|| {
                (rhai::serde::to_dynamic(&req).unwrap(), rhai::serde::to_dynamic(&sub).unwrap())
            }));
        }
        "qjs" | "qjs-text" => {
            let q = qjs_eng::Qjs::new(QJS_MEM);
            let t = q.compile("trivial");
            report(engine, "trivial_noinput", "full", measure(|| q.eval_noinput(&t)));
            let (pr, ps) = (q.persist_json(&req), q.persist_json(&sub));
            for n in NAMES {
                let f = q.compile(n);
                if engine == "qjs" {
                    report(engine, n, "full", measure(|| q.eval_json(&f, &req, &sub, BUDGET).unwrap()));
                    report(engine, n, "native", measure(|| q.eval_native(&f, &pr, &ps)));
                } else {
                    report(engine, n, "full", measure(|| q.eval_json_text(&f, &req, &sub, BUDGET).unwrap()));
                }
            }
            if engine == "qjs" {
                report("qjs", "json->js(req+sub)", "conv", measure(|| {
                    q.ctx.with(|ctx| {
                        let a = qjs_eng::json_to_js(&ctx, &req).unwrap();
                        let b = qjs_eng::json_to_js(&ctx, &sub).unwrap();
                        a.is_object() && b.is_object()
                    })
                }));
            }
        }
        "cel" => {
            let env = cel_eng::env();
            let root = cel::Context::with_env(env.clone());
            let t = cel_eng::compile(&env, "trivial");
            report("cel", "trivial_noinput", "full", measure(|| cel_eng::eval_noinput(&root, &t)));
            let mut nctx = cel::Context::with_env(env.clone());
            nctx.add_variable_from_value("req", cel::to_value(&req).unwrap());
            nctx.add_variable_from_value("sub", cel::to_value(&sub).unwrap());
            for n in NAMES {
                let p = cel_eng::compile(&env, n);
                report("cel", n, "full", measure(|| cel_eng::eval_json(&root, &p, &req, &sub).unwrap()));
                report("cel", n, "native", measure(|| cel_eng::eval_native(&nctx, &p)));
            }
            report("cel", "json->cel(req+sub)", "conv", measure(|| {
                (cel::to_value(&req).unwrap(), cel::to_value(&sub).unwrap())
            }));
        }
        _ => panic!("engine?"),
    }
}

fn compile(engine: &str) {
    match engine {
        "rhai" => {
            let e = rhai_eng::engine(&rhai_eng::DEFAULT_LIMITS);
            for n in NAMES {
                let src = rhai_src(n);
                report("rhai", n, "compile", measure(|| e.compile(src).unwrap()));
            }
            report("rhai", "engine_new", "create", measure(|| rhai_eng::engine(&rhai_eng::DEFAULT_LIMITS)));
        }
        "qjs" => {
            let q = qjs_eng::Qjs::new(QJS_MEM);
            for n in NAMES {
                let src = js_fn_src(n);
                report("qjs", n, "compile", measure(|| {
                    q.ctx.with(|ctx| {
                        let f: rquickjs::Function = ctx.eval(src.clone()).unwrap();
                        f.as_value().is_function()
                    })
                }));
            }
            report("qjs", "runtime+ctx_new", "create", measure(|| qjs_eng::Qjs::new(QJS_MEM)));
        }
        "cel" => {
            let env = cel_eng::env();
            for n in NAMES {
                let src = cel_src(n);
                report("cel", n, "compile", measure(|| env.compile(src).unwrap()));
            }
            report("cel", "env_stdlib_new", "create", measure(cel_eng::env));
        }
        _ => panic!("engine?"),
    }
}

fn mem(engine: &str, n: usize) {
    let (req, sub) = (req_json(), sub_json());
    let (r0, _) = rss_kib();
    macro_rules! step {
        ($label:expr, $r_prev:expr) => {{
            let (r, _) = rss_kib();
            println!(
                "MEM {engine:5} {:28} rss_total_kib={r} delta_per_instance_kib={:.1}",
                $label,
                (r as f64 - $r_prev as f64) / n as f64
            );
            r
        }};
    }
    match engine {
        "rhai" => {
            let mut v: Vec<(rhai::Engine, Vec<rhai::AST>)> = Vec::new();
            for _ in 0..n {
                v.push((rhai_eng::engine(&rhai_eng::DEFAULT_LIMITS), vec![]));
            }
            let r1 = step!("engine", r0);
            for (e, asts) in v.iter_mut() {
                for nm in NAMES {
                    asts.push(rhai_eng::compile(e, nm));
                }
                for a in asts.iter() {
                    rhai_eng::eval_json(e, a, &req, &sub, BUDGET).unwrap();
                }
            }
            step!("+5 ASTs, 1 eval each", r1);
            std::hint::black_box(&v);
        }
        "qjs" => {
            let mut v: Vec<(qjs_eng::Qjs, Vec<_>)> = Vec::new();
            for _ in 0..n {
                v.push((qjs_eng::Qjs::new(QJS_MEM), vec![]));
            }
            let r1 = step!("runtime+Context::full", r0);
            for (q, fs) in v.iter_mut() {
                for nm in NAMES {
                    fs.push(q.compile(nm));
                }
                for f in fs.iter() {
                    q.eval_json(f, &req, &sub, BUDGET).unwrap();
                }
            }
            step!("+5 functions, 1 eval each", r1);
            let mu = v[0].0.rt.memory_usage();
            println!("MEM qjs   JS_GetMemoryUsage(one runtime) malloc_size={} malloc_count={} memory_used_size={}",
                mu.malloc_size, mu.malloc_count, mu.memory_used_size);
            // v must drop before its runtimes: persistent handles are dropped first (field order)
            for (q, fs) in v.drain(..) {
                drop(fs);
                drop(q);
            }
        }
        "cel" => {
            let mut v: Vec<(Arc<cel::Env>, Vec<cel::Program>)> = Vec::new();
            for _ in 0..n {
                v.push((cel_eng::env(), vec![]));
            }
            let r1 = step!("Env::stdlib", r0);
            for (env, ps) in v.iter_mut() {
                for nm in NAMES {
                    ps.push(cel_eng::compile(env, nm));
                }
                let root = cel::Context::with_env(env.clone());
                for p in ps.iter() {
                    cel_eng::eval_json(&root, p, &req, &sub).unwrap();
                }
            }
            step!("+5 programs, 1 eval each", r1);
            std::hint::black_box(&v);
        }
        _ => panic!("engine?"),
    }
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn sandbox(engine: &str, test: &str) {
    let (req, sub) = (req_json(), sub_json());
    let before = rss_kib();
    let line = |res: &Result<String, String>, el: Duration| {
        let after = rss_kib();
        let msg = match res {
            Ok(s) => format!("OK(!) {}", &s[..s.len().min(120)]),
            Err(e) => format!("stopped: {}", e.replace('\n', " ")),
        };
        println!(
            "SANDBOX {engine:5} {test:12} elapsed_ms={:.3} rss_before_kib={} rss_after_kib={} peak_hwm_kib={} | {msg}",
            el.as_secs_f64() * 1e3, before.0, after.0, after.1
        );
    };
    match engine {
        "rhai" => {
            let src = match test {
                "loop" | "loop_ops" => "loop {}",
                "strdouble" => r#"let s = "x"; loop { s += s; }"#,
                "arraypush" => "let a = []; loop { a.push(1); }",
                "arraystr" => r#"let s = "x"; for i in 0..12 { s += s; } let a = []; loop { a.push(s); }"#,
                "nest" => "let a = [1]; loop { a = [a, a]; }",
                "mapgrow" | "mapgrow_prod" => r#"let m = #{}; let i = 0; loop { m["k" + i] = i; i += 1; }"#,
                // distinct 32 KiB strings stored by index assignment (not size-checked until the map is used)
                "mapbig_prod" | "mapbig_ops" | "mapbig_ops100k" => r#"let s = "x"; for j in 0..15 { s += s; } let m = #{}; let i = 0; loop { m["k" + i] = s + i; i += 1; }"#,
                "recursion" => "fn f(x) { f(x + 1) } f(0)",
                // one built-in call that allocates a lot at once
                "padstr" => r#"let s = "x"; s.pad(200000000, "y"); s.len"#,
                "padarr" => "let a = []; a.pad(200000000, 0); a.len",
                _ => panic!("test?"),
            };
            let mut limits = rhai_eng::DEFAULT_LIMITS;
            // isolate the limit under test: operations unlimited (0) except for loop_ops
            // *_prod / *_ops: production limits (1M operations); *_prod also has the 1 ms budget
            if test != "loop_ops" && !test.ends_with("_prod") && !test.ends_with("_ops") {
                limits.max_operations = 0;
            }
            if test.ends_with("_ops100k") {
                limits.max_operations = 100_000;
            }
            let e = rhai_eng::engine(&limits);
            let budget = if test.starts_with("loop") { BUDGET } else { Duration::from_secs(10) };
            let budget = if test.ends_with("_ops") || test.ends_with("_ops100k") { Duration::from_secs(3600) } else { budget };
            let budget = if test.ends_with("_prod") { BUDGET } else { budget };
            let mut times = vec![];
            let mut last = (Ok(String::new()), Duration::ZERO);
            let reps = if test.starts_with("loop") { 21 } else { 1 };
            for _ in 0..reps {
                last = rhai_eng::run_script(&e, src, budget);
                times.push(last.1.as_secs_f64() * 1e3);
            }
            line(&last.0, last.1);
            if times.len() > 1 {
                println!("SANDBOX rhai  {test:12} stop_time_ms over {} runs: median={:.3} p90={:.3} max={:.3} all={:.2?}",
                    times.len(), pct(&mut times, 0.5), pct(&mut times, 0.9), pct(&mut times, 1.0), times);
            }
            let after = rhai_eng::eval_json(&e, &rhai_eng::compile(&e, "d"), &req, &sub, BUDGET);
            println!("SANDBOX rhai  {test:12} engine still works afterwards: {}", after == Ok(expected("d")));
        }
        "qjs" => {
            let src = match test {
                "loop" => "while (true) {}",
                "strdouble" => r#"let s = "x"; while (true) { s += s; }"#,
                "strrepeat" => r#"let a = []; let n = 1024; while (true) { a.push("x".repeat(n)); n *= 2; }"#,
                "arraypush" => "let a = []; while (true) { a.push(1); }",
                "objpush" => r#"let a = []; while (true) { a.push({ x: a.length, y: "abc" }); }"#,
                // same, but inside a function: the array is garbage once the exception unwinds
                "objpush_fn" => r#"(function () { let a = []; while (true) { a.push({ x: a.length, y: "abc" }); } })()"#,
                "recursion" => "function f(x) { return f(x + 1) + 1; } f(0)",
                // one built-in call that allocates a lot at once
                "bigrepeat" => r#""x".repeat(200000000).length"#,
                "bigarray" => "new Array(50000000).fill(0).length",
                // catastrophic regex backtracking inside one built-in call (1 ms budget)
                "regex" => r#"/^(a+)+$/.test("a".repeat(40) + "b")"#,
                _ => panic!("test?"),
            };
            let q = qjs_eng::Qjs::new(QJS_MEM);
            let budget = if test == "loop" || test == "regex" { BUDGET } else { Duration::from_secs(10) };
            let mut times = vec![];
            let mut last = (Ok(String::new()), Duration::ZERO);
            let reps = if test == "loop" || test == "regex" { 21 } else { 1 };
            for _ in 0..reps {
                last = q.run_script(src, budget);
                times.push(last.1.as_secs_f64() * 1e3);
            }
            line(&last.0, last.1);
            if times.len() > 1 {
                println!("SANDBOX qjs   {test:12} stop_time_ms over {} runs: median={:.3} p90={:.3} max={:.3} all={:.2?}",
                    times.len(), pct(&mut times, 0.5), pct(&mut times, 0.9), pct(&mut times, 1.0), times);
            }
            q.rt.run_gc();
            let mu = q.rt.memory_usage();
            println!("SANDBOX qjs   {test:12} runtime malloc_size after (post-GC) = {} B", mu.malloc_size);
            let after = q.try_compile("d").and_then(|f| q.eval_json(&f, &req, &sub, BUDGET));
            println!("SANDBOX qjs   {test:12} same runtime still works afterwards: {} {:?}", after == Ok(expected("d")),
                after.as_ref().err());
            if after != Ok(expected("d")) {
                drop(q);
                let t = Instant::now();
                let q2 = qjs_eng::Qjs::new(QJS_MEM);
                let f = q2.compile("d");
                let ok = q2.eval_json(&f, &req, &sub, BUDGET) == Ok(expected("d"));
                println!("SANDBOX qjs   {test:12} recreated runtime+context+function in {:.3} ms, works: {ok}, rss now {} KiB",
                    t.elapsed().as_secs_f64() * 1e3, rss_kib().0);
                drop(f);
            }
        }
        "cel" => {
            let l10 = "[0,1,2,3,4,5,6,7,8,9]";
            let nested = |depth: usize| {
                let vars = ["a", "b", "c", "d", "e", "f", "g", "h"];
                let mut s = "1".to_string();
                for v in vars.iter().take(depth) {
                    s = format!("{l10}.map({v}, {s})");
                }
                s
            };
            let src = match test {
                "nest4" => nested(4),
                "nest5" => nested(5),
                "nest6" => nested(6),
                "nest7" => nested(7),
                "strconcat" => format!("{l10}.map(a, {l10}.map(b, {l10}.map(c, {l10}.map(d, \"{}\"))))", "x".repeat(1000)),
                _ => panic!("test?"),
            };
            let env = cel_eng::env();
            let t = Instant::now();
            let r = cel_eng::run_script(&env, &src);
            line(&r, t.elapsed());
            println!("SANDBOX cel   {test:12} source length {} chars", src.len());
        }
        _ => panic!("engine?"),
    }
}

fn access() {
    let dir = std::env::current_dir().unwrap().join("tmp");
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("secret.rhai");
    std::fs::write(&secret, "export const x = \"SECRET-FILE-CONTENT\";").unwrap();
    let path = secret.with_extension("");
    let import_src = format!("import \"{}\" as m; m::x", path.display());

    // Rhai default engine vs sandboxed engine
    let default_engine = rhai::Engine::new();
    let sandboxed = rhai_eng::engine(&rhai_eng::DEFAULT_LIMITS);
    for (label, e) in [("Engine::new()", &default_engine), ("sandboxed", &sandboxed)] {
        for (what, src) in [
            ("import file", import_src.as_str()),
            ("eval()", "eval(\"40 + 2\")"),
            ("print()", "print(\"print-from-rhai\"); 1"),
            ("timestamp()", "timestamp(); 1"),
        ] {
            let (r, _) = rhai_eng::run_script(e, src, Duration::from_millis(100));
            println!("ACCESS rhai {label:14} {what:12} -> {:?}", r);
        }
    }

    // QuickJS Context::full
    let q = qjs_eng::Qjs::new(QJS_MEM);
    let probe = "[typeof require, typeof process, typeof std, typeof os, typeof fetch, typeof XMLHttpRequest, \
        typeof console, typeof print, typeof setTimeout, typeof WebAssembly, typeof eval, typeof Function, \
        typeof Date, typeof Math.random].join(',')";
    println!("ACCESS qjs  globals: require,process,std,os,fetch,XMLHttpRequest,console,print,setTimeout,WebAssembly,eval,Function,Date,Math.random -> {:?}",
        q.run_script(probe, Duration::from_millis(100)).0);
    let dyn_import = format!(
        "globalThis.r = 'pending'; import('{}').then(() => {{ globalThis.r = 'loaded' }}, e => {{ globalThis.r = 'rejected: ' + e }}); 0",
        dir.join("secret.js").display()
    );
    std::fs::write(dir.join("secret.js"), "export const x = 1;").unwrap();
    let _ = q.run_script(&dyn_import, Duration::from_millis(100));
    while q.rt.is_job_pending() {
        let _ = q.rt.execute_pending_job();
    }
    println!("ACCESS qjs  dynamic import() of a file -> {:?}", q.run_script("r", Duration::from_millis(100)).0);

    // CEL
    let env = cel_eng::env();
    // typing friction: JSON numbers arrive as uint
    {
        let mut ctx = cel::Context::with_env(env.clone());
        ctx.add_variable_from_value("req", cel::to_value(&req_json()).unwrap());
        for src in ["req.ambr.uplink * 2", "req.ambr.uplink * 2u", "req.ambr.uplink > 5", "req.ambr.uplink / 2.0"] {
            let r = env.compile(src).map_err(|e| e.to_string()).and_then(|p| p.execute(&ctx).map_err(|e| e.to_string()));
            println!("TYPING cel  {src} -> {:?}", r);
        }
    }
    for src in ["env(\"HOME\")", "file(\"/etc/passwd\")", "http(\"http://127.0.0.1/\")", "timestamp(\"2024-01-01T00:00:00Z\") < timestamp(\"2025-01-01T00:00:00Z\")"] {
        println!("ACCESS cel  {src} -> {:?}", cel_eng::run_script(&env, src));
    }
}

fn threads() {
    println!("SENDSYNC rhai::Engine Send={} Sync={}", impls!(rhai::Engine: Send), impls!(rhai::Engine: Sync));
    println!("SENDSYNC rhai::AST Send={} Sync={}", impls!(rhai::AST: Send), impls!(rhai::AST: Sync));
    println!("SENDSYNC rhai::Scope Send={} Sync={}", impls!(rhai::Scope<'static>: Send), impls!(rhai::Scope<'static>: Sync));
    println!("SENDSYNC rhai::Dynamic Send={} Sync={}", impls!(rhai::Dynamic: Send), impls!(rhai::Dynamic: Sync));
    println!("SENDSYNC rquickjs::Runtime Send={} Sync={}", impls!(rquickjs::Runtime: Send), impls!(rquickjs::Runtime: Sync));
    println!("SENDSYNC rquickjs::Context Send={} Sync={}", impls!(rquickjs::Context: Send), impls!(rquickjs::Context: Sync));
    println!("SENDSYNC rquickjs::Persistent<Function> Send={} Sync={}",
        impls!(rquickjs::Persistent<rquickjs::Function<'static>>: Send), impls!(rquickjs::Persistent<rquickjs::Function<'static>>: Sync));
    println!("SENDSYNC cel::Program Send={} Sync={}", impls!(cel::Program: Send), impls!(cel::Program: Sync));
    println!("SENDSYNC cel::Env Send={} Sync={}", impls!(cel::Env: Send), impls!(cel::Env: Sync));
    println!("SENDSYNC cel::Context Send={} Sync={}", impls!(cel::Context<'static, 'static>: Send), impls!(cel::Context<'static, 'static>: Sync));
    println!("SENDSYNC cel::Value Send={} Sync={}", impls!(cel::Value: Send), impls!(cel::Value: Sync));

    let (req, sub) = (Arc::new(req_json()), Arc::new(sub_json()));
    let iters = 50_000usize;
    for nthreads in [1usize, 2] {
        // Rhai: one shared Engine + AST
        let e = Arc::new(rhai_eng::engine(&rhai_eng::DEFAULT_LIMITS));
        let ast = Arc::new(rhai_eng::compile(&e, "d"));
        let t = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..nthreads {
                let (e, ast, req, sub) = (e.clone(), ast.clone(), req.clone(), sub.clone());
                s.spawn(move || {
                    for _ in 0..iters {
                        assert_eq!(rhai_eng::eval_json(&e, &ast, &req, &sub, BUDGET).unwrap(), expected("d"));
                    }
                });
            }
        });
        println!("THREADS rhai shared Arc<Engine>+Arc<AST> threads={nthreads} evals/s={:.0}",
            (iters * nthreads) as f64 / t.elapsed().as_secs_f64());
        // Rhai: an Engine + AST per thread (to separate sharing effects)
        let t = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..nthreads {
                let (req, sub) = (req.clone(), sub.clone());
                s.spawn(move || {
                    let e = rhai_eng::engine(&rhai_eng::DEFAULT_LIMITS);
                    let ast = rhai_eng::compile(&e, "d");
                    for _ in 0..iters {
                        assert_eq!(rhai_eng::eval_json(&e, &ast, &req, &sub, BUDGET).unwrap(), expected("d"));
                    }
                });
            }
        });
        println!("THREADS rhai Engine+AST per thread threads={nthreads} evals/s={:.0}",
            (iters * nthreads) as f64 / t.elapsed().as_secs_f64());
        // Rhai: shared Engine + AST, engine-native inputs (no serde conversion)
        let t = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..nthreads {
                let (e, ast, req, sub) = (e.clone(), ast.clone(), req.clone(), sub.clone());
                s.spawn(move || {
                    let mut scope = rhai_eng::native_scope(&req, &sub);
                    for _ in 0..iters {
                        std::hint::black_box(rhai_eng::eval_native(&e, &ast, &mut scope));
                    }
                });
            }
        });
        println!("THREADS rhai shared, native inputs threads={nthreads} evals/s={:.0}",
            (iters * nthreads) as f64 / t.elapsed().as_secs_f64());
        // Rhai: Engine + AST per thread, engine-native inputs
        let t = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..nthreads {
                let (req, sub) = (req.clone(), sub.clone());
                s.spawn(move || {
                    let e = rhai_eng::engine(&rhai_eng::DEFAULT_LIMITS);
                    let ast = rhai_eng::compile(&e, "d");
                    let mut scope = rhai_eng::native_scope(&req, &sub);
                    for _ in 0..iters {
                        std::hint::black_box(rhai_eng::eval_native(&e, &ast, &mut scope));
                    }
                });
            }
        });
        println!("THREADS rhai per thread, native inputs threads={nthreads} evals/s={:.0}",
            (iters * nthreads) as f64 / t.elapsed().as_secs_f64());
        // Rhai: serde conversion only
        let t = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..nthreads {
                let (req, sub) = (req.clone(), sub.clone());
                s.spawn(move || {
                    for _ in 0..iters {
                        std::hint::black_box((rhai::serde::to_dynamic(&*req).unwrap(), rhai::serde::to_dynamic(&*sub).unwrap()));
                    }
                });
            }
        });
        println!("THREADS rhai to_dynamic(req+sub) only threads={nthreads} conversions/s={:.0}",
            (iters * nthreads) as f64 / t.elapsed().as_secs_f64());
        // CEL: one shared Program + Env; a root Context per thread
        let env = cel_eng::env();
        let p = Arc::new(cel_eng::compile(&env, "d"));
        let t = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..nthreads {
                let (env, p, req, sub) = (env.clone(), p.clone(), req.clone(), sub.clone());
                s.spawn(move || {
                    let root = cel::Context::with_env(env);
                    for _ in 0..iters {
                        assert_eq!(cel_eng::eval_json(&root, &p, &req, &sub).unwrap(), expected("d"));
                    }
                });
            }
        });
        println!("THREADS cel  shared Arc<Program>+Arc<Env> threads={nthreads} evals/s={:.0}",
            (iters * nthreads) as f64 / t.elapsed().as_secs_f64());
        // QuickJS: Runtime+Context+compiled function per thread
        let t = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..nthreads {
                let (req, sub) = (req.clone(), sub.clone());
                s.spawn(move || {
                    let q = qjs_eng::Qjs::new(QJS_MEM);
                    let f = q.compile("d");
                    for _ in 0..iters {
                        assert_eq!(q.eval_json(&f, &req, &sub, BUDGET).unwrap(), expected("d"));
                    }
                    drop(f);
                });
            }
        });
        println!("THREADS qjs  runtime per thread threads={nthreads} evals/s={:.0}",
            (iters * nthreads) as f64 / t.elapsed().as_secs_f64());
    }
}
