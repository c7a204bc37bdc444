//! The Gx messages of the load (TS 29.212 §5.6): what a P-GW (PCEF) sends for an IP-CAN
//! session and what it answers the PCRF. The shape is Open5GS's SMF/PGW (`src/smf/gx-path.c`,
//! v2.7/2.8): CCR-I and CCR-U carry Supported-Features, Network-Request-Support, the UE's
//! address, IP-CAN-Type, RAT-Type, APN-AMBR, the default bearer's QoS, 3GPP-User-Location-Info,
//! 3GPP-MS-TimeZone, 3GPP-SGSN-MCC-MNC, AN-GW-Address, Called-Station-Id, Online/Offline and the
//! charging address and identifier; CCR-T the subscriber and the APN. Two things are added to
//! it: the subscriber's MSISDN (Subscription-Id END_USER_E164, which Open5GS leaves out but
//! PGWs of operators send) and Termination-Cause in CCR-T.
//!
//! Speed: the kit must offer at least 20,000 CCR/s from one core. Every AVP that does not
//! change between requests is encoded once ([`frozen`]) and cloned by reference count; the
//! per-subscriber AVPs (Subscription-Ids, 3GPP-User-Location-Info) are short templates whose
//! digits are overwritten in a stack buffer, inline in the AVP (no allocation): no dictionary
//! lookup and no grouped AVP is built per request.

use std::net::{IpAddr, Ipv4Addr};

use bytes::Bytes;
use diameter::builders::{subscription_id, supported_features};
use diameter::dictionary::dcca::subscription_id_type;
use diameter::dictionary::{base, dcca, gx, nasreq, rx};
use diameter::{result_code as rc, Avp, Message};

pub use crate::rx::messages::{frozen, Identity};

/// Event-Trigger SUCCESSFUL_RESOURCE_ALLOCATION: armed by the PCRF when an AF asked to hear of
/// the allocation; the PCEF then reports its installed rules (TS 29.212 §4.5.12).
pub const SUCCESSFUL_RESOURCE_ALLOCATION: u32 = gx::event_trigger::SUCCESSFUL_RESOURCE_ALLOCATION;

/// What a CCR-U reports (TS 29.212 §4.5.2): the Event-Trigger the PGW saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateEvent {
    /// The UE moved to another cell: RAT_CHANGE's sibling in Open5GS, with a new ECGI.
    UserLocationChange,
    /// The UE moved between E-UTRAN and UTRAN (even and odd CC-Request-Numbers).
    RatChange,
}

/// Usage-Monitoring-Information of a CCR-U (TS 29.212 §4.5.17, §5.3.60): the octets used
/// under one Monitoring-Key since the last report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageReport {
    pub monitoring_key: String,
    pub input_octets: u64,
    pub output_octets: u64,
}

/// What a CCR-U reports: the event, the rules installed since the last report, the usage.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reported<'a> {
    pub event: Option<UpdateEvent>,
    pub installed: &'a [Bytes],
    pub usage: Option<&'a UsageReport>,
}

/// One IP-CAN session's per-request values.
#[derive(Debug, Clone, Copy)]
pub struct SessionFacts {
    /// The subscriber's MSIN (10 digits): IMSI = prefix + MSIN, MSISDN = its prefix + MSIN.
    pub msin: u64,
    pub ue: Ipv4Addr,
    /// Access-Network-Charging-Identifier-Value (the bearer's charging id).
    pub charging_id: u32,
    /// The E-UTRAN cell (28-bit ECI) the UE is in.
    pub cell: u32,
}

/// A short AVP payload written once with digits to overwrite per request.
#[derive(Clone, Copy)]
struct Template {
    code: u32,
    vendor: Option<u32>,
    mandatory: bool,
    len: usize,
    buf: [u8; diameter::avp::INLINE_MAX],
    /// Where the 10 MSIN digits go (Subscription-Id) or the ECI (ULI).
    at: usize,
}

