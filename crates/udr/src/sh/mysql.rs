//! The Sh data over the MySQL-protocol backend: the tables of [`super::sqlite`] with
//! `VARBINARY` keys, a primary key each and no foreign keys (NDB-friendly).
//!
//! A job ([`ShJob`]) is synchronous code over [`ShTx`]; the driver is async. So a job runs on a
//! blocking thread (`spawn_blocking`, never an async worker) and each of its [`ShTx`] calls is
//! sent to the transaction's task, which runs the statements on the connection and answers:
//! one transaction of [`MysqlStore`] per job, committed once the job returns `Ok`. The store
//! tries a transaction again after a deadlock or a Galera certification failure; a job runs at
//! most once (it is an `FnOnce`), so a conflict after it ran fails the request (the Diameter
//! answer is DIAMETER_UNABLE_TO_COMPLY, the provisioning answer a 500) instead of applying it
//! twice. Sh writes are per subscriber and rare, so such conflicts are too.
//!
//! Several UDR instances on one database: a job that changes a profile's subscriptions records
//! the profile in the change feed; the other instances re-read that profile's subscriptions into
//! their index (`crate::coherence`), so a change made at one notifies an AS that subscribed at
//! another. The notification (PNR) is sent by the instance that took the change.

use std::any::Any;
use std::collections::BTreeSet;
use std::sync::{mpsc, Arc, Mutex};

use store::mysql::feed::{self, Op};
use store::mysql::mysql_async::prelude::Queryable;
use store::mysql::mysql_async::Conn;
use store::mysql::TxError;
use store::{MysqlMigration, MysqlStore};
use tokio::sync::mpsc as amp;

use super::data::{
    placement, profile_changes, pur_outcome, pur_service_indications, Placement, ProfileChanges,
    PurOutcome, RepoUpdate, RepositoryData, ShDataStore, ShJob, ShLoaded, ShProfile, ShTx,
    StoredSubscription, UserId,
};
use crate::coherence::SH_SUBSCRIPTIONS;
use crate::StoreFuture;

pub const MIGRATIONS: &[MysqlMigration] = &[MysqlMigration::new(
    "udr-0101-sh",
    &[
        "CREATE TABLE IF NOT EXISTS udr_sh_profile (
            profile_id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
            ims_user_state TINYINT NOT NULL,
            scscf_name VARBINARY(255) NOT NULL
        ) ENGINE=InnoDB",
        "CREATE TABLE IF NOT EXISTS udr_sh_identity (
            kind TINYINT NOT NULL,
            identity VARBINARY(255) NOT NULL,
            profile_id BIGINT NOT NULL,
            position INT NOT NULL,
            PRIMARY KEY (kind, identity),
            KEY udr_sh_identity_profile (profile_id)
        ) ENGINE=InnoDB",
        "CREATE TABLE IF NOT EXISTS udr_sh_repository (
            profile_id BIGINT NOT NULL,
            service_indication VARBINARY(255) NOT NULL,
            sequence_number INT NOT NULL,
            service_data MEDIUMBLOB NOT NULL,
            PRIMARY KEY (profile_id, service_indication)
        ) ENGINE=InnoDB",
        "CREATE TABLE IF NOT EXISTS udr_sh_subscription (
            profile_id BIGINT NOT NULL,
            as_host VARBINARY(255) NOT NULL,
            data_reference INT NOT NULL,
            service_indication VARBINARY(255) NOT NULL,
            as_realm VARBINARY(255) NOT NULL,
            user_kind TINYINT NOT NULL,
            user_identity VARBINARY(255) NOT NULL,
            expiry BIGINT NOT NULL,
            one_time TINYINT NOT NULL,
            PRIMARY KEY (profile_id, as_host, data_reference, service_indication)
        ) ENGINE=InnoDB",
    ],
)];

type Tx<T> = Result<T, TxError>;

/// The Sh tables over a MySQL-protocol database.
pub struct MysqlSh {
    db: MysqlStore,
    writer: Arc<str>,
}

