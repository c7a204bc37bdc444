//! CEL (`cel` crate, formerly `cel-interpreter`): Env + Program compiled once,
//! a child Context scope per evaluation.
use cel::{Context, Env, Program};
use serde_json::Value as J;
use std::sync::Arc;

pub fn env() -> Arc<Env> {
    Arc::new(Env::stdlib())
}

pub fn compile(env: &Env, name: &str) -> Program {
    env.compile(crate::common::cel_src(name)).expect("cel compile")
}

/// Full evaluation: serde_json -> cel::Value (serde), execute, cel::Value -> serde_json.
pub fn eval_json(root: &Context, p: &Program, req: &J, sub: &J) -> Result<J, String> {
    let mut ctx = root.new_inner_scope();
    ctx.add_variable_from_value("req", cel::to_value(req).map_err(|e| e.to_string())?);
    ctx.add_variable_from_value("sub", cel::to_value(sub).map_err(|e| e.to_string())?);
    let v = p.execute(&ctx).map_err(|e| e.to_string())?;
    let out = v.json().map_err(|e| e.to_string());
    out
}

pub fn eval_noinput(root: &Context, p: &Program) -> bool {
    let ctx = root.new_inner_scope();
    matches!(p.execute(&ctx), Ok(cel::Value::Bool(true)))
}

/// Engine-native: variables already bound in the context; result left as cel::Value.
pub fn eval_native(ctx: &Context, p: &Program) -> cel::Value {
    p.execute(ctx).unwrap()
}

pub fn run_script(env: &Arc<Env>, src: &str) -> Result<String, String> {
    let p = env.compile(src).map_err(|e| format!("compile error: {e}"))?;
    let ctx = Context::with_env(env.clone());
    p.execute(&ctx)
        .map(|v| match v {
            cel::Value::List(l) => format!("list of {} elements", l.len()),
            other => format!("{other:?}"),
        })
        .map_err(|e| e.to_string())
}
