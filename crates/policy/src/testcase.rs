//! A project's own test cases (`tests/*.toml`): a request, the subscriber's data and state, and
//! what the decision must hold. `fivecore policy test` runs them; CI runs that.
//!
//! ```toml
//! [[case]]
//! name = "gold subscriber on internet gets 5QI 9"
//! service = "SM"
//! request = { dnn = "internet", supi = "imsi-001010000000001" }   # or request_file = "x.json"
//! subscriber = { tier = "gold" }
//! ssv = { lastDnn = "ims" }
//! node = "smf-1"
//! spending = { "data-cap" = "exhausted" }         # policyCounterId → currentStatus
//! usage = { monthly = { volUsage = 1000 } }         # monitoring key → accumulated usage
//! now = "2026-11-26T10:00:00Z"
//! fired = ["gold-internet", "default-triggers"]    # optional: exactly these rules, in order
//! absent = ["decision.pccRules.video"]              # optional: paths that must have no value
//! fallback = false                                  # optional: whether the fallback answers
//! [case.expect]                                     # each path must hold this value
//! "decision.sessRules.s1.authDefQos.5qi" = 9
//! "ssv.lastDnn" = "internet"
//! ```

use std::path::Path as FsPath;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Map, Value};
use toml::Spanned;

use crate::action::toml_to_json;
use crate::files::{join_rel, ProjectFiles, Source};
use crate::path::{Path, Root};
use crate::project::{CheckError, Project, Service};
use crate::{Input, Outcome};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CasesFile {
    #[serde(default)]
    case: Vec<Spanned<CaseDef>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseDef {
    name: String,
    service: String,
    #[serde(default)]
    request: Option<toml::Value>,
    #[serde(default)]
    request_file: Option<String>,
    #[serde(default)]
    subscriber: Option<toml::Value>,
    #[serde(default)]
    subscriber_file: Option<String>,
    #[serde(default)]
    ssv: Option<toml::Table>,
    #[serde(default)]
    node: String,
    #[serde(default)]
    now: Option<String>,
    #[serde(default)]
    spending: Option<toml::Table>,
    #[serde(default)]
    usage: Option<toml::Table>,
    #[serde(default)]
    expect: toml::Table,
    #[serde(default)]
    absent: Vec<String>,
    #[serde(default)]
    fired: Option<Vec<String>>,
    #[serde(default)]
    fallback: Option<bool>,
}

/// One case, ready to run.
#[derive(Debug, Clone)]
pub struct Case {
    pub name: String,
    pub file: String,
    pub line: usize,
    pub service: Service,
    pub request: Value,
    pub subscriber: Value,
    pub ssv: Map<String, Value>,
    pub node: String,
    pub now: DateTime<Utc>,
    /// The spending limit statuses: policyCounterId → currentStatus.
    pub spending: Map<String, Value>,
    /// The accumulated usage per monitoring key; None: the NF monitors no usage.
    pub usage: Option<Map<String, Value>>,
    expect: Vec<(Path, Value)>,
    absent: Vec<Path>,
    fired: Option<Vec<String>>,
    fallback: Option<bool>,
}

/// How a case went: no failures means it passed.
#[derive(Debug, Clone)]
pub struct CaseResult {
    pub name: String,
    pub file: String,
    pub line: usize,
    pub failures: Vec<String>,
}

impl CaseResult {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// The time cases run at when they give none (so a project's time rules test the same way on
/// every day).
pub fn default_now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-05T12:00:00Z").expect("a valid time").with_timezone(&Utc)
}

/// A time as cases, recordings and `eval` give it: RFC 3339, e.g. 2026-11-26T10:00:00Z.
pub fn parse_time(s: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("`{s}`: {e} (RFC 3339, e.g. 2026-11-26T10:00:00Z)"))
}

/// Reads a JSON or TOML file: the request and subscriber files of cases, and of `eval`.
pub fn read_data(path: &FsPath) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_data(&path.display().to_string(), &text)
}

/// A JSON or TOML document (TOML when `name` ends `.toml`), its errors prefixed by `name`.
pub fn parse_data(name: &str, text: &str) -> Result<Value, String> {
    if name.ends_with(".toml") {
        toml::from_str::<toml::Value>(text).map(toml_to_json).map_err(|e| format!("{name}: {e}"))
    } else {
        serde_json::from_str(text).map_err(|e| format!("{name}: {e}"))
    }
}

/// Loads the cases of `project_dir/tests/*.toml`.
pub fn load_cases(project_dir: &FsPath) -> Result<Vec<Case>, Vec<CheckError>> {
    load_cases_in(Source::Dir(project_dir))
}

/// Loads the cases of a project's files (a stored version): `tests/*.toml`, their data files
/// among the same files.
pub fn load_cases_from(files: &ProjectFiles) -> Result<Vec<Case>, Vec<CheckError>> {
    load_cases_in(Source::Files(files))
}

