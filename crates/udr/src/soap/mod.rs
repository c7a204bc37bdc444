//! SOAP 1.1 provisioning for legacy provisioning systems: `POST /udr-soap/v1` on the SBI port
//! (HTTP/1.1 or HTTP/2), `Content-Type: text/xml; charset=utf-8`, a `SOAPAction` header, a
//! document/literal body described by docs/udr.wsdl.
//!
//! The body's one element names the operation, `{Verb}{Kind}` (`GetShProfile`,
//! `CreateSlfEntry`, ...), in the namespace [`NS`]. Each profile kind is one [`ProfileAdapter`]
//! ([`adapter`]): [`slf::SlfAdapter`] (SLF entries), [`sh::ShAdapter`] (Sh subscriber
//! profiles), [`eir::EirAdapter`] (5G-EIR IMEIs and IMEI ranges) and [`policy::PolicyAdapter`]
//! (a UE's policy data profile); a new kind is one more adapter in [`adapters`], and the
//! dispatch table and its four operations follow.
//!
//! Every error is a SOAP fault (SOAP 1.1 §4.4) answered with HTTP 500: `faultcode`
//! `soapenv:Client` for a mistake in the request (wrong media type, no SOAPAction, malformed XML,
//! not an envelope, unknown operation, a missing or wrong field, an unknown or existing
//! profile), `soapenv:Server` for a failure of ours (the store), `soapenv:VersionMismatch` for an
//! envelope of another namespace (SOAP 1.2), `soapenv:MustUnderstand` for a header entry we do not
//! understand; `faultstring` says what; `detail` carries `<udr:error>` with our `code`, the
//! `field` when one is at fault, and the `message`.

pub mod adapter;
pub mod eir;
pub mod policy;
pub mod sh;
pub mod slf;

use std::fmt::Write;
use std::sync::{Arc, LazyLock};

use http::{header, HeaderValue, StatusCode};
use nf::Answer;
use sbi::{Body, Response, SbiRequest};

pub use adapter::{adapters, Dispatch, Fault, FaultCode, ProfileAdapter, Verb};

use crate::context::Udr;
use crate::sh::xml::{self, escape};

/// The endpoint.
pub const PATH: &str = "/udr-soap/v1";
/// The route's name in metrics and logs.
pub const OPERATION: &str = "UdrProv_Soap";
/// SOAP 1.1 envelope namespace.
pub const SOAP_ENV: &str = "http://schemas.xmlsoap.org/soap/envelope/";
/// Our messages' namespace (the WSDL's targetNamespace).
pub const NS: &str = "urn:fivecore:udr:provisioning:1";

static DISPATCH: LazyLock<Dispatch> = LazyLock::new(|| Dispatch::new(adapters()));

/// The operations served, as the WSDL must list them.
pub fn operation_names() -> Vec<String> {
    DISPATCH.operation_names()
}

/// The soapAction of an operation (also in the WSDL's binding).
pub fn soap_action(operation: &str) -> String {
    format!("{NS}/{operation}")
}

/// POST /udr-soap/v1.
pub async fn handle(udr: Arc<Udr>, req: SbiRequest) -> Answer {
    Ok(match serve(&udr, &req).await {
        Ok((op, inner)) => {
            envelope(StatusCode::OK, &format!("<udr:{op}Response>{inner}</udr:{op}Response>"))
        }
        Err(f) => {
            tracing::debug!(code = f.code, message = %f.message, "SOAP fault");
            envelope(StatusCode::INTERNAL_SERVER_ERROR, &fault_xml(&f))
        }
    })
}

