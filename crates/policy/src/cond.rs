//! Rule conditions: one line each, `<path> <operator> <operand>`, compiled when the project is
//! loaded into a tree the evaluation walks without parsing or allocating.
//!
//! ```text
//! request.dnn == 'internet'
//! subscriber.usage.monthly >= const.fairUseBytes
//! request.supi in list:gold_imsis
//! request.supi matches regex:test_plmn
//! request.gpsi starts_with 'msisdn-4477'
//! request.ratType in ['NR', 'EUTRA']
//! subscriber.tier exists
//! not request.ueTimeZone exists
//! script:roaming_partner            (a script that answers true or false)
//! ```
//! Comparisons are numeric when both sides are numbers (or strings holding one), else textual.
//! An operator applied to an array value holds when it holds for any element. A path with no
//! value makes every operator false except `not exists` and `!=`.

use std::borrow::Cow;

use regex::Regex;
use serde_json::Value;

use crate::input::{as_f64, as_text, Ctx};
use crate::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    NotIn,
    Matches,
    NotMatches,
    StartsWith,
    EndsWith,
    Contains,
    Exists,
    NotExists,
}

#[derive(Debug, Clone)]
pub enum Operand {
    None,
    Lit(Value),
    Array(Vec<Value>),
    /// Index into the project's match lists.
    List(usize),
    /// Index into the project's regexes.
    Regex(usize),
    Path(Path),
}

#[derive(Debug, Clone)]
pub enum Cond {
    Cmp {
        path: Path,
        op: Op,
        operand: Operand,
    },
    /// Index into the project's scripts; the script answers a boolean.
    Script(usize),
    Not(Box<Cond>),
}

/// What a condition may name, resolved while compiling.
pub trait Names {
    fn list(&self, name: &str) -> Option<usize>;
    fn regex(&self, name: &str) -> Option<usize>;
    /// Compiles an inline regex into the project's table and returns its index.
    fn inline_regex(&mut self, pattern: &str) -> Result<usize, String>;
    fn script(&self, name: &str) -> Option<usize>;
}

