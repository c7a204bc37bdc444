//! The consumer side: where an SBI client gets the access token for a request. The nrf-client
//! implements it (tokens from the NRF's Nnrf_AccessToken, cached until shortly before they
//! expire); the client asks before sending and reports a 401 so a refused token is not reused.

use std::future::Future;
use std::pin::Pin;

use http::HeaderValue;

pub type TokenFuture<'a> = Pin<Box<dyn Future<Output = Option<HeaderValue>> + Send + 'a>>;

pub trait TokenSource: Send + Sync {
    /// The `Authorization` value for a request to `service` (the path's first segment,
    /// `nudr-dr`), or `None` to send the request without one (no token needed or none could
    /// be had: the producer then answers 401 if it requires one).
    fn token<'a>(&'a self, service: &'a str) -> TokenFuture<'a>;

    /// The producer answered 401 to a request carrying the token for `service`.
    fn rejected(&self, service: &str);
}

/// The NF type that serves `service` (TS 29.510 ServiceName: `n<nf>-<name>`), which is the
/// target an access token is asked for; `None` for what is not a 3GPP service name (a
/// notification callback path, the token endpoint).
pub fn nf_type_of_service(service: &str) -> Option<String> {
    let rest = service.strip_prefix('n')?;
    if let Some(eir) = rest.strip_prefix("5g-eir") {
        return (eir.is_empty() || eir.starts_with('-')).then(|| "5G_EIR".to_owned());
    }
    let (nf, name) = rest.split_once('-')?;
    if nf.is_empty() || name.is_empty() || !nf.bytes().all(|b| b.is_ascii_lowercase()) {
        return None;
    }
    Some(nf.to_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_names_map_to_their_nf_type() {
        assert_eq!(nf_type_of_service("nudr-dr").as_deref(), Some("UDR"));
        assert_eq!(nf_type_of_service("nbsf-management").as_deref(), Some("BSF"));
        assert_eq!(nf_type_of_service("nchf-spendinglimitcontrol").as_deref(), Some("CHF"));
        assert_eq!(nf_type_of_service("npcf-smpolicycontrol").as_deref(), Some("PCF"));
        assert_eq!(nf_type_of_service("n5g-eir-eic").as_deref(), Some("5G_EIR"));
        assert_eq!(nf_type_of_service("oauth2"), None);
        assert_eq!(nf_type_of_service("notify"), None);
        assert_eq!(nf_type_of_service(""), None);
    }
}
