//! A bounded pool of bound LDAP connections (ldap3 on tokio): at most `pool_size` open, each
//! bound once and reused by one lookup at a time; a lookup waits for a free one within its
//! deadline. A connection that fails or times out is closed, never put back; a reused one that
//! fails (the server closed it while idle, or restarted) is replaced once within the same
//! deadline: that is the reconnect.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ldap3::asn1::StructureTag;
use ldap3::{LdapConnAsync, LdapConnSettings, SearchOptions};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::config::LdapConfig;

/// Why a lookup got no answer, as `pcf_ldap_failures_total{reason}` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// No URL could be connected to.
    Connect,
    /// The directory refused the bind.
    Bind,
    /// The deadline passed (waiting for a connection, connecting, or searching).
    Timeout,
    /// The search failed (the connection broke, or the directory answered an error).
    Search,
}

impl Reason {
    pub const ALL: [Reason; 4] = [Reason::Connect, Reason::Bind, Reason::Timeout, Reason::Search];

    pub fn name(self) -> &'static str {
        match self {
            Reason::Connect => "connect",
            Reason::Bind => "bind",
            Reason::Timeout => "timeout",
            Reason::Search => "search",
        }
    }
}

#[derive(Debug)]
pub struct Failure {
    pub reason: Reason,
    pub why: String,
}

fn fail(reason: Reason, why: impl Into<String>) -> Failure {
    Failure { reason, why: why.into() }
}

/// One entry's attributes as the directory sent them (names as it spelled them).
pub type Entry = Vec<(String, Vec<Vec<u8>>)>;

#[derive(Debug, Default)]
pub struct PoolStats {
    /// Connections open now.
    pub open: AtomicU64,
    pub connects_ok: AtomicU64,
    pub connects_failed: AtomicU64,
}

struct Conn {
    ldap: ldap3::Ldap,
    driver: JoinHandle<()>,
    stats: Arc<PoolStats>,
}

impl Drop for Conn {
    // Aborting the driver closes the socket at once: a connection is only dropped when it
    // failed, timed out (its late answer must not be read as the next search's) or the pool
    // is gone.
    fn drop(&mut self) {
        self.driver.abort();
        self.stats.open.fetch_sub(1, Ordering::Relaxed);
    }
}

pub struct Pool {
    config: Arc<LdapConfig>,
    idle: Mutex<Vec<Conn>>,
    /// One permit per connection that may be in use: idle ones are only ever put back by a
    /// permit holder, and one is opened only when none is idle, so at most `pool_size` exist.
    slots: Semaphore,
    pub stats: Arc<PoolStats>,
}