impl MysqlSh {
    /// Over `db`, which must have [`MIGRATIONS`] applied; `writer` is this instance's id in the
    /// change feed.
    pub fn new(db: MysqlStore, writer: Arc<str>) -> Self {
        MysqlSh { db, writer }
    }

    async fn job(&self, job: ShJob, write: bool) -> store::Result<Box<dyn Any + Send>> {
        let job = Arc::new(Mutex::new(Some(job)));
        let writer = self.writer.clone();
        let body = tx_body(move |c| {
            let (job, writer) = (job.clone(), writer.clone());
            Box::pin(async move {
                let Some(job) = job.lock().unwrap_or_else(|p| p.into_inner()).take() else {
                    return Err(store::Error::backend_msg(
                        "Sh write conflicted with another and was not applied",
                    )
                    .into());
                };
                let (calls, mut rx) = amp::unbounded_channel();
                let ran = tokio::task::spawn_blocking(move || job(&Bridge { calls }));
                let mut failed: Option<TxError> = None;
                let mut touched = BTreeSet::new();
                while let Some((call, reply)) = rx.recv().await {
                    if failed.is_some() {
                        let _ = reply.send(Err(store::Error::backend_msg("transaction failed")));
                        continue;
                    }
                    let answer = match run(c, call, write, &mut touched).await {
                        Ok(a) => Ok(a),
                        Err(TxError::Contract(e)) => Err(e),
                        Err(e) => {
                            failed = Some(e);
                            Err(store::Error::backend_msg("transaction failed"))
                        }
                    };
                    let _ = reply.send(answer);
                }
                let out = ran.await.map_err(store::Error::backend)?;
                if let Some(e) = failed {
                    return Err(e);
                }
                let out = out?;
                let ids: Vec<String> = touched.iter().map(i64::to_string).collect();
                let rows: Vec<(&str, &str, Op, Option<&[u8]>)> =
                    ids.iter().map(|id| (SH_SUBSCRIPTIONS, id.as_str(), Op::Put, None)).collect();
                feed::record_many(c, &writer, &rows).await?;
                Ok(out)
            })
        });
        if write {
            self.db.write(body).await
        } else {
            self.db.read(body).await
        }
    }

    /// A profile's subscriptions (for the change feed).
    pub async fn profile_subscriptions(&self, pid: i64) -> store::Result<Vec<StoredSubscription>> {
        self.db
            .read(move |c| {
                Box::pin(async move {
                    let rows: Vec<SubRow> =
                        c.exec(format!("{SELECT_SUBS} WHERE profile_id = ?"), (pid,)).await?;
                    Ok(rows.into_iter().map(sub_of).collect())
                })
            })
            .await
    }
}

/// Gives a transaction body's closure the signature [`MysqlStore::write`] takes.
fn tx_body<T, F>(f: F) -> F
where
    F: for<'c> FnMut(&'c mut Conn) -> store::mysql::ConnFuture<'c, T>,
{
    f
}

/// One [`ShTx`] call, sent from the job's thread to the transaction's task.
enum Call {
    Resolve(UserId),
    Load(i64, Option<Vec<String>>),
    ApplyPur(i64, Vec<RepoUpdate>),
    Create(ShProfile),
    Replace(UserId, ShProfile),
    Delete(UserId),
    PutSub(StoredSubscription),
    DeleteSub(i64, String, u32, String),
}

enum Answer {
    Id(Option<i64>),
    Profile(Option<ShProfile>),
    Pur(PurOutcome),
    Created(i64),
    Replaced(i64, ProfileChanges),
    Done(bool),
}

type Reply = mpsc::Sender<store::Result<Answer>>;

/// The job's [`ShTx`]: each call waits (on the job's blocking thread) for the transaction's task.
struct Bridge {
    /// Dropped with the job: that ends the transaction task's loop.
    calls: amp::UnboundedSender<(Call, Reply)>,
}

