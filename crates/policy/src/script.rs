//! Scripts, for what rules, tables and lists cannot say: `scripts/NAME.rhai`, in Rhai (chosen by
//! benchmark: docs/BENCHMARKS.md, session s20). A script is an expression or a block whose last
//! value is its result. It reads `request`, `subscriber`, `ssv`, `decision`, `constants`,
//! `node` and `now` (a map: hour, minute, weekday, date, epoch), converted from JSON only when
//! its text names them.
//!
//! Sandboxed: no modules, no `eval`, no file, network or environment access (Rhai has none
//! unless registered). Per evaluation, limits from `[limits]` in project.toml: operations,
//! wall-clock time, string, array and map sizes, call depth. A script that breaks one, or
//! fails, makes the evaluation answer the service's fallback decision, counted.

use std::cell::Cell;
use std::time::{Duration, Instant};

use rhai::{Dynamic, Engine, Scope, AST};
use serde::Deserialize;
use serde_json::Value;

use crate::input::{now_field, Ctx};

/// `[limits]` in project.toml.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Operations one script run may take (a loop iteration is a few).
    pub script_max_operations: u64,
    /// Wall-clock time one script run may take, microseconds.
    pub script_timeout_us: u64,
    /// Largest string, array and map a script may build.
    pub script_max_string_bytes: usize,
    pub script_max_array_len: usize,
    pub script_max_map_len: usize,
    /// Deepest call nesting.
    pub script_max_call_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            script_max_operations: 100_000,
            script_timeout_us: 2_000,
            script_max_string_bytes: 64 * 1024,
            script_max_array_len: 4096,
            script_max_map_len: 4096,
            script_max_call_depth: 32,
        }
    }
}

thread_local! {
    /// When the running script must stop (the engine's progress callback reads it).
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// The operations between two looks at the clock.
const CLOCK_EVERY: u64 = 256;

struct Compiled {
    name: String,
    ast: AST,
    /// Which inputs the script names, so only those are converted.
    reads: [bool; 7],
}

pub struct Scripts {
    engine: Engine,
    timeout: Duration,
    scripts: Vec<Compiled>,
    /// The project's constants, converted once.
    constants: Dynamic,
}

impl std::fmt::Debug for Scripts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scripts").field("count", &self.scripts.len()).finish_non_exhaustive()
    }
}

const INPUTS: [&str; 7] = ["request", "subscriber", "ssv", "decision", "constants", "node", "now"];

impl Scripts {
    pub fn new(limits: &Limits) -> Self {
        let mut engine = Engine::new();
        // No `import` (the default resolver reads files) and no `eval`.
        engine.set_module_resolver(rhai::module_resolvers::DummyModuleResolver::new());
        engine.disable_symbol("eval");
        engine.set_max_operations(limits.script_max_operations);
        engine.set_max_string_size(limits.script_max_string_bytes);
        engine.set_max_array_size(limits.script_max_array_len);
        engine.set_max_map_size(limits.script_max_map_len);
        engine.set_max_call_levels(limits.script_max_call_depth);
        engine.set_max_expr_depths(64, 32);
        engine.set_optimization_level(rhai::OptimizationLevel::Full);
        // The engine is shared by every worker thread: its string interner sits behind one
        // write lock, and with it two threads evaluated no faster than one (session s20's
        // script benchmark, scripts/script-engine-bench).
        engine.set_max_strings_interned(0);
        engine.on_progress(|ops| {
            if ops % CLOCK_EVERY == 0 {
                let late = DEADLINE.with(|d| d.get().is_some_and(|t| Instant::now() > t));
                if late {
                    return Some(Dynamic::from("the script ran out of time"));
                }
            }
            None
        });
        // print and debug go nowhere: a script has no console.
        engine.on_print(|_| {});
        engine.on_debug(|_, _, _| {});
        Scripts {
            engine,
            timeout: Duration::from_micros(limits.script_timeout_us.max(1)),
            scripts: Vec::new(),
            constants: Dynamic::UNIT,
        }
    }

    /// The project's constants, as every script sees them.
    pub fn set_constants(&mut self, c: &Value) {
        self.constants = to_dynamic(c);
    }

    /// Compiles a script; the error names the line.
    pub fn compile(&mut self, name: &str, text: &str) -> Result<usize, (usize, String)> {
        let ast =
            self.engine.compile(text).map_err(|e| (e.1.line().unwrap_or(0), e.0.to_string()))?;
        let mut reads = [false; 7];
        for (i, n) in INPUTS.iter().enumerate() {
            reads[i] = text.contains(n);
        }
        self.scripts.push(Compiled { name: name.to_string(), ast, reads });
        Ok(self.scripts.len() - 1)
    }

    pub fn len(&self) -> usize {
        self.scripts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scripts.is_empty()
    }

