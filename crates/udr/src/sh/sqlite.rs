//! The Sh data over SQLite: the schema and every statement it runs, behind [`ShDataStore`].
//!
//! Tables (no foreign keys, nothing engine-specific, for the MySQL-protocol backend to come):
//! `udr_sh_profile` (one narrow row), `udr_sh_identity` (clustered by kind + identity, so a
//! request's User-Identity is one primary-key read), `udr_sh_repository` (clustered by profile +
//! Service-Indication) and `udr_sh_subscription` (the Sh-Subs-Notif subscriptions, persisted so
//! they outlive a restart). Every function here runs on the store's threads.

use std::any::Any;

use rusqlite::{params, Connection, OptionalExtension};
use store::{Migration, SqliteStore};

use super::data::{
    placement, profile_changes, pur_outcome, pur_service_indications, Placement, ProfileChanges,
    PurOutcome, RepoUpdate, RepositoryData, ShDataStore, ShJob, ShLoaded, ShProfile, ShTx,
    StoredSubscription, UserId,
};
use crate::StoreFuture;

pub const MIGRATIONS: [Migration; 1] = [Migration::new(
    "udr-0101-sh",
    "CREATE TABLE udr_sh_profile (
        profile_id INTEGER PRIMARY KEY,
        ims_user_state INTEGER NOT NULL,
        scscf_name TEXT NOT NULL
    );
    CREATE TABLE udr_sh_identity (
        kind INTEGER NOT NULL,
        identity TEXT NOT NULL,
        profile_id INTEGER NOT NULL,
        position INTEGER NOT NULL,
        PRIMARY KEY (kind, identity)
    ) WITHOUT ROWID;
    CREATE INDEX udr_sh_identity_profile ON udr_sh_identity (profile_id);
    CREATE TABLE udr_sh_repository (
        profile_id INTEGER NOT NULL,
        service_indication TEXT NOT NULL,
        sequence_number INTEGER NOT NULL,
        service_data TEXT NOT NULL,
        PRIMARY KEY (profile_id, service_indication)
    ) WITHOUT ROWID;
    CREATE TABLE udr_sh_subscription (
        profile_id INTEGER NOT NULL,
        as_host TEXT NOT NULL,
        data_reference INTEGER NOT NULL,
        service_indication TEXT NOT NULL,
        as_realm TEXT NOT NULL,
        user_kind INTEGER NOT NULL,
        user_identity TEXT NOT NULL,
        expiry INTEGER NOT NULL,
        one_time INTEGER NOT NULL,
        PRIMARY KEY (profile_id, as_host, data_reference, service_indication)
    ) WITHOUT ROWID;",
)];

/// The Sh tables of the UDR's SQLite store.
#[derive(Clone)]
pub struct SqliteSh {
    db: SqliteStore,
}

impl SqliteSh {
    /// Over `db`, which must have [`MIGRATIONS`] applied.
    pub fn new(db: SqliteStore) -> Self {
        SqliteSh { db }
    }
}

/// A job's view of its transaction (a reader's or the writer's connection).
struct Tx<'a>(&'a Connection);

impl ShTx for Tx<'_> {
    fn resolve(&self, user: &UserId) -> store::Result<Option<i64>> {
        resolve(self.0, user)
    }
    fn load(
        &self,
        profile_id: i64,
        services: Option<&[String]>,
    ) -> store::Result<Option<ShProfile>> {
        load(self.0, profile_id, services)
    }
    fn apply_pur(&self, pid: i64, updates: &[RepoUpdate]) -> store::Result<PurOutcome> {
        apply_pur(self.0, pid, updates)
    }
    fn create(&self, p: &ShProfile) -> store::Result<i64> {
        create(self.0, p)
    }
    fn replace(&self, user: &UserId, new: &ShProfile) -> store::Result<(i64, ProfileChanges)> {
        replace(self.0, user, new)
    }
    fn delete(&self, user: &UserId) -> store::Result<Option<i64>> {
        delete(self.0, user)
    }
    fn put_subscription(&self, s: &StoredSubscription) -> store::Result<()> {
        put_subscription(self.0, s)
    }
    fn delete_subscription(
        &self,
        profile_id: i64,
        as_host: &str,
        data_reference: u32,
        service_indication: &str,
    ) -> store::Result<bool> {
        delete_subscription(self.0, profile_id, as_host, data_reference, service_indication)
    }
}