impl Bridge {
    fn call(&self, call: Call) -> store::Result<Answer> {
        let (tx, rx) = mpsc::channel();
        self.calls.send((call, tx)).map_err(|_| store::Error::Closed)?;
        rx.recv().map_err(|_| store::Error::Closed)?
    }
}

fn unexpected<T>() -> store::Result<T> {
    Err(store::Error::backend_msg("Sh store: unexpected answer"))
}

impl ShTx for Bridge {
    fn resolve(&self, user: &UserId) -> store::Result<Option<i64>> {
        match self.call(Call::Resolve(user.clone()))? {
            Answer::Id(id) => Ok(id),
            _ => unexpected(),
        }
    }
    fn load(&self, pid: i64, services: Option<&[String]>) -> store::Result<Option<ShProfile>> {
        match self.call(Call::Load(pid, services.map(<[String]>::to_vec)))? {
            Answer::Profile(p) => Ok(p),
            _ => unexpected(),
        }
    }
    fn apply_pur(&self, pid: i64, updates: &[RepoUpdate]) -> store::Result<PurOutcome> {
        match self.call(Call::ApplyPur(pid, updates.to_vec()))? {
            Answer::Pur(o) => Ok(o),
            _ => unexpected(),
        }
    }
    fn create(&self, p: &ShProfile) -> store::Result<i64> {
        match self.call(Call::Create(p.clone()))? {
            Answer::Created(id) => Ok(id),
            _ => unexpected(),
        }
    }
    fn replace(&self, user: &UserId, new: &ShProfile) -> store::Result<(i64, ProfileChanges)> {
        match self.call(Call::Replace(user.clone(), new.clone()))? {
            Answer::Replaced(id, ch) => Ok((id, ch)),
            _ => unexpected(),
        }
    }
    fn delete(&self, user: &UserId) -> store::Result<Option<i64>> {
        match self.call(Call::Delete(user.clone()))? {
            Answer::Id(id) => Ok(id),
            _ => unexpected(),
        }
    }
    fn put_subscription(&self, s: &StoredSubscription) -> store::Result<()> {
        match self.call(Call::PutSub(s.clone()))? {
            Answer::Done(_) => Ok(()),
            _ => unexpected(),
        }
    }
    fn delete_subscription(
        &self,
        profile_id: i64,
        as_host: &str,
        data_reference: u32,
        service_indication: &str,
    ) -> store::Result<bool> {
        let call = Call::DeleteSub(
            profile_id,
            as_host.to_owned(),
            data_reference,
            service_indication.to_owned(),
        );
        match self.call(call)? {
            Answer::Done(b) => Ok(b),
            _ => unexpected(),
        }
    }
}

/// Runs one call on the transaction's connection.
async fn run(c: &mut Conn, call: Call, write: bool, touched: &mut BTreeSet<i64>) -> Tx<Answer> {
    let read_only =
        || -> Tx<Answer> { Err(store::Error::backend_msg("a write in a read-only Sh job").into()) };
    Ok(match call {
        Call::Resolve(u) => Answer::Id(resolve(c, &u, write).await?),
        Call::Load(pid, s) => Answer::Profile(load(c, pid, s.as_deref()).await?),
        Call::ApplyPur(pid, u) if write => Answer::Pur(apply_pur(c, pid, &u).await?),
        Call::Create(p) if write => Answer::Created(create(c, &p).await?),
        Call::Replace(u, p) if write => {
            let (pid, ch) = replace(c, &u, &p).await?;
            Answer::Replaced(pid, ch)
        }
        Call::Delete(u) if write => {
            let pid = delete(c, &u).await?;
            touched.extend(pid);
            Answer::Id(pid)
        }
        Call::PutSub(s) if write => {
            put_subscription(c, &s).await?;
            touched.insert(s.profile_id);
            Answer::Done(true)
        }
        Call::DeleteSub(pid, host, dr, si) if write => {
            let gone = delete_subscription(c, pid, &host, dr, &si).await?;
            if gone {
                touched.insert(pid);
            }
            Answer::Done(gone)
        }
        _ => return read_only(),
    })
}

