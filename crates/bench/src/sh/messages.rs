//! The Sh messages of the load (TS 29.329 §6.1): what an IMS application server (an MMTel AS)
//! sends for its users and what it answers to the UDR's notifications. The AVPs that do not
//! change between requests are encoded once ([`frozen`]) and shared by reference count; a
//! request costs its AVP list, Session-Id and User-Identity, and a PUR its User-Data document.

use std::fmt::Write as _;
use std::sync::LazyLock;

use bytes::Bytes;
use diameter::builders::{user_identity_public, vendor_specific_auth_app};
use diameter::dictionary::base;
use diameter::dictionary::sh::{self, data_reference as dr};
use diameter::{result_code as rc, Avp, Message, VENDOR_3GPP};

use crate::rx::messages::frozen;

/// The Service-Indication of the repository data an MMTel AS keeps at the HSS.
pub const SERVICE_INDICATION: &str = "mmtel";

/// Auth-Session-State NO_STATE_MAINTAINED: Sh keeps no Diameter session (TS 29.329 §6.1).
const NO_STATE_MAINTAINED: u32 = 1;
/// Subs-Req-Type SUBSCRIBE.
const SUBSCRIBE: u32 = 0;

/// Origin-Host and Origin-Realm of a simulated AS.
#[derive(Clone)]
pub struct Identity {
    pub host: String,
    pub realm: String,
    origin: [Avp; 2],
}

impl Identity {
    pub fn new(host: &str, realm: &str) -> Self {
        Self {
            host: host.into(),
            realm: realm.into(),
            origin: [
                frozen(base::ORIGIN_HOST.identity(host)),
                frozen(base::ORIGIN_REALM.identity(realm)),
            ],
        }
    }
}

/// The constant parts of every Sh message of the run.
pub struct ShMessages {
    app: Avp,
    no_state: Avp,
    /// Destination-Realm and Destination-Host: the UDR (an AS knows its HSS).
    destination: [Avp; 2],
    repository_data: Avp,
    ims_user_state: Avp,
    mmtel: Avp,
    subscribe: Avp,
    success: Avp,
}

impl ShMessages {
    pub fn new(udr_host: &str, udr_realm: &str) -> Self {
        Self {
            app: frozen(vendor_specific_auth_app(VENDOR_3GPP, sh::APP_ID)),
            no_state: frozen(base::AUTH_SESSION_STATE.enumerated(NO_STATE_MAINTAINED)),
            destination: [
                frozen(base::DESTINATION_REALM.identity(udr_realm)),
                frozen(base::DESTINATION_HOST.identity(udr_host)),
            ],
            repository_data: frozen(sh::DATA_REFERENCE.enumerated(dr::REPOSITORY_DATA)),
            ims_user_state: frozen(sh::DATA_REFERENCE.enumerated(dr::IMS_USER_STATE)),
            mmtel: frozen(sh::SERVICE_INDICATION.utf8(SERVICE_INDICATION)),
            subscribe: frozen(sh::SUBS_REQ_TYPE.enumerated(SUBSCRIBE)),
            success: frozen(base::RESULT_CODE.u32(rc::DIAMETER_SUCCESS)),
        }
    }

    fn request(&self, cmd: u32, sid: String, from: &Identity, user: &str) -> Message {
        let mut m = Message::request(sh::APP_ID, cmd);
        m.push(base::SESSION_ID.with_payload(Bytes::from(sid)));
        m.push(self.app.clone());
        m.push(self.no_state.clone());
        m.push(from.origin[0].clone());
        m.push(from.origin[1].clone());
        m.push(self.destination[1].clone());
        m.push(self.destination[0].clone());
        m.push(user_identity_public(user));
        m
    }

    /// UDR: the user's MMTel repository data and IMS user state (what an AS reads when the
    /// user's call reaches it).
    pub fn user_data(&self, from: &Identity, sid: String, user: &str) -> Message {
        let mut m = self.request(sh::CMD_USER_DATA, sid, from, user);
        m.push(self.mmtel.clone());
        m.push(self.repository_data.clone());
        m.push(self.ims_user_state.clone());
        m
    }

    /// PUR: new MMTel repository data with Sequence-Number `seq` (the stored one + 1).
    /// `variant` changes the forwarding target, so every update is a change.
    pub fn profile_update(
        &self,
        from: &Identity,
        sid: String,
        user: &str,
        seq: u16,
        variant: u64,
    ) -> Message {
        let mut m = self.request(sh::CMD_PROFILE_UPDATE, sid, from, user);
        m.push(self.repository_data.clone());
        m.push(sh::USER_DATA.bytes(pur_document(seq, variant).into_bytes()));
        m
    }

