//! The policy admin endpoint (issue #21): which project version is in force, and deploying a
//! new one. `GET /policy-admin/v1/project` describes the version in force; `POST
//! /policy-admin/v1/project/deploy` loads and checks a project directory (`{"dir": ...}`, or the
//! one in force again when the body is empty) and puts it in force atomically: evaluations
//! already running finish on the old version. A project that fails its check is refused with
//! 400 naming each error's file and line, and the version in force stays.

use std::path::PathBuf;
use std::sync::Arc;

use http::StatusCode;
use nf::{Answer, NfError};
use policy::Project;
use sbi::{json_response, InvalidParam, ProblemDetails, SbiRequest};
use serde_json::{json, Value};

use crate::context::Pcf;

/// The cause of a refused deploy.
pub const POLICY_CHECK_FAILED: &str = "POLICY_CHECK_FAILED";

fn describe(p: &Project) -> Value {
    let (evaluations, fallbacks) = p.counters();
    let s = &p.stats;
    json!({
        "name": p.name,
        "version": p.version,
        "description": p.description,
        "dir": p.dir.display().to_string(),
        "services": p.services.iter().map(|s| s.name()).collect::<Vec<_>>(),
        "stats": {
            "rules": s.rules, "tables": s.tables, "tableRows": s.table_rows, "lists": s.lists,
            "listEntries": s.list_entries, "regexes": s.regexes, "scripts": s.scripts,
        },
        "evaluations": evaluations,
        "fallbacks": fallbacks,
    })
}

/// GET /policy-admin/v1/project
pub async fn project(pcf: Arc<Pcf>, _req: SbiRequest) -> Answer {
    Ok(json_response(StatusCode::OK, &describe(&pcf.policy.current()))?)
}

/// POST /policy-admin/v1/project/deploy
pub async fn deploy(pcf: Arc<Pcf>, req: SbiRequest) -> Answer {
    let dir = if req.body.is_empty() {
        pcf.policy.current().dir.clone()
    } else {
        let body: Value = req.json()?;
        match body.get("dir") {
            None => pcf.policy.current().dir.clone(),
            Some(Value::String(d)) if !d.is_empty() => PathBuf::from(d),
            Some(_) => {
                return Err(ProblemDetails::invalid_params(
                    sbi::problem::cause::MANDATORY_IE_INCORRECT,
                    vec![InvalidParam::new("/dir", "must be the project's directory")],
                )
                .into())
            }
        }
    };
    let before = pcf.policy.current().version.clone();
    // Loading reads files and compiles tables of thousands of rows: off the async threads.
    let policy = pcf.policy.clone();
    let deployed = tokio::task::spawn_blocking(move || policy.deploy(&dir))
        .await
        .map_err(|e| NfError::internal(format!("deploy task: {e}")))?;
    match deployed {
        Ok(p) => {
            let mut v = describe(&p);
            v["previousVersion"] = Value::from(before);
            Ok(json_response(StatusCode::OK, &v)?)
        }
        Err(errors) => {
            tracing::warn!(errors = errors.len(), version = %before, "policy deploy refused; the version in force stays");
            let params = errors
                .iter()
                .map(|e| InvalidParam::new(format!("{}:{}", e.file, e.line), e.message.clone()))
                .collect();
            let mut p = ProblemDetails::invalid_params(POLICY_CHECK_FAILED, params);
            p.detail =
                Some(format!("the project failed its check; version {before} stays in force"));
            Err(p.into())
        }
    }
}