async fn resolve(c: &mut Conn, user: &UserId, lock: bool) -> Tx<Option<i64>> {
    let sql = if lock {
        "SELECT profile_id FROM udr_sh_identity WHERE kind = ? AND identity = ? FOR UPDATE"
    } else {
        "SELECT profile_id FROM udr_sh_identity WHERE kind = ? AND identity = ?"
    };
    Ok(c.exec_first(sql, (user.kind(), user.value())).await?)
}

async fn load(c: &mut Conn, pid: i64, services: Option<&[String]>) -> Tx<Option<ShProfile>> {
    let head: Option<(i64, String)> = c
        .exec_first(
            "SELECT ims_user_state, scscf_name FROM udr_sh_profile WHERE profile_id = ?",
            (pid,),
        )
        .await?;
    let Some((state, scscf)) = head else { return Ok(None) };
    let mut p = ShProfile {
        ims_user_state: state as u8,
        scscf_name: (!scscf.is_empty()).then_some(scscf),
        ..ShProfile::default()
    };
    let ids: Vec<(i64, String)> = c
        .exec(
            "SELECT kind, identity FROM udr_sh_identity WHERE profile_id = ? ORDER BY position",
            (pid,),
        )
        .await?;
    for (kind, value) in ids {
        match UserId::from_parts(kind, value) {
            UserId::Public(s) => p.public_identities.push(s),
            UserId::Msisdn(s) => p.msisdns.push(s),
        }
    }
    let repo = |(si, seq, data): (String, i64, String)| RepositoryData {
        service_indication: si,
        sequence_number: seq as u16,
        service_data: data,
    };
    match services {
        None => {
            let rows: Vec<(String, i64, String)> = c
                .exec(
                    "SELECT service_indication, sequence_number, service_data
                     FROM udr_sh_repository WHERE profile_id = ? ORDER BY service_indication",
                    (pid,),
                )
                .await?;
            p.repository.extend(rows.into_iter().map(repo));
        }
        Some(list) => {
            for si in list {
                let row: Option<(String, i64, String)> = c
                    .exec_first(
                        "SELECT service_indication, sequence_number, service_data
                         FROM udr_sh_repository WHERE profile_id = ? AND service_indication = ?",
                        (pid, si.as_str()),
                    )
                    .await?;
                if let Some(r) = row.map(repo) {
                    if !p.repository.iter().any(|x| x.service_indication == r.service_indication) {
                        p.repository.push(r);
                    }
                }
            }
        }
    }
    Ok(Some(p))
}

async fn apply_pur(c: &mut Conn, pid: i64, updates: &[RepoUpdate]) -> Tx<PurOutcome> {
    let mut stored = Vec::new();
    for si in pur_service_indications(updates) {
        let n: Option<i64> = c
            .exec_first(
                "SELECT sequence_number FROM udr_sh_repository
                 WHERE profile_id = ? AND service_indication = ? FOR UPDATE",
                (pid, si),
            )
            .await?;
        stored.push((si, n.map(|n| n as u16)));
    }
    let outcome = pur_outcome(updates, &stored);
    if let PurOutcome::Applied(changes) = &outcome {
        for ch in changes {
            write_repository(
                c,
                pid,
                &ch.service_indication,
                ch.sequence_number,
                ch.data.as_deref(),
            )
            .await?;
        }
    }
    Ok(outcome)
}

async fn write_repository(
    c: &mut Conn,
    pid: i64,
    si: &str,
    seq: u16,
    data: Option<&str>,
) -> Tx<()> {
    match data {
        Some(d) => {
            c.exec_drop(
                "INSERT INTO udr_sh_repository
                     (profile_id, service_indication, sequence_number, service_data)
                 VALUES (?, ?, ?, ?)
                 ON DUPLICATE KEY UPDATE sequence_number = VALUES(sequence_number),
                     service_data = VALUES(service_data)",
                (pid, si, i64::from(seq), d),
            )
            .await?
        }
        None => {
            c.exec_drop(
                "DELETE FROM udr_sh_repository WHERE profile_id = ? AND service_indication = ?",
                (pid, si),
            )
            .await?
        }
    }
    Ok(())
}