    /// SNR: subscribe to the user's MMTel repository data (a repeated SNR replaces the
    /// subscription at the UDR, so they stay one per user and AS).
    pub fn subscribe(&self, from: &Identity, sid: String, user: &str) -> Message {
        let mut m = self.request(sh::CMD_SUBSCRIBE_NOTIFICATIONS, sid, from, user);
        m.push(self.mmtel.clone());
        m.push(self.subscribe.clone());
        m.push(self.repository_data.clone());
        m
    }

    /// PNA 2001 to a PNR the UDR pushed.
    pub fn pna(&self, req: &Message, from: &Identity) -> Message {
        let mut a = Message::answer_to(req);
        a.push(self.app.clone());
        a.push(self.no_state.clone());
        a.push(from.origin[0].clone());
        a.push(from.origin[1].clone());
        a.push(self.success.clone());
        a
    }
}

/// The Sh-Data of a PUR: one RepositoryData of [`SERVICE_INDICATION`], built in one buffer.
pub fn pur_document(seq: u16, variant: u64) -> String {
    let mut s = String::with_capacity(SERVICE_DATA_LEN + 256);
    s.push_str(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Sh-Data><RepositoryData><ServiceIndication>",
    );
    s.push_str(SERVICE_INDICATION);
    s.push_str("</ServiceIndication><SequenceNumber>");
    let _ = write!(s, "{seq}");
    s.push_str("</SequenceNumber><ServiceData>");
    push_service_data(&mut s, variant);
    s.push_str("</ServiceData></RepositoryData></Sh-Data>");
    s
}

/// About 2 KB of MMTel supplementary service settings (ETSI TS 183 023 / 3GPP TS 24.623
/// simservs: identity presentation, call forwarding rules, barring, waiting), self-contained
/// XML (its namespaces declared in it), the repository data of one user. With the user's
/// identities and state the profile is about 2.2 KB, the reference's T3 profile size.
/// `variant` is the forwarding number (10 digits).
pub fn mmtel_service_data(variant: u64) -> String {
    let mut s = String::with_capacity(SERVICE_DATA_LEN);
    push_service_data(&mut s, variant);
    s
}

/// Length of [`mmtel_service_data`] (the same for every variant).
const SERVICE_DATA_LEN: usize = 2069;

/// The service data is text around four forwarding targets: written once, a request only
/// copies it and its number.
fn push_service_data(out: &mut String, variant: u64) {
    static PARTS: LazyLock<Vec<String>> = LazyLock::new(|| {
        let text = service_data_template();
        text.split(TARGET).map(str::to_owned).collect()
    });
    let number = variant % 10_000_000_000;
    for (i, part) in PARTS.iter().enumerate() {
        if i > 0 {
            let _ = write!(out, "tel:+33{number:010}");
        }
        out.push_str(part);
    }
}

/// Where the forwarding number goes in the template.
const TARGET: &str = "\u{0}";

fn service_data_template() -> String {
    let rule = |id: &str, cond: &str, active: bool| {
        format!(
            "<cp:rule id=\"{id}\"><cp:conditions>{cond}{}</cp:conditions><cp:actions><forward-to>\
             <target>{TARGET}</target><notify-caller>true</notify-caller>\
             <reveal-identity-to-caller>true</reveal-identity-to-caller></forward-to></cp:actions></cp:rule>",
            if active { "" } else { "<rule-deactivated/>" }
        )
    };
    let barring = |id: &str, cond: &str| {
        format!(
            "<cp:rule id=\"{id}\"><cp:conditions>{cond}<rule-deactivated/></cp:conditions>\
             <cp:actions><allow>false</allow></cp:actions></cp:rule>"
        )
    };
    format!(
        "<simservs xmlns=\"http://uri.etsi.org/ngn/params/xml/simservs/xcap\" \
         xmlns:cp=\"urn:ietf:params:xml:ns:common-policy\">\
         <originating-identity-presentation active=\"true\"/>\
         <originating-identity-presentation-restriction active=\"true\">\
         <default-behaviour>presentation-not-restricted</default-behaviour>\
         </originating-identity-presentation-restriction>\
         <terminating-identity-presentation active=\"true\"/>\
         <communication-waiting active=\"true\"/>\
         <communication-diversion active=\"true\"><NoReplyTimer>20</NoReplyTimer><cp:ruleset>\
         {}{}{}{}</cp:ruleset></communication-diversion>\
         <incoming-communication-barring active=\"false\"><cp:ruleset>{}</cp:ruleset>\
         </incoming-communication-barring>\
         <outgoing-communication-barring active=\"false\"><cp:ruleset>{}</cp:ruleset>\
         </outgoing-communication-barring></simservs>",
        rule("cfu", "", false),
        rule("cfb", "<busy/>", true),
        rule("cfnr", "<no-answer/>", true),
        rule("cfnrc", "<not-reachable/>", true),
        barring("icb-roaming", "<roaming/>"),
        barring("ocb-international", "<international/>"),
    )
}

