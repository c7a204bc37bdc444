//! The Rx messages of the load (TS 29.214 §5.6): what a P-CSCF sends for an IMS voice session
//! and what a PCF answers. Every AVP that does not change between requests is encoded once
//! ([`frozen`]) and shared by reference count, so building a request costs a handful of small
//! allocations (the AVP list, Session-Id, the UE's address and flows), not a tree of them.

use std::net::Ipv4Addr;

use bytes::{Bytes, BytesMut};
use diameter::avp::AvpIter;
use diameter::builders::subscription_id;
use diameter::dictionary::dcca::subscription_id_type;
use diameter::dictionary::{base, nasreq, rx};
use diameter::{result_code as rc, Avp, Message};

/// The address the AF's media flows use (TEST-NET-1).
const AF_MEDIA: &str = "192.0.2.10";

/// A grouped (or any) AVP encoded once: clones share its bytes.
pub fn frozen(a: Avp) -> Avp {
    let mut buf = BytesMut::with_capacity(a.encoded_len());
    a.encode(&mut buf).expect("a static AVP encodes");
    AvpIter::new(buf.freeze()).next().expect("one AVP").expect("decodes")
}

/// Origin-Host / Origin-Realm of a simulator and, for requests toward it, Destination-Host /
/// Destination-Realm.
#[derive(Clone)]
pub struct Identity {
    pub host: String,
    pub realm: String,
    origin: [Avp; 2],
    destination: [Avp; 2],
}

impl Identity {
    pub fn new(host: &str, realm: &str) -> Self {
        Self {
            host: host.into(),
            realm: realm.into(),
            origin: [base::ORIGIN_HOST.identity(host), base::ORIGIN_REALM.identity(realm)],
            destination: [
                base::DESTINATION_HOST.identity(host),
                base::DESTINATION_REALM.identity(realm),
            ],
        }
    }

    /// Origin-Host and Origin-Realm, encoded once.
    pub fn origin_avps(&self) -> &[Avp; 2] {
        &self.origin
    }
}

/// The constant parts of every Rx message of the run.
pub struct RxMessages {
    auth_app: Avp,
    /// Destination-Realm of the AF's requests: the NF's realm (no Destination-Host: the NF
    /// finds the PCF).
    nf_realm: Avp,
    af_app: Avp,
    service_final: Avp,
    request_initial: Avp,
    request_update: Avp,
    /// Loss and release of bearer, successful resource allocation: what a P-CSCF subscribes to.
    specific_actions: [Avp; 3],
    /// The modified media of an AAR update (codec change: new bandwidth, flows kept).
    media_update: Avp,
    logout: Avp,
    rar_action: Avp,
    reauth_authorize_only: Avp,
    success: Avp,
}

impl RxMessages {
    pub fn new(nf_realm: &str) -> Self {
        let media_update = rx::MEDIA_COMPONENT_DESCRIPTION.grouped(vec![
            rx::MEDIA_COMPONENT_NUMBER.u32(1),
            rx::MEDIA_TYPE.enumerated(0),
            rx::MAX_REQUESTED_BANDWIDTH_UL.u32(41_000),
            rx::MAX_REQUESTED_BANDWIDTH_DL.u32(41_000),
            rx::FLOW_STATUS.enumerated(2),
            rx::RR_BANDWIDTH.u32(600),
            rx::RS_BANDWIDTH.u32(800),
        ]);
        Self {
            auth_app: frozen(base::AUTH_APPLICATION_ID.u32(rx::APP_ID)),
            nf_realm: frozen(base::DESTINATION_REALM.identity(nf_realm)),
            af_app: frozen(
                rx::AF_APPLICATION_IDENTIFIER.bytes(Bytes::from_static(b"IMS Services")),
            ),
            service_final: frozen(rx::SERVICE_INFO_STATUS.enumerated(0)),
            request_initial: frozen(rx::RX_REQUEST_TYPE.enumerated(0)),
            request_update: frozen(rx::RX_REQUEST_TYPE.enumerated(1)),
            specific_actions: [
                rx::specific_action::INDICATION_OF_LOSS_OF_BEARER,
                rx::specific_action::INDICATION_OF_RELEASE_OF_BEARER,
                rx::specific_action::INDICATION_OF_SUCCESSFUL_RESOURCES_ALLOCATION,
            ]
            .map(|a| frozen(rx::SPECIFIC_ACTION.enumerated(a))),
            media_update: frozen(media_update),
            logout: frozen(base::TERMINATION_CAUSE.enumerated(1)),
            rar_action: frozen(
                rx::SPECIFIC_ACTION
                    .enumerated(rx::specific_action::INDICATION_OF_SUCCESSFUL_RESOURCES_ALLOCATION),
            ),
            reauth_authorize_only: frozen(base::RE_AUTH_REQUEST_TYPE.enumerated(0)),
            success: frozen(base::RESULT_CODE.u32(rc::DIAMETER_SUCCESS)),
        }
    }

