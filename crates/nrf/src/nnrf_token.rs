//! Nnrf_AccessToken (TS 29.510 §5.4): the NRF as OAuth2 authorization server (RFC 6749
//! client credentials grant). Tokens are JWTs (RFC 7519) signed ES256 (RFC 7518 §3.4); the
//! verifying key is published as a JWK set at `GET /oauth2/jwks` so producers can check tokens
//! without calling the NRF.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use http::{header, HeaderValue, StatusCode};
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use store::{DocumentData, DocumentStore};

use crate::config::{AccessTokenConfig, AuthRule};
use crate::context::Nrf;
use nf::{Answer, NfError};
use sbi::{json_response, SbiRequest};

const KEY_COLLECTION: &str = "nrf-keys";
const KEY_ID: &str = "access-token-es256";

/// The ES256 key that signs access tokens, and its public half as a JWK.
pub struct TokenSigner {
    key: EcdsaKeyPair,
    rng: SystemRandom,
    kid: String,
    jwk: Value,
}

#[derive(Serialize, Deserialize)]
struct StoredKey {
    /// PKCS#8 DER, base64url.
    pkcs8: String,
}

impl TokenSigner {
    pub fn from_pkcs8(pkcs8: &[u8]) -> Result<Self, String> {
        let rng = SystemRandom::new();
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8, &rng)
            .map_err(|e| format!("not an EC P-256 PKCS#8 key: {e}"))?;
        // An uncompressed point: 0x04 || X (32 bytes) || Y (32 bytes).
        let point = key.public_key().as_ref();
        if point.len() != 65 {
            return Err("unexpected public key encoding".into());
        }
        let digest = ring::digest::digest(&ring::digest::SHA256, point);
        let kid = B64.encode(&digest.as_ref()[..12]);
        let jwk = json!({
            "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": kid,
            "x": B64.encode(&point[1..33]), "y": B64.encode(&point[33..65]),
        });
        Ok(TokenSigner { key, rng, kid, jwk })
    }

    /// The configured key, or the one kept in the store, or a new one (then kept).
    pub async fn load<S: DocumentStore>(
        config: &AccessTokenConfig,
        db: &S,
    ) -> Result<Self, String> {
        if let Some(path) = &config.signing_key {
            use rustls_pki_types::pem::PemObject;
            let der = rustls_pki_types::PrivatePkcs8KeyDer::from_pem_file(path)
                .map_err(|e| format!("signing key {}: {e}", path.display()))?;
            return Self::from_pkcs8(der.secret_pkcs8_der());
        }
        if let Some(doc) = db.get(KEY_COLLECTION, KEY_ID).await.map_err(|e| e.to_string())? {
            let stored: StoredKey = doc.json().map_err(|e| e.to_string())?;
            let der = B64.decode(stored.pkcs8).map_err(|e| e.to_string())?;
            return Self::from_pkcs8(&der);
        }
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .map_err(|e| format!("cannot generate a signing key: {e}"))?;
        let data = DocumentData::json(&StoredKey { pkcs8: B64.encode(pkcs8.as_ref()) })
            .map_err(|e| e.to_string())?;
        match db.create(KEY_COLLECTION, KEY_ID, data).await {
            Ok(_) => Self::from_pkcs8(pkcs8.as_ref()),
            // Another NRF sharing the store won the race: use its key.
            Err(store::Error::AlreadyExists) => Box::pin(Self::load(config, db)).await,
            Err(e) => Err(e.to_string()),
        }
    }

    pub fn jwks(&self) -> Value {
        json!({ "keys": [self.jwk] })
    }

    /// A compact JWS (header.claims.signature) over `claims`.
    pub fn sign(&self, claims: &Value) -> Result<String, String> {
        let header = json!({ "alg": "ES256", "typ": "JWT", "kid": self.kid });
        let mut out = String::with_capacity(512);
        out.push_str(&B64.encode(serde_json::to_vec(&header).map_err(|e| e.to_string())?));
        out.push('.');
        out.push_str(&B64.encode(serde_json::to_vec(claims).map_err(|e| e.to_string())?));
        let sig = self.key.sign(&self.rng, out.as_bytes()).map_err(|e| e.to_string())?;
        out.push('.');
        out.push_str(&B64.encode(sig.as_ref()));
        Ok(out)
    }
}

/// RFC 6749 §5.2 error codes, as TS 29.510's AccessTokenErr carries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenError {
    InvalidRequest,
    InvalidClient,
    UnauthorizedClient,
    UnsupportedGrantType,
    InvalidScope,
}

impl TokenError {
    fn code(self) -> &'static str {
        match self {
            TokenError::InvalidRequest => "invalid_request",
            TokenError::InvalidClient => "invalid_client",
            TokenError::UnauthorizedClient => "unauthorized_client",
            TokenError::UnsupportedGrantType => "unsupported_grant_type",
            TokenError::InvalidScope => "invalid_scope",
        }
    }
}

fn refuse(error: TokenError, description: impl Into<String>) -> Answer {
    let body = json!({ "error": error.code(), "error_description": description.into() });
    let mut resp = json_response(StatusCode::BAD_REQUEST, &body)?;
    no_store(&mut resp);
    Ok(resp)
}

