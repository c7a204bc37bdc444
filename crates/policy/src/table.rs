//! Policy tables: rows of match cells and output cells, read from CSV, looked up by the values
//! of the current request. The header names the columns:
//!
//! ```text
//! request.dnn, subscriber.plan, request.ratType, request.supi ~prefix, request.tac ~range, priority, =5qi, =arp.priorityLevel, =mbrUl
//! internet,    gold,            NR,              *,                    1..99,              10,       9,    8,                  1 Gbps
//! ```
//! - `path` matches the value exactly; `path ~prefix` by prefix; `path ~range` a number within
//!   `lo..hi` (inclusive; `lo..` and `..hi` are open). A cell `*` matches anything, even no value.
//! - `priority` (optional): the row with the lowest wins when several match; then the first.
//! - `=name` columns are the row's output, an object (`=a.b` nests); cells are JSON when they
//!   parse as a number, true or false, else text. An empty output cell leaves the field out.
//!
//! Lookup cost does not grow with the rows: rows are grouped by which exact columns are
//! wildcards, and each group is a hash map from the exact values to its rows, best first. A
//! lookup probes each group once (a project's tables have a handful of groups) and checks the
//! prefix and range cells of the few rows found.

use rustc_hash::FxHashMap;
use serde_json::{Map, Value};
use smallvec::SmallVec;

use crate::input::{as_f64, as_text, Ctx};
use crate::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Exact,
    Prefix,
    Range,
}

#[derive(Debug)]
struct Column {
    path: Path,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Cell {
    Any,
    Text(String),
    Range(f64, f64),
}

#[derive(Debug)]
struct Row {
    /// Line in the file (1-based), for traces and errors.
    line: usize,
    priority: i64,
    /// Cells of the prefix and range columns, in column order.
    other: Vec<Cell>,
    output: Value,
}

#[derive(Debug)]
struct Group {
    /// Which exact columns hold a value (not `*`) in this group's rows.
    mask: u64,
    best: i64,
    rows: FxHashMap<String, Vec<usize>>,
}

#[derive(Debug)]
pub struct Table {
    pub name: String,
    exact: Vec<Column>,
    other: Vec<Column>,
    rows: Vec<Row>,
    groups: Vec<Group>,
}

/// A row that matched: its line in the file and its output.
#[derive(Debug, Clone, Copy)]
pub struct Hit<'t> {
    pub line: usize,
    pub output: &'t Value,
}

const SEP: char = '\u{1f}';

