//! What a rule does when it fires, in order: JSON operations on the decision (set, merge,
//! append, remove), a policy table's row merged in, a script's result placed, a subscriber
//! state variable set.
//!
//! ```toml
//! [[rule.then]]
//! set = "decision.sessRules.s1.authDefQos.5qi"
//! value = 9                                  # or from = "request.dnn", or template = "pcc-{request.dnn}"
//! [[rule.then]]
//! merge = "decision.pccRules"                # RFC 7396 merge patch
//! value = { video = { precedence = 100 } }
//! [[rule.then]]
//! append = "decision.policyCtrlReqTriggers"
//! value = "PLMN_CH"
//! [[rule.then]]
//! remove = "decision.pccRules.video"
//! [[rule.then]]
//! table = "qos_by_plan"                      # the best row's outputs merged at `into`
//! into = "decision.qosDecs.q1"
//! [[rule.then]]
//! script = "mbr"                             # the script's result set at `into`
//! into = "decision.sessRules.s1.authSessAmbr"
//! [[rule.then]]
//! ssv = "lastDnn"                            # a subscriber state variable
//! from = "request.dnn"
//! ```

use serde::Deserialize;
use serde_json::Value;

use crate::input::{as_text, Ctx};
use crate::path::{Path, Root};

/// An action as written in a rules file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionDef {
    pub set: Option<String>,
    pub merge: Option<String>,
    pub append: Option<String>,
    pub remove: Option<String>,
    pub table: Option<String>,
    pub script: Option<String>,
    pub ssv: Option<String>,
    pub into: Option<String>,
    pub value: Option<toml::Value>,
    pub from: Option<String>,
    pub template: Option<String>,
    /// For `table`: what to do when no row matches: "skip" (default) or "fallback" (the
    /// service's fallback decision, as for a failed script).
    pub unmatched: Option<String>,
}

/// Where a value comes from.
#[derive(Debug, Clone)]
pub enum Source {
    Lit(Value),
    From(Path),
    Template(Vec<Piece>),
}

#[derive(Debug, Clone)]
pub enum Piece {
    Text(String),
    Path(Path),
}

#[derive(Debug, Clone)]
pub enum Action {
    Set(Path, Source),
    Merge(Path, Source),
    Append(Path, Source),
    Remove(Path),
    Table { table: usize, into: Path, fallback_if_unmatched: bool },
    Script { script: usize, into: Path },
    Ssv(String, Source),
}

/// What an action may name, resolved while compiling.
pub trait ActionNames {
    fn table(&self, name: &str) -> Option<usize>;
    fn script(&self, name: &str) -> Option<usize>;
}

fn decision_path(s: &str) -> Result<Path, String> {
    let p = Path::parse(s).map_err(|e| e.0)?;
    if p.root != Root::Decision {
        return Err(format!("`{s}`: actions write under decision."));
    }
    Ok(p)
}

impl ActionDef {
    pub fn compile(self, names: &dyn ActionNames) -> Result<Action, String> {
        let verbs = [
            &self.set,
            &self.merge,
            &self.append,
            &self.remove,
            &self.table,
            &self.script,
            &self.ssv,
        ]
        .iter()
        .filter(|v| v.is_some())
        .count();
        if verbs != 1 {
            return Err(
                "an action has exactly one of set, merge, append, remove, table, script, ssv"
                    .into(),
            );
        }
        let source = |d: &ActionDef| -> Result<Source, String> {
            match (&d.value, &d.from, &d.template) {
                (Some(v), None, None) => Ok(Source::Lit(toml_to_json(v.clone()))),
                (None, Some(p), None) => Ok(Source::From(Path::parse(p).map_err(|e| e.0)?)),
                (None, None, Some(t)) => Ok(Source::Template(parse_template(t)?)),
                _ => Err("give the value as exactly one of value, from or template".into()),
            }
        };
        if let Some(p) = &self.set {
            return Ok(Action::Set(decision_path(p)?, source(&self)?));
        }
        if let Some(p) = &self.merge {
            return Ok(Action::Merge(decision_path(p)?, source(&self)?));
        }
        if let Some(p) = &self.append {
            return Ok(Action::Append(decision_path(p)?, source(&self)?));
        }
        if let Some(p) = &self.remove {
            return Ok(Action::Remove(decision_path(p)?));
        }
        if let Some(name) = &self.ssv {
            if name.is_empty() || name.contains(['.', '[']) {
                return Err(format!("`{name}`: a state variable's name is one word"));
            }
            return Ok(Action::Ssv(name.clone(), source(&self)?));
        }
        let into = self.into.as_deref().ok_or("`into` says where the result goes")?;
        let into = decision_path(into)?;
        if let Some(t) = &self.table {
            let fallback_if_unmatched = match self.unmatched.as_deref() {
                None | Some("skip") => false,
                Some("fallback") => true,
                Some(o) => return Err(format!("unmatched = `{o}`: skip or fallback")),
            };
            let table = names.table(t).ok_or_else(|| format!("no table `{t}` (tables/{t}.csv)"))?;
            return Ok(Action::Table { table, into, fallback_if_unmatched });
        }
        let s = self.script.as_deref().unwrap_or_default();
        let script =
            names.script(s).ok_or_else(|| format!("no script `{s}` (scripts/{s}.rhai)"))?;
        Ok(Action::Script { script, into })
    }
}

fn parse_template(t: &str) -> Result<Vec<Piece>, String> {
    let mut out = Vec::new();
    let mut rest = t;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            out.push(Piece::Text(rest[..open].to_string()));
        }
        let close = rest[open..].find('}').ok_or_else(|| format!("`{t}`: unclosed {{"))? + open;
        out.push(Piece::Path(Path::parse(&rest[open + 1..close]).map_err(|e| e.0)?));
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest.to_string()));
    }
    Ok(out)
}

pub(crate) fn toml_to_json(v: toml::Value) -> Value {
    match v {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::from(i),
        toml::Value::Float(f) => Value::from(f),
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.into_iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => {
            Value::Object(t.into_iter().map(|(k, v)| (k, toml_to_json(v))).collect())
        }
    }
}

impl Source {
    /// The value, or `None` when a `from` path has none (the action is then skipped).
    pub(crate) fn value(&self, ctx: &Ctx<'_>) -> Option<Value> {
        match self {
            Source::Lit(v) => Some(v.clone()),
            Source::From(p) => ctx.get(p).map(|v| v.into_owned()),
            Source::Template(pieces) => {
                let mut s = String::new();
                for p in pieces {
                    match p {
                        Piece::Text(t) => s.push_str(t),
                        Piece::Path(p) => {
                            if let Some(v) = ctx.get(p) {
                                if let Some(t) = as_text(&v) {
                                    s.push_str(&t);
                                }
                            }
                        }
                    }
                }
                Some(Value::String(s))
            }
        }
    }
}

/// RFC 7396 JSON merge patch of `patch` into `target`.
pub(crate) fn merge_patch(target: &mut Value, patch: Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(serde_json::Map::new());
            }
            let t = target.as_object_mut().expect("made an object above");
            for (k, v) in p {
                if v.is_null() {
                    t.remove(&k);
                } else {
                    merge_patch(t.entry(k).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other,
    }
}