impl ShDataStore for SqliteSh {
    fn read_job(&self, job: ShJob) -> StoreFuture<'_, Box<dyn Any + Send>> {
        Box::pin(self.db.read(move |c| job(&Tx(c))))
    }

    fn write_job(&self, job: ShJob) -> StoreFuture<'_, Box<dyn Any + Send>> {
        Box::pin(self.db.write(move |tx| job(&Tx(tx))))
    }

    fn all_subscriptions(&self) -> StoreFuture<'_, Vec<StoredSubscription>> {
        Box::pin(self.db.read(all_subscriptions))
    }

    fn delete_expired_subscriptions(&self, now: u64) -> StoreFuture<'_, usize> {
        Box::pin(self.db.write(move |tx| delete_expired_subscriptions(tx, now)))
    }

    fn put_profiles(
        &self,
        rows: Vec<(u64, ShProfile)>,
        stop_on_refused: bool,
    ) -> StoreFuture<'_, (ShLoaded, Vec<(u64, ShProfile)>)> {
        Box::pin(self.db.write(move |tx| Ok((put_profiles(tx, &rows, stop_on_refused)?, rows))))
    }
}

/// The bulk load of [`ShDataStore::put_profiles`]. Every identity is looked up before anything
/// of a row is written, so a refused row writes nothing.
fn put_profiles(
    tx: &Connection,
    rows: &[(u64, ShProfile)],
    stop_on_refused: bool,
) -> store::Result<ShLoaded> {
    let mut loaded = ShLoaded::default();
    for (tag, p) in rows {
        let owners = p
            .identities()
            .map(|id| Ok((resolve(tx, &id)?, id)))
            .collect::<store::Result<Vec<_>>>()?;
        match placement(owners.into_iter().map(|(pid, id)| (id, pid))) {
            Placement::Refused(why) => {
                loaded.refused.push((*tag, why));
                if stop_on_refused {
                    break;
                }
            }
            Placement::Replace(user) => {
                replace(tx, &user, p)?;
                loaded.replaced += 1;
            }
            Placement::Create => {
                create(tx, p)?;
                loaded.new += 1;
            }
        }
    }
    Ok(loaded)
}

/// The profile id of a user, if known.
fn resolve(c: &Connection, user: &UserId) -> store::Result<Option<i64>> {
    let mut st = c.prepare_cached(
        "SELECT profile_id FROM udr_sh_identity WHERE kind = ?1 AND identity = ?2",
    )?;
    Ok(st.query_row(params![user.kind(), user.value()], |r| r.get(0)).optional()?)
}

