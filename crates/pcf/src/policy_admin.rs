//! The policy admin endpoint (issues #21 and #27): the project in force, deploying a new one,
//! and the versions the PCF keeps (`crate::policy_versions`), under `/policy-admin/v1`:
//!
//! - `GET /project` describes the version in force; `POST /project/deploy` reads a project
//!   directory (`{"dir": ...}`, or the in-force version's directory again when the body is
//!   empty), checks it, stores it as a version and puts it in force atomically: evaluations
//!   already running finish on the old version. A project that fails its check is refused
//!   with 400 naming each error's file and line, and the version in force stays.
//! - `GET|POST /versions`, `GET /versions/{id}`, `GET /versions/{a}/diff/{b}`,
//!   `POST /versions/{id}/test`, `POST /versions/{id}/activate`, `POST /rollback`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use http::{header, HeaderValue, StatusCode};
use nf::{Answer, NfError};
use policy::testcase::parse_time;
use policy::{CheckError, Input, Project, ProjectFiles, Service, Step};
use sbi::problem::cause;
use sbi::{json_response, InvalidParam, ProblemDetails, SbiRequest};
use serde_json::{json, Map, Value};

use crate::context::Pcf;
use crate::policy_versions::{rfc3339, Refusal};
pub use crate::policy_versions::{NO_PREVIOUS_VERSION, POLICY_CHECK_FAILED};
use crate::store::PolicyVersion;

const BASE: &str = "/policy-admin/v1";

fn describe(p: &Project, v: &PolicyVersion) -> Value {
    let (evaluations, fallbacks) = p.counters();
    let s = &p.stats;
    json!({
        "name": p.name,
        "version": p.version,
        "description": p.description,
        "dir": v.dir,
        "versionId": v.id,
        "services": p.services.iter().map(|s| s.name()).collect::<Vec<_>>(),
        "stats": {
            "rules": s.rules, "tables": s.tables, "tableRows": s.table_rows, "lists": s.lists,
            "listEntries": s.list_entries, "regexes": s.regexes, "scripts": s.scripts,
        },
        "evaluations": evaluations,
        "fallbacks": fallbacks,
    })
}

fn check_failed(errors: &[CheckError], detail: String) -> NfError {
    let params = errors
        .iter()
        .map(|e| InvalidParam::new(format!("{}:{}", e.file, e.line), e.message.clone()))
        .collect();
    let mut p = ProblemDetails::invalid_params(POLICY_CHECK_FAILED, params);
    p.detail = Some(detail);
    p.into()
}

/// A refusal as its answer: 400 naming each file and line, 404 naming the id, 409.
fn refused(r: Refusal, param: &str) -> NfError {
    match r {
        Refusal::Check(errors) => {
            check_failed(&errors, "the project failed its check; the version in force stays".into())
        }
        Refusal::Unknown(id) => {
            let mut p = ProblemDetails::not_found(format!("no policy version {id}"));
            p.invalid_params = vec![InvalidParam::new(param, "no version of this id")];
            p.into()
        }
        Refusal::NoPrevious => ProblemDetails::new(
            StatusCode::CONFLICT,
            NO_PREVIOUS_VERSION,
            "no version was in force before the one in force",
        )
        .into(),
        Refusal::Fault(e) => e,
    }
}

fn bad(cause: &str, param: &str, reason: &str) -> NfError {
    ProblemDetails::invalid_params(cause, vec![InvalidParam::new(param, reason)]).into()
}

/// The version id of path parameter `name`.
fn id_param(req: &SbiRequest, name: &str) -> Result<i64, NfError> {
    let v = req.param(name);
    v.parse::<i64>().ok().filter(|&id| id > 0).ok_or_else(|| {
        bad(cause::MANDATORY_IE_INCORRECT, name, "a version id is a positive integer")
    })
}

/// The body as a JSON object; an empty body is an empty object.
fn object_body(req: &SbiRequest) -> Result<Map<String, Value>, NfError> {
    if req.body.is_empty() {
        return Ok(Map::new());
    }
    match req.json::<Value>()? {
        Value::Object(m) => Ok(m),
        _ => Err(bad(cause::MANDATORY_IE_INCORRECT, "/", "the body is a JSON object")),
    }
}

