//! One adapter per profile kind, and the dispatch table built from them.
//!
//! An adapter names its kind (`ShProfile`) and serves the four verbs on it; the table maps each
//! operation element (`{Verb}{Kind}`: `GetShProfile`, `CreateShProfile`, `UpdateShProfile`,
//! `DeleteShProfile`) to its adapter and verb. To add a kind: implement [`ProfileAdapter`], add it
//! to [`adapters`], and describe its four operations in docs/udr.wsdl (a test compares the two).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::context::Udr;
use crate::sh::xml::Element;

/// The provisioning verbs (GET / POST / PUT / DELETE of the REST provisioning).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    Create,
    Update,
    Delete,
}

impl Verb {
    pub const ALL: [Verb; 4] = [Verb::Get, Verb::Create, Verb::Update, Verb::Delete];

    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "Get",
            Verb::Create => "Create",
            Verb::Update => "Update",
            Verb::Delete => "Delete",
        }
    }
}

/// SOAP 1.1 fault codes (§4.4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultCode {
    VersionMismatch,
    MustUnderstand,
    Client,
    Server,
}

impl FaultCode {
    pub fn as_str(self) -> &'static str {
        match self {
            FaultCode::VersionMismatch => "VersionMismatch",
            FaultCode::MustUnderstand => "MustUnderstand",
            FaultCode::Client => "Client",
            FaultCode::Server => "Server",
        }
    }
}

/// A SOAP fault: the fault code, our error code (detail), the field at fault, the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub faultcode: FaultCode,
    pub code: &'static str,
    pub field: Option<&'static str>,
    pub message: String,
}

impl Fault {
    pub fn new(faultcode: FaultCode, code: &'static str, message: impl Into<String>) -> Fault {
        Fault { faultcode, code, field: None, message: message.into() }
    }
    pub fn client(code: &'static str, message: impl Into<String>) -> Fault {
        Fault::new(FaultCode::Client, code, message)
    }
    /// A required element absent.
    pub fn missing(field: &'static str) -> Fault {
        Fault {
            field: Some(field),
            ..Fault::client("MANDATORY_FIELD_MISSING", format!("{field} is missing"))
        }
    }
    /// An element with a wrong value.
    pub fn invalid(field: &'static str, why: impl Into<String>) -> Fault {
        Fault { field: Some(field), ..Fault::client("INVALID_FIELD", why) }
    }
    pub fn not_found(message: impl Into<String>) -> Fault {
        Fault::client("NOT_FOUND", message)
    }
    pub fn already_exists(message: impl Into<String>) -> Fault {
        Fault::client("ALREADY_EXISTS", message)
    }
    /// Our failure (the store).
    pub fn server(e: &store::Error) -> Fault {
        tracing::warn!(error = %e, "SOAP provisioning: store failed");
        Fault::new(FaultCode::Server, "STORE_FAILURE", format!("store: {e}"))
    }
}

pub type AdapterFuture<'a> = Pin<Box<dyn Future<Output = Result<String, Fault>> + Send + 'a>>;

/// The operations of one profile kind.
pub trait ProfileAdapter: Send + Sync {
    /// The kind's name in operation names (`SlfEntry`, `ShProfile`).
    fn kind(&self) -> &'static str;

    /// The child elements `verb`'s operation element may hold; any other is refused before
    /// [`ProfileAdapter::call`] (a misspelt element is a mistake to report, not data to drop).
    fn fields(&self, verb: Verb) -> &'static [&'static str];

    /// Serves `verb` for the operation element `op` (its children are the request's fields;
    /// `src` is the whole request text, for content kept verbatim). Returns the content of the
    /// `{op}Response` element, already escaped XML.
    fn call<'a>(
        &'a self,
        udr: &'a Arc<Udr>,
        verb: Verb,
        op: &'a Element,
        src: &'a str,
    ) -> AdapterFuture<'a>;
}

/// Every profile kind served over SOAP.
pub fn adapters() -> Vec<Box<dyn ProfileAdapter>> {
    vec![
        Box::new(super::slf::SlfAdapter),
        Box::new(super::sh::ShAdapter),
        Box::new(super::eir::EirAdapter),
        Box::new(super::policy::PolicyAdapter),
    ]
}

/// Operation name → (adapter, verb).
pub struct Dispatch {
    adapters: Vec<Box<dyn ProfileAdapter>>,
    ops: Vec<(String, usize, Verb)>,
}

impl Dispatch {
    pub fn new(adapters: Vec<Box<dyn ProfileAdapter>>) -> Dispatch {
        let ops = adapters
            .iter()
            .enumerate()
            .flat_map(|(i, a)| {
                Verb::ALL.into_iter().map(move |v| (format!("{}{}", v.as_str(), a.kind()), i, v))
            })
            .collect();
        Dispatch { adapters, ops }
    }

    pub fn find(&self, operation: &str) -> Option<(&dyn ProfileAdapter, Verb)> {
        self.ops
            .iter()
            .find(|(n, _, _)| n == operation)
            .map(|(_, i, v)| (self.adapters[*i].as_ref(), *v))
    }

    pub fn operation_names(&self) -> Vec<String> {
        self.ops.iter().map(|(n, _, _)| n.clone()).collect()
    }
}

/// Refuses a child of `el` that is not one of `allowed` in `el`'s own namespace, naming it.
/// `field` is the element at fault in the fault's detail (`el` itself).
pub fn known_children(el: &Element, allowed: &[&str], field: &'static str) -> Result<(), Fault> {
    match el.children.iter().find(|c| c.ns != el.ns || !allowed.contains(&c.name.as_str())) {
        None => Ok(()),
        Some(c) => Err(Fault::invalid(
            field,
            format!(
                "unknown element <{}{}> in {}: expected {}",
                c.ns.as_deref()
                    .filter(|n| Some(*n) != el.ns.as_deref())
                    .map_or(String::new(), |n| format!("{{{n}}}")),
                c.name,
                el.name,
                allowed.join(", ")
            ),
        )),
    }
}

/// The trimmed text of a required child element.
pub fn required<'a>(op: &'a Element, name: &'static str) -> Result<&'a str, Fault> {
    match op.child_text(name) {
        Some(t) if !t.is_empty() => Ok(t),
        _ => Err(Fault::missing(name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_operations_per_kind() {
        let d = Dispatch::new(adapters());
        let names = d.operation_names();
        assert_eq!(names.len(), 16);
        assert!(names.contains(&"GetShProfile".to_owned()));
        assert!(names.contains(&"DeleteSlfEntry".to_owned()));
        let (a, v) = d.find("UpdateShProfile").unwrap();
        assert_eq!((a.kind(), v), ("ShProfile", Verb::Update));
        let (a, v) = d.find("DeletePolicyProfile").unwrap();
        assert_eq!((a.kind(), v), ("PolicyProfile", Verb::Delete));
        assert!(d.find("GetEirEntry").is_some());
        assert!(d.find("GetEirEntries").is_none());
    }
}