async fn insert_identities(c: &mut Conn, pid: i64, p: &ShProfile) -> Tx<()> {
    for (i, id) in p.identities().enumerate() {
        let taken: Option<i64> = c
            .exec_first(
                "SELECT 1 FROM udr_sh_identity WHERE kind = ? AND identity = ? FOR UPDATE",
                (id.kind(), id.value()),
            )
            .await?;
        if taken.is_some() {
            return Err(store::Error::AlreadyExists.into());
        }
        c.exec_drop(
            "INSERT INTO udr_sh_identity (kind, identity, profile_id, position) VALUES (?, ?, ?, ?)",
            (id.kind(), id.value(), pid, i as i64),
        )
        .await?;
    }
    Ok(())
}

async fn create(c: &mut Conn, p: &ShProfile) -> Tx<i64> {
    c.exec_drop(
        "INSERT INTO udr_sh_profile (ims_user_state, scscf_name) VALUES (?, ?)",
        (i64::from(p.ims_user_state), p.scscf_name.as_deref().unwrap_or("")),
    )
    .await?;
    let pid = c.last_insert_id().ok_or_else(|| store::Error::backend_msg("no profile id"))? as i64;
    insert_identities(c, pid, p).await?;
    for r in &p.repository {
        write_repository(c, pid, &r.service_indication, r.sequence_number, Some(&r.service_data))
            .await?;
    }
    Ok(pid)
}

async fn replace(c: &mut Conn, user: &UserId, new: &ShProfile) -> Tx<(i64, ProfileChanges)> {
    let pid = resolve(c, user, true).await?.ok_or(store::Error::NotFound)?;
    let old = load(c, pid, None).await?.ok_or(store::Error::NotFound)?;
    c.exec_drop(
        "UPDATE udr_sh_profile SET ims_user_state = ?, scscf_name = ? WHERE profile_id = ?",
        (i64::from(new.ims_user_state), new.scscf_name.as_deref().unwrap_or(""), pid),
    )
    .await?;
    c.exec_drop("DELETE FROM udr_sh_identity WHERE profile_id = ?", (pid,)).await?;
    insert_identities(c, pid, new).await?;
    let changes = profile_changes(&old, new);
    for ch in &changes.repository {
        write_repository(c, pid, &ch.service_indication, ch.sequence_number, ch.data.as_deref())
            .await?;
    }
    Ok((pid, changes))
}

async fn delete(c: &mut Conn, user: &UserId) -> Tx<Option<i64>> {
    let Some(pid) = resolve(c, user, true).await? else { return Ok(None) };
    for sql in [
        "DELETE FROM udr_sh_identity WHERE profile_id = ?",
        "DELETE FROM udr_sh_repository WHERE profile_id = ?",
        "DELETE FROM udr_sh_subscription WHERE profile_id = ?",
        "DELETE FROM udr_sh_profile WHERE profile_id = ?",
    ] {
        c.exec_drop(sql, (pid,)).await?;
    }
    Ok(Some(pid))
}

async fn put_subscription(c: &mut Conn, s: &StoredSubscription) -> Tx<()> {
    c.exec_drop(
        "INSERT INTO udr_sh_subscription (profile_id, as_host, data_reference, service_indication,
             as_realm, user_kind, user_identity, expiry, one_time)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON DUPLICATE KEY UPDATE as_realm = VALUES(as_realm), user_kind = VALUES(user_kind),
             user_identity = VALUES(user_identity), expiry = VALUES(expiry),
             one_time = VALUES(one_time)",
        (
            s.profile_id,
            s.as_host.as_str(),
            i64::from(s.data_reference),
            s.service_indication.as_str(),
            s.as_realm.as_str(),
            s.user.kind(),
            s.user.value(),
            s.expiry as i64,
            s.one_time,
        ),
    )
    .await?;
    Ok(())
}

