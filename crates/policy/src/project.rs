//! A policy project: a directory of text, loaded and checked as a whole, compiled into the plan
//! [`crate::Project::evaluate`] walks.
//!
//! ```text
//! project.toml        name, version, services, constants, script limits, fallback decisions,
//!                     spending limit counters
//! rules/sm.toml       ordered rules per service: sm, am, ue, pa, gx, sy
//! tables/NAME.csv     policy tables (crate::table)
//! lists/NAME.txt      match lists: one value per line, # comments
//! regex.toml          named regexes: NAME = 'pattern'
//! scripts/NAME.rhai   scripts (crate::script)
//! tests/*.toml        the project's own test cases (crate::testcase)
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path as FsPath, PathBuf};

use regex::Regex;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Deserialize;
use serde_json::Value;
use toml::Spanned;

use crate::action::{toml_to_json, Action, ActionDef, ActionNames};
use crate::cond::{Cond, Names};
use crate::files::{ProjectFiles, Source};
use crate::script::{Limits, Scripts};
use crate::table::Table;

/// The services a project may serve, as the manifest names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
pub enum Service {
    /// Npcf_SMPolicyControl (N7).
    #[serde(rename = "SM")]
    Sm,
    /// Npcf_AMPolicyControl (N15).
    #[serde(rename = "AM")]
    Am,
    /// Npcf_UEPolicyControl.
    #[serde(rename = "UE")]
    Ue,
    /// Npcf_PolicyAuthorization (N5) and Rx.
    #[serde(rename = "PA")]
    Pa,
    /// Gx.
    #[serde(rename = "GX")]
    Gx,
    /// Sy and usage monitoring.
    #[serde(rename = "SY")]
    Sy,
}

impl Service {
    pub const ALL: [Service; 6] =
        [Service::Sm, Service::Am, Service::Ue, Service::Pa, Service::Gx, Service::Sy];