fn no_store(resp: &mut sbi::Response) {
    // RFC 6749 §5.1: token answers must not be cached.
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp.headers_mut().insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
}

/// The AccessTokenReq fields fivecore reads (TS 29.510 §6.3.5.2.2).
#[derive(Default, Debug)]
struct TokenRequest {
    grant_type: Option<String>,
    nf_instance_id: Option<String>,
    nf_type: Option<String>,
    target_nf_type: Option<String>,
    target_nf_instance_id: Option<String>,
    scope: Option<String>,
    requester_plmn: Option<Value>,
    target_plmn: Option<Value>,
}

fn parse_form(body: &[u8]) -> Result<TokenRequest, String> {
    let mut r = TokenRequest::default();
    for (k, v) in form_urlencoded::parse(body) {
        let slot = match k.as_ref() {
            "grant_type" => &mut r.grant_type,
            "nfInstanceId" => &mut r.nf_instance_id,
            "nfType" => &mut r.nf_type,
            "targetNfType" => &mut r.target_nf_type,
            "targetNfInstanceId" => &mut r.target_nf_instance_id,
            "scope" => &mut r.scope,
            "requesterPlmn" | "targetPlmn" => {
                // PlmnId objects travel as JSON in the form (TS 29.510 §6.3.5.2.2).
                let v: Value =
                    serde_json::from_str(&v).map_err(|_| format!("{k} is not a PlmnId"))?;
                if k == "requesterPlmn" {
                    r.requester_plmn = Some(v);
                } else {
                    r.target_plmn = Some(v);
                }
                continue;
            }
            _ => continue,
        };
        if slot.is_some() {
            return Err(format!("{k} appears twice"));
        }
        *slot = Some(v.into_owned());
    }
    Ok(r)
}

/// POST /oauth2/token: AccessTokenRequest.
pub async fn token(nrf: Arc<Nrf>, req: SbiRequest) -> Answer {
    let form_ok = sbi::body::media_type(req.headers())
        .is_some_and(|m| m.eq_ignore_ascii_case("application/x-www-form-urlencoded"));
    if !form_ok {
        return refuse(
            TokenError::InvalidRequest,
            "the body must be application/x-www-form-urlencoded",
        );
    }
    let r = match parse_form(&req.body) {
        Ok(r) => r,
        Err(e) => return refuse(TokenError::InvalidRequest, e),
    };
    match r.grant_type.as_deref() {
        Some("client_credentials") => {}
        Some(other) => {
            return refuse(
                TokenError::UnsupportedGrantType,
                format!("grant_type {other} is not supported"),
            )
        }
        None => return refuse(TokenError::InvalidRequest, "grant_type is missing"),
    }
    let Some(consumer_id) = r.nf_instance_id.as_deref().map(str::to_ascii_lowercase) else {
        return refuse(TokenError::InvalidRequest, "nfInstanceId is missing");
    };
    let Some(scope) = r.scope.as_deref().filter(|s| !s.trim().is_empty()) else {
        return refuse(TokenError::InvalidRequest, "scope is missing");
    };
    let scopes: Vec<&str> = scope.split_whitespace().collect();

    // The consumer must be registered, and be of the type it claims (§5.4.2.2.2).
    let Some(consumer) = nrf.entry(&consumer_id) else {
        return refuse(
            TokenError::InvalidClient,
            format!("NF instance {consumer_id} is not registered"),
        );
    };
    let consumer_type = consumer.profile.nf_type.clone();
    if r.nf_type.as_deref().is_some_and(|t| t != consumer_type) {
        return refuse(
            TokenError::InvalidClient,
            format!("NF instance {consumer_id} is a {consumer_type}"),
        );
    }

    // The target: an instance (then its type and services are known) or an NF type.
    let (target_type, audience, target_entry) = match (&r.target_nf_instance_id, &r.target_nf_type)
    {
        (Some(id), declared) => {
            let Some(target) = nrf.entry(&id.to_ascii_lowercase()) else {
                return refuse(
                    TokenError::InvalidRequest,
                    format!("target NF instance {id} is not registered"),
                );
            };
            if declared.as_deref().is_some_and(|t| *t != target.profile.nf_type) {
                return refuse(
                    TokenError::InvalidRequest,
                    "targetNfType does not match targetNfInstanceId",
                );
            }
            (target.profile.nf_type.clone(), json!([target.profile.nf_instance_id]), Some(target))
        }
        (None, Some(t)) if crate::models::is_nf_type(t) => (t.clone(), json!(t), None),
        (None, Some(t)) => {
            return refuse(TokenError::InvalidRequest, format!("unknown targetNfType {t}"))
        }
        (None, None) => {
            return refuse(
                TokenError::InvalidRequest,
                "targetNfType or targetNfInstanceId is required",
            )
        }
    };
    if let Some(target) = &target_entry {
        if let Some(allowed) = target.value.get("allowedNfTypes").and_then(Value::as_array) {
            if !allowed.iter().any(|t| t.as_str() == Some(consumer_type.as_str())) {
                return refuse(
                    TokenError::UnauthorizedClient,
                    format!("the target does not allow {consumer_type} consumers"),
                );
            }
        }
        if let Some(missing) = scopes.iter().find(|s| !target.profile.has_service(s)) {
            return refuse(
                TokenError::InvalidScope,
                format!("the target offers no service {missing}"),
            );
        }
    }
    if let Err((e, why)) =
        authorize(&nrf.config.access_token.rules, &consumer_type, &target_type, &scopes)
    {
        return refuse(e, why);
    }

    let Some(signer) = nrf.token_signer.get() else {
        return Err(NfError::internal("the token signing key is not loaded"));
    };
    let expiry = nrf.config.access_token.expiry_secs;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut claims = json!({
        "iss": nrf.instance_id.get().map_or("", String::as_str),
        "sub": consumer.profile.nf_instance_id,
        "aud": audience,
        "scope": scopes.join(" "),
        "exp": now + expiry,
        "iat": now,
    });
    if let Some(p) = r.requester_plmn {
        claims["consumerPlmnId"] = p;
    }
    if let Some(p) = r.target_plmn {
        claims["producerPlmnId"] = p;
    }
    let access_token = signer.sign(&claims).map_err(NfError::internal)?;
    let body = json!({
        "access_token": access_token,
        "token_type": "Bearer",
        "expires_in": expiry,
        "scope": scopes.join(" "),
    });
    let mut resp = json_response(StatusCode::OK, &body)?;
    no_store(&mut resp);
    Ok(resp)
}

