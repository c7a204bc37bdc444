//! Paths into the evaluation's data: `request.snssai.sst`, `subscriber.plans[0]`,
//! `ssv.lastDnn`, `const.default5qi`, `decision.sessRules.s1`, `node`, `now.hour`. Parsed once
//! when the project is loaded; resolving one is a walk down `serde_json` maps, no allocation.

use std::fmt;

use serde_json::Value;

/// Where a path starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Root {
    /// The request as the NF hands it over (an SBI body, or a Diameter message as JSON).
    Request,
    /// Subscriber data from the policy data source (UDR policy data, LDAP attributes, usage).
    Subscriber,
    /// Subscriber state variables: as loaded, with the updates of this evaluation so far.
    Ssv,
    /// The project's constants (`[constants]` in project.toml).
    Const,
    /// The decision being built (what earlier rules set).
    Decision,
    /// The subscriber's spending limit statuses: `spending.<policyCounterId>` is the counter's
    /// currentStatus (TS 29.594 PolicyCounterInfo), absent when the NF has none for it.
    Spending,
    /// The subscriber's accumulated usage per monitoring key, as the NF adds up the usage
    /// reports of its sessions (Gx Used-Service-Unit, N7 accuUsageReports):
    /// `usage.<monitoringKey>.volUsage` (octets), `.volUsageUplink`, `.volUsageDownlink`,
    /// `.timeUsage` (seconds). `usage` alone is the map, present (maybe empty) only when the NF
    /// monitors usage, so `usage exists` tells a rule it can grant thresholds.
    Usage,
    /// The requesting node (an NF instance id, a Diameter Origin-Host).
    Node,
    /// The time of the evaluation: `now.hour`, `now.minute`, `now.weekday` (1 = Monday),
    /// `now.date` (YYYY-MM-DD), `now.epoch` (seconds).
    Now,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Path {
    pub root: Root,
    pub segs: Vec<Seg>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PathError(pub String);

impl Path {
    /// Parses `root.a.b[2].c`. Keys may hold any character but `.`, `[` and `]`; a key that
    /// needs them is written in quotes: `request.'a.b'`.
    pub fn parse(s: &str) -> Result<Path, PathError> {
        let s = s.trim();
        let mut segs = Vec::new();
        let mut rest = s;
        let mut first = true;
        let mut root = Root::Request;
        while !rest.is_empty() {
            if !first {
                if let Some(r) = rest.strip_prefix('.') {
                    rest = r;
                } else if !rest.starts_with('[') {
                    return Err(PathError(format!("`{s}`: expected `.` or `[` at `{rest}`")));
                }
            }
            if let Some(r) = rest.strip_prefix('[') {
                let end = r.find(']').ok_or_else(|| PathError(format!("`{s}`: unclosed `[`")))?;
                let idx = r[..end]
                    .trim()
                    .parse::<usize>()
                    .map_err(|_| PathError(format!("`{s}`: `[{}]` is not an index", &r[..end])))?;
                if first {
                    return Err(PathError(format!("`{s}`: a path starts with a name")));
                }
                segs.push(Seg::Index(idx));
                rest = &r[end + 1..];
                continue;
            }
            let (key, r) = if let Some(q) = rest.strip_prefix('\'') {
                let end =
                    q.find('\'').ok_or_else(|| PathError(format!("`{s}`: unclosed quote")))?;
                (&q[..end], &q[end + 1..])
            } else {
                let end = rest.find(['.', '[']).unwrap_or(rest.len());
                (&rest[..end], &rest[end..])
            };
            if key.is_empty() {
                return Err(PathError(format!("`{s}`: empty name")));
            }
            if first {
                root = match key {
                    "request" => Root::Request,
                    "subscriber" => Root::Subscriber,
                    "ssv" => Root::Ssv,
                    "const" => Root::Const,
                    "decision" => Root::Decision,
                    "node" => Root::Node,
                    "now" => Root::Now,
                    "spending" => Root::Spending,
                    "usage" => Root::Usage,
                    other => {
                        return Err(PathError(format!(
                            "`{s}`: `{other}` is not a root (request, subscriber, ssv, const, decision, node, now, spending, usage)"
                        )))
                    }
                };
                first = false;
            } else {
                segs.push(Seg::Key(key.to_string()));
            }
            rest = r;
        }
        if first {
            return Err(PathError("empty path".into()));
        }
        if root == Root::Now {
            match segs.as_slice() {
                [Seg::Key(k)] if NOW_FIELDS.contains(&k.as_str()) => {}
                _ => {
                    return Err(PathError(format!(
                        "`{s}`: the time is read as now.{}",
                        NOW_FIELDS.join(", now.")
                    )))
                }
            }
        }
        if root == Root::Spending && !matches!(segs.as_slice(), [Seg::Key(_)]) {
            return Err(PathError(format!(
                "`{s}`: a spending status is read as spending.<policyCounterId>"
            )));
        }
        if root == Root::Node && !segs.is_empty() {
            return Err(PathError(format!("`{s}`: `node` has no fields")));
        }
        Ok(Path { root, segs })
    }

    /// Walks `segs` down from `v`.
    pub fn walk<'v>(&self, mut v: &'v Value) -> Option<&'v Value> {
        for s in &self.segs {
            v = match (s, v) {
                (Seg::Key(k), Value::Object(m)) => m.get(k)?,
                (Seg::Index(i), Value::Array(a)) => a.get(*i)?,
                _ => return None,
            };
        }
        Some(v)
    }

    /// Walks `segs` down from a map (the first is one of its keys).
    pub fn walk_map<'v>(&self, m: &'v serde_json::Map<String, Value>) -> Option<&'v Value> {
        let (first, rest) = match self.segs.split_first() {
            Some((Seg::Key(k), rest)) => (k, rest),
            _ => return None,
        };
        let mut v = m.get(first)?;
        for s in rest {
            v = match (s, v) {
                (Seg::Key(k), Value::Object(m)) => m.get(k)?,
                (Seg::Index(i), Value::Array(a)) => a.get(*i)?,
                _ => return None,
            };
        }
        Some(v)
    }

    /// The mutable place at this path under `v` (a decision), made of objects as needed; `None`
    /// when a step is not an object (an index past the end, a string in the way).
    pub fn place<'v>(&self, mut v: &'v mut Value) -> Option<&'v mut Value> {
        for s in &self.segs {
            v = match s {
                Seg::Key(k) => {
                    if v.is_null() {
                        *v = Value::Object(serde_json::Map::new());
                    }
                    let m = v.as_object_mut()?;
                    // The key is cloned only when the member is new.
                    if !m.contains_key(k) {
                        m.insert(k.clone(), Value::Null);
                    }
                    m.get_mut(k)?
                }
                Seg::Index(i) => v.as_array_mut()?.get_mut(*i)?,
            };
        }
        Some(v)
    }

    /// Removes what the path names; whether anything was there.
    pub fn remove(&self, v: &mut Value) -> bool {
        let Some((last, init)) = self.segs.split_last() else {
            let had = !v.is_null();
            *v = Value::Object(serde_json::Map::new());
            return had;
        };
        let mut cur = v;
        for s in init {
            cur = match (s, cur) {
                (Seg::Key(k), Value::Object(m)) => match m.get_mut(k) {
                    Some(x) => x,
                    None => return false,
                },
                (Seg::Index(i), Value::Array(a)) => match a.get_mut(*i) {
                    Some(x) => x,
                    None => return false,
                },
                _ => return false,
            };
        }
        match (last, cur) {
            (Seg::Key(k), Value::Object(m)) => m.remove(k).is_some(),
            (Seg::Index(i), Value::Array(a)) if *i < a.len() => {
                a.remove(*i);
                true
            }
            _ => false,
        }
    }
}