    pub fn name(&self, i: usize) -> &str {
        &self.scripts[i].name
    }

    /// Runs script `i` over the context; its result as JSON.
    pub(crate) fn run(&self, i: usize, ctx: &Ctx<'_>) -> Result<Value, String> {
        let out = self.eval(i, ctx)?;
        from_dynamic(&out).map_err(|e| format!("script {}: {e}", self.scripts[i].name))
    }

    /// Runs script `i` as a condition.
    pub(crate) fn run_bool(&self, i: usize, ctx: &Ctx<'_>) -> Result<bool, String> {
        let out = self.eval(i, ctx)?;
        out.as_bool().map_err(|t| {
            format!("script {} answered a {t}, not true or false", self.scripts[i].name)
        })
    }

    fn eval(&self, i: usize, ctx: &Ctx<'_>) -> Result<Dynamic, String> {
        let s = &self.scripts[i];
        let mut scope = Scope::new();
        for (k, n) in INPUTS.iter().enumerate() {
            if !s.reads[k] {
                continue;
            }
            // In INPUTS' order.
            let v: Dynamic = match k {
                0 => to_dynamic(ctx.input.request),
                1 => to_dynamic(ctx.input.subscriber),
                2 => {
                    let mut m = ctx.input.ssv.clone();
                    for (k, v) in &ctx.ssv_updates {
                        m.insert(k.clone(), v.clone());
                    }
                    to_dynamic(&Value::Object(m))
                }
                3 => to_dynamic(&ctx.decision),
                4 => self.constants.clone(),
                5 => Dynamic::from(ctx.input.node.to_string()),
                _ => Dynamic::from_map(
                    crate::path::NOW_FIELDS
                        .iter()
                        .filter_map(|f| {
                            Some(((*f).into(), to_dynamic(&now_field(ctx.input.now, f)?)))
                        })
                        .collect(),
                ),
            };
            scope.push_dynamic(*n, v);
        }
        DEADLINE.with(|d| d.set(Some(Instant::now() + self.timeout)));
        let r = self.engine.eval_ast_with_scope::<Dynamic>(&mut scope, &s.ast);
        DEADLINE.with(|d| d.set(None));
        r.map_err(|e| format!("script {}: {}", s.name, describe(&e)))
    }
}

/// JSON to a Rhai value, directly (serde's path through `rhai::serde` cost twice as much).
fn to_dynamic(v: &Value) -> Dynamic {
    match v {
        Value::Null => Dynamic::UNIT,
        Value::Bool(b) => Dynamic::from_bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Dynamic::from_int(i),
            None => Dynamic::from_float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Dynamic::from(s.clone()),
        Value::Array(a) => Dynamic::from_array(a.iter().map(to_dynamic).collect()),
        Value::Object(o) => {
            Dynamic::from_map(o.iter().map(|(k, v)| (k.as_str().into(), to_dynamic(v))).collect())
        }
    }
}

/// A script's result as JSON: unit is null; integers, floats, strings, booleans, arrays and
/// maps as themselves; anything else (a function pointer, a timestamp) is an error.
fn from_dynamic(d: &Dynamic) -> Result<Value, String> {
    if d.is_unit() {
        return Ok(Value::Null);
    }
    if let Ok(b) = d.as_bool() {
        return Ok(Value::Bool(b));
    }
    if let Ok(i) = d.as_int() {
        return Ok(Value::from(i));
    }
    if let Ok(f) = d.as_float() {
        return Ok(serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number));
    }
    if d.is_string() {
        return Ok(Value::String(d.clone().into_string().unwrap_or_default()));
    }
    if d.is_array() {
        let a = d.read_lock::<rhai::Array>().ok_or("an array that cannot be read")?;
        return a.iter().map(from_dynamic).collect::<Result<Vec<_>, _>>().map(Value::Array);
    }
    if d.is_map() {
        let m = d.read_lock::<rhai::Map>().ok_or("a map that cannot be read")?;
        let mut out = serde_json::Map::new();
        for (k, v) in m.iter() {
            out.insert(k.to_string(), from_dynamic(v)?);
        }
        return Ok(Value::Object(out));
    }
    Err(format!("its result, a {}, is not JSON", d.type_name()))
}

fn describe(e: &rhai::EvalAltResult) -> String {
    use rhai::EvalAltResult as E;
    match e {
        E::ErrorTooManyOperations(_) => {
            "ran past its operation limit (script_max_operations)".into()
        }
        E::ErrorTerminated(_, _) => "ran past its time limit (script_timeout_us)".into(),
        E::ErrorDataTooLarge(what, _) => format!("built a {what} past its size limit"),
        E::ErrorStackOverflow(_) => "called too deep (script_max_call_depth)".into(),
        other => other.to_string(),
    }
}