fn version_json(v: &PolicyVersion, active: bool, activated_ms: Option<i64>) -> Value {
    let mut o = json!({
        "id": v.id,
        "projectVersion": v.project_version,
        "name": v.name,
        "deployedAt": rfc3339(v.created_ms),
        "active": active,
        "description": v.description,
        "dir": v.dir,
    });
    if let Some(ms) = activated_ms {
        o["activatedAt"] = Value::from(rfc3339(ms));
    }
    o
}

/// GET /policy-admin/v1/project
pub async fn project(pcf: Arc<Pcf>, _req: SbiRequest) -> Answer {
    let v = pcf.versions.active();
    Ok(json_response(StatusCode::OK, &describe(&pcf.policy.current(), &v))?)
}

/// POST /policy-admin/v1/project/deploy
pub async fn deploy(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let body = object_body(&req)?;
    let before = pcf.versions.active();
    let dir = match body.get("dir") {
        None => match &before.dir {
            Some(d) => PathBuf::from(d),
            None => {
                return Err(bad(
                    cause::MANDATORY_IE_MISSING,
                    "/dir",
                    "the version in force was uploaded: name the project's directory",
                ))
            }
        },
        Some(Value::String(d)) if !d.is_empty() => PathBuf::from(d),
        Some(_) => {
            return Err(bad(
                cause::MANDATORY_IE_INCORRECT,
                "/dir",
                "must be the project's directory",
            ))
        }
    };
    match pcf.versions.deploy_dir(&dir).await {
        Ok((v, _)) => {
            let mut out = describe(&pcf.policy.current(), &v);
            out["previousVersion"] = Value::from(before.project_version.clone());
            out["previousVersionId"] = Value::from(before.id);
            Ok(json_response(StatusCode::OK, &out)?)
        }
        Err(Refusal::Check(errors)) => {
            tracing::warn!(errors = errors.len(), version = %before.project_version, "policy deploy refused; the version in force stays");
            Err(check_failed(
                &errors,
                format!(
                    "the project failed its check; version {} stays in force",
                    before.project_version
                ),
            ))
        }
        Err(r) => Err(refused(r, "/dir")),
    }
}

/// GET /policy-admin/v1/versions
pub async fn versions(pcf: Arc<Pcf>, _req: SbiRequest) -> Answer {
    let active = pcf.versions.active().id;
    let list = pcf.versions.list().await.map_err(|r| refused(r, "id"))?;
    let out: Vec<Value> = list.iter().map(|(v, at)| version_json(v, v.id == active, *at)).collect();
    Ok(json_response(StatusCode::OK, &out)?)
}

/// GET /policy-admin/v1/versions/{id}
pub async fn version(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let id = id_param(&req, "id")?;
    let (v, files) = pcf.versions.get(id).await.map_err(|r| refused(r, "id"))?;
    let mut out = version_json(&v, pcf.versions.active().id == id, None);
    out["files"] = json!(files.map());
    Ok(json_response(StatusCode::OK, &out)?)
}