impl Template {
    /// AVP `a` (grouped or not) as its payload bytes, to be patched from byte `at` on.
    fn of(a: &Avp, at: usize) -> Template {
        let payload = a.payload();
        assert!(payload.len() <= diameter::avp::INLINE_MAX, "a template fits inline");
        let mut buf = [0; diameter::avp::INLINE_MAX];
        buf[..payload.len()].copy_from_slice(&payload);
        Template {
            code: a.code(),
            vendor: a.vendor_id(),
            mandatory: a.is_mandatory(),
            len: payload.len(),
            buf,
            at,
        }
    }

    fn avp(&self, patch: impl FnOnce(&mut [u8])) -> Avp {
        let mut buf = self.buf;
        patch(&mut buf[self.at..self.len]);
        Avp::from_slice(self.code, self.vendor, self.mandatory, &buf[..self.len])
    }
}

/// Writes `v` as the first `out.len()` decimal digits, zero padded (`out.len()` ≤ 20).
fn put_digits(out: &mut [u8], mut v: u64) {
    for d in out.iter_mut().rev() {
        *d = b'0' + (v % 10) as u8;
        v /= 10;
    }
}

/// Where the text of a Subscription-Id's data starts in its payload: after the 12-byte
/// Subscription-Id-Type and the 8-byte header of Subscription-Id-Data.
const SUBSCRIPTION_DATA_AT: usize = 12 + 8;

/// The constant parts of every Gx message of the run.
pub struct GxMessages {
    auth_app: Avp,
    /// Destination-Realm of every CCR: the PCRF's realm (no Destination-Host: the first CCR of
    /// a session goes to whichever PCRF the realm routes to).
    nf_realm: Avp,
    request_type: [Avp; 3],
    imsi: Template,
    msisdn: Template,
    uli: Template,
    supported_features: Avp,
    network_request_support: Avp,
    ip_can_type: Avp,
    rat_eutran: Avp,
    rat_utran: Avp,
    apn_ambr: Avp,
    default_bearer_qos: Avp,
    ms_timezone: Avp,
    sgsn_mcc_mnc: Avp,
    an_gw_address: Avp,
    apn: Avp,
    online: Avp,
    offline: Avp,
    charging_address: Avp,
    location_change: Avp,
    rat_change: Avp,
    usage_report: Avp,
    resource_allocated: Avp,
    rule_active: Avp,
    logout: Avp,
    success: Avp,
}

/// TS 29.061 §16.4.7.2 type 130 (TAI and ECGI) in PLMN 001-01, TAC 0x0001; the ECI follows.
const ULI_TAI_ECGI: [u8; 13] = [130, 0x00, 0xf1, 0x10, 0x00, 0x01, 0x00, 0xf1, 0x10, 0, 0, 0, 0];