fn load_cases_in(src: Source<'_>) -> Result<Vec<Case>, Vec<CheckError>> {
    let mut errors = Vec::new();
    let mut cases = Vec::new();
    for stem in src.stems("tests", "toml") {
        let rel = format!("tests/{stem}.toml");
        let text = match src.read(&rel) {
            Ok(t) => t,
            Err(message) => {
                errors.push(CheckError { file: rel, line: 0, message });
                continue;
            }
        };
        let file: CasesFile = match toml::from_str(&text) {
            Ok(f) => f,
            Err(e) => {
                let line = e.span().map_or(0, |s| text[..s.start].matches('\n').count() + 1);
                errors.push(CheckError { file: rel, line, message: e.message().to_string() });
                continue;
            }
        };
        for c in file.case {
            let line = text[..c.span().start].matches('\n').count() + 1;
            let mut err =
                |m: String| errors.push(CheckError { file: rel.clone(), line, message: m });
            let d = c.into_inner();
            let Some(service) = Service::parse(&d.service) else {
                err(format!("service `{}`: SM, AM, UE, PA, GX or SY", d.service));
                continue;
            };
            let data =
                |inline: Option<toml::Value>, file: Option<String>| -> Result<Value, String> {
                    match (inline, file) {
                        (Some(v), None) => Ok(toml_to_json(v)),
                        (None, Some(f)) => match src {
                            Source::Dir(d) => read_data(&d.join("tests").join(f)),
                            Source::Files(_) => {
                                let rel = join_rel("tests", &f)
                                    .ok_or_else(|| format!("{f}: outside the project"))?;
                                parse_data(&f, &src.read(&rel).map_err(|e| format!("{f}: {e}"))?)
                            }
                        },
                        (None, None) => Ok(Value::Null),
                        (Some(_), Some(_)) => Err("give inline data or a file, not both".into()),
                    }
                };
            let request = match data(d.request, d.request_file) {
                Ok(v) => v,
                Err(m) => {
                    err(m);
                    continue;
                }
            };
            let subscriber = match data(d.subscriber, d.subscriber_file) {
                Ok(v) => v,
                Err(m) => {
                    err(m);
                    continue;
                }
            };
            let now = match d.now.as_deref().map(parse_time).transpose() {
                Ok(t) => t.unwrap_or_else(default_now),
                Err(e) => {
                    err(format!("now: {e}"));
                    continue;
                }
            };
            let mut expect = Vec::new();
            let mut bad = false;
            for (k, v) in d.expect {
                match Path::parse(&k) {
                    Ok(p) if matches!(p.root, Root::Decision | Root::Ssv) => {
                        expect.push((p, toml_to_json(v)))
                    }
                    Ok(_) => {
                        err(format!("expect `{k}`: cases check decision.* and ssv.*"));
                        bad = true;
                    }
                    Err(e) => {
                        err(format!("expect `{k}`: {}", e.0));
                        bad = true;
                    }
                }
            }
            let mut absent = Vec::new();
            for k in d.absent {
                match Path::parse(&k) {
                    Ok(p) => absent.push(p),
                    Err(e) => {
                        err(format!("absent `{k}`: {}", e.0));
                        bad = true;
                    }
                }
            }
            if bad {
                continue;
            }
            cases.push(Case {
                name: d.name,
                file: rel.clone(),
                line,
                service,
                request,
                subscriber,
                ssv: d
                    .ssv
                    .map(|t| t.into_iter().map(|(k, v)| (k, toml_to_json(v))).collect())
                    .unwrap_or_default(),
                node: d.node,
                now,
                spending: d
                    .spending
                    .map(|t| t.into_iter().map(|(k, v)| (k, toml_to_json(v))).collect())
                    .unwrap_or_default(),
                usage: d.usage.map(|t| t.into_iter().map(|(k, v)| (k, toml_to_json(v))).collect()),
                expect,
                absent,
                fired: d.fired,
                fallback: d.fallback,
            });
        }
    }
    if errors.is_empty() {
        Ok(cases)
    } else {
        Err(errors)
    }
}

impl Case {
    pub fn input(&self) -> Input<'_> {
        Input {
            request: &self.request,
            subscriber: &self.subscriber,
            ssv: &self.ssv,
            node: &self.node,
            now: self.now,
            spending: &self.spending,
            usage: self.usage.as_ref(),
        }
    }

    /// Runs the case against `project`.
    pub fn run(&self, project: &Project) -> CaseResult {
        let out = project.evaluate(self.service, self.input());
        CaseResult {
            name: self.name.clone(),
            file: self.file.clone(),
            line: self.line,
            failures: self.check(project, &out),
        }
    }

    fn check(&self, project: &Project, out: &Outcome) -> Vec<String> {
        let mut f = Vec::new();
        let get = |p: &Path| -> Option<Value> {
            match p.root {
                Root::Decision => p.walk(&out.decision).cloned(),
                Root::Ssv => crate::input::ssv_get(&out.ssv_updates, &self.ssv, p).cloned(),
                _ => None,
            }
        };
        for (p, want) in &self.expect {
            match get(p) {
                Some(got) if &got == want || crate::cond::loose_eq(&got, want) => {}
                Some(got) => f.push(format!("{p}: expected {want}, got {got}")),
                None => f.push(format!("{p}: expected {want}, got nothing")),
            }
        }
        for p in &self.absent {
            if let Some(got) = get(p) {
                f.push(format!("{p}: expected nothing, got {got}"));
            }
        }
        if let Some(want) = &self.fired {
            let names = project.rule_names(self.service);
            let got: Vec<&str> = out.fired.iter().map(|&i| names[i]).collect();
            if got != want.iter().map(String::as_str).collect::<Vec<_>>() {
                f.push(format!("fired {got:?}, expected {want:?}"));
            }
        }
        if let Some(want) = self.fallback {
            if out.is_fallback() != want {
                f.push(match &out.error {
                    Some(e) => format!("answered the fallback ({e}), expected a decision"),
                    None => "answered a decision, expected the fallback".into(),
                });
            }
        } else if let Some(e) = &out.error {
            f.push(format!("answered the fallback: {e}"));
        }
        f
    }
}
