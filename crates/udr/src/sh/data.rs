//! The Sh subscriber data and its store schema.
//!
//! A profile is one IMS subscription as the Sh interface sees it: its public identities (IMPUs
//! and PSIs, `sip:`/`sips:`/`tel:` URIs), its MSISDNs, the IMS user state, the assigned S-CSCF,
//! and its repository data (transparent data per Service-Indication with a sequence number,
//! TS 29.328 §7.6). The identities of a profile share its data, as the identities of one implicit
//! registration set do.
//!
//! The profiles, their repository data and the Sh-Subs-Notif subscriptions are kept behind
//! [`ShDataStore`]; its SQLite implementation, with the schema, is [`super::sqlite`].

use std::any::Any;

use crate::StoreFuture;

/// Longest identity, S-CSCF name or Service-Indication accepted.
pub const MAX_NAME_LEN: usize = 255;

/// How a user is named: an IMS public identity (IMPU/PSI) or an MSISDN (digits).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum UserId {
    Public(String),
    Msisdn(String),
}

impl UserId {
    pub(crate) fn kind(&self) -> i64 {
        match self {
            UserId::Public(_) => 0,
            UserId::Msisdn(_) => 1,
        }
    }
    pub fn value(&self) -> &str {
        match self {
            UserId::Public(s) | UserId::Msisdn(s) => s,
        }
    }
    pub(crate) fn from_parts(kind: i64, value: String) -> UserId {
        if kind == 1 {
            UserId::Msisdn(value)
        } else {
            UserId::Public(value)
        }
    }
}

/// tIMSUserState of TS 29.328 (Sh-Data `IMSUserState`).
pub mod ims_user_state {
    pub const NOT_REGISTERED: u8 = 0;
    pub const REGISTERED: u8 = 1;
    pub const REGISTERED_UNREG_SERVICES: u8 = 2;
    pub const AUTHENTICATION_PENDING: u8 = 3;
    pub const NAMES: [&str; 4] =
        ["NOT_REGISTERED", "REGISTERED", "REGISTERED_UNREG_SERVICES", "AUTHENTICATION_PENDING"];
}

/// An IMS-User-State by its TS 29.328 name (or its number).
pub fn parse_ims_user_state(s: &str) -> Option<u8> {
    ims_user_state::NAMES
        .iter()
        .position(|n| *n == s)
        .map(|i| i as u8)
        .or_else(|| s.parse::<u8>().ok().filter(|n| *n <= ims_user_state::AUTHENTICATION_PENDING))
}

/// Why `s` is not an IMS-User-State.
pub fn ims_user_state_refused(s: &str) -> String {
    format!("{s:?} is not one of {}", ims_user_state::NAMES.join(", "))
}

/// Checks the ServiceData of Service-Indication `si` (trimmed): a non-empty XML fragment of at
/// most `max_data` bytes. The field at fault is `serviceData`.
pub fn check_service_data(si: &str, raw: &str, max_data: usize) -> Result<(), Invalid> {
    let bad = |why: String| Err(Invalid::new("serviceData", why));
    if raw.is_empty() {
        return bad(format!("serviceData of {si} is empty"));
    }
    if let Err(e) = super::xml::check_fragment(raw) {
        return bad(format!("serviceData of {si}: {e}"));
    }
    if raw.len() > max_data {
        return bad(format!("serviceData of {si} is {} bytes, more than {max_data}", raw.len()));
    }
    Ok(())
}

/// Transparent data of one Service-Indication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepositoryData {
    pub service_indication: String,
    pub sequence_number: u16,
    /// The content of `ServiceData`, an XML fragment kept verbatim.
    pub service_data: String,
}

/// One Sh subscriber profile.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShProfile {
    pub public_identities: Vec<String>,
    pub msisdns: Vec<String>,
    pub ims_user_state: u8,
    pub scscf_name: Option<String>,
    /// Ordered by Service-Indication.
    pub repository: Vec<RepositoryData>,
}

/// Why profile content is refused: the field and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub field: &'static str,
    pub reason: String,
}

impl Invalid {
    pub fn new(field: &'static str, reason: impl Into<String>) -> Invalid {
        Invalid { field, reason: reason.into() }
    }
}