/// A whole profile; repository data restricted to `services` when given.
fn load(
    c: &Connection,
    profile_id: i64,
    services: Option<&[String]>,
) -> store::Result<Option<ShProfile>> {
    let head = c
        .prepare_cached(
            "SELECT ims_user_state, scscf_name FROM udr_sh_profile WHERE profile_id = ?1",
        )?
        .query_row([profile_id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
        .optional()?;
    let Some((state, scscf)) = head else { return Ok(None) };
    let mut p = ShProfile {
        ims_user_state: state as u8,
        scscf_name: (!scscf.is_empty()).then_some(scscf),
        ..ShProfile::default()
    };
    let mut st = c.prepare_cached(
        "SELECT kind, identity FROM udr_sh_identity WHERE profile_id = ?1 ORDER BY position",
    )?;
    let rows = st.query_map([profile_id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?;
    for row in rows {
        let (kind, value) = row?;
        match UserId::from_parts(kind, value) {
            UserId::Public(s) => p.public_identities.push(s),
            UserId::Msisdn(s) => p.msisdns.push(s),
        }
    }
    let read_one = |r: &rusqlite::Row<'_>| {
        Ok(RepositoryData {
            service_indication: r.get(0)?,
            sequence_number: r.get::<_, i64>(1)? as u16,
            service_data: r.get(2)?,
        })
    };
    match services {
        None => {
            let mut st = c.prepare_cached(
                "SELECT service_indication, sequence_number, service_data FROM udr_sh_repository
                 WHERE profile_id = ?1 ORDER BY service_indication",
            )?;
            for r in st.query_map([profile_id], read_one)? {
                p.repository.push(r?);
            }
        }
        Some(list) => {
            let mut st = c.prepare_cached(
                "SELECT service_indication, sequence_number, service_data FROM udr_sh_repository
                 WHERE profile_id = ?1 AND service_indication = ?2",
            )?;
            for si in list {
                if let Some(r) = st.query_row(params![profile_id, si], read_one).optional()? {
                    if !p.repository.iter().any(|x| x.service_indication == r.service_indication) {
                        p.repository.push(r);
                    }
                }
            }
        }
    }
    Ok(Some(p))
}

/// Applies a PUR's repository updates to profile `pid` in the caller's transaction: all of them
/// or, when one is out of sync, none (checked before anything is written).
fn apply_pur(tx: &Connection, pid: i64, updates: &[RepoUpdate]) -> store::Result<PurOutcome> {
    let mut get = tx.prepare_cached(
        "SELECT sequence_number FROM udr_sh_repository
         WHERE profile_id = ?1 AND service_indication = ?2",
    )?;
    let mut stored = Vec::new();
    for si in pur_service_indications(updates) {
        let n = get.query_row(params![pid, si], |r| r.get::<_, i64>(0)).optional()?;
        stored.push((si, n.map(|n| n as u16)));
    }
    let outcome = pur_outcome(updates, &stored);
    if let PurOutcome::Applied(changes) = &outcome {
        for c in changes {
            write_repository(tx, pid, &c.service_indication, c.sequence_number, c.data.as_deref())?;
        }
    }
    Ok(outcome)
}

fn write_repository(
    tx: &Connection,
    pid: i64,
    si: &str,
    seq: u16,
    data: Option<&str>,
) -> store::Result<()> {
    match data {
        Some(d) => {
            tx.prepare_cached(
                "INSERT INTO udr_sh_repository
                     (profile_id, service_indication, sequence_number, service_data)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (profile_id, service_indication)
                 DO UPDATE SET sequence_number = excluded.sequence_number,
                               service_data = excluded.service_data",
            )?
            .execute(params![pid, si, i64::from(seq), d])?;
        }
        None => {
            tx.prepare_cached(
                "DELETE FROM udr_sh_repository WHERE profile_id = ?1 AND service_indication = ?2",
            )?
            .execute(params![pid, si])?;
        }
    }
    Ok(())
}

fn insert_identities(tx: &Connection, pid: i64, p: &ShProfile) -> store::Result<()> {
    let mut exists =
        tx.prepare_cached("SELECT 1 FROM udr_sh_identity WHERE kind = ?1 AND identity = ?2")?;
    let mut ins = tx.prepare_cached(
        "INSERT INTO udr_sh_identity (kind, identity, profile_id, position) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for (i, id) in p.identities().enumerate() {
        if exists.query_row(params![id.kind(), id.value()], |_| Ok(())).optional()?.is_some() {
            return Err(store::Error::AlreadyExists);
        }
        ins.execute(params![id.kind(), id.value(), pid, i as i64])?;
    }
    Ok(())
}

/// Creates a profile (checked by the caller); `AlreadyExists` when one of its identities belongs
/// to a profile already (nothing is then written: the job's savepoint rolls back).
fn create(tx: &Connection, p: &ShProfile) -> store::Result<i64> {
    tx.prepare_cached("INSERT INTO udr_sh_profile (ims_user_state, scscf_name) VALUES (?1, ?2)")?
        .execute(params![i64::from(p.ims_user_state), p.scscf_name.as_deref().unwrap_or("")])?;
    let pid = tx.last_insert_rowid();
    insert_identities(tx, pid, p)?;
    for r in &p.repository {
        write_repository(tx, pid, &r.service_indication, r.sequence_number, Some(&r.service_data))?;
    }
    Ok(pid)
}

/// Replaces the profile of `user` with `new` (checked by the caller). Repository data of `new`
/// is written with the successor of the stored sequence number (0 when new), and Service-
/// Indications it does not list are removed. `NotFound` for an unknown user, `AlreadyExists`
/// when a new identity belongs to another profile.
fn replace(
    tx: &Connection,
    user: &UserId,
    new: &ShProfile,
) -> store::Result<(i64, ProfileChanges)> {
    let pid = resolve(tx, user)?.ok_or(store::Error::NotFound)?;
    let old = load(tx, pid, None)?.ok_or(store::Error::NotFound)?;
    tx.prepare_cached(
        "UPDATE udr_sh_profile SET ims_user_state = ?2, scscf_name = ?3 WHERE profile_id = ?1",
    )?
    .execute(params![
        pid,
        i64::from(new.ims_user_state),
        new.scscf_name.as_deref().unwrap_or("")
    ])?;
    tx.prepare_cached("DELETE FROM udr_sh_identity WHERE profile_id = ?1")?.execute([pid])?;
    insert_identities(tx, pid, new)?;
    let changes = profile_changes(&old, new);
    for c in &changes.repository {
        write_repository(tx, pid, &c.service_indication, c.sequence_number, c.data.as_deref())?;
    }
    Ok((pid, changes))
}

/// Deletes the profile of `user` with its identities, repository data and subscriptions;
/// the profile id, or None for an unknown user.
fn delete(tx: &Connection, user: &UserId) -> store::Result<Option<i64>> {
    let Some(pid) = resolve(tx, user)? else { return Ok(None) };
    for sql in [
        "DELETE FROM udr_sh_identity WHERE profile_id = ?1",
        "DELETE FROM udr_sh_repository WHERE profile_id = ?1",
        "DELETE FROM udr_sh_subscription WHERE profile_id = ?1",
        "DELETE FROM udr_sh_profile WHERE profile_id = ?1",
    ] {
        tx.prepare_cached(sql)?.execute([pid])?;
    }
    Ok(Some(pid))
}

fn put_subscription(tx: &Connection, s: &StoredSubscription) -> store::Result<()> {
    tx.prepare_cached(
        "INSERT INTO udr_sh_subscription (profile_id, as_host, data_reference, service_indication,
             as_realm, user_kind, user_identity, expiry, one_time)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT (profile_id, as_host, data_reference, service_indication)
         DO UPDATE SET as_realm = excluded.as_realm, user_kind = excluded.user_kind,
             user_identity = excluded.user_identity, expiry = excluded.expiry,
             one_time = excluded.one_time",
    )?
    .execute(params![
        s.profile_id,
        s.as_host,
        i64::from(s.data_reference),
        s.service_indication,
        s.as_realm,
        s.user.kind(),
        s.user.value(),
        s.expiry as i64,
        s.one_time
    ])?;
    Ok(())
}

/// Removes one subscription; whether it existed.
fn delete_subscription(
    tx: &Connection,
    profile_id: i64,
    as_host: &str,
    data_reference: u32,
    service_indication: &str,
) -> store::Result<bool> {
    let n = tx
        .prepare_cached(
            "DELETE FROM udr_sh_subscription WHERE profile_id = ?1 AND as_host = ?2
             AND data_reference = ?3 AND service_indication = ?4",
        )?
        .execute(params![profile_id, as_host, i64::from(data_reference), service_indication])?;
    Ok(n > 0)
}

/// Every stored subscription (at start, to rebuild the in-memory index).
fn all_subscriptions(c: &Connection) -> store::Result<Vec<StoredSubscription>> {
    let mut st = c.prepare(
        "SELECT profile_id, as_host, data_reference, service_indication, as_realm, user_kind,
                user_identity, expiry, one_time FROM udr_sh_subscription",
    )?;
    let rows = st.query_map([], |r| {
        Ok(StoredSubscription {
            profile_id: r.get(0)?,
            as_host: r.get(1)?,
            data_reference: r.get::<_, i64>(2)? as u32,
            service_indication: r.get(3)?,
            as_realm: r.get(4)?,
            user: UserId::from_parts(r.get(5)?, r.get(6)?),
            expiry: r.get::<_, i64>(7)? as u64,
            one_time: r.get(8)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Removes the subscriptions expired at `now` (unix seconds); how many.
fn delete_expired_subscriptions(tx: &Connection, now: u64) -> store::Result<usize> {
    Ok(tx
        .prepare_cached("DELETE FROM udr_sh_subscription WHERE expiry != 0 AND expiry <= ?1")?
        .execute([now as i64])?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sh::data::ims_user_state;

    fn profile() -> ShProfile {
        ShProfile {
            public_identities: vec!["sip:alice@ims.example".into(), "tel:+33600000001".into()],
            msisdns: vec!["33600000001".into()],
            ims_user_state: ims_user_state::REGISTERED,
            scscf_name: Some("sip:scscf1.ims.example".into()),
            repository: vec![],
        }
    }

    #[tokio::test]
    async fn pur_rules_on_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let db =
            SqliteStore::open(store::SqliteConfig::new(dir.path().join("sh.db"))).await.unwrap();
        db.migrate(MIGRATIONS).await.unwrap();
        let pid = db.write(|tx| create(tx, &profile())).await.unwrap();
        let dup = db.write(|tx| create(tx, &profile())).await;
        assert!(matches!(dup, Err(store::Error::AlreadyExists)));
        let user = UserId::Msisdn("33600000001".into());
        let found = db.read({
            let user = user.clone();
            move |c| resolve(c, &user)
        });
        assert_eq!(found.await.unwrap(), Some(pid));
        let up = |si: &str, seq: u16, data: Option<&str>| RepoUpdate {
            service_indication: si.into(),
            sequence_number: seq,
            data: data.map(str::to_owned),
        };
        let run = |ups: Vec<RepoUpdate>| {
            let db = db.clone();
            async move { db.write(move |tx| apply_pur(tx, pid, &ups)).await.unwrap() }
        };
        assert_eq!(
            run(vec![up("svc", 1, Some("<a/>"))]).await,
            PurOutcome::OutOfSync("svc".into())
        );
        assert_eq!(run(vec![up("svc", 0, None)]).await, PurOutcome::OutOfSync("svc".into()));
        assert!(matches!(run(vec![up("svc", 0, Some("<a/>"))]).await, PurOutcome::Applied(_)));
        assert_eq!(
            run(vec![up("svc", 0, Some("<b/>"))]).await,
            PurOutcome::OutOfSync("svc".into())
        );
        // Two updates of one Service-Indication chain; one bad update writes nothing.
        assert!(matches!(
            run(vec![up("svc", 1, Some("<b/>")), up("svc", 2, Some("<c/>"))]).await,
            PurOutcome::Applied(_)
        ));
        assert_eq!(
            run(vec![up("other", 0, Some("<x/>")), up("svc", 2, Some("<d/>"))]).await,
            PurOutcome::OutOfSync("svc".into())
        );
        let p = db.read(move |c| load(c, pid, None)).await.unwrap().unwrap();
        assert_eq!(p.repository.len(), 1);
        assert_eq!(
            (p.repository[0].sequence_number, p.repository[0].service_data.as_str()),
            (2, "<c/>")
        );
        // Wrap: 65535 is followed by 1.
        db.write(move |tx| {
            Ok(tx.execute("UPDATE udr_sh_repository SET sequence_number = 65535", [])?)
        })
        .await
        .unwrap();
        assert_eq!(
            run(vec![up("svc", 0, Some("<e/>"))]).await,
            PurOutcome::OutOfSync("svc".into())
        );
        assert!(matches!(run(vec![up("svc", 1, Some("<e/>"))]).await, PurOutcome::Applied(_)));
        assert!(matches!(run(vec![up("svc", 2, None)]).await, PurOutcome::Applied(_)));
        let p = db.read(move |c| load(c, pid, None)).await.unwrap().unwrap();
        assert!(p.repository.is_empty());
        let unknown = UserId::Public("sip:nobody@ims.example".into());
        assert_eq!(db.read(move |c| resolve(c, &unknown)).await.unwrap(), None);
    }
}
