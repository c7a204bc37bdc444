//! QuickJS (quickjs-ng via rquickjs): one Runtime + Context per worker thread,
//! expressions compiled once into functions kept as Persistent handles.
use rquickjs::{
    Array, CatchResultExt, Context, Ctx, Function, Object, Persistent, Runtime, Type,
    Value,
};
use serde_json::Value as J;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

fn epoch() -> Instant {
    static E: OnceLock<Instant> = OnceLock::new();
    *E.get_or_init(Instant::now)
}
fn now_ns() -> u64 {
    epoch().elapsed().as_nanos() as u64
}

pub struct Qjs {
    pub rt: Runtime,
    pub ctx: Context,
    /// deadline in ns since epoch(); 0 = none
    deadline: Arc<AtomicU64>,
}

impl Qjs {
    pub fn new(mem_limit: usize) -> Qjs {
        let rt = Runtime::new().unwrap();
        rt.set_memory_limit(mem_limit);
        rt.set_max_stack_size(256 * 1024);
        let deadline = Arc::new(AtomicU64::new(0));
        let d = deadline.clone();
        // QuickJS calls this every ~10000 interrupt-counter ticks (branches/calls).
        rt.set_interrupt_handler(Some(Box::new(move || {
            let dl = d.load(Ordering::Relaxed);
            dl != 0 && now_ns() >= dl
        })));
        let ctx = Context::full(&rt).unwrap();
        Qjs { rt, ctx, deadline }
    }

    pub fn set_deadline(&self, budget: Option<Duration>) {
        let v = match budget {
            Some(b) => now_ns() + b.as_nanos() as u64,
            None => 0,
        };
        self.deadline.store(v, Ordering::Relaxed);
    }

    pub fn compile(&self, name: &str) -> Persistent<Function<'static>> {
        let src = crate::common::js_fn_src(name);
        self.ctx.with(|ctx| {
            let f: Function = ctx.eval(src).unwrap();
            Persistent::save(&ctx, f)
        })
    }

    /// Like `compile`, but returns an error instead of panicking (e.g. after an OOM).
    pub fn try_compile(&self, name: &str) -> Result<Persistent<Function<'static>>, String> {
        let src = crate::common::js_fn_src(name);
        self.ctx.with(|ctx| {
            let f: Function = ctx.eval(src).catch(&ctx).map_err(|e| e.to_string())?;
            Ok(Persistent::save(&ctx, f))
        })
    }

    /// Full evaluation: serde_json -> JS objects (walker), call, JS -> serde_json.
    pub fn eval_json(
        &self,
        f: &Persistent<Function<'static>>,
        req: &J,
        sub: &J,
        budget: Duration,
    ) -> Result<J, String> {
        self.set_deadline(Some(budget));
        let r = self.ctx.with(|ctx| {
            let f = f.clone().restore(&ctx).map_err(|e| e.to_string())?;
            let r = json_to_js(&ctx, req).map_err(|e| e.to_string())?;
            let s = json_to_js(&ctx, sub).map_err(|e| e.to_string())?;
            let out: Value = f.call((r, s)).catch(&ctx).map_err(|e| e.to_string())?;
            js_to_json(&out)
        });
        self.set_deadline(None);
        r
    }

    /// Variant: in/out via JSON text (serde_json::to_string + JSON.parse, JSON.stringify + from_str).
    pub fn eval_json_text(
        &self,
        f: &Persistent<Function<'static>>,
        req: &J,
        sub: &J,
        budget: Duration,
    ) -> Result<J, String> {
        self.set_deadline(Some(budget));
        let req_s = serde_json::to_string(req).unwrap();
        let sub_s = serde_json::to_string(sub).unwrap();
        let r = self.ctx.with(|ctx| {
            let f = f.clone().restore(&ctx).map_err(|e| e.to_string())?;
            let r = ctx.json_parse(req_s).map_err(|e| e.to_string())?;
            let s = ctx.json_parse(sub_s).map_err(|e| e.to_string())?;
            let out: Value = f.call((r, s)).catch(&ctx).map_err(|e| e.to_string())?;
            let txt = ctx.json_stringify(out).map_err(|e| e.to_string())?;
            match txt {
                Some(t) => serde_json::from_str(&t.to_string().map_err(|e| e.to_string())?)
                    .map_err(|e| e.to_string()),
                None => Ok(J::Null),
            }
        });
        self.set_deadline(None);
        r
    }

    /// Trivial function called with no arguments.
    pub fn eval_noinput(&self, f: &Persistent<Function<'static>>) -> bool {
        self.ctx.with(|ctx| {
            let f = f.clone().restore(&ctx).unwrap();
            f.call::<_, bool>(()).unwrap()
        })
    }

    /// Engine-native: inputs already JS objects (persistent), result dropped / read as is.
    pub fn eval_native(
        &self,
        f: &Persistent<Function<'static>>,
        req: &Persistent<Value<'static>>,
        sub: &Persistent<Value<'static>>,
    ) -> Type {
        self.set_deadline(Some(Duration::from_millis(50)));
        let t = self.ctx.with(|ctx| {
            let f = f.clone().restore(&ctx).unwrap();
            let r = req.clone().restore(&ctx).unwrap();
            let s = sub.clone().restore(&ctx).unwrap();
            let out: Value = f.call((r, s)).unwrap();
            out.type_of()
        });
        self.set_deadline(None);
        t
    }

    pub fn persist_json(&self, v: &J) -> Persistent<Value<'static>> {
        self.ctx.with(|ctx| {
            let x = json_to_js(&ctx, v).unwrap();
            Persistent::save(&ctx, x)
        })
    }

    /// Run an arbitrary script (global code) with a budget.
    pub fn run_script(&self, src: &str, budget: Duration) -> (Result<String, String>, Duration) {
        let t = Instant::now();
        self.set_deadline(Some(budget));
        let r = self.ctx.with(|ctx| {
            let r: Result<Value, _> = ctx.eval(src.to_string()).catch(&ctx);
            match r {
                Ok(v) => Ok(format!("{:?}", js_to_json(&v))),
                Err(e) => Err(e.to_string()),
            }
        });
        self.set_deadline(None);
        (r, t.elapsed())
    }
}