/// POST /policy-admin/v1/versions: `{"dir": ...}` or `{"files": {path: text}}`, and an
/// optional `description`; checked and stored, not put in force.
pub async fn add_version(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let body = object_body(&req)?;
    let description = match body.get("description") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            return Err(bad(cause::OPTIONAL_IE_INCORRECT, "/description", "must be a string"))
        }
    };
    let (files, dir) = match (body.get("dir"), body.get("files")) {
        (Some(_), Some(_)) => {
            return Err(bad(cause::MANDATORY_IE_INCORRECT, "/files", "give dir or files, not both"))
        }
        (None, None) => {
            return Err(ProblemDetails::invalid_params(
                cause::MANDATORY_IE_MISSING,
                vec![
                    InvalidParam::new("/dir", "a project directory on the PCF's host, or"),
                    InvalidParam::new("/files", "the project's files, {path: text}"),
                ],
            )
            .into())
        }
        (Some(Value::String(d)), None) if !d.is_empty() => {
            let read = PathBuf::from(d);
            let files = tokio::task::spawn_blocking(move || ProjectFiles::read_dir(&read))
                .await
                .map_err(|e| NfError::internal(format!("policy read task: {e}")))?
                .map_err(|e| check_failed(&e, format!("{d} cannot be read as a project")))?;
            (files, Some(d.clone()))
        }
        (Some(_), None) => {
            return Err(bad(
                cause::MANDATORY_IE_INCORRECT,
                "/dir",
                "must be the project's directory",
            ))
        }
        (None, Some(Value::Object(m))) => {
            let mut files = BTreeMap::new();
            let mut wrong = Vec::new();
            for (path, text) in m {
                let param = format!("/files/{}", path.replace('~', "~0").replace('/', "~1"));
                match (text, policy::files::bad_path(path)) {
                    (Value::String(t), None) => {
                        files.insert(path.clone(), t.clone());
                    }
                    (Value::String(_), Some(why)) => wrong.push(InvalidParam::new(param, why)),
                    _ => wrong.push(InvalidParam::new(param, "a file's text is a string")),
                }
            }
            if !wrong.is_empty() {
                return Err(
                    ProblemDetails::invalid_params(cause::MANDATORY_IE_INCORRECT, wrong).into()
                );
            }
            let files = ProjectFiles::new(files)
                .map_err(|e| check_failed(&e, "a path is not a project's".into()))?;
            (files, None)
        }
        (None, Some(_)) => {
            return Err(bad(cause::MANDATORY_IE_INCORRECT, "/files", "an object: {path: text}"))
        }
    };
    let (v, _) =
        pcf.versions.add(files, dir, description, false).await.map_err(|r| refused(r, "/files"))?;
    let mut resp = json_response(StatusCode::CREATED, &version_json(&v, false, None))?;
    let location = format!("{}{BASE}/versions/{}", pcf.api_root(Some(&req)), v.id);
    if let Ok(h) = HeaderValue::from_str(&location) {
        resp.headers_mut().insert(header::LOCATION, h);
    }
    Ok(resp)
}

/// GET /policy-admin/v1/versions/{a}/diff/{b}: how b differs from a.
pub async fn diff(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let a = id_param(&req, "a")?;
    let b = id_param(&req, "b")?;
    let (_, from) = pcf.versions.get(a).await.map_err(|r| refused(r, "a"))?;
    let (_, to) = pcf.versions.get(b).await.map_err(|r| refused(r, "b"))?;
    let files: Vec<Value> = from
        .diff(&to)
        .into_iter()
        .map(|d| json!({"path": d.path, "status": d.change.as_str(), "unifiedDiff": d.unified}))
        .collect();
    Ok(json_response(StatusCode::OK, &json!({"from": a, "to": b, "files": files}))?)
}

/// POST /policy-admin/v1/versions/{id}/test: the version's own test cases; with a body
/// `{service, request, subscriber, ssv, node, now, spending, usage}`, one dry-run evaluation
/// instead. Neither changes anything nor counts among the decisions of the version in force.
pub async fn test(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let id = id_param(&req, "id")?;
    let body = object_body(&req)?;
    if !body.is_empty() {
        return dry_run(&pcf, id, body).await;
    }
    let results = pcf.versions.test(id).await.map_err(|r| refused(r, "id"))?;
    let passed = results.iter().filter(|r| r.passed()).count();
    let cases: Vec<Value> = results
        .iter()
        .map(|r| {
            json!({
                "name": r.name,
                "file": format!("{}:{}", r.file, r.line),
                "passed": r.passed(),
                "message": r.failures.join("; "),
            })
        })
        .collect();
    Ok(json_response(
        StatusCode::OK,
        &json!({"passed": passed, "failed": results.len() - passed, "cases": cases}),
    )?)
}

fn object_member(
    body: &Map<String, Value>,
    name: &str,
    wrong: &mut Vec<InvalidParam>,
) -> Map<String, Value> {
    match body.get(name) {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => {
            wrong.push(InvalidParam::new(format!("/{name}"), "must be an object"));
            Map::new()
        }
    }
}

