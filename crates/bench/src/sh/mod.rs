//! Diameter Sh application servers (`as_sh` simulators, TS 29.328 / TS 29.329): IMS ASs on
//! our own Diameter stack, connected to the UDR's Sh port, sending the reference T3 mix of
//! User-Data (UDR), Profile-Update (PUR) and Subscribe-Notifications (SNR) requests for the
//! preloaded Sh users, and answering the Push-Notifications (PNR) the UDR sends them.
//!
//! * User `i` (of the `{supi}` range: the preloaded Sh profiles but the SOAP ones) is named by
//!   its Public-Identity `sip:+<MSISDN>@ims.fivecore.local` (`crate::udr::UdrPlan::sh_user`).
//! * Every user has a home AS (`i mod n`): UDR and SNR come from it. A PUR comes from the next
//!   AS (`i + 1 mod n`), as when a second service changes data the first one watches, so the
//!   UDR notifies the home AS of every update of a user it subscribed to; the PNRs are counted
//!   per AS in the report.
//! * PUR carries the user's next Sequence-Number, kept here ([`users`]): a user is lent to one
//!   PUR at a time, so PURs are valid and a 5105 is a real failure.

pub mod messages;
pub mod peer;
pub mod users;

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use diameter::{DiameterNode, Message};
use serde::Serialize;

use crate::rx::error_label;
use crate::scenario::{Scenario, ShOp, SimKind};
use crate::sched::Rng;
use crate::udr::UdrPlan;
use messages::{outcome_label, ShMessages};
use peer::{AsReport, ShPeer};
use users::{Lent, UserPool};

/// Forwarding numbers a PUR picks from (10 digits).
const VARIANTS: u64 = 10_000_000_000;

/// What the Sh simulators saw, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct ShReport {
    pub peers: Vec<AsReport>,
    /// Sh users the requests name.
    pub users: u64,
    /// Users no longer updated because a PUR of theirs got no answer (its Sequence-Number is
    /// then unknown) or was answered out of sync.
    pub pur_users_lost: u64,
}

/// The application servers, connected to the UDR.
pub struct ShSims {
    ases: Vec<ShPeer>,
    msgs: Arc<ShMessages>,
    udr_host: String,
    plan: UdrPlan,
    users: u64,
    pur_users: UserPool,
}

impl ShSims {
    /// Whether the scenario has Sh application servers.
    pub fn wanted(s: &Scenario) -> bool {
        s.simulators.iter().any(|x| x.kind == SimKind::AsSh)
    }

    /// Connects every `as_sh` simulator to the UDR's Sh port at `addr`.
    pub async fn start(s: &Scenario, addr: SocketAddr, plan: &UdrPlan) -> Result<ShSims> {
        let d = s.diameter.as_ref().context("the Sh simulators need the [diameter] section")?;
        let users = plan.drawn();
        if users == 0 || users > u64::from(u32::MAX) {
            bail!("Sh users: {users} (1 to {} supported)", u32::MAX);
        }
        let msgs = Arc::new(ShMessages::new(&d.origin_host, &d.origin_realm));
        let mut ases = Vec::new();
        for sim in s.simulators.iter().filter(|x| x.kind == SimKind::AsSh) {
            ases.push(ShPeer::start(sim, d, addr, msgs.clone()).await?);
        }
        if ases.is_empty() {
            bail!("the scenario has no as_sh simulator");
        }
        Ok(ShSims {
            ases,
            msgs,
            udr_host: d.origin_host.clone(),
            plan: plan.clone(),
            users,
            pur_users: UserPool::preloaded(users as u32),
        })
    }

    /// DPR to the UDR from every AS.
    pub async fn shutdown(&self) {
        for p in &self.ases {
            p.node.shutdown().await;
        }
    }

    pub fn report(&self) -> ShReport {
        ShReport {
            peers: self.ases.iter().map(ShPeer::report).collect(),
            users: self.users,
            pur_users_lost: self.pur_users.lost(),
        }
    }