impl Pool {
    pub fn new(config: Arc<LdapConfig>) -> Self {
        let slots = Semaphore::new(config.pool_size.max(1));
        Pool { config, idle: Mutex::new(Vec::new()), slots, stats: Arc::default() }
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<Conn>> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The first entry `filter` finds under the base DN (None: no entry matches), and how many
    /// matched (more than one is the directory's or the filter's fault; the first is used).
    pub async fn search(&self, filter: &str) -> Result<Option<(Entry, usize)>, Failure> {
        let deadline = Instant::now() + Duration::from_millis(self.config.timeout_ms);
        let _slot = tokio::time::timeout_at(deadline, self.slots.acquire())
            .await
            .map_err(|_| fail(Reason::Timeout, "no free LDAP connection in time"))?
            .map_err(|_| fail(Reason::Search, "the LDAP pool is closed"))?;
        let pooled = loop {
            let Some(mut c) = self.idle().pop() else { break None };
            // A connection whose driver ended (the server closed it) is dropped here.
            if !c.ldap.is_closed() {
                break Some(c);
            }
        };
        let reused = pooled.is_some();
        let conn = match pooled {
            Some(c) => c,
            None => self.connect(deadline).await?,
        };
        let res = match self.search_on(conn, filter, deadline).await {
            Err(f) if reused && f.reason == Reason::Search => {
                tracing::debug!(why = %f.why, "pooled LDAP connection failed: a new one is opened");
                let conn = self.connect(deadline).await?;
                self.search_on(conn, filter, deadline).await?
            }
            r => r?,
        };
        let ldap3::SearchResult(entries, result) = res;
        // 4 sizeLimitExceeded: more than one entry matched; the first is still an answer.
        let answered = result.rc == 0 || (result.rc == 4 && !entries.is_empty());
        if !answered {
            return Err(fail(
                Reason::Search,
                format!("the directory answered {} {}", result.rc, result.text),
            ));
        }
        let n = entries.len() + usize::from(result.rc == 4);
        let Some(first) = entries.into_iter().next() else { return Ok(None) };
        let entry = parse_entry(first.0).ok_or_else(|| {
            fail(Reason::Search, "the directory sent an entry that does not decode")
        })?;
        Ok(Some((entry, n)))
    }

    /// One search on `conn`, put back idle once answered (whatever the result code says: the
    /// connection is sound); a connection that broke or did not answer in time is closed.
    async fn search_on(
        &self,
        mut conn: Conn,
        filter: &str,
        deadline: Instant,
    ) -> Result<ldap3::SearchResult, Failure> {
        let c = &self.config;
        // Two at most: enough to tell that the filter is not unique.
        conn.ldap.with_search_options(SearchOptions::new().sizelimit(2));
        let sent = conn.ldap.search(&c.base_dn, c.scope.ldap3(), filter, &c.attributes);
        match tokio::time::timeout_at(deadline, sent).await {
            Err(_) => Err(fail(Reason::Timeout, "the LDAP search took too long")),
            Ok(Err(e)) => Err(fail(Reason::Search, format!("LDAP search: {e}"))),
            Ok(Ok(r)) => {
                self.idle().push(conn);
                Ok(r)
            }
        }
    }

    /// A new connection, bound: the URLs in order, each within `connect_timeout_ms` and the
    /// lookup's deadline.
    async fn connect(&self, deadline: Instant) -> Result<Conn, Failure> {
        let c = &self.config;
        let mut last = fail(Reason::Connect, "no LDAP URL");
        for url in &c.urls {
            let now = Instant::now();
            if now >= deadline {
                return Err(fail(Reason::Timeout, "no LDAP connection in time"));
            }
            let budget = Duration::from_millis(c.connect_timeout_ms).min(deadline - now);
            let attempt = tokio::time::timeout(budget, self.open(url)).await;
            match attempt {
                Ok(Ok(conn)) => {
                    self.stats.connects_ok.fetch_add(1, Ordering::Relaxed);
                    return Ok(conn);
                }
                Ok(Err(f)) => last = f,
                Err(_) => last = fail(Reason::Connect, format!("{url}: no connection in time")),
            }
            self.stats.connects_failed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%url, why = %last.why, "LDAP connection failed");
        }
        if Instant::now() >= deadline {
            last.reason = Reason::Timeout;
        }
        Err(last)
    }

    async fn open(&self, url: &str) -> Result<Conn, Failure> {
        let (driver, mut ldap) = LdapConnAsync::with_settings(LdapConnSettings::new(), url)
            .await
            .map_err(|e| fail(Reason::Connect, format!("{url}: {e}")))?;
        let driver = tokio::spawn(async move {
            if let Err(e) = driver.drive().await {
                tracing::debug!(error = %e, "LDAP connection ended");
            }
        });
        self.stats.open.fetch_add(1, Ordering::Relaxed);
        let conn = Conn { ldap: ldap.clone(), driver, stats: self.stats.clone() };
        let c = &self.config;
        if !c.bind_dn.is_empty() {
            match ldap.simple_bind(&c.bind_dn, &c.bind_password).await {
                Ok(r) if r.rc == 0 => {}
                Ok(r) => {
                    return Err(fail(
                        Reason::Bind,
                        format!("{url}: bind as {} refused: {} {}", c.bind_dn, r.rc, r.text),
                    ))
                }
                Err(e) => return Err(fail(Reason::Connect, format!("{url}: bind: {e}"))),
            }
        }
        Ok(conn)
    }
}

/// A SearchResultEntry (RFC 4511 §4.5.2: `[APPLICATION 4] SEQUENCE { objectName, attributes
/// SEQUENCE OF SEQUENCE { type, vals SET OF value } }`) taken apart without panicking on what
/// a server sent (ldap3's `SearchEntry::construct` panics on a malformed one).
fn parse_entry(tag: StructureTag) -> Option<Entry> {
    let mut parts = tag.match_id(4)?.expect_constructed()?.into_iter();
    let _dn = parts.next()?;
    let mut out = Vec::new();
    for attr in parts.next()?.expect_constructed()? {
        let mut a = attr.expect_constructed()?.into_iter();
        let name = String::from_utf8(a.next()?.expect_primitive()?).ok()?;
        let values = a
            .next()?
            .expect_constructed()?
            .into_iter()
            .map(StructureTag::expect_primitive)
            .collect::<Option<Vec<_>>>()?;
        out.push((name, values));
    }
    Some(out)
}