fn printable(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_NAME_LEN && !s.chars().any(|c| c.is_control() || c == ' ')
}

/// An IMS public identity: a `sip:`, `sips:` or `tel:` URI without spaces or control characters.
pub fn check_public_identity(s: &str) -> Result<(), Invalid> {
    let scheme_ok = ["sip:", "sips:", "tel:"]
        .iter()
        .any(|p| s.len() > p.len() && s[..p.len()].eq_ignore_ascii_case(p));
    if !scheme_ok || !printable(s) {
        return Err(Invalid::new(
            "publicIdentity",
            format!("{s:?} is not a sip:, sips: or tel: URI of at most {MAX_NAME_LEN} bytes"),
        ));
    }
    Ok(())
}

/// An MSISDN in international format: 5 to 15 digits.
pub fn check_msisdn(s: &str) -> Result<(), Invalid> {
    if !(5..=15).contains(&s.len()) || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Invalid::new("msisdn", format!("{s:?} is not 5 to 15 digits")));
    }
    Ok(())
}

pub fn check_service_indication(s: &str) -> Result<(), Invalid> {
    if !printable(s) {
        return Err(Invalid::new(
            "serviceIndication",
            format!("{s:?} must be 1 to {MAX_NAME_LEN} printable bytes without spaces"),
        ));
    }
    Ok(())
}

impl ShProfile {
    /// Bytes the profile's content takes: identities, names and ServiceData (what
    /// `max_sh_profile_bytes` bounds).
    pub fn content_bytes(&self) -> usize {
        let ids: usize = self.public_identities.iter().chain(&self.msisdns).map(String::len).sum();
        let repo: usize =
            self.repository.iter().map(|r| r.service_indication.len() + r.service_data.len()).sum();
        ids + repo + self.scscf_name.as_ref().map_or(0, String::len)
    }

    /// Checks the profile's size: at most `max_ids` identities (public identities and MSISDNs
    /// together) and `max_bytes` of content.
    pub fn check_size(&self, max_ids: usize, max_bytes: usize) -> Result<(), Invalid> {
        let ids = self.public_identities.len() + self.msisdns.len();
        if ids > max_ids {
            return Err(Invalid::new(
                "publicIdentity",
                format!("a profile has at most {max_ids} identities (publicIdentity and msisdn), not {ids}"),
            ));
        }
        let bytes = self.content_bytes();
        if bytes > max_bytes {
            return Err(Invalid::new(
                "profile",
                format!("a profile holds at most {max_bytes} bytes, not {bytes}"),
            ));
        }
        Ok(())
    }

    /// Checks every field; the first problem found.
    pub fn check(&self) -> Result<(), Invalid> {
        if self.public_identities.is_empty() {
            return Err(Invalid::new("publicIdentity", "at least one public identity"));
        }
        for p in &self.public_identities {
            check_public_identity(p)?;
        }
        for m in &self.msisdns {
            check_msisdn(m)?;
        }
        let mut seen = std::collections::HashSet::new();
        for id in self.public_identities.iter().chain(&self.msisdns) {
            if !seen.insert(id) {
                return Err(Invalid::new("publicIdentity", format!("{id:?} is listed twice")));
            }
        }
        if self.ims_user_state > ims_user_state::AUTHENTICATION_PENDING {
            return Err(Invalid::new("imsUserState", "0 to 3"));
        }
        if let Some(s) = &self.scscf_name {
            let sip = s.len() > 4 && s[..4].eq_ignore_ascii_case("sip:");
            if !sip || !printable(s) {
                return Err(Invalid::new("scscfName", format!("{s:?} is not a SIP URI")));
            }
        }
        let mut sis = std::collections::HashSet::new();
        for r in &self.repository {
            check_service_indication(&r.service_indication)?;
            if !sis.insert(&r.service_indication) {
                return Err(Invalid::new(
                    "serviceIndication",
                    format!("{:?} is listed twice", r.service_indication),
                ));
            }
        }
        Ok(())
    }