impl GxMessages {
    /// `supi_prefix` / `gpsi_prefix`: the digits before the MSIN of the IMSI and the MSISDN;
    /// `apn`: Called-Station-Id.
    pub fn new(nf_realm: &str, supi_prefix: &str, gpsi_prefix: &str, apn: &str) -> Self {
        let digits = |prefix: &str| format!("{prefix}0000000000");
        let imsi = subscription_id(subscription_id_type::END_USER_IMSI, &digits(supi_prefix));
        let msisdn = subscription_id(subscription_id_type::END_USER_E164, &digits(gpsi_prefix));
        let uli = gx::TGPP_USER_LOCATION_INFO.bytes(Bytes::from_static(&ULI_TAI_ECGI));
        Self {
            auth_app: frozen(base::AUTH_APPLICATION_ID.u32(gx::APP_ID)),
            nf_realm: frozen(base::DESTINATION_REALM.identity(nf_realm)),
            request_type: [1, 2, 3].map(|t| frozen(dcca::CC_REQUEST_TYPE.enumerated(t))),
            imsi: Template::of(&imsi, SUBSCRIPTION_DATA_AT + supi_prefix.len()),
            msisdn: Template::of(&msisdn, SUBSCRIPTION_DATA_AT + gpsi_prefix.len()),
            uli: Template::of(&uli, 9),
            // Open5GS's list 1, features 0x0b (Rel8, Rel9, ProvAFsignalFlow).
            supported_features: frozen(supported_features(1, 0x0b)),
            network_request_support: frozen(gx::NETWORK_REQUEST_SUPPORT.enumerated(1)),
            ip_can_type: frozen(gx::IP_CAN_TYPE.enumerated(gx::ip_can_type::TGPP_EPS)),
            rat_eutran: frozen(gx::RAT_TYPE.enumerated(gx::rat_type::EUTRAN)),
            rat_utran: frozen(gx::RAT_TYPE.enumerated(gx::rat_type::UTRAN)),
            apn_ambr: frozen(gx::QOS_INFORMATION.grouped(vec![
                gx::APN_AGGREGATE_MAX_BITRATE_UL.u32(1_000_000_000),
                gx::APN_AGGREGATE_MAX_BITRATE_DL.u32(2_000_000_000),
            ])),
            default_bearer_qos: frozen(gx::DEFAULT_EPS_BEARER_QOS.grouped(vec![
                gx::QOS_CLASS_IDENTIFIER.enumerated(if apn == "ims" { 5 } else { 9 }),
                gx::ALLOCATION_RETENTION_PRIORITY.grouped(vec![
                    gx::PRIORITY_LEVEL.u32(8),
                    gx::PRE_EMPTION_CAPABILITY.enumerated(1),
                    gx::PRE_EMPTION_VULNERABILITY.enumerated(1),
                ]),
            ])),
            // UTC+1, no daylight saving adjustment (TS 29.061 §16.4.7.2 23).
            ms_timezone: frozen(gx::TGPP_MS_TIMEZONE.bytes(Bytes::from_static(&[0x40, 0x00]))),
            sgsn_mcc_mnc: frozen(gx::TGPP_SGSN_MCC_MNC.utf8("00101")),
            an_gw_address: frozen(
                gx::AN_GW_ADDRESS.address(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 20))),
            ),
            apn: frozen(nasreq::CALLED_STATION_ID.utf8(apn)),
            online: frozen(gx::ONLINE.enumerated(0)),
            offline: frozen(gx::OFFLINE.enumerated(1)),
            charging_address: frozen(
                rx::ACCESS_NETWORK_CHARGING_ADDRESS
                    .address(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 21))),
            ),
            location_change: frozen(
                gx::EVENT_TRIGGER.enumerated(gx::event_trigger::USER_LOCATION_CHANGE),
            ),
            rat_change: frozen(gx::EVENT_TRIGGER.enumerated(gx::event_trigger::RAT_CHANGE)),
            usage_report: frozen(gx::EVENT_TRIGGER.enumerated(gx::event_trigger::USAGE_REPORT)),
            resource_allocated: frozen(
                gx::EVENT_TRIGGER.enumerated(SUCCESSFUL_RESOURCE_ALLOCATION),
            ),
            rule_active: frozen(gx::PCC_RULE_STATUS.enumerated(0)),
            logout: frozen(base::TERMINATION_CAUSE.enumerated(1)),
            success: frozen(base::RESULT_CODE.u32(rc::DIAMETER_SUCCESS)),
        }
    }

    /// The header AVPs every CCR starts with (TS 29.212 §5.6.2's order).
    fn ccr(
        &self,
        from: &Identity,
        sid: &Bytes,
        kind: usize,
        number: u32,
        f: &SessionFacts,
    ) -> Message {
        let mut m = Message::request(gx::APP_ID, gx::CMD_CREDIT_CONTROL);
        m.avps.reserve(28);
        m.push(base::SESSION_ID.with_payload(sid.clone()));
        m.push(self.auth_app.clone());
        m.avps.extend_from_slice(from.origin_avps());
        m.push(self.nf_realm.clone());
        m.push(self.request_type[kind - 1].clone());
        m.push(dcca::CC_REQUEST_NUMBER.u32(number));
        m.push(self.imsi.avp(|d| put_digits(&mut d[..10], f.msin)));
        m
    }

    /// The IP-CAN session's attributes, as Open5GS puts them in every CCR-I and CCR-U.
    fn session_avps(&self, m: &mut Message, f: &SessionFacts, rat_utran: bool) {
        m.push(self.msisdn.avp(|d| put_digits(&mut d[..10], f.msin)));
        m.push(self.supported_features.clone());
        m.push(self.network_request_support.clone());
        m.push(nasreq::FRAMED_IP_ADDRESS.ipv4_octets(f.ue));
        m.push(self.ip_can_type.clone());
        m.push(if rat_utran { self.rat_utran.clone() } else { self.rat_eutran.clone() });
        m.push(self.apn_ambr.clone());
        m.push(self.default_bearer_qos.clone());
        m.push(self.uli.avp(|d| d[..4].copy_from_slice(&(f.cell & 0x0fff_ffff).to_be_bytes())));
        m.push(self.ms_timezone.clone());
        m.push(self.sgsn_mcc_mnc.clone());
        m.push(self.an_gw_address.clone());
        m.push(self.apn.clone());
        m.push(self.online.clone());
        m.push(self.offline.clone());
        m.push(self.charging_address.clone());
        m.push(
            rx::ACCESS_NETWORK_CHARGING_IDENTIFIER_VALUE.with_slice(&f.charging_id.to_be_bytes()),
        );
        let value = m.avps.pop().expect("just pushed");
        m.push(gx::ACCESS_NETWORK_CHARGING_IDENTIFIER_GX.grouped(vec![value]));
    }

    /// CCR-I (TS 29.212 §4.5.1): a new IP-CAN session, CC-Request-Number 0.
    pub fn ccr_initial(&self, pcef: &Identity, sid: &Bytes, f: &SessionFacts) -> Message {
        let mut m = self.ccr(pcef, sid, 1, 0, f);
        self.session_avps(&mut m, f, false);
        m
    }

    /// CCR-U (§4.5.2) number `number`: the session's attributes with `event` (the new cell or
    /// RAT), a Charging-Rule-Report ACTIVE for `installed` (the rules the PCRF installed since
    /// the last report, with SUCCESSFUL_RESOURCE_ALLOCATION armed; §4.5.12), and `usage`.
    pub fn ccr_update(
        &self,
        pcef: &Identity,
        sid: &Bytes,
        number: u32,
        f: &SessionFacts,
        what: &Reported,
    ) -> Message {
        let Reported { event, installed, usage } = *what;
        let mut m = self.ccr(pcef, sid, 2, number, f);
        self.session_avps(&mut m, f, event == Some(UpdateEvent::RatChange) && number % 2 == 1);
        if !installed.is_empty() {
            let mut report: Vec<Avp> =
                installed.iter().map(|n| gx::CHARGING_RULE_NAME.with_payload(n.clone())).collect();
            report.push(self.rule_active.clone());
            m.push(gx::CHARGING_RULE_REPORT.grouped(report));
            m.push(self.resource_allocated.clone());
        }
        match event {
            Some(UpdateEvent::UserLocationChange) => m.push(self.location_change.clone()),
            Some(UpdateEvent::RatChange) => m.push(self.rat_change.clone()),
            None => {}
        }
        if let Some(u) = usage {
            m.push(self.usage_report.clone());
            m.push(gx::USAGE_MONITORING_INFORMATION.grouped(vec![
                gx::MONITORING_KEY.bytes(Bytes::copy_from_slice(u.monitoring_key.as_bytes())),
                dcca::USED_SERVICE_UNIT.grouped(vec![
                    dcca::CC_TOTAL_OCTETS.u64(u.input_octets + u.output_octets),
                    dcca::CC_INPUT_OCTETS.u64(u.input_octets),
                    dcca::CC_OUTPUT_OCTETS.u64(u.output_octets),
                ]),
            ]));
        }
        m
    }

    /// CCR-T (§4.5.7): the session ends (DIAMETER_LOGOUT), the subscriber and APN named.
    pub fn ccr_terminate(
        &self,
        pcef: &Identity,
        sid: &Bytes,
        number: u32,
        f: &SessionFacts,
    ) -> Message {
        let mut m = self.ccr(pcef, sid, 3, number, f);
        m.push(self.apn.clone());
        m.push(self.logout.clone());
        m
    }

    /// The PCEF's answer to what the PCRF sends it (RAA §5.6.5, ASA): Session-Id echoed, its
    /// origin, Result-Code 2001 (the RAA's grammar has no Auth-Application-Id).
    pub fn success(&self, req: &Message, from: &Identity) -> Message {
        let mut a = Message::answer_to(req);
        a.avps.extend_from_slice(from.origin_avps());
        a.push(self.success.clone());
        a
    }
}