async fn delete_subscription(
    c: &mut Conn,
    pid: i64,
    as_host: &str,
    data_reference: u32,
    si: &str,
) -> Tx<bool> {
    c.exec_drop(
        "DELETE FROM udr_sh_subscription WHERE profile_id = ? AND as_host = ?
         AND data_reference = ? AND service_indication = ?",
        (pid, as_host, i64::from(data_reference), si),
    )
    .await?;
    Ok(c.affected_rows() > 0)
}

const SELECT_SUBS: &str = "SELECT profile_id, as_host, data_reference, service_indication, \
     as_realm, user_kind, user_identity, expiry, one_time FROM udr_sh_subscription";

type SubRow = (i64, String, i64, String, String, i64, String, i64, bool);

fn sub_of(r: SubRow) -> StoredSubscription {
    StoredSubscription {
        profile_id: r.0,
        as_host: r.1,
        data_reference: r.2 as u32,
        service_indication: r.3,
        as_realm: r.4,
        user: UserId::from_parts(r.5, r.6),
        expiry: r.7 as u64,
        one_time: r.8,
    }
}

async fn put_profiles(
    c: &mut Conn,
    rows: &[(u64, ShProfile)],
    stop_on_refused: bool,
) -> Tx<ShLoaded> {
    let mut loaded = ShLoaded::default();
    for (tag, p) in rows {
        let mut owners = Vec::new();
        for id in p.identities() {
            owners.push((resolve(c, &id, true).await?, id));
        }
        match placement(owners.into_iter().map(|(pid, id)| (id, pid))) {
            Placement::Refused(why) => {
                loaded.refused.push((*tag, why));
                if stop_on_refused {
                    break;
                }
            }
            Placement::Replace(user) => {
                replace(c, &user, p).await?;
                loaded.replaced += 1;
            }
            Placement::Create => {
                create(c, p).await?;
                loaded.new += 1;
            }
        }
    }
    Ok(loaded)
}

impl ShDataStore for MysqlSh {
    fn read_job(&self, job: ShJob) -> StoreFuture<'_, Box<dyn Any + Send>> {
        Box::pin(self.job(job, false))
    }

    fn write_job(&self, job: ShJob) -> StoreFuture<'_, Box<dyn Any + Send>> {
        Box::pin(self.job(job, true))
    }

    fn all_subscriptions(&self) -> StoreFuture<'_, Vec<StoredSubscription>> {
        Box::pin(self.db.scan(|c| {
            Box::pin(async move {
                let rows: Vec<SubRow> = c.query(SELECT_SUBS).await?;
                Ok(rows.into_iter().map(sub_of).collect())
            })
        }))
    }

    fn delete_expired_subscriptions(&self, now: u64) -> StoreFuture<'_, usize> {
        // Not in the feed: every instance expires the subscriptions of its index by their time.
        Box::pin(self.db.write(move |c| {
            Box::pin(async move {
                c.exec_drop(
                    "DELETE FROM udr_sh_subscription WHERE expiry != 0 AND expiry <= ?",
                    (now as i64,),
                )
                .await?;
                Ok(c.affected_rows() as usize)
            })
        }))
    }

    fn put_profiles(
        &self,
        rows: Vec<(u64, ShProfile)>,
        stop_on_refused: bool,
    ) -> StoreFuture<'_, (ShLoaded, Vec<(u64, ShProfile)>)> {
        let rows = Arc::new(rows);
        Box::pin(async move {
            let r = rows.clone();
            let loaded = self
                .db
                .write(move |c| {
                    let r = r.clone();
                    Box::pin(async move { put_profiles(c, &r, stop_on_refused).await })
                })
                .await?;
            let rows = Arc::try_unwrap(rows).unwrap_or_else(|a| (*a).clone());
            Ok((loaded, rows))
        })
    }
}
