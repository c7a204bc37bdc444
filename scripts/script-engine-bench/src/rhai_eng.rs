//! Rhai: one Engine (Send + Sync with feature "sync"), ASTs compiled once,
//! a fresh Scope per evaluation.
use rhai::{Dynamic, Engine, Scope, AST};
use serde_json::Value as J;
use std::cell::Cell;
use std::time::{Duration, Instant};

thread_local! {
    /// Wall-clock deadline of the evaluation running on this thread.
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

pub struct Limits {
    pub max_operations: u64,
    pub max_string: usize,
    pub max_array: usize,
    pub max_map: usize,
    pub max_call_levels: usize,
}

pub const DEFAULT_LIMITS: Limits = Limits {
    max_operations: 1_000_000,
    max_string: 64 * 1024,
    max_array: 10_000,
    max_map: 10_000,
    max_call_levels: 32,
};

/// A sandboxed engine: limits, on_progress wall-clock check, no module
/// resolver (the default one reads files), print/debug swallowed, `eval` disabled.
pub fn engine(l: &Limits) -> Engine {
    let mut e = Engine::new();
    e.set_max_operations(l.max_operations)
        .set_max_string_size(l.max_string)
        .set_max_array_size(l.max_array)
        .set_max_map_size(l.max_map)
        .set_max_call_levels(l.max_call_levels)
        .set_max_expr_depths(64, 32)
        .set_module_resolver(rhai::module_resolvers::DummyModuleResolver::new())
        .on_print(|_| {})
        .on_debug(|_, _, _| {})
        .disable_symbol("eval");
    // The strings interner sits behind one write lock per Engine (feature "sync"):
    // a shared Engine serialises all threads on it. RHAI_INTERN=0 turns it off.
    if std::env::var("RHAI_INTERN").as_deref() == Ok("0") {
        e.set_max_strings_interned(0);
    }
    // Called after every operation; check the clock every 256 operations.
    e.on_progress(|ops| {
        if ops & 0xff == 0 {
            if let Some(d) = DEADLINE.with(|c| c.get()) {
                if Instant::now() >= d {
                    return Some(Dynamic::from("wall-clock limit"));
                }
            }
        }
        None
    });
    e
}

pub fn compile(e: &Engine, name: &str) -> AST {
    e.compile(crate::common::rhai_src(name)).expect("rhai compile")
}

/// Full evaluation: serde_json in -> Dynamic, eval, Dynamic -> serde_json out.
pub fn eval_json(e: &Engine, ast: &AST, req: &J, sub: &J, budget: Duration) -> Result<J, String> {
    let mut scope = Scope::new();
    scope.push_constant_dynamic("req", rhai::serde::to_dynamic(req).map_err(|e| e.to_string())?);
    scope.push_constant_dynamic("sub", rhai::serde::to_dynamic(sub).map_err(|e| e.to_string())?);
    DEADLINE.with(|c| c.set(Some(Instant::now() + budget)));
    let r = e.eval_ast_with_scope::<Dynamic>(&mut scope, ast);
    DEADLINE.with(|c| c.set(None));
    let r = r.map_err(|e| e.to_string())?;
    rhai::serde::from_dynamic::<J>(&r).map_err(|e| e.to_string())
}

/// Evaluation without inputs (fixed cost floor).
pub fn eval_noinput(e: &Engine, ast: &AST) -> bool {
    let mut scope = Scope::new();
    e.eval_ast_with_scope::<bool>(&mut scope, ast).unwrap()
}

/// Engine-native: inputs already in a Scope (reused), result left as Dynamic.
pub fn eval_native(e: &Engine, ast: &AST, scope: &mut Scope) -> Dynamic {
    let n = scope.len();
    DEADLINE.with(|c| c.set(Some(Instant::now() + Duration::from_millis(50))));
    let r = e.eval_ast_with_scope::<Dynamic>(scope, ast).unwrap();
    DEADLINE.with(|c| c.set(None));
    scope.rewind(n);
    r
}

pub fn native_scope(req: &J, sub: &J) -> Scope<'static> {
    let mut scope = Scope::new();
    scope.push_constant_dynamic("req", rhai::serde::to_dynamic(req).unwrap());
    scope.push_constant_dynamic("sub", rhai::serde::to_dynamic(sub).unwrap());
    scope
}

/// Run an arbitrary script with a budget; returns (result/error, elapsed).
pub fn run_script(e: &Engine, src: &str, budget: Duration) -> (Result<String, String>, Duration) {
    let ast = match e.compile(src) {
        Ok(a) => a,
        Err(err) => return (Err(format!("compile error: {err}")), Duration::ZERO),
    };
    let mut scope = Scope::new();
    let t = Instant::now();
    DEADLINE.with(|c| c.set(Some(t + budget)));
    let r = e.eval_ast_with_scope::<Dynamic>(&mut scope, &ast);
    DEADLINE.with(|c| c.set(None));
    let el = t.elapsed();
    (r.map(|d| format!("{d:?}")).map_err(|e| e.to_string()), el)
}