    pub(crate) fn identities(&self) -> impl Iterator<Item = UserId> + '_ {
        self.public_identities
            .iter()
            .map(|p| UserId::Public(p.clone()))
            .chain(self.msisdns.iter().map(|m| UserId::Msisdn(m.clone())))
    }
}

/// The sequence number that follows `n` (TS 29.328 §7.7: 0 is only the first, 65535 wraps to 1).
pub fn next_sequence(n: u16) -> u16 {
    if n == u16::MAX {
        1
    } else {
        n + 1
    }
}

/// One repository update of a PUR: `data` None deletes (empty ServiceData).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoUpdate {
    pub service_indication: String,
    pub sequence_number: u16,
    pub data: Option<String>,
}

/// What a repository update did, for the notifications.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoChange {
    pub service_indication: String,
    pub sequence_number: u16,
    /// None: deleted.
    pub data: Option<String>,
}

/// The outcome of a PUR's repository updates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PurOutcome {
    Applied(Vec<RepoChange>),
    /// The sequence number of this Service-Indication is not the successor of the stored one
    /// (or not 0 for new data, or data to delete does not exist).
    OutOfSync(String),
}

/// What a provisioning update changed, for the notifications.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProfileChanges {
    pub identities: bool,
    pub msisdns: bool,
    pub ims_user_state: bool,
    pub scscf_name: bool,
    pub repository: Vec<RepoChange>,
}

/// The Service-Indications a PUR's `updates` name, each once, in the order they first appear:
/// the stored sequence numbers [`pur_outcome`] needs, read (and locked) by the backend in this
/// order.
pub fn pur_service_indications(updates: &[RepoUpdate]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::with_capacity(updates.len());
    for u in updates {
        if !out.contains(&u.service_indication.as_str()) {
            out.push(&u.service_indication);
        }
    }
    out
}

/// Checks a PUR's repository updates against `stored` (each Service-Indication of
/// [`pur_service_indications`] with its stored sequence number, None without data): all apply,
/// their changes to write in order, or the first out of sync. Several updates of one
/// Service-Indication in a PUR chain, each checked against the state the previous one leaves.
/// Both store backends call it, so they only run the statements.
pub fn pur_outcome(updates: &[RepoUpdate], stored: &[(&str, Option<u16>)]) -> PurOutcome {
    let mut current: Vec<(&str, Option<u16>)> = stored.to_vec();
    for u in updates {
        let si = u.service_indication.as_str();
        let slot = match current.iter_mut().find(|(s, _)| *s == si) {
            Some(slot) => slot,
            None => {
                current.push((si, None));
                current.last_mut().expect("just pushed")
            }
        };
        let ok = match (slot.1, &u.data) {
            (Some(n), _) => u.sequence_number == next_sequence(n),
            (None, Some(_)) => u.sequence_number == 0,
            (None, None) => false,
        };
        if !ok {
            return PurOutcome::OutOfSync(u.service_indication.clone());
        }
        slot.1 = u.data.as_ref().map(|_| u.sequence_number);
    }
    PurOutcome::Applied(
        updates
            .iter()
            .map(|u| RepoChange {
                service_indication: u.service_indication.clone(),
                sequence_number: u.sequence_number,
                data: u.data.clone(),
            })
            .collect(),
    )
}

/// What replacing profile `old` with `new` changes: the flags for the notifications, and the
/// repository data to write, each with its new sequence number (the successor of the stored
/// one, 0 when new; `data` None: the Service-Indication is removed). Data that did not change
/// is not rewritten. Both store backends call it, so they only run the statements.
pub fn profile_changes(old: &ShProfile, new: &ShProfile) -> ProfileChanges {
    let mut changes = ProfileChanges {
        identities: old.public_identities != new.public_identities,
        msisdns: old.msisdns != new.msisdns,
        ims_user_state: old.ims_user_state != new.ims_user_state,
        scscf_name: old.scscf_name != new.scscf_name,
        repository: Vec::new(),
    };
    for r in &new.repository {
        let before = old.repository.iter().find(|o| o.service_indication == r.service_indication);
        if before.is_some_and(|b| b.service_data == r.service_data) {
            continue;
        }
        changes.repository.push(RepoChange {
            service_indication: r.service_indication.clone(),
            sequence_number: before.map_or(0, |b| next_sequence(b.sequence_number)),
            data: Some(r.service_data.clone()),
        });
    }
    for o in &old.repository {
        if !new.repository.iter().any(|r| r.service_indication == o.service_indication) {
            changes.repository.push(RepoChange {
                service_indication: o.service_indication.clone(),
                sequence_number: next_sequence(o.sequence_number),
                data: None,
            });
        }
    }
    changes
}

