//! The page and its scripts, compiled into the binary: the console works air-gapped, and what
//! it serves is exactly what was tested. Each file carries a strong ETag (its SHA-256) and
//! `Cache-Control: no-cache`, so a browser revalidates with a cheap 304 and never runs a stale
//! script after an upgrade.

use std::sync::OnceLock;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH};
use http::{HeaderMap, StatusCode};

pub struct Asset {
    pub path: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
    etag: String,
}

const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

const FILES: [(&str, &str, &[u8]); 9] = [
    ("/console/", "text/html; charset=utf-8", include_bytes!("../assets/index.html")),
    ("/console/app.js", JS, include_bytes!("../assets/app.js")),
    ("/console/app.css", CSS, include_bytes!("../assets/app.css")),
    ("/console/metrics.js", JS, include_bytes!("../assets/metrics.js")),
    ("/console/vendor/preact.module.js", JS, include_bytes!("../assets/vendor/preact.module.js")),
    ("/console/vendor/hooks.module.js", JS, include_bytes!("../assets/vendor/hooks.module.js")),
    ("/console/vendor/htm.module.js", JS, include_bytes!("../assets/vendor/htm.module.js")),
    ("/console/vendor/uPlot.esm.js", JS, include_bytes!("../assets/vendor/uPlot.esm.js")),
    ("/console/vendor/uPlot.min.css", CSS, include_bytes!("../assets/vendor/uPlot.min.css")),
];

fn all() -> &'static [Asset] {
    static ASSETS: OnceLock<Vec<Asset>> = OnceLock::new();
    ASSETS.get_or_init(|| {
        FILES
            .iter()
            .map(|&(path, content_type, bytes)| {
                let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
                let etag = format!("\"{}\"", hex(&digest.as_ref()[..16]));
                Asset { path, content_type, bytes, etag }
            })
            .collect()
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn find(path: &str) -> Option<&'static Asset> {
    let path = if path == "/console" || path == "/console/index.html" { "/console/" } else { path };
    all().iter().find(|a| a.path == path)
}

impl Asset {
    pub fn respond(&self, headers: &HeaderMap) -> Response {
        let fresh = headers
            .get(IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|t| t.trim() == self.etag || t.trim() == "*"));
        let mut builder = Response::builder()
            .header(ETAG, &self.etag)
            .header(CACHE_CONTROL, "no-cache")
            .header(CONTENT_TYPE, self.content_type);
        if self.path == "/console/" {
            builder = builder.header("content-security-policy", content_security_policy());
        }
        let result = if fresh {
            builder.status(StatusCode::NOT_MODIFIED).body(Body::empty())
        } else {
            builder.status(StatusCode::OK).body(Body::from(self.bytes))
        };
        result.unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
    }
}

/// Scripts only from the console itself plus the page's one inline script, the import map
/// (allowed by its hash, computed here from the embedded page so the two cannot drift); no
/// framing; requests only to the console.
pub fn content_security_policy() -> &'static str {
    static CSP: OnceLock<String> = OnceLock::new();
    CSP.get_or_init(|| {
        let page = std::str::from_utf8(FILES[0].2).unwrap_or("");
        let import_map = page
            .split_once("<script type=\"importmap\">")
            .and_then(|(_, rest)| rest.split_once("</script>"))
            .map_or("", |(map, _)| map);
        let digest = ring::digest::digest(&ring::digest::SHA256, import_map.as_bytes());
        let hash = base64::engine::general_purpose::STANDARD.encode(digest.as_ref());
        format!(
            "default-src 'self'; script-src 'self' 'sha256-{hash}'; style-src 'self' \
             'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; \
             base-uri 'none'; form-action 'self'; object-src 'none'"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_is_found_with_its_etag() {
        for (path, _, bytes) in FILES {
            let a = find(path).unwrap();
            assert_eq!(a.bytes.len(), bytes.len());
            assert_eq!(a.etag.len(), 34);
        }
        assert_eq!(find("/console").unwrap().path, "/console/");
        assert!(find("/console/../Cargo.toml").is_none());
    }

    #[test]
    fn the_import_map_is_hashed_into_the_policy() {
        let page = std::str::from_utf8(FILES[0].2).unwrap();
        assert!(page.contains("<script type=\"importmap\">"));
        let csp = content_security_policy();
        assert!(csp.contains("'sha256-") && !csp.contains("'sha256-47DEQpj8"), "{csp}");
    }
}
