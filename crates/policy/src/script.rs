//! Scripts, for what rules, tables and lists cannot say: `scripts/NAME.rhai`, in Rhai (chosen by
//! benchmark: docs/BENCHMARKS.md, session s20). A script is an expression or a block whose last
//! value is its result. It reads `request`, `subscriber`, `ssv`, `decision`, `constants`,
//! `node`, `now` (a map: hour, minute, weekday, date, epoch), `spending` (a map:
//! policyCounterId → currentStatus) and `usage` (a map: monitoring key → accumulated usage),
//! converted from JSON only when its text names them.
//!
//! Besides Rhai's own functions, scripts have the policy helpers of [`helpers`]: `sum`,
//! `bitrate` and `bps`.
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

mod helpers;

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
    reads: [bool; 9],
    /// For the request and the subscriber: the only members the script reads, when every use
    /// of the name is `name.member` (a UDR's policy data is large; a script reads a few of it).
    members: [Option<Vec<String>>; 2],
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

const INPUTS: [&str; 9] =
    ["request", "subscriber", "ssv", "decision", "constants", "node", "now", "spending", "usage"];

impl Scripts {
    pub fn new(limits: &Limits) -> Self {
        let mut engine = Engine::new();
        // No `import` (rhai is built without modules: `no_module`) and no `eval`.
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
        helpers::register(&mut engine);
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
        let mut reads = [false; 9];
        for (i, n) in INPUTS.iter().enumerate() {
            reads[i] = text.contains(n);
        }
        let members = [members_read(text, INPUTS[0]), members_read(text, INPUTS[1])];
        self.scripts.push(Compiled { name: name.to_string(), ast, reads, members });
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
                0 => convert_members(ctx.input.request, s.members[0].as_deref()),
                1 => convert_members(ctx.input.subscriber, s.members[1].as_deref()),
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
                7 => Dynamic::from_map(
                    ctx.input
                        .spending
                        .iter()
                        .map(|(k, v)| (k.as_str().into(), to_dynamic(v)))
                        .collect(),
                ),
                // No usage (the NF does not monitor it) reads as an empty map: the rules
                // decide whether to monitor (`usage exists`), a script only adds up.
                8 => Dynamic::from_map(
                    ctx.input
                        .usage
                        .into_iter()
                        .flatten()
                        .map(|(k, v)| (k.as_str().into(), to_dynamic(v)))
                        .collect(),
                ),
                _ => Dynamic::from_map(
                    crate::path::NOW_FIELDS
                        .iter()
                        .filter_map(|f| {
                            Some(((*f).into(), to_dynamic(&now_field(ctx.input.now, f)?)))
                        })
                        .collect(),
                ),
            };
            // Read-only: a script changes its own copy at most, never what the next one reads.
            scope.push_constant_dynamic(*n, v);
        }
        DEADLINE.with(|d| d.set(Some(Instant::now() + self.timeout)));
        let r = self.engine.eval_ast_with_scope::<Dynamic>(&mut scope, &s.ast);
        DEADLINE.with(|d| d.set(None));
        r.map_err(|e| format!("script {}: {}", s.name, describe(&e)))
    }
}

/// The members of `name` a script reads, if every use of the name is `name.member`; `None`
/// (convert it all) when one is anything else (`name[...]`, `name` alone, `name?.x`). A
/// mention in a comment or a string only makes the set larger or `None`: never too small.
fn members_read(text: &str, name: &str) -> Option<Vec<String>> {
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = text.as_bytes();
    let mut members: Vec<String> = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(name).map(|i| i + from) {
        from = at + name.len();
        if at > 0 && ident(bytes[at - 1]) || bytes.get(from).is_some_and(|b| ident(*b)) {
            continue; // part of a longer word
        }
        if bytes.get(from) != Some(&b'.') {
            return None;
        }
        let m: String =
            text[from + 1..].bytes().take_while(|b| ident(*b)).map(char::from).collect();
        if m.is_empty() {
            return None;
        }
        if !members.contains(&m) {
            members.push(m);
        }
    }
    Some(members)
}

/// An input as a script sees it: only `members` of it when given and it is an object.
fn convert_members(v: &Value, members: Option<&[String]>) -> Dynamic {
    match (v, members) {
        (Value::Object(o), Some(members)) => Dynamic::from_map(
            members
                .iter()
                .filter_map(|m| Some((m.as_str().into(), to_dynamic(o.get(m)?))))
                .collect(),
        ),
        _ => to_dynamic(v),
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
        // Straight to Rhai's string: a short one sits inline, with no copy of the String first.
        Value::String(s) => Dynamic::from(rhai::ImmutableString::from(s.as_str())),
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

#[cfg(test)]
mod tests {
    use super::members_read;

    #[test]
    fn the_members_a_script_reads_or_none_when_it_reads_more() {
        let m = |t: &str| members_read(t, "subscriber");
        assert_eq!(
            m("subscriber.usage.len() + subscriber.planRateMbps + subscriber.usage[0]"),
            Some(vec!["usage".to_string(), "planRateMbps".to_string()])
        );
        assert_eq!(m("1 + 2"), Some(vec![]));
        assert_eq!(m("let s = subscriber; s.plan"), None);
        assert_eq!(m("subscriber[\"plan\"]"), None);
        assert_eq!(m("subscriber?.plan"), None);
        assert_eq!(m("subscriber. plan"), None);
        assert_eq!(m("subscribers + my_subscriber.x + subscriber.a"), Some(vec!["a".to_string()]));
    }
}