/// What a condition reads at evaluation time besides the context.
pub(crate) trait Tables {
    fn in_list(&self, list: usize, v: &str) -> bool;
    fn regex(&self, i: usize) -> &Regex;
    fn run_bool_script(&self, i: usize, ctx: &Ctx<'_>) -> Result<bool, String>;
}

impl Cond {
    pub fn parse(line: &str, names: &mut dyn Names) -> Result<Cond, String> {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("not ") {
            return Ok(Cond::Not(Box::new(Cond::parse(rest, names)?)));
        }
        if let Some(name) = line.strip_prefix("script:") {
            let name = name.trim();
            return names
                .script(name)
                .map(Cond::Script)
                .ok_or_else(|| format!("no script `{name}` (scripts/{name}.rhai)"));
        }
        let (path_s, rest) = split_word(line);
        let path = Path::parse(path_s).map_err(|e| e.0)?;
        let (op_s, mut rest) = split_word(rest);
        let op = match op_s {
            "==" => Op::Eq,
            "!=" => Op::Ne,
            "<" => Op::Lt,
            "<=" => Op::Le,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            "in" => Op::In,
            "matches" => Op::Matches,
            "starts_with" => Op::StartsWith,
            "ends_with" => Op::EndsWith,
            "contains" => Op::Contains,
            "exists" => Op::Exists,
            "not" => {
                let (next, r) = split_word(rest);
                rest = r;
                match next {
                    "in" => Op::NotIn,
                    "matches" => Op::NotMatches,
                    "exists" => Op::NotExists,
                    other => return Err(format!("`not {other}`: expected not in, not matches or not exists")),
                }
            }
            "" => return Err(format!("`{line}`: an operator is missing")),
            other => return Err(format!("`{other}` is not an operator (== != < <= > >= in, not in, matches, not matches, starts_with, ends_with, contains, exists, not exists)")),
        };
        let rest = rest.trim();
        let operand = match op {
            Op::Exists | Op::NotExists => {
                if !rest.is_empty() {
                    return Err(format!("`{rest}`: `exists` takes no operand"));
                }
                Operand::None
            }
            _ if rest.is_empty() => return Err(format!("`{line}`: the operand is missing")),
            Op::In | Op::NotIn => {
                if let Some(name) = rest.strip_prefix("list:") {
                    let name = name.trim();
                    Operand::List(
                        names
                            .list(name)
                            .ok_or_else(|| format!("no match list `{name}` (lists/{name}.txt)"))?,
                    )
                } else if rest.starts_with('[') {
                    match parse_literal(rest)? {
                        Value::Array(a) => Operand::Array(a),
                        _ => unreachable!("a literal starting with [ is an array"),
                    }
                } else {
                    return Err(format!("`{rest}`: `in` takes list:NAME or ['a', 'b']"));
                }
            }
            Op::Matches | Op::NotMatches => {
                if let Some(name) = rest.strip_prefix("regex:") {
                    let name = name.trim();
                    Operand::Regex(
                        names
                            .regex(name)
                            .ok_or_else(|| format!("no regex `{name}` (regex.toml)"))?,
                    )
                } else {
                    match parse_literal(rest)? {
                        Value::String(p) => Operand::Regex(names.inline_regex(&p)?),
                        _ => {
                            return Err(format!(
                                "`{rest}`: `matches` takes regex:NAME or 'pattern'"
                            ))
                        }
                    }
                }
            }
            _ => {
                if rest.starts_with(['\'', '"', '[', '-'])
                    || rest.starts_with(|c: char| c.is_ascii_digit())
                    || ["true", "false", "null"].contains(&rest)
                {
                    match parse_literal(rest)? {
                        Value::Array(a) => Operand::Array(a),
                        v => Operand::Lit(v),
                    }
                } else {
                    Operand::Path(Path::parse(rest).map_err(|e| e.0)?)
                }
            }
        };
        Ok(Cond::Cmp { path, op, operand })
    }

    /// The paths the condition reads (none for a script).
    pub fn paths(&self) -> Vec<&Path> {
        match self {
            Cond::Not(c) => c.paths(),
            Cond::Script(_) => Vec::new(),
            Cond::Cmp { path, operand: Operand::Path(o), .. } => vec![path, o],
            Cond::Cmp { path, .. } => vec![path],
        }
    }

    pub(crate) fn holds(&self, ctx: &Ctx<'_>, t: &dyn Tables) -> Result<bool, String> {
        match self {
            Cond::Not(c) => Ok(!c.holds(ctx, t)?),
            Cond::Script(i) => t.run_bool_script(*i, ctx),
            Cond::Cmp { path, op, operand } => {
                let v = ctx.get(path);
                Ok(match op {
                    Op::Exists => v.is_some_and(|v| !v.is_null()),
                    Op::NotExists => v.is_none_or(|v| v.is_null()),
                    Op::Ne => match v {
                        None => true,
                        Some(v) => !any(&v, |x| compare(x, operand, ctx, t, Op::Eq)),
                    },
                    Op::NotIn => match v {
                        None => true,
                        Some(v) => !any(&v, |x| compare(x, operand, ctx, t, Op::In)),
                    },
                    Op::NotMatches => match v {
                        None => true,
                        Some(v) => !any(&v, |x| compare(x, operand, ctx, t, Op::Matches)),
                    },
                    // `contains` on an array value is about its elements, not "any element".
                    Op::Contains if v.as_deref().is_some_and(Value::is_array) => {
                        let want = operand_value(operand, ctx);
                        match (v.as_deref(), want) {
                            (Some(Value::Array(a)), Some(w)) => a.iter().any(|x| loose_eq(x, &w)),
                            _ => false,
                        }
                    }
                    _ => match v {
                        None => false,
                        Some(v) => any(&v, |x| compare(x, operand, ctx, t, *op)),
                    },
                })
            }
        }
    }
}

/// `f` over the value, or over each element of an array value.
fn any(v: &Value, mut f: impl FnMut(&Value) -> bool) -> bool {
    match v {
        Value::Array(a) => a.iter().any(f),
        v => f(v),
    }
}

fn operand_value<'a>(o: &'a Operand, ctx: &'a Ctx<'_>) -> Option<Cow<'a, Value>> {
    match o {
        Operand::Lit(v) => Some(Cow::Borrowed(v)),
        Operand::Path(p) => ctx.get(p),
        _ => None,
    }
}