pub const NOW_FIELDS: &[&str] = &["hour", "minute", "weekday", "date", "epoch"];

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let root = match self.root {
            Root::Request => "request",
            Root::Subscriber => "subscriber",
            Root::Ssv => "ssv",
            Root::Const => "const",
            Root::Decision => "decision",
            Root::Node => "node",
            Root::Now => "now",
            Root::Spending => "spending",
            Root::Usage => "usage",
        };
        f.write_str(root)?;
        for s in &self.segs {
            match s {
                Seg::Key(k) if k.contains(['.', '[', ']']) => write!(f, ".'{k}'")?,
                Seg::Key(k) => write!(f, ".{k}")?,
                Seg::Index(i) => write!(f, "[{i}]")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_parse_walk_place_and_remove() {
        let p = Path::parse("request.snssai.sd").unwrap();
        assert_eq!(p.root, Root::Request);
        let v = json!({"snssai": {"sst": 1, "sd": "000001"}, "list": [1, {"a": 2}]});
        assert_eq!(p.walk(&v), Some(&json!("000001")));
        assert_eq!(Path::parse("request.list[1].a").unwrap().walk(&v), Some(&json!(2)));
        assert_eq!(Path::parse("request.list[5]").unwrap().walk(&v), None);
        assert_eq!(Path::parse("request.'a.b'").unwrap().segs, vec![Seg::Key("a.b".into())]);
        assert_eq!(Path::parse("request.'a.b'").unwrap().to_string(), "request.'a.b'");
        for bad in [
            "",
            "req.x",
            "request..x",
            "request.x[",
            "request.x[a]",
            "now.year",
            "node.x",
            "spending",
            "spending.a.b",
        ] {
            assert!(Path::parse(bad).is_err(), "{bad}");
        }
        let u = Path::parse("usage.monthly.volUsage").unwrap();
        assert_eq!(u.root, Root::Usage);
        let m = json!({"monthly": {"volUsage": 7}});
        assert_eq!(u.walk_map(m.as_object().unwrap()), Some(&json!(7)));
        assert!(Path::parse("usage").unwrap().segs.is_empty(), "the map itself, for `exists`");
        let sp = Path::parse("spending.data-cap").unwrap();
        assert_eq!(sp.root, Root::Spending);
        let m = json!({"data-cap": "exhausted"});
        assert_eq!(sp.walk_map(m.as_object().unwrap()), Some(&json!("exhausted")));
        let mut d = Value::Null;
        *Path::parse("decision.a.b").unwrap().place(&mut d).unwrap() = json!(1);
        assert_eq!(d, json!({"a": {"b": 1}}));
        assert!(Path::parse("decision.a.b").unwrap().remove(&mut d));
        assert_eq!(d, json!({"a": {}}));
        assert!(!Path::parse("decision.x.y").unwrap().remove(&mut d));
    }
}
