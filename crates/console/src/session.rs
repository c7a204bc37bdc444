//! Log-in sessions: a random id in an HttpOnly cookie, ended by idleness, age or log-out.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::config::Role;

/// The cookie carrying the session id.
pub const COOKIE: &str = "fivecore_console";

/// Sessions held at once; a log-in beyond it ends the oldest, so repeated log-ins cannot grow
/// the console's memory without bound.
const MAX_SESSIONS: usize = 10_000;

#[derive(Debug, Clone)]
pub struct Session {
    pub user: String,
    pub role: Role,
    created: Instant,
    last_seen: Instant,
}

/// The live sessions. The lock is held for a map operation only, never across an await.
pub struct Sessions {
    idle: Duration,
    max_age: Duration,
    map: Mutex<HashMap<String, Session>>,
}

impl Sessions {
    pub fn new(idle: Duration, max_age: Duration) -> Sessions {
        Sessions { idle, max_age, map: Mutex::new(HashMap::new()) }
    }

    pub fn idle(&self) -> Duration {
        self.idle
    }

    /// Opens a session for `user` under the new random `id`.
    pub fn open(&self, id: String, user: String, role: Role) {
        let now = Instant::now();
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, s| self.live(s, now));
        if map.len() >= MAX_SESSIONS {
            if let Some(oldest) = map.iter().min_by_key(|(_, s)| s.created).map(|(k, _)| k.clone())
            {
                map.remove(&oldest);
            }
        }
        map.insert(id, Session { user, role, created: now, last_seen: now });
    }

    /// The session of `id` if it is live, its idle clock restarted; an expired one is removed.
    pub fn touch(&self, id: &str) -> Option<Session> {
        let now = Instant::now();
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let live = map.get(id).map(|s| self.live(s, now))?;
        if !live {
            map.remove(id);
            return None;
        }
        let s = map.get_mut(id)?;
        s.last_seen = now;
        Some(s.clone())
    }

    pub fn close(&self, id: &str) {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
    }

    fn live(&self, s: &Session, now: Instant) -> bool {
        now.duration_since(s.last_seen) < self.idle && now.duration_since(s.created) < self.max_age
    }
}

/// The session id in a `Cookie` header, if any.
pub fn id_from_cookies(header: &str) -> Option<&str> {
    header.split(';').map(str::trim).find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == COOKIE && !v.is_empty()).then_some(v)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_ends_when_idle_and_when_old() {
        let s = Sessions::new(Duration::from_millis(60), Duration::from_secs(60));
        s.open("a".into(), "alice".into(), Role::Admin);
        assert_eq!(s.touch("a").unwrap().user, "alice");
        std::thread::sleep(Duration::from_millis(80));
        assert!(s.touch("a").is_none());

        let s = Sessions::new(Duration::from_secs(60), Duration::from_millis(60));
        s.open("b".into(), "bob".into(), Role::ReadOnly);
        std::thread::sleep(Duration::from_millis(30));
        assert!(s.touch("b").is_some());
        std::thread::sleep(Duration::from_millis(40));
        assert!(s.touch("b").is_none(), "activity does not extend past the maximum age");
    }

    #[test]
    fn log_out_ends_it() {
        let s = Sessions::new(Duration::from_secs(60), Duration::from_secs(60));
        s.open("c".into(), "carol".into(), Role::Admin);
        s.close("c");
        assert!(s.touch("c").is_none());
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        assert_eq!(id_from_cookies("x=1; fivecore_console=abc; y=2"), Some("abc"));
        assert_eq!(id_from_cookies("fivecore_console="), None);
        assert_eq!(id_from_cookies("other=abc"), None);
    }
}