async fn dry_run(pcf: &Pcf, id: i64, body: Map<String, Value>) -> Answer {
    let mut wrong = Vec::new();
    let mut missing = false;
    let service = match body.get("service") {
        None => Service::Sm,
        Some(Value::String(s)) => Service::parse(s).unwrap_or_else(|| {
            wrong.push(InvalidParam::new("/service", "SM, AM, UE, PA, GX or SY"));
            Service::Sm
        }),
        Some(_) => {
            wrong.push(InvalidParam::new("/service", "SM, AM, UE, PA, GX or SY"));
            Service::Sm
        }
    };
    let request = match body.get("request") {
        Some(v @ Value::Object(_)) => v.clone(),
        None => {
            missing = true;
            wrong.push(InvalidParam::new("/request", "the request to decide on, an object"));
            Value::Null
        }
        Some(_) => {
            wrong.push(InvalidParam::new("/request", "must be an object"));
            Value::Null
        }
    };
    let subscriber = body.get("subscriber").cloned().unwrap_or(Value::Null);
    let ssv = object_member(&body, "ssv", &mut wrong);
    let spending = object_member(&body, "spending", &mut wrong);
    let usage = match body.get("usage") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m.clone()),
        Some(_) => {
            wrong.push(InvalidParam::new("/usage", "must be an object"));
            None
        }
    };
    let node = match body.get("node") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            wrong.push(InvalidParam::new("/node", "must be a string"));
            String::new()
        }
    };
    let now = match body.get("now") {
        None | Some(Value::Null) => chrono::Utc::now(),
        Some(Value::String(s)) => parse_time(s).unwrap_or_else(|e| {
            wrong.push(InvalidParam::new("/now", e));
            chrono::Utc::now()
        }),
        Some(_) => {
            wrong.push(InvalidParam::new("/now", "RFC 3339, e.g. 2026-11-26T10:00:00Z"));
            chrono::Utc::now()
        }
    };
    if !wrong.is_empty() {
        let c = if missing { cause::MANDATORY_IE_MISSING } else { cause::MANDATORY_IE_INCORRECT };
        return Err(ProblemDetails::invalid_params(c, wrong).into());
    }
    let (_, project, _) = pcf.versions.project(id).await.map_err(|r| refused(r, "id"))?;
    // Scripts run under the project's limits (2 ms by default): short enough for this thread.
    let input = Input {
        request: &request,
        subscriber: &subscriber,
        ssv: &ssv,
        node: &node,
        now,
        spending: &spending,
        usage: usage.as_ref(),
    };
    let mut trace = Vec::new();
    let out = project.evaluate_traced(service, input, &mut trace);
    let fallback = out.is_fallback();
    let names = project.rule_names(service);
    let fired: Vec<&str> = out.fired.iter().map(|&i| names[i]).collect();
    let trace: Vec<Value> = trace.iter().map(step_json).collect();
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "service": service.name(),
            "decision": out.decision,
            "fired": fired,
            "ssvUpdates": out.ssv_updates,
            "fallback": fallback,
            "error": out.error,
            "trace": trace,
        }),
    )?)
}

fn step_json(s: &Step) -> Value {
    match s {
        Step::Rule { name, file, line } => json!({"rule": name, "at": format!("{file}:{line}")}),
        Step::TableRow { table, line } => json!({"table": table, "row": line}),
        Step::TableMiss { table } => json!({"table": table, "row": null}),
        Step::Script { name, result } => json!({"script": name, "result": result}),
        Step::Error(e) => json!({"error": e}),
    }
}

/// POST /policy-admin/v1/versions/{id}/activate
pub async fn activate(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let id = id_param(&req, "id")?;
    let a = pcf.versions.activate(id).await.map_err(|r| refused(r, "id"))?;
    Ok(json_response(StatusCode::OK, &json!({"active": a.active, "previous": a.previous}))?)
}

/// POST /policy-admin/v1/rollback: the version in force before the current one, back.
pub async fn rollback(pcf: Arc<Pcf>, _req: SbiRequest) -> Answer {
    let (was, now) = pcf.versions.rollback().await.map_err(|r| refused(r, "id"))?;
    Ok(json_response(StatusCode::OK, &json!({"active": now.id, "previous": was.id}))?)
}