/// Applies the configured rules: with none, everything is allowed; otherwise a rule must name
/// the consumer's type (or any) and the target type, and allow every requested scope.
fn authorize(
    rules: &[AuthRule],
    consumer_type: &str,
    target_type: &str,
    scopes: &[&str],
) -> Result<(), (TokenError, String)> {
    if rules.is_empty() {
        return Ok(());
    }
    let applicable: Vec<&AuthRule> = rules
        .iter()
        .filter(|r| r.target_nf_type == target_type)
        .filter(|r| {
            r.consumer_nf_types.is_empty() || r.consumer_nf_types.iter().any(|t| t == consumer_type)
        })
        .collect();
    if applicable.is_empty() {
        return Err((
            TokenError::UnauthorizedClient,
            format!("{consumer_type} may not get tokens for {target_type}"),
        ));
    }
    let allowed =
        |s: &str| applicable.iter().any(|r| r.scopes.is_empty() || r.scopes.iter().any(|a| a == s));
    match scopes.iter().find(|s| !allowed(s)) {
        Some(s) => Err((
            TokenError::InvalidScope,
            format!("{consumer_type} may not use {s} of {target_type}"),
        )),
        None => Ok(()),
    }
}

/// GET /oauth2/jwks: the key that verifies our tokens.
pub async fn jwks(nrf: Arc<Nrf>, _req: SbiRequest) -> Answer {
    match nrf.token_signer.get() {
        Some(s) => Ok(json_response(StatusCode::OK, &s.jwks())?),
        None => Err(NfError::internal("the token signing key is not loaded")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(consumers: &[&str], target: &str, scopes: &[&str]) -> AuthRule {
        AuthRule {
            consumer_nf_types: consumers.iter().map(|s| s.to_string()).collect(),
            target_nf_type: target.into(),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn rules_decide_consumer_target_and_scope() {
        assert!(authorize(&[], "AMF", "UDM", &["nudm-sdm"]).is_ok());
        let rules =
            [rule(&["AMF", "SMF"], "UDM", &["nudm-sdm", "nudm-uecm"]), rule(&[], "NRF", &[])];
        assert!(authorize(&rules, "AMF", "UDM", &["nudm-sdm"]).is_ok());
        assert_eq!(
            authorize(&rules, "PCF", "UDM", &["nudm-sdm"]).unwrap_err().0,
            TokenError::UnauthorizedClient
        );
        assert_eq!(
            authorize(&rules, "AMF", "UDM", &["nudm-ueau"]).unwrap_err().0,
            TokenError::InvalidScope
        );
        assert!(authorize(&rules, "PCF", "NRF", &["nnrf-disc"]).is_ok());
    }

    #[test]
    fn tokens_verify_with_the_published_key() {
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .unwrap();
        let signer = TokenSigner::from_pkcs8(pkcs8.as_ref()).unwrap();
        let jwt = signer.sign(&json!({"sub": "x", "exp": 1})).unwrap();
        let (signed, sig) = jwt.rsplit_once('.').unwrap();
        let jwk = &signer.jwks()["keys"][0];
        let mut point = vec![4u8];
        point.extend(B64.decode(jwk["x"].as_str().unwrap()).unwrap());
        point.extend(B64.decode(jwk["y"].as_str().unwrap()).unwrap());
        let public = ring::signature::UnparsedPublicKey::new(
            &ring::signature::ECDSA_P256_SHA256_FIXED,
            point,
        );
        public.verify(signed.as_bytes(), &B64.decode(sig).unwrap()).unwrap();
        assert!(public.verify(b"tampered", &B64.decode(sig).unwrap()).is_err());
    }
}