pub fn json_to_js<'js>(ctx: &Ctx<'js>, v: &J) -> rquickjs::Result<Value<'js>> {
    Ok(match v {
        J::Null => Value::new_null(ctx.clone()),
        J::Bool(b) => Value::new_bool(ctx.clone(), *b),
        J::Number(n) => match n.as_i64() {
            Some(i) if i >= i32::MIN as i64 && i <= i32::MAX as i64 => {
                Value::new_int(ctx.clone(), i as i32)
            }
            _ => Value::new_number(ctx.clone(), n.as_f64().unwrap_or(f64::NAN)),
        },
        J::String(s) => rquickjs::String::from_str(ctx.clone(), s)?.into_value(),
        J::Array(a) => {
            let arr = Array::new(ctx.clone())?;
            for (i, x) in a.iter().enumerate() {
                arr.set(i, json_to_js(ctx, x)?)?;
            }
            arr.into_value()
        }
        J::Object(m) => {
            let o = Object::new(ctx.clone())?;
            for (k, x) in m {
                o.set(k.as_str(), json_to_js(ctx, x)?)?;
            }
            o.into_value()
        }
    })
}

pub fn js_to_json(v: &Value) -> Result<J, String> {
    Ok(match v.type_of() {
        Type::Uninitialized | Type::Undefined | Type::Null => J::Null,
        Type::Bool => J::Bool(v.as_bool().unwrap()),
        Type::Int => J::from(v.as_int().unwrap()),
        Type::Float => {
            let f = v.as_float().unwrap();
            if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 {
                J::from(f as i64)
            } else {
                serde_json::Number::from_f64(f).map(J::Number).unwrap_or(J::Null)
            }
        }
        Type::String => J::String(v.as_string().unwrap().to_string().map_err(|e| e.to_string())?),
        Type::Array => {
            let a = v.as_array().unwrap();
            let mut out = Vec::with_capacity(a.len());
            for x in a.iter::<Value>() {
                out.push(js_to_json(&x.map_err(|e| e.to_string())?)?);
            }
            J::Array(out)
        }
        Type::Object => {
            let o = v.as_object().unwrap();
            let mut m = serde_json::Map::new();
            for p in o.props::<String, Value>() {
                let (k, x) = p.map_err(|e| e.to_string())?;
                m.insert(k, js_to_json(&x)?);
            }
            J::Object(m)
        }
        t => return Err(format!("unsupported JS result type {t}")),
    })
}