    fn request(&self, cmd: u32, sid: &Bytes, from: &Identity) -> Message {
        let mut m = Message::request(rx::APP_ID, cmd);
        m.push(base::SESSION_ID.with_payload(sid.clone()));
        m.push(self.auth_app.clone());
        m.push(from.origin[0].clone());
        m.push(from.origin[1].clone());
        m
    }

    /// AAR opening a session for the UE at `ue` (Framed-IP-Address), with one audio
    /// component (RTP and RTCP flows) and the subscriber's E.164 number.
    pub fn aar_initial(&self, af: &Identity, sid: &Bytes, ue: Ipv4Addr, msisdn: &str) -> Message {
        let mut m = self.request(rx::CMD_AA, sid, af);
        m.push(self.nf_realm.clone());
        m.push(self.af_app.clone());
        m.push(rx::MEDIA_COMPONENT_DESCRIPTION.grouped(vec![
                rx::MEDIA_COMPONENT_NUMBER.u32(1),
                rx::MEDIA_SUB_COMPONENT.grouped(vec![
                    rx::FLOW_NUMBER.u32(1),
                    rx::FLOW_DESCRIPTION
                        .utf8(&format!("permit out 17 from {AF_MEDIA} 30000 to {ue} 49152")),
                    // The uplink flow: TS 29.214 §5.4 lets a Flow-Description say only "permit
                    // out", the direction given by source and destination (the UE first).
                    rx::FLOW_DESCRIPTION
                        .utf8(&format!("permit out 17 from {ue} 49152 to {AF_MEDIA} 30000")),
                ]),
                rx::MEDIA_SUB_COMPONENT
                    .grouped(vec![rx::FLOW_NUMBER.u32(2), rx::FLOW_USAGE.enumerated(1)]),
                rx::MEDIA_TYPE.enumerated(0),
                rx::MAX_REQUESTED_BANDWIDTH_UL.u32(64_000),
                rx::MAX_REQUESTED_BANDWIDTH_DL.u32(64_000),
                rx::FLOW_STATUS.enumerated(2),
            ]));
        m.push(self.service_final.clone());
        m.avps.extend_from_slice(&self.specific_actions);
        m.push(subscription_id(subscription_id_type::END_USER_E164, msisdn));
        m.push(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(ue));
        m.push(self.request_initial.clone());
        m
    }

    /// AAR modifying an open session: same Session-Id, new bandwidth; no UE address (the
    /// session already names its PCF).
    pub fn aar_update(&self, af: &Identity, sid: &Bytes) -> Message {
        let mut m = self.request(rx::CMD_AA, sid, af);
        m.push(self.nf_realm.clone());
        m.push(self.af_app.clone());
        m.push(self.media_update.clone());
        m.push(self.service_final.clone());
        m.push(self.request_update.clone());
        m
    }

    /// STR ending a session (Termination-Cause DIAMETER_LOGOUT).
    pub fn str_request(&self, af: &Identity, sid: &Bytes) -> Message {
        let mut m = self.request(rx::CMD_SESSION_TERMINATION, sid, af);
        m.push(self.nf_realm.clone());
        m.push(self.logout.clone());
        m
    }