/// Where a bulk-loaded profile goes, given the profile each of its identities belongs to now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// None of its identities is known: a new profile.
    Create,
    /// It replaces the one profile its known identities belong to (named by one of them).
    Replace(UserId),
    /// Its identities belong to different profiles: refused, with why.
    Refused(String),
}

/// The placement of a profile whose identities resolved to `owners` (identity, its profile id
/// or None), in the profile's order. Both store backends call it.
pub fn placement(owners: impl IntoIterator<Item = (UserId, Option<i64>)>) -> Placement {
    let mut owner: Option<(i64, UserId)> = None;
    for (id, pid) in owners {
        match (pid, &owner) {
            (None, _) => {}
            (Some(pid), None) => owner = Some((pid, id)),
            (Some(pid), Some((o, _))) if pid == *o => {}
            (Some(_), Some(_)) => {
                return Placement::Refused(format!(
                    "{} belongs to another profile than its other identities",
                    id.value()
                ))
            }
        }
    }
    match owner {
        Some((_, user)) => Placement::Replace(user),
        None => Placement::Create,
    }
}

/// A subscription to notifications (Sh-Subs-Notif) as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSubscription {
    pub profile_id: i64,
    pub as_host: String,
    pub as_realm: String,
    pub data_reference: u32,
    /// '' unless the data reference is RepositoryData.
    pub service_indication: String,
    /// The identity the AS subscribed with; the PNR names the user by it.
    pub user: UserId,
    /// Unix seconds; 0: no expiry.
    pub expiry: u64,
    pub one_time: bool,
}

/// One transaction over the Sh data: what a job given to `read` or `write` of a
/// `dyn ShDataStore` ([`ShDataStore::read_job`], [`ShDataStore::write_job`]) may do (the writing
/// methods fail in a read job).
pub trait ShTx {
    /// The profile id of a user, if known.
    fn resolve(&self, user: &UserId) -> store::Result<Option<i64>>;
    /// A whole profile; repository data restricted to `services` when given.
    fn load(
        &self,
        profile_id: i64,
        services: Option<&[String]>,
    ) -> store::Result<Option<ShProfile>>;
    /// Applies a PUR's repository updates to profile `pid`: all of them or, when one is out of
    /// sync, none (checked before anything is written).
    fn apply_pur(&self, pid: i64, updates: &[RepoUpdate]) -> store::Result<PurOutcome>;
    /// Creates a profile (checked by the caller); `AlreadyExists` when one of its identities
    /// belongs to a profile already (then the whole job writes nothing).
    fn create(&self, p: &ShProfile) -> store::Result<i64>;
    /// Replaces the profile of `user` with `new` (checked by the caller). Repository data of
    /// `new` is written with the successor of the stored sequence number (0 when new), and
    /// Service-Indications it does not list are removed. `NotFound` for an unknown user,
    /// `AlreadyExists` when a new identity belongs to another profile.
    fn replace(&self, user: &UserId, new: &ShProfile) -> store::Result<(i64, ProfileChanges)>;
    /// Deletes the profile of `user` with its identities, repository data and subscriptions;
    /// the profile id, or None for an unknown user.
    fn delete(&self, user: &UserId) -> store::Result<Option<i64>>;
    /// Creates or replaces one subscription.
    fn put_subscription(&self, s: &StoredSubscription) -> store::Result<()>;
    /// Removes one subscription; whether it existed.
    fn delete_subscription(
        &self,
        profile_id: i64,
        as_host: &str,
        data_reference: u32,
        service_indication: &str,
    ) -> store::Result<bool>;
}

/// What [`ShDataStore::put_profiles`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShLoaded {
    /// Profiles created.
    pub new: u64,
    /// Profiles replaced.
    pub replaced: u64,
    /// Rows refused: their tag and why.
    pub refused: Vec<(u64, String)>,
}

