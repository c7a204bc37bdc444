//! The xDR resources of the admin API: a query answered as a JSON array, page by page, and an
//! export of every matching xDR as JSON lines or CSV, streamed.
//!
//! ```text
//! GET /dd-admin/v1/xdrs?supi=&from=&to=&outcome=&nf=&limit=&cursor=
//! GET /dd-admin/v1/xdrs/export?format=jsonl|csv&supi=&from=&to=&outcome=&nf=&limit=
//! ```
//!
//! `from` and `to` are RFC 3339 times and select by start time (`from` <= start < `to`);
//! `outcome` is `success`, `failure`, `timeout`, `incomplete` or the status of a failure (`404`,
//! `5030`); `nf` an NF type that took part. A query answers at most `limit` xDRs (default 100, at
//! most 1,000) and, when more follow, a `Link: <...&cursor=...>; rel="next"` header whose URL
//! continues after the last one. An export answers every matching xDR (or the first `limit`),
//! reading them from the store a page at a time while the client reads, so its size is bounded
//! by neither memory nor a page. Any wrong parameter is a 400 whose `invalidParams` names it.
//!
//! The handlers are generic over the state of the router that mounts them ([`XdrAdmin`]), so
//! the Data Director's admin router adds them with [`routes`].

use std::fmt::Write as _;
use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderValue, Method, StatusCode};
use nf::Answer;
use sbi::problem::cause;
use sbi::router::RouterBuilder;
use sbi::{Body, InvalidParam, ProblemDetails, SbiRequest};

use crate::sinks::xdr_store::{Cursor, OutcomeFilter, XdrQuery, XdrStore};
use crate::transforms::correlate::xdr::{parse_time, Xdr, CSV_HEADER};

pub const XDRS_PATH: &str = "/dd-admin/v1/xdrs";
pub const EXPORT_PATH: &str = "/dd-admin/v1/xdrs/export";

const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 1_000;
/// xDRs read from the store per step of an export.
const EXPORT_PAGE: usize = 500;

const JSON_LINES: &str = "application/x-ndjson";
const CSV: &str = "text/csv; charset=utf-8; header=present";

/// What the router's state gives these handlers.
pub trait XdrAdmin: Send + Sync + 'static {
    fn xdr_store(&self) -> Arc<dyn XdrStore>;
}

/// Adds the query and the export to an admin router.
pub fn routes<S: XdrAdmin>(b: RouterBuilder<S>) -> RouterBuilder<S> {
    b.route(Method::GET, XDRS_PATH, "DdAdmin_XdrQuery", query::<S>)
        .route(Method::GET, EXPORT_PATH, "DdAdmin_XdrExport", export::<S>)
        // It answers in CSV or JSON lines, whatever Accept a download tool sends.
        .own_media(ProblemDetails::into_response)
}

/// `GET /dd-admin/v1/xdrs`: one page, as a JSON array.
pub async fn query<S: XdrAdmin>(state: Arc<S>, req: SbiRequest) -> Answer {
    let q = parse(&req, false)?.query;
    let page = state.xdr_store().query(q).await?;
    let mut resp = sbi::json_response(StatusCode::OK, &page.xdrs)?;
    if let Some(next) = page.next {
        let link = format!("<{}>; rel=\"next\"", next_url(&req, next));
        if let Ok(v) = HeaderValue::from_str(&link) {
            resp.headers_mut().insert(header::LINK, v);
        }
    }
    Ok(resp)
}