    /// The request of `op` due now, or `None` for a PUR when every user is being updated
    /// (the request is then skipped, not failed).
    pub fn prepare(&self, op: ShOp, rng: &mut Rng) -> Option<ShCall> {
        let n = self.ases.len() as u64;
        let (user, lent) = match op {
            ShOp::UserData | ShOp::Subscribe => (rng.below(self.users), None),
            ShOp::ProfileUpdate => {
                let l = self.pur_users.take()?;
                (u64::from(l.user), Some(l))
            }
        };
        let from = match op {
            ShOp::ProfileUpdate => &self.ases[((user + 1) % n) as usize],
            _ => &self.ases[(user % n) as usize],
        };
        let sid = from.node.new_session_id();
        let identity = self.plan.sh_user(user);
        let msg = match (op, lent) {
            (ShOp::UserData, _) => self.msgs.user_data(&from.id, sid, &identity),
            (ShOp::Subscribe, _) => self.msgs.subscribe(&from.id, sid, &identity),
            (ShOp::ProfileUpdate, Some(l)) => {
                self.msgs.profile_update(&from.id, sid, &identity, l.seq, rng.below(VARIANTS))
            }
            (ShOp::ProfileUpdate, None) => unreachable!("a PUR always has its user"),
        };
        Some(ShCall { node: from.node.clone(), msg, lent })
    }
}

/// One Sh request, ready to go.
pub struct ShCall {
    node: DiameterNode,
    msg: Message,
    /// The user a PUR updates.
    lent: Option<Lent>,
}

impl ShCall {
    /// Sends the request and waits for its answer: success when its result code is expected
    /// and it comes from the UDR. Keeps the PUR user's Sequence-Number.
    pub async fn send(self, sims: &ShSims, expect: &[u32]) -> (bool, Cow<'static, str>) {
        let ShCall { node, msg, lent } = self;
        match node.request(msg).await {
            Ok(a) => {
                let (ok, code, label) = judge(&a, expect, &sims.udr_host);
                if let Some(l) = lent {
                    let out_of_sync = code
                        == Some(diameter::dictionary::sh::experimental_result::DIAMETER_ERROR_TRANSPARENT_DATA_OUT_OF_SYNC);
                    match (ok, out_of_sync) {
                        (true, _) => sims.pur_users.updated(l),
                        (false, true) => sims.pur_users.lose(),
                        // Refused: nothing of it was written.
                        (false, false) => sims.pur_users.unchanged(l),
                    }
                }
                (ok, label)
            }
            Err(e) => {
                if lent.is_some() {
                    sims.pur_users.lose();
                }
                (false, Cow::Borrowed(error_label(&e)))
            }
        }
    }
}

/// Success: an expected result code from the UDR itself.
fn judge(a: &Message, expect: &[u32], udr_host: &str) -> (bool, Option<u32>, Cow<'static, str>) {
    let code = a.any_result_code();
    let expected = code.is_some_and(|c| expect.contains(&c));
    let from_udr = a.origin_host().is_some_and(|h| h.eq_ignore_ascii_case(udr_host));
    if expected && !from_udr {
        return (false, code, Cow::Borrowed("expected result from the wrong host"));
    }
    (expected, code, outcome_label(code))
}

#[cfg(test)]
mod tests {
    use super::*;
    use diameter::builders::experimental_result;
    use diameter::dictionary::sh::{self, experimental_result as er};

    #[test]
    fn only_the_expected_result_from_the_udr_counts() {
        let m = ShMessages::new("udr.x", "x");
        let as1 = messages::Identity::new("as1.ims.x", "ims.x");
        let req = m.user_data(&as1, "as1;1".into(), "sip:+33@ims.x");
        let ok = Message::answer_to(&req).origin("udr.x", "x").result_code_avp(2001);
        assert_eq!(judge(&ok, &[2001], "udr.x"), (true, Some(2001), "2001".into()));
        let other = Message::answer_to(&req).origin("dra.x", "x").result_code_avp(2001);
        assert!(!judge(&other, &[2001], "udr.x").0);
        let unknown = Message::answer_to(&req)
            .origin("udr.x", "x")
            .avp(experimental_result(diameter::VENDOR_3GPP, er::DIAMETER_ERROR_USER_UNKNOWN));
        assert_eq!(judge(&unknown, &[2001], "udr.x"), (false, Some(5001), "5001".into()));
        assert_eq!(sh::CMD_USER_DATA, req.command_code());
    }
}