    /// The rules file's name: `rules/<file>.toml`.
    pub fn file(self) -> &'static str {
        match self {
            Service::Sm => "sm",
            Service::Am => "am",
            Service::Ue => "ue",
            Service::Pa => "pa",
            Service::Gx => "gx",
            Service::Sy => "sy",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Service::Sm => "SM",
            Service::Am => "AM",
            Service::Ue => "UE",
            Service::Pa => "PA",
            Service::Gx => "GX",
            Service::Sy => "SY",
        }
    }

    pub fn parse(s: &str) -> Option<Service> {
        Service::ALL.into_iter().find(|x| x.name().eq_ignore_ascii_case(s))
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A problem in a project: the file (relative to the project), the line (0 when the whole file
/// is meant) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        } else {
            write!(f, "{}: {}", self.file, self.message)
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    name: String,
    version: String,
    #[serde(default)]
    description: String,
    services: Vec<Service>,
    #[serde(default)]
    constants: toml::Table,
    #[serde(default)]
    limits: Option<Limits>,
    /// Per service (SM, AM, ...): the decision answered when a script fails.
    #[serde(default)]
    fallback: BTreeMap<String, toml::Value>,
    #[serde(default)]
    spending: Option<SpendingDef>,
}

/// `[spending]`: the policy counters (TS 29.594 policyCounterIds) whose statuses the project
/// reads as `spending.<id>`; the NF subscribes to them at the charging function.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpendingDef {
    counters: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    /// "all" (default): every rule whose conditions hold fires, in order; "first": only the
    /// first.
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    rule: Vec<Spanned<RuleDef>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleDef {
    name: String,
    #[serde(default)]
    description: String,
    /// Every one must hold.
    #[serde(default)]
    when: Vec<Spanned<String>>,
    /// At least one must hold (when given).
    #[serde(default)]
    any: Vec<Spanned<String>>,
    #[serde(default)]
    then: Vec<Spanned<ActionDef>>,
    /// Stop after this rule when it fires.
    #[serde(default)]
    stop: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    All,
    First,
}

#[derive(Debug)]
pub(crate) struct Rule {
    pub name: String,
    pub file: String,
    pub line: usize,
    pub all: Vec<Cond>,
    pub any: Vec<Cond>,
    pub then: Vec<Action>,
    pub stop: bool,
}

#[derive(Debug)]
pub(crate) struct ServiceRules {
    pub mode: Mode,
    pub rules: Vec<Rule>,
}

/// A loaded, checked project.
#[derive(Debug)]
pub struct Project {
    pub name: String,
    pub version: String,
    pub description: String,
    pub services: Vec<Service>,
    pub dir: PathBuf,
    pub(crate) consts: Value,
    pub(crate) rules: [Option<ServiceRules>; 6],
    pub(crate) tables: Vec<Table>,
    pub(crate) lists: Vec<FxHashSet<String>>,
    pub(crate) regexes: Vec<Regex>,
    pub(crate) scripts: Scripts,
    pub(crate) fallbacks: [Value; 6],
    /// `[spending] counters`, in the manifest's order.
    pub(crate) spending: Vec<String>,
    pub(crate) counters: crate::Counters,
    /// Sizes, for `check` and the logs.
    pub stats: Stats,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub rules: usize,
    pub tables: usize,
    pub table_rows: usize,
    pub lists: usize,
    pub list_entries: usize,
    pub regexes: usize,
    pub scripts: usize,
}

/// Names while compiling.
#[derive(Default)]
struct Scope {
    tables: FxHashMap<String, usize>,
    lists: FxHashMap<String, usize>,
    regex_names: FxHashMap<String, usize>,
    regexes: Vec<Regex>,
    scripts: FxHashMap<String, usize>,
}

impl Names for Scope {
    fn list(&self, name: &str) -> Option<usize> {
        self.lists.get(name).copied()
    }
    fn regex(&self, name: &str) -> Option<usize> {
        self.regex_names.get(name).copied()
    }
    fn inline_regex(&mut self, pattern: &str) -> Result<usize, String> {
        let r = compile_regex(pattern)?;
        self.regexes.push(r);
        Ok(self.regexes.len() - 1)
    }
    fn script(&self, name: &str) -> Option<usize> {
        self.scripts.get(name).copied()
    }
}

impl ActionNames for Scope {
    fn table(&self, name: &str) -> Option<usize> {
        self.tables.get(name).copied()
    }
    fn script(&self, name: &str) -> Option<usize> {
        self.scripts.get(name).copied()
    }
}

fn compile_regex(p: &str) -> Result<Regex, String> {
    regex::RegexBuilder::new(p).size_limit(1 << 20).build().map_err(|e| format!("regex `{p}`: {e}"))
}

fn line_at(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].bytes().filter(|&b| b == b'\n').count() + 1
}

fn toml_error(file: &str, text: &str, e: &toml::de::Error) -> CheckError {
    CheckError {
        file: file.to_string(),
        line: e.span().map_or(0, |s| line_at(text, s.start)),
        message: e.message().to_string(),
    }
}

impl Project {
    /// Loads and checks the project in `dir`; every problem found is returned, each with its
    /// file and line.
    pub fn load(dir: impl AsRef<FsPath>) -> Result<Project, Vec<CheckError>> {
        let dir = dir.as_ref();
        Project::load_from(Source::Dir(dir), dir)
    }

    /// Loads and checks the project made of `files` (a stored or uploaded version) as
    /// [`Project::load`] does its directory; `dir` is what [`Project::dir`] will say.
    pub fn from_files(
        files: &ProjectFiles,
        dir: impl Into<PathBuf>,
    ) -> Result<Project, Vec<CheckError>> {
        Project::load_from(Source::Files(files), &dir.into())
    }