/// A job of [`ShDataStore`]: runs on the store's side, within one transaction.
pub type ShJob = Box<dyn FnOnce(&dyn ShTx) -> store::Result<Box<dyn Any + Send>> + Send>;

/// The Sh data's persistence: profiles, repository data and Sh-Subs-Notif subscriptions. A
/// request's reads and writes run as one job in one transaction ([`ShTx`]), so a PUR's sequence
/// numbers are checked and written atomically, and the subscription index can change in the
/// order of the store's writes.
pub trait ShDataStore: Send + Sync + 'static {
    /// Runs `job` in a read transaction (one consistent snapshot).
    fn read_job(&self, job: ShJob) -> StoreFuture<'_, Box<dyn Any + Send>>;
    /// Runs `job` in a write transaction; its writes are committed when this resolves, or none
    /// is when the job fails.
    fn write_job(&self, job: ShJob) -> StoreFuture<'_, Box<dyn Any + Send>>;
    /// Every stored subscription (at start, to rebuild the in-memory index).
    fn all_subscriptions(&self) -> StoreFuture<'_, Vec<StoredSubscription>>;
    /// Removes the subscriptions expired at `now` (unix seconds); how many.
    fn delete_expired_subscriptions(&self, now: u64) -> StoreFuture<'_, usize>;
    /// Bulk load in one transaction of checked profiles, each tagged (e.g. by its input line):
    /// a profile none of whose identities is known is created; one whose known identities all
    /// belong to one profile replaces it (as a provisioning update does, so loading a file twice
    /// is harmless); one naming identities of two profiles is refused and, with
    /// `stop_on_refused`, ends the batch. The rows come back for the caller to free.
    fn put_profiles(
        &self,
        rows: Vec<(u64, ShProfile)>,
        stop_on_refused: bool,
    ) -> StoreFuture<'_, (ShLoaded, Vec<(u64, ShProfile)>)>;
}

impl dyn ShDataStore {
    /// [`read_job`](ShDataStore::read_job) with a typed result.
    pub async fn read<T: Send + 'static>(
        &self,
        job: impl FnOnce(&dyn ShTx) -> store::Result<T> + Send + 'static,
    ) -> store::Result<T> {
        typed(
            self.read_job(Box::new(move |tx| Ok(Box::new(job(tx)?) as Box<dyn Any + Send>)))
                .await?,
        )
    }

    /// [`write_job`](ShDataStore::write_job) with a typed result.
    pub async fn write<T: Send + 'static>(
        &self,
        job: impl FnOnce(&dyn ShTx) -> store::Result<T> + Send + 'static,
    ) -> store::Result<T> {
        typed(
            self.write_job(Box::new(move |tx| Ok(Box::new(job(tx)?) as Box<dyn Any + Send>)))
                .await?,
        )
    }
}