async fn serve(udr: &Arc<Udr>, req: &SbiRequest) -> Result<(String, String), Fault> {
    let media = sbi::body::media_type(req.headers()).unwrap_or("");
    if !media.eq_ignore_ascii_case("text/xml") {
        return Err(Fault::client(
            "UNSUPPORTED_MEDIA_TYPE",
            format!("SOAP 1.1 is sent as text/xml, not {:?}", media),
        ));
    }
    let action = req
        .headers()
        .get("soapaction")
        .ok_or_else(|| Fault::client("SOAP_ACTION_MISSING", "the SOAPAction header is missing"))?
        .to_str()
        .map_err(|_| Fault::client("SOAP_ACTION_MISMATCH", "SOAPAction is not text"))?
        .trim()
        .trim_matches('"')
        .to_owned();
    let text = std::str::from_utf8(&req.body)
        .map_err(|_| Fault::client("MALFORMED_XML", "the body is not UTF-8"))?;
    let root = xml::parse(text).map_err(|e| Fault::client("MALFORMED_XML", e.0))?;
    if root.name != "Envelope" {
        return Err(Fault::client(
            "INVALID_ENVELOPE",
            format!("root is <{}>, not Envelope", root.name),
        ));
    }
    if root.ns.as_deref() != Some(SOAP_ENV) {
        return Err(Fault::new(
            FaultCode::VersionMismatch,
            "VERSION_MISMATCH",
            format!(
                "envelope namespace {:?} is not SOAP 1.1's {SOAP_ENV}",
                root.ns.as_deref().unwrap_or("")
            ),
        ));
    }
    for el in &root.children {
        if el.ns.as_deref() != Some(SOAP_ENV) || (el.name != "Header" && el.name != "Body") {
            return Err(Fault::client(
                "INVALID_ENVELOPE",
                format!("unexpected <{}> in the envelope", el.name),
            ));
        }
    }
    if let Some(h) = root.child("Header") {
        if let Some(e) =
            h.children.iter().find(|e| e.attr("mustUnderstand").is_some_and(|v| v == "1"))
        {
            return Err(Fault::new(
                FaultCode::MustUnderstand,
                "MUST_UNDERSTAND",
                format!("header entry <{}> is not understood", e.name),
            ));
        }
    }
    let body = root
        .child("Body")
        .ok_or_else(|| Fault::client("INVALID_ENVELOPE", "the envelope has no Body"))?;
    let [op] = body.children.as_slice() else {
        return Err(Fault::client(
            "INVALID_ENVELOPE",
            "the Body must hold exactly one operation element",
        ));
    };
    if op.ns.as_deref() != Some(NS) {
        return Err(Fault::client(
            "UNKNOWN_OPERATION",
            format!("<{}> is not in the namespace {NS}", op.name),
        ));
    }
    let (adapter, verb) = DISPATCH
        .find(&op.name)
        .ok_or_else(|| Fault::client("UNKNOWN_OPERATION", format!("no operation {}", op.name)))?;
    if !action.is_empty() && action != soap_action(&op.name) && action != op.name {
        return Err(Fault::client(
            "SOAP_ACTION_MISMATCH",
            format!("SOAPAction {action:?} does not name the body's operation {}", op.name),
        ));
    }
    adapter::known_children(op, adapter.fields(verb), "operation")?;
    let inner = adapter.call(udr, verb, op, text).await?;
    Ok((op.name.clone(), inner))
}

/// A refusal of the SBI layers before [`handle`] runs (411/413 body framing and size, 503
/// overload) as the SOAP fault a SOAP client can read: `soapenv:Client` for the request's fault,
/// `soapenv:Server` for ours, the ProblemDetails cause as the detail's code. HTTP 500 as for
/// every fault, except 503 which stays 503 (with its Retry-After) so clients back off.
pub fn problem_fault(p: sbi::ProblemDetails) -> Response {
    let status = p.status.and_then(|s| StatusCode::from_u16(s).ok());
    let server = status.is_none_or(|s| s.is_server_error());
    let code = match p.cause.as_deref() {
        Some("PAYLOAD_TOO_LARGE") => "PAYLOAD_TOO_LARGE",
        Some("NF_CONGESTION") => "NF_CONGESTION",
        Some("INCORRECT_LENGTH") => "INCORRECT_LENGTH",
        Some("INVALID_MSG_FORMAT") => "MALFORMED_XML",
        _ if server => "SERVER_FAILURE",
        _ => "INVALID_ENVELOPE",
    };
    let message = p.detail.clone().unwrap_or_else(|| p.title.clone().unwrap_or_default());
    let f = Fault::new(if server { FaultCode::Server } else { FaultCode::Client }, code, message);
    let http = match status {
        Some(StatusCode::SERVICE_UNAVAILABLE) => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    envelope(http, &fault_xml(&f))
}

fn envelope(status: StatusCode, body: &str) -> Response {
    let mut s = String::with_capacity(body.len() + 200);
    s.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
    let _ = write!(
        s,
        "<soapenv:Envelope xmlns:soapenv=\"{SOAP_ENV}\" xmlns:udr=\"{NS}\"><soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"
    );
    let mut resp: Response = http::Response::new(Body::from(s));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/xml; charset=utf-8"));
    resp
}

fn fault_xml(f: &Fault) -> String {
    let mut s = String::with_capacity(256);
    let _ = write!(
        s,
        "<soapenv:Fault><faultcode>soapenv:{}</faultcode><faultstring>{}</faultstring>\
         <detail><udr:error><udr:code>{}</udr:code>",
        f.faultcode.as_str(),
        escape(&f.message),
        f.code
    );
    if let Some(field) = f.field {
        let _ = write!(s, "<udr:field>{}</udr:field>", escape(field));
    }
    let _ = write!(
        s,
        "<udr:message>{}</udr:message></udr:error></detail></soapenv:Fault>",
        escape(&f.message)
    );
    s
}