/// The names of the rules a CCA or RAR installs (Charging-Rule-Install: Charging-Rule-Name
/// directly or in a Charging-Rule-Definition), and whether it says which Event-Triggers are
/// armed: `Some(true)` when SUCCESSFUL_RESOURCE_ALLOCATION is among them, `Some(false)` when
/// the list leaves it out (the list replaces the PCEF's own), `None` without a list.
pub fn installs_and_triggers(m: &Message) -> (Vec<Bytes>, Option<bool>) {
    let mut names = Vec::new();
    for install in m.charging_rule_installs() {
        let Ok(children) = install.children() else { continue };
        for c in children.iter() {
            if c.is(&gx::CHARGING_RULE_NAME) {
                names.extend(c.as_bytes().ok());
            } else if c.is(&gx::CHARGING_RULE_DEFINITION) {
                names.extend(c.child(&gx::CHARGING_RULE_NAME).and_then(|n| n.as_bytes().ok()));
            }
        }
    }
    let triggers = m.event_triggers();
    let armed = (!triggers.is_empty()).then(|| triggers.contains(&SUCCESSFUL_RESOURCE_ALLOCATION));
    (names, armed)
}

/// The names of the rules a CCA or RAR removes (Charging-Rule-Remove).
pub fn removals(m: &Message) -> Vec<Bytes> {
    m.find_all(&gx::CHARGING_RULE_REMOVE)
        .flat_map(|r| r.children_of(&gx::CHARGING_RULE_NAME))
        .filter_map(|n| n.as_bytes().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use diameter::validate;

    fn facts() -> SessionFacts {
        SessionFacts {
            msin: 42,
            ue: Ipv4Addr::new(100, 64, 0, 9),
            charging_id: 7,
            cell: 0x0123_4567,
        }
    }

    fn child_str(g: &Avp, def: &diameter::dictionary::AvpDef) -> String {
        String::from_utf8(g.child(def).unwrap().as_slice().unwrap().to_vec()).unwrap()
    }

    /// The CCR builder's AVPs: what a PGW says of the session, each field where TS 29.212 and
    /// TS 29.061 put it, every message valid for our dictionary and validator (the PCF
    /// validates them too) after a trip over the wire.
    #[test]
    fn ccrs_carry_the_session_as_a_pgw_sends_it_and_are_valid_gx() {
        let m = GxMessages::new("fivecore.local", "00101", "33", "internet");
        let pgw = Identity::new("pgw1.epc.fivecore.local", "epc.fivecore.local");
        let sid = Bytes::from_static(b"pgw1.epc.fivecore.local;1;9");
        let f = facts();
        let usage = UsageReport {
            monitoring_key: "mk-data".into(),
            input_octets: 1_000,
            output_octets: 4_000,
        };
        let rules = [Bytes::from_static(b"af-rx:x-1")];
        let reqs = [
            m.ccr_initial(&pgw, &sid, &f),
            m.ccr_update(
                &pgw,
                &sid,
                1,
                &f,
                &Reported {
                    event: Some(UpdateEvent::RatChange),
                    installed: &[],
                    usage: Some(&usage),
                },
            ),
            m.ccr_update(
                &pgw,
                &sid,
                2,
                &f,
                &Reported {
                    event: Some(UpdateEvent::UserLocationChange),
                    installed: &rules,
                    usage: None,
                },
            ),
            m.ccr_terminate(&pgw, &sid, 3, &f),
        ];
        let reqs: Vec<Message> = reqs
            .into_iter()
            .map(|r| {
                let back = Message::decode(r.ids(1, 2).to_bytes().unwrap()).unwrap();
                validate(&back).unwrap_or_else(|e| panic!("{:?}: {e}", back.cc_request_type()));
                back
            })
            .collect();
        let [i, u_rat, u_loc, t] = &reqs[..] else { unreachable!() };
        for (r, number) in reqs.iter().zip([0, 1, 2, 3]) {
            assert_eq!(r.session_id(), Some("pgw1.epc.fivecore.local;1;9"));
            assert_eq!(r.cc_request_number(), Some(number));
            assert_eq!(r.imsi().as_deref(), Some("001010000000042"));
            assert_eq!(r.origin_host(), Some("pgw1.epc.fivecore.local"));
            assert_eq!(r.destination_realm(), Some("fivecore.local"));
            assert_eq!(r.destination_host(), None, "the realm routes it to a PCRF");
            assert_eq!(r.auth_application_id(), Some(gx::APP_ID));
            assert_eq!(r.called_station_id(), Some("internet"));
        }
        // CCR-I: the whole session.
        assert_eq!(i.msisdn().as_deref(), Some("330000000042"));
        assert_eq!(i.framed_ip_address(), Some(f.ue));
        assert_eq!(i.rat_type(), Some(gx::rat_type::EUTRAN));
        assert_eq!(i.ip_can_type(), Some(gx::ip_can_type::TGPP_EPS));
        let sf = i.supported_features();
        assert_eq!((sf.len(), sf[0].feature_list_id, sf[0].feature_list), (1, 1, 0x0b));
        let qos = i.qos_information().unwrap();
        assert_eq!(
            qos.child(&gx::APN_AGGREGATE_MAX_BITRATE_DL).unwrap().as_u32().unwrap(),
            2_000_000_000
        );
        let bearer = i.find(&gx::DEFAULT_EPS_BEARER_QOS).unwrap();
        assert_eq!(bearer.child(&gx::QOS_CLASS_IDENTIFIER).unwrap().as_u32().unwrap(), 9);
        let uli = i.get_slice(&gx::TGPP_USER_LOCATION_INFO).unwrap();
        assert_eq!(uli.len(), 13);
        assert_eq!(&uli[..9], &ULI_TAI_ECGI[..9], "TAI+ECGI in 001-01, TAC 1");
        assert_eq!(u32::from_be_bytes([uli[9], uli[10], uli[11], uli[12]]), 0x0123_4567);
        assert_eq!(i.get_str(&gx::TGPP_SGSN_MCC_MNC), Some("00101"));
        let charging = i.find(&gx::ACCESS_NETWORK_CHARGING_IDENTIFIER_GX).unwrap();
        let value = charging.child(&rx::ACCESS_NETWORK_CHARGING_IDENTIFIER_VALUE).unwrap();
        assert_eq!(value.as_slice().unwrap(), &7u32.to_be_bytes());
        assert!(
            i.event_triggers().is_empty() && i.find(&gx::USAGE_MONITORING_INFORMATION).is_none()
        );
        // CCR-U: the event, the RAT it names, usage under the key, the rules' report.
        assert_eq!(
            u_rat.event_triggers(),
            [gx::event_trigger::RAT_CHANGE, gx::event_trigger::USAGE_REPORT]
        );
        assert_eq!(u_rat.rat_type(), Some(gx::rat_type::UTRAN), "odd updates are on UTRAN");
        let umi = u_rat.usage_monitoring_information().next().unwrap();
        assert_eq!(child_str(umi, &gx::MONITORING_KEY), "mk-data");
        let used = umi.child(&dcca::USED_SERVICE_UNIT).unwrap();
        assert_eq!(used.child(&dcca::CC_TOTAL_OCTETS).unwrap().as_u64().unwrap(), 5_000);
        assert_eq!(used.child(&dcca::CC_INPUT_OCTETS).unwrap().as_u64().unwrap(), 1_000);
        assert_eq!(used.child(&dcca::CC_OUTPUT_OCTETS).unwrap().as_u64().unwrap(), 4_000);
        assert_eq!(
            u_loc.event_triggers(),
            [SUCCESSFUL_RESOURCE_ALLOCATION, gx::event_trigger::USER_LOCATION_CHANGE]
        );
        assert_eq!(u_loc.rat_type(), Some(gx::rat_type::EUTRAN));
        let report = u_loc.charging_rule_reports().next().unwrap();
        assert_eq!(child_str(report, &gx::CHARGING_RULE_NAME), "af-rx:x-1");
        assert_eq!(report.child(&gx::PCC_RULE_STATUS).unwrap().as_u32().unwrap(), 0);
        // CCR-T: no session attributes, the cause.
        assert_eq!(t.termination_cause(), Some(1));
        assert_eq!(t.framed_ip_address(), None);
        assert_eq!(t.msisdn(), None);
        // The answers to the PCRF.
        let rar = Message::request(gx::APP_ID, gx::CMD_RE_AUTH)
            .session_id_avp("pgw1.epc.fivecore.local;1;9")
            .avp(base::AUTH_APPLICATION_ID.u32(gx::APP_ID))
            .origin("pcf.fivecore.local", "fivecore.local")
            .destination("epc.fivecore.local", Some("pgw1.epc.fivecore.local"))
            .avp(base::RE_AUTH_REQUEST_TYPE.enumerated(0));
        let raa = Message::decode(m.success(&rar.ids(5, 6), &pgw).to_bytes().unwrap()).unwrap();
        validate(&raa).unwrap();
        assert_eq!(
            (raa.result_code(), raa.origin_host()),
            (Some(2001), Some("pgw1.epc.fivecore.local"))
        );
    }

    #[test]
    fn installs_removals_and_armed_triggers_are_read_from_the_pcrf() {
        let named = gx::CHARGING_RULE_INSTALL.grouped(vec![
            gx::CHARGING_RULE_DEFINITION.grouped(vec![gx::CHARGING_RULE_NAME.utf8("af-rx:s-1")]),
            gx::CHARGING_RULE_NAME.utf8("predefined"),
        ]);
        let rar = Message::request(gx::APP_ID, gx::CMD_RE_AUTH)
            .avp(named)
            .avp(gx::CHARGING_RULE_REMOVE.grouped(vec![gx::CHARGING_RULE_NAME.utf8("old")]))
            .avp(gx::EVENT_TRIGGER.enumerated(SUCCESSFUL_RESOURCE_ALLOCATION));
        let rar = Message::decode(rar.ids(1, 1).to_bytes().unwrap()).unwrap();
        let (names, armed) = installs_and_triggers(&rar);
        assert_eq!(names, [Bytes::from_static(b"af-rx:s-1"), Bytes::from_static(b"predefined")]);
        assert_eq!(armed, Some(true));
        assert_eq!(removals(&rar), [Bytes::from_static(b"old")]);
        let none = Message::request(gx::APP_ID, gx::CMD_RE_AUTH)
            .avp(gx::EVENT_TRIGGER.enumerated(gx::event_trigger::NO_EVENT_TRIGGERS));
        assert_eq!(installs_and_triggers(&none), (vec![], Some(false)));
        let silent = Message::request(gx::APP_ID, gx::CMD_RE_AUTH);
        assert_eq!(installs_and_triggers(&silent).1, None, "no list: the armed set stays");
    }
}