fn typed<T: 'static>(out: Box<dyn Any + Send>) -> store::Result<T> {
    out.downcast::<T>()
        .map(|b| *b)
        .map_err(|_| store::Error::backend_msg("Sh store job answered with another type"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> ShProfile {
        ShProfile {
            public_identities: vec!["sip:alice@ims.example".into(), "tel:+33600000001".into()],
            msisdns: vec!["33600000001".into()],
            ims_user_state: ims_user_state::REGISTERED,
            scscf_name: Some("sip:scscf1.ims.example".into()),
            repository: vec![],
        }
    }

    fn up(si: &str, seq: u16, data: Option<&str>) -> RepoUpdate {
        RepoUpdate {
            service_indication: si.into(),
            sequence_number: seq,
            data: data.map(Into::into),
        }
    }

    #[test]
    fn a_pur_chain_is_checked_against_the_state_each_update_leaves() {
        let chain = [up("a", 0, Some("<x/>")), up("b", 8, Some("<y/>")), up("a", 1, None)];
        assert_eq!(pur_service_indications(&chain), ["a", "b"]);
        // "a" new, "b" stored at 7, then "a" deleted at the successor of the 0 just written.
        match pur_outcome(&chain, &[("a", None), ("b", Some(7))]) {
            PurOutcome::Applied(c) => {
                let got: Vec<_> =
                    c.iter().map(|c| (c.service_indication.as_str(), c.sequence_number)).collect();
                assert_eq!(got, [("a", 0), ("b", 8), ("a", 1)]);
                assert_eq!(c[2].data, None);
            }
            o => panic!("{o:?}"),
        }
        // "b" stored at 8: its 8 is out of sync, nothing applies.
        assert_eq!(
            pur_outcome(&chain, &[("a", None), ("b", Some(8))]),
            PurOutcome::OutOfSync("b".into())
        );
        // Deleting what does not exist, or new data not at 0; 65535 is followed by 1.
        assert_eq!(
            pur_outcome(&[up("a", 0, None)], &[("a", None)]),
            PurOutcome::OutOfSync("a".into())
        );
        assert_eq!(
            pur_outcome(&[up("a", 3, Some("<x/>"))], &[("a", None)]),
            PurOutcome::OutOfSync("a".into())
        );
        assert!(matches!(
            pur_outcome(&[up("a", 1, Some("<x/>"))], &[("a", Some(65535))]),
            PurOutcome::Applied(_)
        ));
    }

    #[test]
    fn replacing_a_profile_rewrites_only_changed_repository_data_with_the_next_sequence() {
        let repo = |si: &str, seq: u16, d: &str| RepositoryData {
            service_indication: si.into(),
            sequence_number: seq,
            service_data: d.into(),
        };
        let mut old = profile();
        old.repository =
            vec![repo("same", 4, "<s/>"), repo("changed", 65535, "<c/>"), repo("gone", 9, "<g/>")];
        let mut new = profile();
        new.msisdns = vec!["33600000002".into()];
        new.repository =
            vec![repo("same", 0, "<s/>"), repo("changed", 0, "<c2/>"), repo("new", 5, "<n/>")];
        let c = profile_changes(&old, &new);
        assert_eq!(
            (c.identities, c.msisdns, c.ims_user_state, c.scscf_name),
            (false, true, false, false)
        );
        let got: Vec<_> = c
            .repository
            .iter()
            .map(|r| (r.service_indication.as_str(), r.sequence_number, r.data.as_deref()))
            .collect();
        assert_eq!(
            got,
            [("changed", 1, Some("<c2/>")), ("new", 0, Some("<n/>")), ("gone", 10, None)]
        );
    }

    #[test]
    fn a_bulk_loaded_profile_is_created_replaces_its_one_owner_or_is_refused() {
        let a = || UserId::Public("sip:a@ims.example".into());
        let m = || UserId::Msisdn("336".into());
        assert_eq!(placement([(a(), None), (m(), None)]), Placement::Create);
        assert_eq!(placement([(a(), None), (m(), Some(3))]), Placement::Replace(m()));
        assert_eq!(placement([(a(), Some(3)), (m(), Some(3))]), Placement::Replace(a()));
        assert_eq!(
            placement([(a(), Some(3)), (m(), Some(4))]),
            Placement::Refused("336 belongs to another profile than its other identities".into())
        );
    }

    #[test]
    fn sequence_wraps_past_zero() {
        assert_eq!(next_sequence(0), 1);
        assert_eq!(next_sequence(41), 42);
        assert_eq!(next_sequence(65535), 1);
    }

    #[test]
    fn checks() {
        assert!(profile().check().is_ok());
        let mut p = profile();
        p.public_identities.push("alice".into());
        assert_eq!(p.check().unwrap_err().field, "publicIdentity");
        let mut p = profile();
        p.msisdns.push("12ab5".into());
        assert_eq!(p.check().unwrap_err().field, "msisdn");
        let mut p = profile();
        p.ims_user_state = 4;
        assert_eq!(p.check().unwrap_err().field, "imsUserState");
        let mut p = profile();
        p.scscf_name = Some("scscf".into());
        assert_eq!(p.check().unwrap_err().field, "scscfName");
        let mut p = profile();
        p.public_identities.push("sip:alice@ims.example".into());
        assert!(p.check().is_err());
        assert!(ShProfile::default().check().is_err());
    }
}