    fn load_from(src: Source<'_>, dir: &FsPath) -> Result<Project, Vec<CheckError>> {
        let mut errors = Vec::new();
        let read = |rel: &str, errors: &mut Vec<CheckError>| -> Option<String> {
            match src.read(rel) {
                Ok(t) => Some(t),
                Err(message) => {
                    errors.push(CheckError { file: rel.into(), line: 0, message });
                    None
                }
            }
        };
        let manifest_text = read("project.toml", &mut errors).ok_or_else(|| errors.clone())?;
        let manifest: Manifest = toml::from_str(&manifest_text)
            .map_err(|e| vec![toml_error("project.toml", &manifest_text, &e)])?;
        let mut scope = Scope::default();
        let mut stats = Stats::default();

        // Match lists.
        let mut lists = Vec::new();
        for name in src.stems("lists", "txt") {
            let rel = format!("lists/{name}.txt");
            let Some(text) = read(&rel, &mut errors) else { continue };
            let set: FxHashSet<String> = text
                .lines()
                .map(|l| l.split('#').next().unwrap_or("").trim())
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect();
            stats.list_entries += set.len();
            scope.lists.insert(name, lists.len());
            lists.push(set);
        }
        stats.lists = lists.len();

        // Named regexes.
        if src.is_file("regex.toml") {
            if let Some(text) = read("regex.toml", &mut errors) {
                match toml::from_str::<BTreeMap<String, Spanned<String>>>(&text) {
                    Ok(map) => {
                        for (name, pat) in map {
                            match compile_regex(pat.get_ref()) {
                                Ok(r) => {
                                    scope.regex_names.insert(name, scope.regexes.len());
                                    scope.regexes.push(r);
                                }
                                Err(m) => errors.push(CheckError {
                                    file: "regex.toml".into(),
                                    line: line_at(&text, pat.span().start),
                                    message: m,
                                }),
                            }
                        }
                    }
                    Err(e) => errors.push(toml_error("regex.toml", &text, &e)),
                }
            }
        }
        stats.regexes = scope.regexes.len();

        // Tables.
        let mut tables = Vec::new();
        for name in src.stems("tables", "csv") {
            let rel = format!("tables/{name}.csv");
            let Some(text) = read(&rel, &mut errors) else { continue };
            match Table::parse(&name, &text) {
                Ok(t) => {
                    stats.table_rows += t.len();
                    scope.tables.insert(name, tables.len());
                    tables.push(t);
                }
                Err((line, message)) => errors.push(CheckError { file: rel, line, message }),
            }
        }
        stats.tables = tables.len();

        // Scripts.
        let limits = manifest.limits.clone().unwrap_or_default();
        let mut scripts = Scripts::new(&limits);
        let consts = toml_to_json(toml::Value::Table(manifest.constants.clone()));
        scripts.set_constants(&consts);
        for name in src.stems("scripts", "rhai") {
            let rel = format!("scripts/{name}.rhai");
            let Some(text) = read(&rel, &mut errors) else { continue };
            match scripts.compile(&name, &text) {
                Ok(i) => {
                    scope.scripts.insert(name, i);
                }
                Err((line, message)) => errors.push(CheckError { file: rel, line, message }),
            }
        }
        stats.scripts = scripts.len();

        // Rules per service.
        let mut rules: [Option<ServiceRules>; 6] = Default::default();
        for s in &manifest.services {
            let rel = format!("rules/{}.toml", s.file());
            let Some(text) = read(&rel, &mut errors) else { continue };
            let file: RulesFile = match toml::from_str(&text) {
                Ok(f) => f,
                Err(e) => {
                    errors.push(toml_error(&rel, &text, &e));
                    continue;
                }
            };
            let mode = match file.mode.as_deref() {
                None | Some("all") => Mode::All,
                Some("first") => Mode::First,
                Some(o) => {
                    errors.push(CheckError {
                        file: rel.clone(),
                        line: 0,
                        message: format!("mode = `{o}`: all or first"),
                    });
                    Mode::All
                }
            };
            let mut list = Vec::new();
            let mut seen = FxHashSet::default();
            for r in file.rule {
                let line = line_at(&text, r.span().start);
                let def = r.into_inner();
                if !seen.insert(def.name.clone()) {
                    errors.push(CheckError {
                        file: rel.clone(),
                        line,
                        message: format!("a second rule named `{}`", def.name),
                    });
                }
                let mut conds =
                    |v: Vec<Spanned<String>>, errors: &mut Vec<CheckError>| -> Vec<Cond> {
                        v.into_iter()
                            .filter_map(|c| {
                                let l = line_at(&text, c.span().start);
                                Cond::parse(c.get_ref(), &mut scope)
                                    .map_err(|m| {
                                        errors.push(CheckError {
                                            file: rel.clone(),
                                            line: l,
                                            message: m,
                                        })
                                    })
                                    .ok()
                            })
                            .collect()
                    };
                let all = conds(def.when, &mut errors);
                let any = conds(def.any, &mut errors);
                let mut then = Vec::new();
                for a in def.then {
                    let l = line_at(&text, a.span().start);
                    match a.into_inner().compile(&scope) {
                        Ok(a) => then.push(a),
                        Err(m) => {
                            errors.push(CheckError { file: rel.clone(), line: l, message: m })
                        }
                    }
                }
                let _ = def.description;
                list.push(Rule {
                    name: def.name,
                    file: rel.clone(),
                    line,
                    all,
                    any,
                    then,
                    stop: def.stop,
                });
            }
            stats.rules += list.len();
            rules[s.index()] = Some(ServiceRules { mode, rules: list });
        }
        // A rules file for a service the manifest does not list is a mistake worth naming.
        for name in src.stems("rules", "toml") {
            match Service::ALL.iter().find(|s| s.file() == name) {
                Some(s) if manifest.services.contains(s) => {}
                Some(s) => errors.push(CheckError {
                    file: format!("rules/{name}.toml"),
                    line: 0,
                    message: format!("service {s} is not in project.toml's services"),
                }),
                None => errors.push(CheckError {
                    file: format!("rules/{name}.toml"),
                    line: 0,
                    message: "not a service: rules files are sm, am, ue, pa, gx, sy".into(),
                }),
            }
        }

        let mut fallbacks: [Value; 6] = Default::default();
        for f in &mut fallbacks {
            *f = Value::Object(Default::default());
        }
        for (k, v) in manifest.fallback {
            match Service::parse(&k) {
                Some(s) => fallbacks[s.index()] = toml_to_json(v),
                None => errors.push(CheckError {
                    file: "project.toml".into(),
                    line: 0,
                    message: format!("[fallback.{k}]: not a service (SM, AM, UE, PA, GX, SY)"),
                }),
            }
        }
        let spending = manifest.spending.map(|s| s.counters).unwrap_or_default();
        let mut seen = FxHashSet::default();
        for c in &spending {
            let bad = if c.trim().is_empty() {
                Some("a policy counter id is empty".to_string())
            } else if c.contains(['.', '[', ']', '\'']) {
                Some(format!(
                    "policy counter `{c}`: `.`, `[`, `]` and `'` cannot be read in a path"
                ))
            } else if !seen.insert(c.as_str()) {
                Some(format!("policy counter `{c}` is listed twice"))
            } else {
                None
            };
            if let Some(message) = bad {
                errors.push(CheckError { file: "project.toml".into(), line: 0, message });
            }
        }
        // A condition on a counter the project does not list would never see a status: the NF
        // subscribes to the listed ones only.
        for (s, r) in rules.iter().enumerate().filter_map(|(i, r)| Some((i, r.as_ref()?))) {
            for rule in &r.rules {
                for p in rule.all.iter().chain(&rule.any).flat_map(Cond::paths) {
                    if p.root != crate::path::Root::Spending {
                        continue;
                    }
                    let Some(crate::path::Seg::Key(id)) = p.segs.first() else { continue };
                    if !spending.contains(id) {
                        errors.push(CheckError {
                            file: format!("rules/{}.toml", Service::ALL[s].file()),
                            line: rule.line,
                            message: format!(
                                "rule `{}` reads {p}, but `{id}` is not in [spending] counters",
                                rule.name
                            ),
                        });
                    }
                }
            }
        }
        if manifest.services.is_empty() {
            errors.push(CheckError {
                file: "project.toml".into(),
                line: 0,
                message: "services is empty".into(),
            });
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Project {
            name: manifest.name,
            version: manifest.version,
            description: manifest.description,
            services: manifest.services,
            dir: dir.to_path_buf(),
            consts,
            rules,
            tables,
            lists,
            regexes: scope.regexes,
            scripts,
            fallbacks,
            spending,
            counters: Default::default(),
            stats,
        })
    }

    /// The policy counters whose spending limit statuses the project reads (`[spending]
    /// counters`); empty when it reads none, and then the NF asks the charging function nothing.
    pub fn spending_counters(&self) -> &[String] {
        &self.spending
    }

    /// The names of the rules of a service, in order.
    pub fn rule_names(&self, service: Service) -> Vec<&str> {
        self.rules[service.index()]
            .as_ref()
            .map_or(Vec::new(), |r| r.rules.iter().map(|r| r.name.as_str()).collect())
    }
}