/// `GET /dd-admin/v1/xdrs/export`: every matching xDR, streamed.
pub async fn export<S: XdrAdmin>(state: Arc<S>, req: SbiRequest) -> Answer {
    let Parsed { mut query, total, csv } = parse(&req, true)?;
    let store = state.xdr_store();
    let mut left = total.unwrap_or(usize::MAX);
    // The first page before the answer: a store that cannot be read is a 500, not an empty file.
    query.limit = EXPORT_PAGE.min(left);
    let first = store.query(query.clone()).await?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(2);
    tokio::spawn(async move {
        let mut page = first;
        let mut header = csv.then_some(CSV_HEADER);
        loop {
            let mut chunk = String::from(header.take().unwrap_or(""));
            for x in &page.xdrs {
                write_row(x, csv, &mut chunk);
            }
            left -= page.xdrs.len();
            if tx.send(Bytes::from(chunk)).await.is_err() {
                return; // The client went away.
            }
            let Some(next) = page.next.filter(|_| left > 0) else { return };
            query.after = Some(next);
            query.limit = EXPORT_PAGE.min(left);
            page = match store.query(query.clone()).await {
                Ok(p) => p,
                Err(e) => {
                    // The status is sent: all that is left is to end the body early.
                    tracing::warn!(error = %e, "xDR export stopped: the store failed");
                    return;
                }
            };
        }
    });
    let mut resp = http::Response::new(Body::stream(rx));
    let (media, file) = if csv { (CSV, "xdrs.csv") } else { (JSON_LINES, "xdrs.jsonl") };
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
    let disposition = format!("attachment; filename=\"{file}\"");
    if let Ok(v) = HeaderValue::from_str(&disposition) {
        resp.headers_mut().insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(resp)
}

fn write_row(x: &Xdr, csv: bool, out: &mut String) {
    if csv {
        x.write_csv(out);
    } else {
        x.write_json_line(out);
    }
}

struct Parsed {
    query: XdrQuery,
    /// The export's cap on the whole answer.
    total: Option<usize>,
    csv: bool,
}

/// The query parameters, or a 400 naming every wrong one.
fn parse(req: &SbiRequest, export: bool) -> Result<Parsed, ProblemDetails> {
    let raw = req.query();
    let known: &[&str] = if export {
        &["format", "supi", "from", "to", "outcome", "nf", "limit"]
    } else {
        &["supi", "from", "to", "outcome", "nf", "limit", "cursor"]
    };
    raw.deny_unknown(known)?;
    let mut bad = Vec::new();
    let mut get = |name: &str| match raw.get(name) {
        Ok(v) => v.map(str::to_owned),
        Err(_) => {
            bad.push(InvalidParam::new(name, "must appear at most once"));
            None
        }
    };
    let (supi, from, to, outcome, nf, limit, cursor, format) = (
        get("supi"),
        get("from"),
        get("to"),
        get("outcome"),
        get("nf"),
        get("limit"),
        get("cursor"),
        get("format"),
    );
    let mut q = XdrQuery { limit: DEFAULT_LIMIT, ..XdrQuery::default() };
    for (name, value, slot) in [("supi", supi, &mut q.supi), ("nf", nf, &mut q.nf_type)] {
        match value {
            Some(v) if v.is_empty() => bad.push(InvalidParam::new(name, "empty")),
            v => *slot = v,
        }
    }
    for (name, value, slot) in [("from", from, &mut q.from), ("to", to, &mut q.to)] {
        if let Some(v) = value {
            match parse_time(&v) {
                Some(t) => *slot = Some(t),
                None => bad.push(InvalidParam::new(
                    name,
                    format!("'{v}' is not an RFC 3339 time (2026-11-26T06:32:29Z)"),
                )),
            }
        }
    }
    if let (Some(from), Some(to)) = (q.from, q.to) {
        if to <= from {
            bad.push(InvalidParam::new("to", "must be later than from"));
        }
    }
    if let Some(v) = outcome {
        match v.parse::<OutcomeFilter>() {
            Ok(o) => q.outcome = Some(o),
            Err(()) => bad.push(InvalidParam::new(
                "outcome",
                format!("'{v}' is none of success, failure, timeout, incomplete or a status"),
            )),
        }
    }
    let mut total = None;
    if let Some(v) = limit {
        let max = if export { usize::MAX } else { MAX_LIMIT };
        match v.parse::<usize>() {
            Ok(n) if (1..=max).contains(&n) && v.bytes().all(|b| b.is_ascii_digit()) => {
                q.limit = n;
                total = Some(n);
            }
            _ if export => bad.push(InvalidParam::new("limit", "a positive whole number")),
            _ => bad.push(InvalidParam::new("limit", format!("1 to {MAX_LIMIT}"))),
        }
    }
    if let Some(v) = cursor {
        match v.parse::<Cursor>() {
            Ok(c) => q.after = Some(c),
            Err(()) => bad.push(InvalidParam::new("cursor", "not a cursor this API gave")),
        }
    }
    let csv = match format.as_deref() {
        None | Some("jsonl") => false,
        Some("csv") => true,
        Some(other) => {
            bad.push(InvalidParam::new("format", format!("'{other}' is neither jsonl nor csv")));
            false
        }
    };
    if !bad.is_empty() {
        return Err(ProblemDetails::invalid_params(cause::OPTIONAL_QUERY_PARAM_INCORRECT, bad));
    }
    Ok(Parsed { query: q, total, csv })
}

/// This request's URL with `cursor` set to `next`.
fn next_url(req: &SbiRequest, next: Cursor) -> String {
    let mut url = String::from(req.head.uri.path());
    url.push('?');
    for pair in req.head.uri.query().unwrap_or("").split('&') {
        if !pair.is_empty() && !pair.starts_with("cursor=") && pair != "cursor" {
            url.push_str(pair);
            url.push('&');
        }
    }
    let _ = write!(url, "cursor={next}");
    url
}