impl Table {
    /// Parses a table; errors name the line.
    pub fn parse(name: &str, text: &str) -> Result<Table, (usize, String)> {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .trim(csv::Trim::All)
            .comment(Some(b'#'))
            .flexible(false)
            .from_reader(text.as_bytes());
        let mut records = reader.records();
        let header = match records.next() {
            Some(Ok(h)) => h,
            Some(Err(e)) => return Err((line_of(&e), e.to_string())),
            None => return Err((1, "empty table: a header row is needed".into())),
        };
        let hline = header.position().map_or(1, |p| p.line() as usize);
        enum Col {
            Match(Column),
            Priority,
            Out(Path),
        }
        let mut cols = Vec::new();
        for h in header.iter() {
            let col = if h == "priority" {
                Col::Priority
            } else if let Some(out) = h.strip_prefix('=') {
                // Output names are paths below the row's object.
                let p = Path::parse(&format!("decision.{out}")).map_err(|e| (hline, e.0))?;
                Col::Out(p)
            } else {
                let (p, kind) = match h.split_once('~') {
                    Some((p, "prefix")) => (p.trim(), Kind::Prefix),
                    Some((p, "range")) => (p.trim(), Kind::Range),
                    Some((_, k)) => {
                        return Err((
                            hline,
                            format!("`~{k}`: a match column is exact, ~prefix or ~range"),
                        ))
                    }
                    None => (h, Kind::Exact),
                };
                let path = Path::parse(p).map_err(|e| (hline, e.0))?;
                Col::Match(Column { path, kind })
            };
            cols.push(col);
        }
        let mut exact = Vec::new();
        let mut other = Vec::new();
        // Where each header column goes: (is exact, index within exact/other), or priority/out.
        let mut slots = Vec::new();
        for c in cols {
            match c {
                Col::Match(m) if m.kind == Kind::Exact => {
                    slots.push(Slot::Exact(exact.len()));
                    exact.push(m);
                }
                Col::Match(m) => {
                    slots.push(Slot::Other(other.len(), m.kind));
                    other.push(m);
                }
                Col::Priority => slots.push(Slot::Priority),
                Col::Out(p) => slots.push(Slot::Out(p)),
            }
        }
        if exact.len() > 64 {
            return Err((hline, "at most 64 exact match columns".into()));
        }
        if exact.is_empty() && other.is_empty() {
            return Err((hline, "no match column".into()));
        }
        let mut rows = Vec::new();
        let mut keys: Vec<(u64, String)> = Vec::new();
        for rec in records {
            let rec = rec.map_err(|e| (line_of(&e), e.to_string()))?;
            let line = rec.position().map_or(0, |p| p.line() as usize);
            let mut mask = 0u64;
            let mut key = String::new();
            let mut exact_cells: Vec<Option<&str>> = vec![None; exact.len()];
            let mut cells = vec![Cell::Any; other.len()];
            let mut priority = 0i64;
            let mut output = Value::Object(Map::new());
            for (cell, slot) in rec.iter().zip(&slots) {
                match slot {
                    Slot::Exact(i) => {
                        if cell != "*" {
                            exact_cells[*i] = Some(cell);
                        }
                    }
                    Slot::Other(i, kind) => {
                        cells[*i] = match (cell, kind) {
                            ("*", _) => Cell::Any,
                            (c, Kind::Prefix) => Cell::Text(c.trim_end_matches('*').to_string()),
                            (c, _) => parse_range(c).map_err(|e| (line, e))?,
                        }
                    }
                    Slot::Priority => {
                        priority = cell
                            .parse()
                            .map_err(|_| (line, format!("priority `{cell}` is not an integer")))?;
                    }
                    Slot::Out(p) => {
                        if !cell.is_empty() {
                            let v = match serde_json::from_str::<Value>(cell) {
                                Ok(v @ (Value::Number(_) | Value::Bool(_))) => v,
                                _ => Value::String(cell.to_string()),
                            };
                            if let Some(place) = p.place(&mut output) {
                                *place = v;
                            }
                        }
                    }
                }
            }
            for (i, c) in exact_cells.iter().enumerate() {
                if let Some(c) = c {
                    mask |= 1 << i;
                    key.push_str(c);
                }
                key.push(SEP);
            }
            keys.push((mask, key));
            rows.push(Row { line, priority, other: cells, output });
        }
        // Groups by mask, each key's rows best first.
        let mut by_mask: FxHashMap<u64, Group> = FxHashMap::default();
        for (i, (mask, key)) in keys.into_iter().enumerate() {
            let g = by_mask.entry(mask).or_insert_with(|| Group {
                mask,
                best: i64::MAX,
                rows: FxHashMap::default(),
            });
            g.best = g.best.min(rows[i].priority);
            g.rows.entry(key).or_default().push(i);
        }
        let mut groups: Vec<Group> = by_mask.into_values().collect();
        for g in &mut groups {
            for list in g.rows.values_mut() {
                list.sort_by_key(|&i| (rows[i].priority, i));
            }
        }
        groups.sort_by_key(|g| (g.best, g.mask));
        Ok(Table { name: name.to_string(), exact, other, rows, groups })
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The best row matching the context, if any.
    pub(crate) fn lookup<'t>(&'t self, ctx: &Ctx<'_>, key: &mut String) -> Option<Hit<'t>> {
        // Each exact column's value and its text, once.
        let vals: SmallVec<[Option<std::borrow::Cow<'_, Value>>; 8]> =
            self.exact.iter().map(|c| ctx.get(&c.path)).collect();
        let texts: SmallVec<[Option<std::borrow::Cow<'_, str>>; 8]> =
            vals.iter().map(|v| v.as_deref().and_then(as_text)).collect();
        let mut present = 0u64;
        for (i, t) in texts.iter().enumerate() {
            if t.is_some() {
                present |= 1 << i;
            }
        }
        let mut best: Option<usize> = None;
        for g in &self.groups {
            if let Some(b) = best {
                if g.best > self.rows[b].priority {
                    break;
                }
            }
            // A group needs a value wherever its rows have one.
            if g.mask & !present != 0 {
                continue;
            }
            key.clear();
            for (i, t) in texts.iter().enumerate() {
                if g.mask & (1 << i) != 0 {
                    key.push_str(t.as_deref().unwrap_or(""));
                }
                key.push(SEP);
            }
            let Some(list) = g.rows.get(key.as_str()) else { continue };
            for &r in list {
                if best.is_some_and(|b| (self.rows[b].priority, b) <= (self.rows[r].priority, r)) {
                    break;
                }
                if self.others_match(&self.rows[r], ctx) {
                    best = Some(r);
                    break;
                }
            }
        }
        best.map(|r| Hit { line: self.rows[r].line, output: &self.rows[r].output })
    }

    fn others_match(&self, row: &Row, ctx: &Ctx<'_>) -> bool {
        self.other.iter().zip(&row.other).all(|(c, cell)| match cell {
            Cell::Any => true,
            Cell::Text(prefix) => ctx
                .get(&c.path)
                .is_some_and(|v| as_text(&v).is_some_and(|t| t.starts_with(prefix.as_str()))),
            Cell::Range(lo, hi) => {
                ctx.get(&c.path).and_then(|v| as_f64(&v)).is_some_and(|x| *lo <= x && x <= *hi)
            }
        })
    }
}

enum Slot {
    Exact(usize),
    Other(usize, Kind),
    Priority,
    Out(Path),
}

fn parse_range(c: &str) -> Result<Cell, String> {
    let (lo, hi) =
        c.split_once("..").ok_or_else(|| format!("`{c}`: a range cell is lo..hi, lo.. or ..hi"))?;
    let num = |s: &str, open: f64| -> Result<f64, String> {
        let s = s.trim();
        if s.is_empty() {
            return Ok(open);
        }
        if let Some(h) = s.strip_prefix("0x") {
            return i64::from_str_radix(h, 16)
                .map(|v| v as f64)
                .map_err(|_| format!("`{s}` is not a number"));
        }
        s.parse().map_err(|_| format!("`{s}` is not a number"))
    };
    Ok(Cell::Range(num(lo, f64::NEG_INFINITY)?, num(hi, f64::INFINITY)?))
}

fn line_of(e: &csv::Error) -> usize {
    e.position().map_or(0, |p| p.line() as usize)
}