    /// RAR from the PCF serving the session to the AF that opened it (Destination-Host: the
    /// AF), reporting successful resource allocation.
    pub fn rar(&self, pcf: &Identity, sid: &Bytes, af: &Identity) -> Message {
        let mut m = self.request(rx::CMD_RE_AUTH, sid, pcf);
        m.push(af.destination[1].clone());
        m.push(af.destination[0].clone());
        m.push(self.reauth_authorize_only.clone());
        m.push(self.rar_action.clone());
        m
    }

    /// The success answer of a simulator (AAA, STA, RAA): Session-Id echoed, its origin,
    /// Result-Code 2001; Auth-Application-Id only where the answer's grammar has it (AAA).
    pub fn success(&self, req: &Message, from: &Identity) -> Message {
        let mut a = Message::answer_to(req);
        if req.command_code() == rx::CMD_AA {
            a.push(self.auth_app.clone());
        }
        a.push(from.origin[0].clone());
        a.push(from.origin[1].clone());
        a.push(self.success.clone());
        a
    }
}

/// The outcome label of a result code, without allocating for the usual ones.
pub fn outcome_label(code: Option<u32>) -> std::borrow::Cow<'static, str> {
    use std::borrow::Cow;
    Cow::Borrowed(match code {
        Some(2001) => "2001",
        Some(3002) => "3002",
        Some(3004) => "3004",
        Some(5002) => "5002",
        Some(5012) => "5012",
        Some(5065) => "5065",
        Some(c) => return Cow::Owned(c.to_string()),
        None => "no result code",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use diameter::validate;

    /// Every message the simulators send passes our own validator (the NF validates them too)
    /// and survives the wire.
    #[test]
    fn requests_and_answers_are_valid_rx() {
        let m = RxMessages::new("fivecore.local");
        let af = Identity::new("pcscf1.ims.fivecore.local", "ims.fivecore.local");
        let pcf = Identity::new("pcf1.pcf.fivecore.local", "pcf.fivecore.local");
        let sid = Bytes::from_static(b"pcscf1.ims.fivecore.local;1;2");
        let ue = Ipv4Addr::new(10, 0, 0, 9);
        let reqs = [
            m.aar_initial(&af, &sid, ue, "330000000009"),
            m.aar_update(&af, &sid),
            m.str_request(&af, &sid),
            m.rar(&pcf, &sid, &af),
        ];
        for r in &reqs {
            let wire = r.clone().ids(1, 2).to_bytes().unwrap();
            let back = Message::decode(wire).unwrap();
            validate(&back).unwrap_or_else(|e| panic!("{}: {e}", r.command_code()));
            assert_eq!(back.session_id(), Some("pcscf1.ims.fivecore.local;1;2"));
            let ans = m.success(&back, &pcf);
            let ans = Message::decode(ans.to_bytes().unwrap()).unwrap();
            validate(&ans).unwrap_or_else(|e| panic!("answer to {}: {e}", r.command_code()));
            assert_eq!(ans.any_result_code(), Some(2001));
        }
        let aar = &reqs[0];
        assert_eq!(aar.framed_ip_address(), Some(ue));
        assert_eq!(aar.destination_realm(), Some("fivecore.local"));
        assert_eq!(aar.destination_host(), None, "the NF finds the PCF");
        assert_eq!(aar.rx_request_type(), Some(0));
        assert_eq!(reqs[1].rx_request_type(), Some(1));
        assert_eq!(reqs[1].framed_ip_address(), None);
        assert_eq!(reqs[2].termination_cause(), Some(1));
        assert_eq!(reqs[3].destination_host(), Some("pcscf1.ims.fivecore.local"));
        assert_eq!(reqs[3].origin_host(), Some("pcf1.pcf.fivecore.local"));
        assert_eq!(outcome_label(Some(5065)), "5065");
        assert_eq!(outcome_label(Some(4001)), "4001");
    }
}
