//! `fivecore policy check|test|eval|replay`: the tools around a policy project, for its author
//! and for CI (exit status 0 when all is well, 1 when not, 2 when the project cannot be used).

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use chrono::Utc;
use policy::testcase::{load_cases, read_data};
use policy::{CheckError, Input, Project, Service, Step};
use serde_json::{Map, Value};

use crate::cli::PolicyCommand;

pub fn run(cmd: &PolicyCommand) -> ExitCode {
    // Output through a handle, not println!: `fivecore policy test | head` must not panic.
    let mut out = std::io::stdout().lock();
    match run_to(cmd, &mut out) {
        Ok(code) => code,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "fivecore policy: {e}");
            ExitCode::from(2)
        }
    }
}

fn load(dir: &Path, out: &mut impl Write) -> Result<Project, ExitCode> {
    Project::load(dir).map_err(|errors| {
        print_errors(dir, &errors, out);
        ExitCode::from(2)
    })
}

fn print_errors(dir: &Path, errors: &[CheckError], out: &mut impl Write) {
    for e in errors {
        let _ = writeln!(out, "{}/{e}", dir.display());
    }
    let _ = writeln!(out, "{} error(s)", errors.len());
}

fn run_to(cmd: &PolicyCommand, out: &mut impl Write) -> Result<ExitCode, String> {
    match cmd {
        PolicyCommand::Check { dir } => {
            let p = match Project::load(dir) {
                Ok(p) => p,
                Err(errors) => {
                    print_errors(dir, &errors, out);
                    return Ok(ExitCode::from(1));
                }
            };
            if let Err(errors) = load_cases(dir) {
                print_errors(dir, &errors, out);
                return Ok(ExitCode::from(1));
            }
            let s = &p.stats;
            let services: Vec<&str> = p.services.iter().map(|s| s.name()).collect();
            let _ = writeln!(
                out,
                "{} {}: ok ({}; {} rules, {} tables of {} rows, {} match lists of {} entries, {} regexes, {} scripts)",
                p.name,
                p.version,
                services.join(" "),
                s.rules,
                s.tables,
                s.table_rows,
                s.lists,
                s.list_entries,
                s.regexes,
                s.scripts
            );
            Ok(ExitCode::SUCCESS)
        }
        PolicyCommand::Test { dir } => {
            let p = match load(dir, out) {
                Ok(p) => p,
                Err(c) => return Ok(c),
            };
            let cases = match load_cases(dir) {
                Ok(c) => c,
                Err(errors) => {
                    print_errors(dir, &errors, out);
                    return Ok(ExitCode::from(2));
                }
            };
            let mut failed = 0;
            for c in &cases {
                let r = c.run(&p);
                if r.passed() {
                    let _ = writeln!(out, "pass  {}:{}  {}", r.file, r.line, r.name);
                } else {
                    failed += 1;
                    let _ = writeln!(out, "FAIL  {}:{}  {}", r.file, r.line, r.name);
                    for f in &r.failures {
                        let _ = writeln!(out, "        {f}");
                    }
                }
            }
            let _ = writeln!(
                out,
                "{} {}: {} cases, {} passed, {} failed",
                p.name,
                p.version,
                cases.len(),
                cases.len() - failed,
                failed
            );
            Ok(if failed == 0 && !cases.is_empty() {
                ExitCode::SUCCESS
            } else {
                if cases.is_empty() {
                    let _ = writeln!(out, "no test cases (tests/*.toml)");
                }
                ExitCode::from(1)
            })
        }
        PolicyCommand::Eval { dir, request, subscriber, ssv, usage, service, node, now } => {
            let p = match load(dir, out) {
                Ok(p) => p,
                Err(c) => return Ok(c),
            };
            let service = Service::parse(service)
                .ok_or_else(|| format!("--service {service}: SM, AM, UE, PA, GX or SY"))?;
            let request = read_data(request)?;
            let subscriber =
                subscriber.as_deref().map(read_data).transpose()?.unwrap_or(Value::Null);
            let ssv: Map<String, Value> = match ssv.as_deref().map(read_data).transpose()? {
                None => Map::new(),
                Some(Value::Object(m)) => m,
                Some(_) => return Err("--ssv: an object of state variables".into()),
            };
            let usage: Option<Map<String, Value>> =
                match usage.as_deref().map(read_data).transpose()? {
                    None => None,
                    Some(Value::Object(m)) => Some(m),
                    Some(_) => return Err("--usage: an object of monitoring keys".into()),
                };
            let now = match now {
                None => Utc::now(),
                Some(t) => policy::testcase::parse_time(t).map_err(|e| format!("--now {e}"))?,
            };
            let input = Input {
                request: &request,
                subscriber: &subscriber,
                ssv: &ssv,
                node,
                now,
                spending: Input::empty(),
                usage: usage.as_ref(),
            };
            let mut trace = Vec::new();
            let o = p.evaluate_traced(service, input, &mut trace);
            let _ = writeln!(
                out,
                "project {} {}, service {service}, at {}",
                p.name,
                p.version,
                now.to_rfc3339()
            );
            let _ = writeln!(out, "trace:");
            for s in &trace {
                let _ = match s {
                    Step::Rule { name, file, line } => {
                        writeln!(out, "  rule {name} ({file}:{line})")
                    }
                    Step::TableRow { table, line } => {
                        writeln!(out, "    table {table}: row at tables/{table}.csv:{line}")
                    }
                    Step::TableMiss { table } => writeln!(out, "    table {table}: no row matches"),
                    Step::Script { name, result } => writeln!(out, "    script {name} -> {result}"),
                    Step::Error(e) => writeln!(out, "  error: {e} (the fallback decision answers)"),
                };
            }
            let doc = serde_json::json!({
                "decision": o.decision,
                "ssvUpdates": o.ssv_updates,
                "fallback": o.error,
            });
            let _ = writeln!(out, "{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
            Ok(ExitCode::SUCCESS)
        }
        PolicyCommand::Replay { old, new, sessions } => {
            let a = match load(old, out) {
                Ok(p) => p,
                Err(c) => return Ok(c),
            };
            let b = match load(new, out) {
                Ok(p) => p,
                Err(c) => return Ok(c),
            };
            let f = std::fs::File::open(sessions)
                .map_err(|e| format!("{}: {e}", sessions.display()))?;
            let r = policy::replay::replay(&a, &b, std::io::BufReader::new(f))
                .map_err(|e| e.to_string())?;
            for d in &r.differences {
                let _ = writeln!(out, "{}:{} ({}): differs", sessions.display(), d.line, d.service);
                for c in &d.changes {
                    let _ = writeln!(out, "    {c}");
                }
            }
            for (line, why) in &r.bad_lines {
                let _ = writeln!(out, "{}:{line}: not a record: {why}", sessions.display());
            }
            let _ = writeln!(
                out,
                "{} {} -> {} {}: {} requests, {} decisions differ, {} lines unread",
                a.name,
                a.version,
                b.name,
                b.version,
                r.requests,
                r.differences.len(),
                r.bad_lines.len()
            );
            Ok(if r.differences.is_empty() && r.bad_lines.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}
