//! Realm routing table (RFC 6733 §2.7) and the per-request next-hop hook for proxies.

use std::fmt;
use std::sync::Arc;

use crate::message::Message;

/// A peer's Diameter identity (its Origin-Host).
pub type PeerName = String;

/// Picks the next hop of a proxied request: the BSF routes Rx AARs to the PCF holding the
/// binding for the Framed-IP-Address. `None` falls back to the route's peer list.
pub trait NextHop: Send + Sync + 'static {
    fn select(&self, req: &Message) -> Option<PeerName>;
}

impl<F> NextHop for F
where
    F: Fn(&Message) -> Option<PeerName> + Send + Sync + 'static,
{
    fn select(&self, req: &Message) -> Option<PeerName> {
        self(req)
    }
}

/// What to do with a request for a realm (RFC 6733 §2.7 Local Action).
#[derive(Clone)]
pub enum RouteAction {
    /// Process here with the local application handler.
    Local,
    /// Forward unchanged (plus Route-Record) to the first usable peer of the list.
    Relay(Vec<PeerName>),
    /// Forward to the peer the hook picks, else to the first usable peer of the list.
    Proxy { peers: Vec<PeerName>, next_hop: Option<Arc<dyn NextHop>> },
    /// Answer 3006 DIAMETER_REDIRECT_INDICATION with these Redirect-Host URIs
    /// (`aaa://host:port;transport=tcp`).
    Redirect(Vec<String>),
}

impl fmt::Debug for RouteAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouteAction::Local => f.write_str("Local"),
            RouteAction::Relay(p) => f.debug_tuple("Relay").field(p).finish(),
            RouteAction::Proxy { peers, next_hop } => f
                .debug_struct("Proxy")
                .field("peers", peers)
                .field("next_hop", &next_hop.is_some())
                .finish(),
            RouteAction::Redirect(h) => f.debug_tuple("Redirect").field(h).finish(),
        }
    }
}

/// One routing table entry: realm (`"*"` is the default route) and optional application id.
#[derive(Clone, Debug)]
pub struct Route {
    pub realm: String,
    pub application_id: Option<u32>,
    pub action: RouteAction,
}

impl Route {
    pub fn new(realm: impl Into<String>, action: RouteAction) -> Route {
        Route { realm: realm.into(), application_id: None, action }
    }
    /// Restricts the entry to one application.
    pub fn application(mut self, id: u32) -> Route {
        self.application_id = Some(id);
        self
    }
    pub(crate) fn matches(&self, realm: &str, app: u32) -> bool {
        (self.realm == "*" || self.realm.eq_ignore_ascii_case(realm))
            && self.application_id.is_none_or(|a| a == app)
    }
}

/// The host part of a DiameterURI (`aaa://host:port;transport=tcp` → `host`).
pub fn uri_host(uri: &str) -> &str {
    let rest = uri.strip_prefix("aaas://").or_else(|| uri.strip_prefix("aaa://")).unwrap_or(uri);
    let end = rest.find([':', ';', '/']).unwrap_or(rest.len());
    &rest[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_hosts() {
        assert_eq!(uri_host("aaa://pcf.example.com:3868;transport=tcp"), "pcf.example.com");
        assert_eq!(uri_host("aaas://a.b;transport=tcp"), "a.b");
        assert_eq!(uri_host("host.only"), "host.only");
        let r = Route::new("Example.COM", RouteAction::Local).application(4);
        assert!(r.matches("example.com", 4));
        assert!(!r.matches("example.com", 5));
        assert!(Route::new("*", RouteAction::Local).matches("x", 1));
    }
}
