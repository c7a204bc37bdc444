//! The policy engine: the PCF (5G) and the PCRF (4G) decide through it. A policy project is a
//! directory of text kept in git (`crate::project`), loaded and checked as a whole, and
//! evaluated once per request: rules in order, their conditions over the request, the
//! subscriber's data and state, the time and the requesting node; their actions building a
//! decision with JSON operations, policy tables and scripts.
//!
//! The engine knows neither SBI nor Diameter: requests and decisions are JSON. The decision's
//! top-level members are the NF's to read (an SM decision uses the names of TS 29.512's
//! SmPolicyDecision: `pccRules`, `sessRules`, `qosDecs`, `policyCtrlReqTriggers`, ...), so
//! custom JSON operations in a project reach the answer as written. docs/policy.md.

pub mod action;
pub mod cond;
pub mod deploy;
pub mod files;
mod input;
pub mod path;
pub mod project;
pub mod replay;
pub mod script;
pub mod table;
pub mod testcase;

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value};

pub use deploy::Deployed;
pub use files::ProjectFiles;
pub use input::Input;
pub use project::{CheckError, Project, Service, Stats};

use action::{merge_patch, Action};
use cond::{Cond, Tables};
use input::Ctx;
use project::Mode;

/// What an evaluation decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The decision: an object whose members the NF turns into its answer.
    pub decision: Value,
    /// Subscriber state variables this evaluation set, to be persisted by the NF.
    pub ssv_updates: Map<String, Value>,
    /// The rules that fired, by index into the service's rules ([`Project::rule_names`]).
    pub fired: Vec<usize>,
    /// The error that made this the service's fallback decision (a script that failed or ran
    /// out of its limits, a table the project requires a row from).
    pub error: Option<String>,
}

impl Outcome {
    pub fn is_fallback(&self) -> bool {
        self.error.is_some()
    }
}

/// One step of an evaluation, for `fivecore policy eval` and the test runner.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Rule { name: String, file: String, line: usize },
    TableRow { table: String, line: usize },
    TableMiss { table: String },
    Script { name: String, result: Value },
    Error(String),
}

/// Evaluations and errors since the project was loaded.
#[derive(Debug, Default)]
pub struct Counters {
    pub evaluations: AtomicU64,
    /// Evaluations answered with the fallback decision.
    pub fallbacks: AtomicU64,
}

impl Project {
    /// Decides on one request for `service`. A service the project does not serve decides
    /// nothing (an empty decision).
    pub fn evaluate(&self, service: Service, input: Input<'_>) -> Outcome {
        self.run(service, input, None)
    }

    /// [`Project::evaluate`], recording every rule, table row and script on the way.
    pub fn evaluate_traced(
        &self,
        service: Service,
        input: Input<'_>,
        trace: &mut Vec<Step>,
    ) -> Outcome {
        self.run(service, input, Some(trace))
    }

    /// The decision `[fallback.<service>]` gives: what an NF answers when it cannot evaluate
    /// (its data source is down) as when a script fails.
    pub fn fallback(&self, service: Service) -> &Value {
        &self.fallbacks[service.index()]
    }

    pub fn counters(&self) -> (u64, u64) {
        (
            self.counters.evaluations.load(Ordering::Relaxed),
            self.counters.fallbacks.load(Ordering::Relaxed),
        )
    }

