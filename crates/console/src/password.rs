//! Passwords: argon2id PHC strings in the configuration, checked off the async threads.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use base64::Engine;
use ring::rand::{SecureRandom, SystemRandom};

#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    #[error("the system random source failed")]
    Random,
    #[error("cannot hash: {0}")]
    Hash(String),
    #[error("user {user}: password_hash is not an argon2 PHC string: {reason}")]
    BadHash { user: String, reason: String },
}

/// An argon2id PHC string of `password` with a fresh random salt (argon2's default cost).
pub fn hash(password: &str) -> Result<String, PasswordError> {
    let mut salt = [0u8; 16];
    SystemRandom::new().fill(&mut salt).map_err(|_| PasswordError::Random)?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| PasswordError::Hash(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| PasswordError::Hash(e.to_string()))
}

/// Whether `password` matches the PHC string `phc` (any argon2 variant and cost it names).
pub fn verify(password: &str, phc: &str) -> bool {
    match PasswordHash::new(phc) {
        Ok(parsed) => Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok(),
        Err(_) => false,
    }
}

/// Checks a configured hash at start, so a typo fails there and not at the first log-in.
pub fn check_phc(user: &str, phc: &str) -> Result<(), PasswordError> {
    let parsed = PasswordHash::new(phc)
        .map_err(|e| PasswordError::BadHash { user: user.into(), reason: e.to_string() })?;
    if !parsed.algorithm.as_str().starts_with("argon2") {
        return Err(PasswordError::BadHash {
            user: user.into(),
            reason: format!("algorithm {} is not argon2", parsed.algorithm),
        });
    }
    Ok(())
}

/// 18 random bytes as 24 URL-safe characters: the generated admin password of `up`.
pub fn random_password() -> Result<String, PasswordError> {
    random_token(18)
}

/// `n` random bytes, base64url without padding (session ids, passwords).
pub fn random_token(n: usize) -> Result<String, PasswordError> {
    let mut bytes = vec![0u8; n];
    SystemRandom::new().fill(&mut bytes).map_err(|_| PasswordError::Random)?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_its_password_only() {
        let h = hash("s3cret!").unwrap();
        assert!(h.starts_with("$argon2id$"), "{h}");
        check_phc("u", &h).unwrap();
        assert!(verify("s3cret!", &h));
        assert!(!verify("s3cret", &h));
        assert!(!verify("s3cret!", "not a hash"));
        // Two hashes of one password differ by their salt.
        assert_ne!(h, hash("s3cret!").unwrap());
    }

    #[test]
    fn a_bad_hash_is_refused_at_start() {
        assert!(check_phc("alice", "plaintext").unwrap_err().to_string().contains("alice"));
        assert!(check_phc("bob", "$pbkdf2-sha256$i=1000$c2FsdA$aGFzaA").is_err());
    }

    #[test]
    fn random_tokens_are_long_and_distinct() {
        let a = random_token(32).unwrap();
        assert_eq!(a.len(), 43);
        assert_ne!(a, random_token(32).unwrap());
    }
}