fn compare(x: &Value, operand: &Operand, ctx: &Ctx<'_>, t: &dyn Tables, op: Op) -> bool {
    match (op, operand) {
        (Op::In, Operand::List(l)) => as_text(x).is_some_and(|s| t.in_list(*l, &s)),
        (Op::In, Operand::Array(a)) => a.iter().any(|w| loose_eq(x, w)),
        (Op::Matches, Operand::Regex(r)) => as_text(x).is_some_and(|s| t.regex(*r).is_match(&s)),
        (Op::Eq, Operand::Array(a)) => a.iter().any(|w| loose_eq(x, w)),
        _ => {
            let Some(w) = operand_value(operand, ctx) else { return false };
            match op {
                Op::Eq => loose_eq(x, &w),
                Op::Lt | Op::Le | Op::Gt | Op::Ge => {
                    let ord = match (as_f64(x), as_f64(&w)) {
                        (Some(a), Some(b)) => a.partial_cmp(&b),
                        _ => match (as_text(x), as_text(&w)) {
                            (Some(a), Some(b)) => Some(a.cmp(&b)),
                            _ => None,
                        },
                    };
                    ord.is_some_and(|o| match op {
                        Op::Lt => o.is_lt(),
                        Op::Le => o.is_le(),
                        Op::Gt => o.is_gt(),
                        _ => o.is_ge(),
                    })
                }
                Op::StartsWith | Op::EndsWith | Op::Contains => match (as_text(x), as_text(&w)) {
                    (Some(a), Some(b)) => match op {
                        Op::StartsWith => a.starts_with(&*b),
                        Op::EndsWith => a.ends_with(&*b),
                        _ => a.contains(&*b),
                    },
                    _ => false,
                },
                _ => false,
            }
        }
    }
}

/// Equality across JSON's types where policies expect it: 5 == "5", 1.0 == 1.
pub(crate) fn loose_eq(a: &Value, b: &Value) -> bool {
    if a == b {
        return true;
    }
    match (a, b) {
        (Value::Number(_), Value::String(_))
        | (Value::String(_), Value::Number(_))
        | (Value::Number(_), Value::Number(_)) => {
            matches!((as_f64(a), as_f64(b)), (Some(x), Some(y)) if x == y)
        }
        _ => false,
    }
}

fn split_word(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    let end = s.find(char::is_whitespace).unwrap_or(s.len());
    (&s[..end], &s[end..])
}

/// A literal operand: 'text' or "text", a number, true, false, null, or an array of them.
/// Single quotes are the norm (rules live inside TOML strings); JSON syntax is accepted too.
pub fn parse_literal(s: &str) -> Result<Value, String> {
    let s = s.trim();
    // Single-quoted strings become JSON strings, quotes inside escaped.
    let mut json = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\'' {
            json.push('"');
            loop {
                match chars.next() {
                    Some('\'') => break,
                    Some('"') => json.push_str("\\\""),
                    Some('\\') => {
                        json.push('\\');
                        if let Some(n) = chars.next() {
                            json.push(n);
                        }
                    }
                    Some(c) => json.push(c),
                    None => return Err(format!("`{s}`: unclosed quote")),
                }
            }
            json.push('"');
        } else {
            json.push(c);
        }
    }
    serde_json::from_str(&json).map_err(|e| {
        format!("`{s}` is not a literal ('text', a number, true, false, null or [..]): {e}")
    })
}