    fn run(
        &self,
        service: Service,
        input: Input<'_>,
        mut trace: Option<&mut Vec<Step>>,
    ) -> Outcome {
        self.counters.evaluations.fetch_add(1, Ordering::Relaxed);
        let mut ctx = Ctx::new(input, &self.consts);
        let mut fired = Vec::new();
        let Some(rules) = &self.rules[service.index()] else {
            return Outcome {
                decision: ctx.decision,
                ssv_updates: ctx.ssv_updates,
                fired,
                error: None,
            };
        };
        let mut key = String::new();
        let result = (|| -> Result<(), String> {
            for (i, rule) in rules.rules.iter().enumerate() {
                if !self.all_hold(&rule.all, &ctx)? {
                    continue;
                }
                if !rule.any.is_empty() && !self.any_holds(&rule.any, &ctx)? {
                    continue;
                }
                fired.push(i);
                if let Some(t) = trace.as_deref_mut() {
                    t.push(Step::Rule {
                        name: rule.name.clone(),
                        file: rule.file.clone(),
                        line: rule.line,
                    });
                }
                for a in &rule.then {
                    self.apply(a, &mut ctx, &mut key, trace.as_deref_mut())?;
                }
                if rule.stop || rules.mode == Mode::First {
                    break;
                }
            }
            Ok(())
        })();
        match result {
            Ok(()) => {
                Outcome { decision: ctx.decision, ssv_updates: ctx.ssv_updates, fired, error: None }
            }
            Err(e) => {
                self.counters.fallbacks.fetch_add(1, Ordering::Relaxed);
                if let Some(t) = trace {
                    t.push(Step::Error(e.clone()));
                }
                Outcome {
                    decision: self.fallbacks[service.index()].clone(),
                    ssv_updates: Map::new(),
                    fired,
                    error: Some(e),
                }
            }
        }
    }

    fn all_hold(&self, conds: &[Cond], ctx: &Ctx<'_>) -> Result<bool, String> {
        for c in conds {
            if !c.holds(ctx, self)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn any_holds(&self, conds: &[Cond], ctx: &Ctx<'_>) -> Result<bool, String> {
        for c in conds {
            if c.holds(ctx, self)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn apply(
        &self,
        a: &Action,
        ctx: &mut Ctx<'_>,
        key: &mut String,
        trace: Option<&mut Vec<Step>>,
    ) -> Result<(), String> {
        match a {
            Action::Set(p, src) => {
                if let Some(v) = src.value(ctx) {
                    if let Some(place) = p.place(&mut ctx.decision) {
                        *place = v;
                    }
                }
            }
            Action::Merge(p, src) => {
                if let Some(v) = src.value(ctx) {
                    if let Some(place) = p.place(&mut ctx.decision) {
                        merge_patch(place, v);
                    }
                }
            }
            Action::Append(p, src) => {
                if let Some(v) = src.value(ctx) {
                    if let Some(place) = p.place(&mut ctx.decision) {
                        match place {
                            Value::Array(a) => a.push(v),
                            Value::Null => *place = Value::Array(vec![v]),
                            other => *other = Value::Array(vec![other.take(), v]),
                        }
                    }
                }
            }
            Action::Remove(p) => {
                p.remove(&mut ctx.decision);
            }
            Action::Ssv(name, src) => {
                if let Some(v) = src.value(ctx) {
                    ctx.ssv_updates.insert(name.clone(), v);
                }
            }
            Action::Table { table, into, fallback_if_unmatched } => {
                let t = &self.tables[*table];
                match t.lookup(ctx, key) {
                    Some(hit) => {
                        if let Some(tr) = trace {
                            tr.push(Step::TableRow { table: t.name.clone(), line: hit.line });
                        }
                        let out = hit.output.clone();
                        if let Some(place) = into.place(&mut ctx.decision) {
                            merge_patch(place, out);
                        }
                    }
                    None => {
                        if let Some(tr) = trace {
                            tr.push(Step::TableMiss { table: t.name.clone() });
                        }
                        if *fallback_if_unmatched {
                            return Err(format!("table {}: no row matches", t.name));
                        }
                    }
                }
            }
            Action::Script { script, into } => {
                let v = self.scripts.run(*script, ctx)?;
                if let Some(tr) = trace {
                    tr.push(Step::Script {
                        name: self.scripts.name(*script).to_string(),
                        result: v.clone(),
                    });
                }
                if let Some(place) = into.place(&mut ctx.decision) {
                    *place = v;
                }
            }
        }
        Ok(())
    }
}

impl Tables for Project {
    fn in_list(&self, list: usize, v: &str) -> bool {
        self.lists[list].contains(v)
    }
    fn regex(&self, i: usize) -> &regex::Regex {
        &self.regexes[i]
    }
    fn run_bool_script(&self, i: usize, ctx: &Ctx<'_>) -> Result<bool, String> {
        self.scripts.run_bool(i, ctx)
    }
}