/// The outcome label of an Sh answer: the result code (Result-Code or Experimental-Result-Code).
pub fn outcome_label(code: Option<u32>) -> std::borrow::Cow<'static, str> {
    use std::borrow::Cow;
    Cow::Borrowed(match code {
        Some(2001) => "2001",
        Some(5001) => "5001",
        Some(5012) => "5012",
        Some(5105) => "5105",
        Some(5106) => "5106",
        Some(c) => return Cow::Owned(c.to_string()),
        None => "no result code",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use diameter::validate;

    /// Every message the simulators send passes our own validator (the UDR validates them
    /// too) and survives the wire; the PUR's document is Sh-Data the UDR parses.
    #[test]
    fn requests_and_answers_are_valid_sh() {
        let m = ShMessages::new("udr.fivecore.local", "fivecore.local");
        let as1 = Identity::new("as1.ims.fivecore.local", "ims.fivecore.local");
        let user = "sip:+330000000007@ims.fivecore.local";
        let reqs = [
            m.user_data(&as1, "as1;1;1".into(), user),
            m.profile_update(&as1, "as1;1;2".into(), user, 1, 7),
            m.subscribe(&as1, "as1;1;3".into(), user),
        ];
        for r in &reqs {
            let wire = r.clone().ids(1, 2).to_bytes().unwrap();
            let back = Message::decode(wire).unwrap();
            validate(&back).unwrap_or_else(|e| panic!("{}: {e}", r.command_code()));
            assert_eq!(back.user_public_identity().as_deref(), Some(user));
            assert_eq!(back.destination_host(), Some("udr.fivecore.local"));
            let ans = Message::decode(m.pna(&back, &as1).to_bytes().unwrap()).unwrap();
            assert_eq!(ans.any_result_code(), Some(2001));
        }
        assert_eq!(reqs[0].data_references(), [dr::REPOSITORY_DATA, dr::IMS_USER_STATE]);
        assert_eq!(reqs[2].subs_req_type(), Some(SUBSCRIBE));
        let doc = String::from_utf8(reqs[1].user_data().unwrap().to_vec()).unwrap();
        // Sh-Data (TS 29.328 Annex D) with one RepositoryData: well-formed, in the schema's
        // order; the smoke runs check that a real UDR takes every PUR.
        let elements = crate::xml_check::elements(&doc).expect("well-formed Sh-Data");
        let shape: Vec<(usize, &str)> =
            elements.iter().take(5).map(|e| (e.depth, e.name.as_str())).collect();
        assert_eq!(
            shape,
            [
                (0, "Sh-Data"),
                (1, "RepositoryData"),
                (2, "ServiceIndication"),
                (2, "SequenceNumber"),
                (2, "ServiceData")
            ]
        );
        assert_eq!(elements.iter().filter(|e| e.depth == 1).count(), 1);
        assert!(doc.contains("<SequenceNumber>1</SequenceNumber>"));
        // A PNR as the UDR sends it is answered 2001 with the AS as origin, valid as a PNA.
        let pnr = Message::request(sh::APP_ID, sh::CMD_PUSH_NOTIFICATION)
            .session_id_avp("udr;1;1")
            .avp(vendor_specific_auth_app(VENDOR_3GPP, sh::APP_ID))
            .avp(base::AUTH_SESSION_STATE.enumerated(1))
            .origin("udr.fivecore.local", "fivecore.local")
            .destination("ims.fivecore.local", Some("as1.ims.fivecore.local"))
            .avp(user_identity_public(user))
            .avp(sh::USER_DATA.bytes(doc.into_bytes()));
        let pna = Message::decode(m.pna(&pnr, &as1).ids(3, 4).to_bytes().unwrap()).unwrap();
        validate(&pna).unwrap();
        assert_eq!(pna.origin_host(), Some("as1.ims.fivecore.local"));
    }

    #[test]
    fn service_data_is_about_two_kilobytes_of_self_contained_xml_that_changes() {
        let a = mmtel_service_data(1);
        assert!((1900..2200).contains(&a.len()), "{} bytes", a.len());
        assert_eq!(crate::xml_check::elements(&a).unwrap()[0].name, "simservs");
        assert_ne!(a, mmtel_service_data(2));
        assert_eq!(a.len(), mmtel_service_data(9_999_999_999).len(), "fixed size");
        assert_eq!(a.len(), SERVICE_DATA_LEN);
        assert!(a.contains("<target>tel:+330000000001</target>"), "{a}");
    }
}
