//! Diameter Sh over real sockets: the UDR with `[udr.sh]` on 127.0.0.1:0, application servers
//! that are our own `DiameterNode`s connecting to it, and one AS behind Debian's freeDiameter
//! (`freeDiameterd`) relaying its traffic (freeDiameter ships no Sh client application, so it is
//! the real peer the UDR talks to and the AS sits behind it). Every wait has a timeout.

mod common;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use common::*;
use diameter::builders::{experimental_result, user_identity_public, vendor_specific_auth_app};
use diameter::dictionary::base;
use diameter::dictionary::sh::{self, data_reference as dr, experimental_result as er};
use diameter::{
    result_code as rc, ApplicationId, Avp, DiameterNode, Message, NodeConfig, PeerConfig, Route,
    RouteAction, Time, VENDOR_3GPP,
};
use tokio::sync::mpsc;
use udr::sh::config::{Procedure, ShConfig, ShRoute};
use udr::sh::data::{self, ims_user_state, RepositoryData, ShProfile};
use udr::sh::xml;
use udr::UdrConfig;

const T: Duration = Duration::from_secs(15);
const UDR_HOST: &str = "udr.fivecore.local";
const UDR_REALM: &str = "fivecore.local";
const AS_REALM: &str = "as.example";
const ALICE: &str = "sip:alice@ims.example";
const ALICE_MSISDN: &str = "33600000001";

fn sh_config() -> UdrConfig {
    UdrConfig {
        sh: ShConfig {
            enabled: true,
            listen: SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0),
            ..ShConfig::default()
        },
        ..UdrConfig::default()
    }
}

fn sh_addr(u: &TestUdr) -> SocketAddr {
    u.udr.sh.node().expect("Sh enabled").local_addr().unwrap()
}

fn alice() -> ShProfile {
    ShProfile {
        public_identities: vec![ALICE.into(), "tel:+33600000001".into()],
        msisdns: vec![ALICE_MSISDN.into()],
        ims_user_state: ims_user_state::REGISTERED,
        scscf_name: Some("sip:scscf1.ims.example".into()),
        repository: vec![RepositoryData {
            service_indication: "mmtel".into(),
            sequence_number: 0,
            service_data: "<cfu><target>tel:+331</target></cfu>".into(),
        }],
    }
}

fn bob() -> ShProfile {
    ShProfile {
        public_identities: vec!["sip:bob@ims.example".into()],
        msisdns: vec!["33600000002".into()],
        ..ShProfile::default()
    }
}

async fn provision(u: &TestUdr, p: ShProfile) {
    u.udr.sh.store.write(move |tx| tx.create(&p)).await.unwrap();
}

/// An application server: a node connected to the UDR (or to a relay), whose received PNRs
/// arrive on `pnrs` and are answered with `pna_code` (2001, or an Sh Experimental-Result).
struct As {
    node: DiameterNode,
    host: String,
    pnrs: mpsc::UnboundedReceiver<Message>,
}

async fn as_node(host: &str, peers: Vec<PeerConfig>, routes: Vec<Route>, pna_code: u32) -> As {
    let mut c = NodeConfig::new(host, AS_REALM);
    c.listen = Some(SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0));
    c.applications = vec![ApplicationId::tgpp(sh::APP_ID)];
    c.peers = peers;
    c.routes = routes;
    c.accept_unknown_peers = true;
    c.reconnect_min = Duration::from_millis(50);
    c.reconnect_max = Duration::from_millis(200);
    let (tx, rx) = mpsc::unbounded_channel();
    let node = DiameterNode::builder(c)
        .handler(sh::APP_ID, move |req: Message| {
            let tx = tx.clone();
            async move {
                let a = Message::answer_to(&req)
                    .avp(vendor_specific_auth_app(VENDOR_3GPP, sh::APP_ID))
                    .avp(base::AUTH_SESSION_STATE.enumerated(1));
                let a = if pna_code == rc::DIAMETER_SUCCESS {
                    a.result_code_avp(pna_code)
                } else {
                    a.avp(experimental_result(VENDOR_3GPP, pna_code))
                };
                let _ = tx.send(req);
                a
            }
        })
        .start()
        .await
        .unwrap();
    As { node, host: host.into(), pnrs: rx }
}

async fn direct_as(host: &str, udr_addr: SocketAddr, pna_code: u32) -> As {
    let a = as_node(host, vec![PeerConfig::connect(UDR_HOST, udr_addr)], vec![], pna_code).await;
    assert!(a.node.wait_open(UDR_HOST, T).await, "{host} connects to the UDR");
    a
}

/// An AS connected to the UDR instance `udr_host` only.
async fn direct_as_to(host: &str, udr_host: &str, addr: SocketAddr) -> As {
    let a = as_node(host, vec![PeerConfig::connect(udr_host, addr)], vec![], 2001).await;
    assert!(a.node.wait_open(udr_host, T).await, "{host} connects to {udr_host}");
    a
}

impl As {
    fn request(&self, cmd: u32, user: Option<Avp>, refs: &[u32]) -> Message {
        let mut m = Message::request(sh::APP_ID, cmd)
            .session_id_avp(&self.node.new_session_id())
            .avp(vendor_specific_auth_app(VENDOR_3GPP, sh::APP_ID))
            .avp(base::AUTH_SESSION_STATE.enumerated(1))
            .origin(&self.host, AS_REALM)
            .destination(UDR_REALM, None);
        if let Some(u) = user {
            m.push(u);
        }
        for r in refs {
            m.push(sh::DATA_REFERENCE.enumerated(*r));
        }
        m
    }

    async fn send(&self, m: Message) -> Message {
        tokio::time::timeout(T, self.node.request(m)).await.expect("answer in time").unwrap()
    }

    async fn udr(&self, user: &str, refs: &[u32], services: &[&str]) -> Message {
        let mut m = self.request(sh::CMD_USER_DATA, Some(user_identity_public(user)), refs);
        for s in services {
            m.push(sh::SERVICE_INDICATION.utf8(s));
        }
        self.send(m).await
    }

    async fn pur(&self, user: &str, si: &str, seq: u16, data: Option<&str>) -> Message {
        let body = data.map_or(String::new(), |d| format!("<ServiceData>{d}</ServiceData>"));
        let doc = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Sh-Data><RepositoryData>\
             <ServiceIndication>{si}</ServiceIndication><SequenceNumber>{seq}</SequenceNumber>\
             {body}</RepositoryData></Sh-Data>"
        );
        self.pur_raw(user, &[dr::REPOSITORY_DATA], doc.as_bytes()).await
    }

    async fn pur_raw(&self, user: &str, refs: &[u32], doc: &[u8]) -> Message {
        let m = self
            .request(sh::CMD_PROFILE_UPDATE, Some(user_identity_public(user)), refs)
            .avp(sh::USER_DATA.bytes(doc.to_vec()));
        self.send(m).await
    }

    async fn snr(&self, user: &str, kind: u32, refs: &[u32], services: &[&str]) -> Message {
        let mut m = self
            .request(sh::CMD_SUBSCRIBE_NOTIFICATIONS, Some(user_identity_public(user)), refs)
            .avp(sh::SUBS_REQ_TYPE.enumerated(kind));
        for s in services {
            m.push(sh::SERVICE_INDICATION.utf8(s));
        }
        self.send(m).await
    }

    async fn next_pnr(&mut self) -> Message {
        tokio::time::timeout(T, self.pnrs.recv()).await.expect("a PNR in time").unwrap()
    }

    async fn no_pnr(&mut self) {
        let got = tokio::time::timeout(Duration::from_millis(400), self.pnrs.recv()).await;
        assert!(got.is_err(), "unexpected PNR: {got:?}");
    }
}

/// The Experimental-Result code (vendor 10415 checked).
fn exp(a: &Message) -> Option<u32> {
    a.experimental_result().map(|e| {
        assert_eq!(e.vendor_id, VENDOR_3GPP);
        e.code
    })
}

fn ok(a: &Message) {
    assert_eq!(a.result_code(), Some(rc::DIAMETER_SUCCESS), "{a:?}");
    assert_eq!(a.origin_host(), Some(UDR_HOST));
}

fn sh_data(a: &Message) -> (String, xml::Element) {
    let text = String::from_utf8(a.user_data().expect("User-Data").to_vec()).unwrap();
    let root = xml::parse(&text).unwrap();
    assert_eq!(root.name, "Sh-Data");
    (text, root)
}

/// (ServiceIndication, SequenceNumber, ServiceData content) of each RepositoryData.
fn repository(a: &Message) -> Vec<(String, u16, Option<String>)> {
    let (text, root) = sh_data(a);
    root.children_named("RepositoryData")
        .map(|r| {
            (
                r.child_text("ServiceIndication").unwrap().to_owned(),
                r.child_text("SequenceNumber").unwrap().parse().unwrap(),
                r.child("ServiceData").map(|d| text[d.content.clone()].to_owned()),
            )
        })
        .collect()
}

fn failed_avp_codes(a: &Message) -> Vec<u32> {
    a.failed_avps().iter().map(Avp::code).collect()
}

async fn user_data_request_parts_and_errors() {
    let dir = common::state_dir();
    let mut config = sh_config();
    config.sh.as_permissions =
        [("ro.as.example".to_owned(), vec![Procedure::Pull])].into_iter().collect();
    config
        .sh
        .as_permissions
        .insert("*".into(), vec![Procedure::Pull, Procedure::Update, Procedure::SubsNotif]);
    let u = TestUdr::start(dir.path(), config).await;
    provision(&u, alice()).await;
    provision(&u, bob()).await;
    let a = direct_as("as1.as.example", sh_addr(&u), 2001).await;

    let all = [
        dr::REPOSITORY_DATA,
        dr::IMS_PUBLIC_IDENTITY,
        dr::MSISDN,
        dr::IMS_USER_STATE,
        dr::S_CSCF_NAME,
    ];
    let ans = a.udr(ALICE, &all, &["mmtel", "absent"]).await;
    ok(&ans);
    assert_eq!(ans.find(&base::AUTH_SESSION_STATE).unwrap().as_u32().unwrap(), 1);
    let (_, root) = sh_data(&ans);
    let order: Vec<_> = root.children.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(order, ["PublicIdentifiers", "RepositoryData", "Sh-IMS-Data"]);
    let ids: Vec<_> =
        root.children[0].children_named("IMSPublicIdentity").map(|e| e.text.as_str()).collect();
    assert_eq!(ids, [ALICE, "tel:+33600000001"]);
    assert_eq!(root.children[0].child_text("MSISDN"), Some(ALICE_MSISDN));
    assert_eq!(
        repository(&ans),
        [("mmtel".into(), 0, Some("<cfu><target>tel:+331</target></cfu>".to_owned()))]
    );
    let ims = &root.children[2];
    assert_eq!(ims.child_text("S-CSCFName"), Some("sip:scscf1.ims.example"));
    assert_eq!(ims.child_text("IMSUserState"), Some("1"));

    // By MSISDN (TBCD in User-Identity), only the MSISDN part.
    let by_msisdn = a.request(
        sh::CMD_USER_DATA,
        Some(udr::sh::user_identity_avp(&data::UserId::Msisdn(ALICE_MSISDN.into()))),
        &[dr::IMS_USER_STATE],
    );
    let ans = a.send(by_msisdn).await;
    ok(&ans);
    let (_, root) = sh_data(&ans);
    assert_eq!(root.children.len(), 1);
    assert_eq!(root.child("Sh-IMS-Data").unwrap().child_text("IMSUserState"), Some("1"));

    // Registered identities only while registered: bob is not.
    let m = a
        .request(
            sh::CMD_USER_DATA,
            Some(user_identity_public("sip:bob@ims.example")),
            &[dr::IMS_PUBLIC_IDENTITY],
        )
        .avp(sh::IDENTITY_SET.enumerated(1));
    let (_, root) = sh_data(&a.send(m).await);
    assert!(root.children.is_empty());

    // Unknown user, unsupported data reference, identities of two users.
    assert_eq!(
        exp(&a.udr("sip:nobody@ims.example", &[dr::MSISDN], &[]).await),
        Some(er::DIAMETER_ERROR_USER_UNKNOWN)
    );
    let ans = a.udr(ALICE, &[dr::MSISDN, dr::LOCATION_INFORMATION], &[]).await;
    assert_eq!(exp(&ans), Some(er::DIAMETER_ERROR_USER_DATA_CANNOT_BE_READ));
    assert_eq!(ans.result_code(), None);
    let both = sh::USER_IDENTITY.grouped(vec![
        sh::PUBLIC_IDENTITY.utf8(ALICE),
        sh::MSISDN.bytes(udr::sh::tbcd_encode("33600000002")),
    ]);
    let ans = a.send(a.request(sh::CMD_USER_DATA, Some(both), &[dr::MSISDN])).await;
    assert_eq!(exp(&ans), Some(er::DIAMETER_ERROR_IDENTITIES_DONT_MATCH));

    // Base errors with Failed-AVP: RepositoryData without Service-Indication (ours), no
    // User-Identity at all (the dictionary validator), an empty User-Identity (ours), an MSISDN
    // that is not TBCD.
    let ans = a.udr(ALICE, &[dr::REPOSITORY_DATA], &[]).await;
    assert_eq!(ans.result_code(), Some(rc::DIAMETER_MISSING_AVP));
    assert_eq!(failed_avp_codes(&ans), [sh::SERVICE_INDICATION.code]);
    let ans = a.send(a.request(sh::CMD_USER_DATA, None, &[dr::MSISDN])).await;
    assert_eq!(ans.result_code(), Some(rc::DIAMETER_MISSING_AVP));
    assert_eq!(failed_avp_codes(&ans), [sh::USER_IDENTITY.code]);
    let empty = sh::USER_IDENTITY.grouped(vec![]);
    let ans = a.send(a.request(sh::CMD_USER_DATA, Some(empty), &[dr::MSISDN])).await;
    assert_eq!(ans.result_code(), Some(rc::DIAMETER_MISSING_AVP));
    assert_eq!(failed_avp_codes(&ans), [sh::USER_IDENTITY.code]);
    let bad = sh::USER_IDENTITY.grouped(vec![sh::MSISDN.bytes(vec![0xab])]);
    let ans = a.send(a.request(sh::CMD_USER_DATA, Some(bad), &[dr::MSISDN])).await;
    assert_eq!(ans.result_code(), Some(rc::DIAMETER_INVALID_AVP_VALUE));

    // The AS permission list: ro.as.example may only read.
    let ro = direct_as("ro.as.example", sh_addr(&u), 2001).await;
    ok(&ro.udr(ALICE, &[dr::MSISDN], &[]).await);
    let ans = ro.pur(ALICE, "mmtel", 1, Some("<x/>")).await;
    assert_eq!(exp(&ans), Some(er::DIAMETER_ERROR_OPERATION_NOT_ALLOWED));
    let ans = ro.snr(ALICE, 0, &[dr::IMS_USER_STATE], &[]).await;
    assert_eq!(exp(&ans), Some(er::DIAMETER_ERROR_OPERATION_NOT_ALLOWED));
    u.stop().await;
}

async fn profile_update_sequence_numbers_and_errors() {
    let dir = common::state_dir();
    let mut config = sh_config();
    config.sh.max_repository_data_bytes = 64;
    let u = TestUdr::start(dir.path(), config).await;
    provision(&u, alice()).await;
    let a = direct_as("as1.as.example", sh_addr(&u), 2001).await;

    // New data must come with 0, then each update with the successor.
    ok(&a.pur(ALICE, "presence", 0, Some("<p>on</p>")).await);
    let again = a.pur(ALICE, "presence", 0, Some("<p>off</p>")).await;
    assert_eq!(exp(&again), Some(er::DIAMETER_ERROR_TRANSPARENT_DATA_OUT_OF_SYNC));
    assert_eq!(again.result_code(), None);
    let skip = a.pur(ALICE, "presence", 2, Some("<p>off</p>")).await;
    assert_eq!(exp(&skip), Some(er::DIAMETER_ERROR_TRANSPARENT_DATA_OUT_OF_SYNC));
    ok(&a.pur(ALICE, "presence", 1, Some("<p>off</p>")).await);
    let got = a.udr(ALICE, &[dr::REPOSITORY_DATA], &["presence"]).await;
    assert_eq!(repository(&got), [("presence".into(), 1, Some("<p>off</p>".to_owned()))]);
    // The out-of-sync ones changed nothing; an empty ServiceData deletes.
    ok(&a.pur(ALICE, "presence", 2, None).await);
    assert!(repository(&a.udr(ALICE, &[dr::REPOSITORY_DATA], &["presence"]).await).is_empty());
    let gone = a.pur(ALICE, "presence", 3, None).await;
    assert_eq!(exp(&gone), Some(er::DIAMETER_ERROR_TRANSPARENT_DATA_OUT_OF_SYNC));

    // 65535 wraps to 1 (set behind the UDR's back, on a connection of its own).
    common::exec_sql(
        dir.path(),
        "UPDATE udr_sh_repository SET sequence_number = 65535 WHERE service_indication = 'mmtel'",
    )
    .await;
    let zero = a.pur(ALICE, "mmtel", 0, Some("<w/>")).await;
    assert_eq!(exp(&zero), Some(er::DIAMETER_ERROR_TRANSPARENT_DATA_OUT_OF_SYNC));
    ok(&a.pur(ALICE, "mmtel", 1, Some("<w/>")).await);

    // Wrong data reference, unrecognized User-Data, too much data, unknown user.
    let ans = a.pur_raw(ALICE, &[dr::IMS_USER_STATE], b"<Sh-Data/>").await;
    assert_eq!(exp(&ans), Some(er::DIAMETER_ERROR_USER_DATA_CANNOT_BE_MODIFIED));
    for bad in [&b"<Sh-Data><RepositoryData>"[..], b"not xml", b"<Sh-Data></Sh-Data>"] {
        let ans = a.pur_raw(ALICE, &[dr::REPOSITORY_DATA], bad).await;
        assert_eq!(exp(&ans), Some(er::DIAMETER_ERROR_USER_DATA_NOT_RECOGNIZED));
    }
    let big = format!("<big>{}</big>", "x".repeat(100));
    let ans = a.pur(ALICE, "mmtel", 2, Some(&big)).await;
    assert_eq!(exp(&ans), Some(udr::sh::pur::DIAMETER_ERROR_TOO_MUCH_DATA));
    let ans = a.pur("sip:nobody@ims.example", "mmtel", 0, Some("<x/>")).await;
    assert_eq!(exp(&ans), Some(er::DIAMETER_ERROR_USER_UNKNOWN));
    // A PUR without User-Data: the validator's 5005 naming it.
    let m = a.request(
        sh::CMD_PROFILE_UPDATE,
        Some(user_identity_public(ALICE)),
        &[dr::REPOSITORY_DATA],
    );
    let ans = a.send(m).await;
    assert_eq!(ans.result_code(), Some(rc::DIAMETER_MISSING_AVP));
    assert_eq!(failed_avp_codes(&ans), [sh::USER_DATA.code]);

    // Concurrent PURs with the same sequence number: exactly one wins.
    let (x, y) = tokio::join!(
        a.pur(ALICE, "mmtel", 2, Some("<x/>")),
        a.pur(ALICE, "mmtel", 2, Some("<y/>"))
    );
    let won = [&x, &y].iter().filter(|m| m.result_code() == Some(2001)).count();
    assert_eq!(won, 1, "{x:?} {y:?}");
    u.stop().await;
}

async fn sh_answers_reach_metrics() {
    let dir = common::state_dir();
    let u = TestUdr::start(dir.path(), sh_config()).await;
    provision(&u, alice()).await;
    let a = direct_as("as1.as.example", sh_addr(&u), 2001).await;
    let app = sh::APP_ID.to_string();
    let udr_cmd = sh::CMD_USER_DATA.to_string();
    let answers = |class: &'static str| {
        [("application", app.clone()), ("command", udr_cmd.clone()), ("result_class", class.into())]
    };
    let scrape = |class: &'static str| {
        let labels = answers(class);
        let u = &u;
        async move {
            let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
            metric(u, "diameter_answers_total", &labels).await
        }
    };
    assert_eq!(scrape("2xxx").await, 0.0);
    ok(&a.udr(ALICE, &[dr::MSISDN], &[]).await);
    ok(&a.udr(ALICE, &[dr::IMS_USER_STATE], &[]).await);
    let unknown = a.udr("sip:nobody@ims.example", &[dr::MSISDN], &[]).await;
    assert_eq!(exp(&unknown), Some(er::DIAMETER_ERROR_USER_UNKNOWN));
    // The Sh node's answers, by result class, on the UDR's SBI /metrics.
    assert_eq!(scrape("2xxx").await, 2.0);
    assert_eq!(scrape("5xxx").await, 1.0);
    let labels = [("application", app.as_str()), ("command", udr_cmd.as_str())];
    assert_eq!(metric(&u, "diameter_request_duration_seconds_count", &labels).await, 3.0);
    u.stop().await;
}

async fn subscribe_then_another_as_update_pushes_a_notification() {
    let dir = common::state_dir();
    let mut config = sh_config();
    config.sh.max_subscription_secs = 7200;
    let u = TestUdr::start(dir.path(), config).await;
    provision(&u, alice()).await;
    let mut as1 = direct_as("as1.as.example", sh_addr(&u), 2001).await;
    let mut as2 = direct_as("as2.as.example", sh_addr(&u), 2001).await;

    let expiry = Time::from_unix_secs(udr_now() + 3600);
    let m = as1
        .request(
            sh::CMD_SUBSCRIBE_NOTIFICATIONS,
            Some(user_identity_public(ALICE)),
            &[dr::REPOSITORY_DATA],
        )
        .avp(sh::SUBS_REQ_TYPE.enumerated(0))
        .avp(sh::SERVICE_INDICATION.utf8("mmtel"))
        .avp(sh::SEND_DATA_INDICATION.enumerated(1))
        .avp(sh::EXPIRY_TIME.time(expiry));
    let sna = as1.send(m).await;
    ok(&sna);
    assert_eq!(
        repository(&sna),
        [("mmtel".into(), 0, Some("<cfu><target>tel:+331</target></cfu>".to_owned()))]
    );
    assert_eq!(sna.get_time(&sh::EXPIRY_TIME), Some(expiry));
    assert_eq!(u.udr.sh.subscriptions.len(), 1);

    // Data the user has none of, data that cannot be notified, a past Expiry-Time.
    let ans = as1.snr(ALICE, 0, &[dr::REPOSITORY_DATA], &["nothing-here"]).await;
    assert_eq!(exp(&ans), Some(er::DIAMETER_ERROR_SUBS_DATA_ABSENT));
    let ans = as1.snr(ALICE, 0, &[dr::LOCATION_INFORMATION], &[]).await;
    assert_eq!(exp(&ans), Some(er::DIAMETER_ERROR_USER_DATA_CANNOT_BE_NOTIFIED));
    let m = as1
        .request(
            sh::CMD_SUBSCRIBE_NOTIFICATIONS,
            Some(user_identity_public(ALICE)),
            &[dr::IMS_USER_STATE],
        )
        .avp(sh::SUBS_REQ_TYPE.enumerated(0))
        .avp(sh::EXPIRY_TIME.time(Time::from_unix_secs(udr_now() - 10)));
    let ans = as1.send(m).await;
    assert_eq!(ans.result_code(), Some(rc::DIAMETER_INVALID_AVP_VALUE));
    assert_eq!(failed_avp_codes(&ans), [sh::EXPIRY_TIME.code]);
    assert_eq!(
        exp(&as1.snr("sip:nobody@ims.example", 0, &[dr::MSISDN], &[]).await),
        Some(er::DIAMETER_ERROR_USER_UNKNOWN)
    );
    assert_eq!(u.udr.sh.subscriptions.len(), 1);

    // AS2 updates: AS1 is told, AS2 (the updater) is not.
    ok(&as2.pur(ALICE, "mmtel", 1, Some("<cfu><target>tel:+332</target></cfu>")).await);
    let pnr = as1.next_pnr().await;
    assert_eq!(pnr.command_code(), sh::CMD_PUSH_NOTIFICATION);
    assert_eq!(pnr.origin_host(), Some(UDR_HOST));
    assert_eq!(pnr.destination_host(), Some("as1.as.example"));
    assert_eq!(pnr.user_public_identity().as_deref(), Some(ALICE));
    assert_eq!(
        repository(&pnr),
        [("mmtel".into(), 1, Some("<cfu><target>tel:+332</target></cfu>".to_owned()))]
    );
    as2.no_pnr().await;
    // AS1's own update is not pushed back to it; a deletion is pushed without ServiceData.
    ok(&as1.pur(ALICE, "mmtel", 2, Some("<mine/>")).await);
    as1.no_pnr().await;
    ok(&as2.pur(ALICE, "mmtel", 3, None).await);
    assert_eq!(repository(&as1.next_pnr().await), [("mmtel".into(), 3, None)]);

    // Unsubscribed: nothing more.
    ok(&as2.pur(ALICE, "mmtel", 0, Some("<again/>")).await);
    assert_eq!(
        repository(&as1.next_pnr().await),
        [("mmtel".into(), 0, Some("<again/>".to_owned()))]
    );
    ok(&as1.snr(ALICE, 1, &[dr::REPOSITORY_DATA], &["mmtel"]).await);
    assert!(u.udr.sh.subscriptions.is_empty());
    ok(&as2.pur(ALICE, "mmtel", 1, Some("<quiet/>")).await);
    as1.no_pnr().await;

    // An AS that answers 5107 DIAMETER_ERROR_NO_SUBSCRIPTION_TO_DATA loses its subscription.
    let mut as3 =
        direct_as("as3.as.example", sh_addr(&u), er::DIAMETER_ERROR_NO_SUBSCRIPTION_TO_DATA).await;
    ok(&as3.snr(ALICE, 0, &[dr::REPOSITORY_DATA], &["mmtel"]).await);
    assert_eq!(u.udr.sh.subscriptions.len(), 1);
    ok(&as2.pur(ALICE, "mmtel", 2, Some("<x/>")).await);
    as3.next_pnr().await;
    wait_no_subscriptions(&u, "after 5107").await;

    // One-Time-Notification: one PNR, then the subscription is gone. Without an Expiry-Time the
    // UDR grants max_subscription_secs.
    let mut as4 = direct_as("as4.as.example", sh_addr(&u), 2001).await;
    let m = as4
        .request(
            sh::CMD_SUBSCRIBE_NOTIFICATIONS,
            Some(user_identity_public(ALICE)),
            &[dr::REPOSITORY_DATA],
        )
        .avp(sh::SUBS_REQ_TYPE.enumerated(0))
        .avp(sh::SERVICE_INDICATION.utf8("mmtel"))
        .avp(sh::ONE_TIME_NOTIFICATION.enumerated(0));
    let sna = as4.send(m).await;
    ok(&sna);
    let granted = sna.get_time(&sh::EXPIRY_TIME).unwrap().unix_secs();
    assert!(granted.abs_diff(udr_now() + 7200) <= 5, "granted {granted}");
    ok(&as2.pur(ALICE, "mmtel", 3, Some("<once/>")).await);
    assert_eq!(repository(&as4.next_pnr().await)[0].1, 3);
    wait_no_subscriptions(&u, "after a one-time notification").await;
    ok(&as2.pur(ALICE, "mmtel", 4, Some("<twice/>")).await);
    as4.no_pnr().await;
    u.stop().await;
}

async fn wait_no_subscriptions(u: &TestUdr, when: &str) {
    let deadline = tokio::time::Instant::now() + T;
    while !u.udr.sh.subscriptions.is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "subscription not removed {when}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn subscriptions_survive_a_restart() {
    let dir = common::state_dir();
    let u = TestUdr::start(dir.path(), sh_config()).await;
    provision(&u, alice()).await;
    let as1 = direct_as("as1.as.example", sh_addr(&u), 2001).await;
    ok(&as1.snr(ALICE, 0, &[dr::REPOSITORY_DATA], &["mmtel"]).await);
    as1.node.shutdown().await;
    u.stop().await;

    let u = TestUdr::start(dir.path(), sh_config()).await;
    assert_eq!(u.udr.sh.subscriptions.len(), 1);
    let mut as1 = direct_as("as1.as.example", sh_addr(&u), 2001).await;
    let as2 = direct_as("as2.as.example", sh_addr(&u), 2001).await;
    ok(&as2.pur(ALICE, "mmtel", 1, Some("<after-restart/>")).await);
    assert_eq!(
        repository(&as1.next_pnr().await),
        [("mmtel".into(), 1, Some("<after-restart/>".to_owned()))]
    );
    u.stop().await;
}

async fn sh_is_disabled_by_default() {
    let dir = common::state_dir();
    let u = TestUdr::start(dir.path(), UdrConfig::default()).await;
    assert!(u.udr.sh.node().is_none());
    assert!(!UdrConfig::default().sh.enabled);
    assert_eq!(UdrConfig::default().sh.listen.port(), 3870);
    u.stop().await;
}

fn udr_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

// ---- freeDiameter ----

use testkit::freediameter::{
    binary_or_skip as fd_binary_or_skip, start as start_fd, HOST as FD_HOST,
};

/// An AS reaching the UDR only through freeDiameterd: Sh-Pull, Sh-Update with sequence numbers,
/// Sh-Subs-Notif, and the PNR for another AS's update, all relayed by freeDiameter.
async fn as_behind_freediameter() {
    let Some(bin) = fd_binary_or_skip() else { return };
    let dir = common::state_dir();
    let mut config = sh_config();
    // PNRs for the ASs' realm go through freeDiameterd.
    config.sh.routes = vec![ShRoute { realm: AS_REALM.into(), peers: vec![FD_HOST.into()] }];
    let u = TestUdr::start(dir.path(), config).await;
    provision(&u, alice()).await;
    let relay = vec![Route::new(UDR_REALM, RouteAction::Relay(vec![FD_HOST.into()]))];
    let mut far = as_node("far.as.example", vec![PeerConfig::accept(FD_HOST)], relay, 2001).await;
    let _fd = start_fd(
        &bin,
        &[(UDR_HOST, sh_addr(&u)), ("far.as.example", far.node.local_addr().unwrap())],
    );
    assert!(far.node.wait_open(FD_HOST, T).await, "freeDiameterd connects to the AS");
    assert!(u.udr.sh.node().unwrap().wait_open(FD_HOST, T).await, "and to the UDR");
    // freeDiameterd routes once it has read our CEA; until then it answers 3002.
    let deadline = tokio::time::Instant::now() + T;
    let first = loop {
        let a = far.udr(ALICE, &[dr::REPOSITORY_DATA], &["mmtel"]).await;
        if a.result_code() != Some(rc::DIAMETER_UNABLE_TO_DELIVER) {
            break a;
        }
        assert!(tokio::time::Instant::now() < deadline, "freeDiameterd never routes: {a:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    ok(&first);
    assert_eq!(repository(&first)[0].1, 0);
    ok(&far.pur(ALICE, "mmtel", 1, Some("<via-fd/>")).await);
    assert_eq!(
        exp(&far.pur(ALICE, "mmtel", 1, Some("<stale/>")).await),
        Some(er::DIAMETER_ERROR_TRANSPARENT_DATA_OUT_OF_SYNC)
    );
    assert_eq!(
        exp(&far.udr("sip:nobody@ims.example", &[dr::MSISDN], &[]).await),
        Some(er::DIAMETER_ERROR_USER_UNKNOWN)
    );
    ok(&far.snr(ALICE, 0, &[dr::REPOSITORY_DATA], &["mmtel"]).await);

    // A directly connected AS updates; the PNR reaches the far AS through freeDiameterd.
    let near = direct_as("near.as.example", sh_addr(&u), 2001).await;
    ok(&near.pur(ALICE, "mmtel", 2, Some("<from-near/>")).await);
    let pnr = far.next_pnr().await;
    assert_eq!(pnr.user_public_identity().as_deref(), Some(ALICE));
    assert!(
        pnr.find_all(&base::ROUTE_RECORD).any(|r| r.as_str().ok() == Some(UDR_HOST)),
        "relayed: {pnr:?}"
    );
    assert_eq!(repository(&pnr), [("mmtel".into(), 2, Some("<from-near/>".to_owned()))]);
    u.stop().await;
}

/// `[udr.sh.limits]` reach the node: a first message declaring more than `max_cer_bytes` is
/// closed at once (before its body), and an AS still connects and is served.
async fn sh_diameter_limits_come_from_the_config() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = common::state_dir();
    let mut config = sh_config();
    config.sh.limits.max_cer_bytes = 4096;
    let u = TestUdr::start(dir.path(), config).await;
    // A CER header declaring 8 KiB, and 16 bytes of it.
    let mut header = vec![1u8, 0, 0x20, 0, 0x80, 0, 1, 1];
    header.resize(36, 0);
    let mut big = tokio::net::TcpStream::connect(sh_addr(&u)).await.unwrap();
    big.write_all(&header).await.unwrap();
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(2), big.read(&mut buf)).await;
    assert!(matches!(read, Ok(Ok(0) | Err(_))), "closed at once, not at the CER timeout: {read:?}");
    provision(&u, alice()).await;
    let a = direct_as("as1.as.example", sh_addr(&u), 2001).await;
    ok(&a.pur(ALICE, "presence", 0, Some("<p>on</p>")).await);
    u.stop().await;
}

/// Two UDR instances on one MariaDB database (issue #25): an AS subscribes at B; a PUR taken by
/// A pushes exactly one PNR, from A (which learnt of the subscription through the change feed),
/// and none from B. The AS is a peer of both (A connects to it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pur_at_one_instance_notifies_an_as_subscribed_at_the_other_once() {
    if !testkit::backends::use_mariadb() {
        return;
    }
    let dir = common::state_dir();
    let b =
        TestUdr::start_as(dir.path(), sh_config(), Some(uuid::Uuid::new_v4().to_string())).await;
    provision(&b, alice()).await;
    let b_host = UDR_HOST;
    let a_host = "udr-a.fivecore.local";
    let mut as1 = direct_as_to("as1.as.example", b_host, sh_addr(&b)).await;
    ok(&as1.snr(ALICE, 0, &[dr::REPOSITORY_DATA], &["mmtel"]).await);
    assert_eq!(b.udr.sh.subscriptions.len(), 1);

    let mut config_a = sh_config();
    config_a.sh.origin_host = a_host.into();
    config_a.sh.peers = vec![udr::sh::config::ShPeer {
        host: "as1.as.example".into(),
        addr: as1.node.local_addr().unwrap(),
        tls: false,
    }];
    let a = TestUdr::start_as(dir.path(), config_a, Some(uuid::Uuid::new_v4().to_string())).await;
    // A loads B's subscription at start; a later one reaches it through the feed.
    let deadline = tokio::time::Instant::now() + T;
    while a.udr.sh.subscriptions.len() != 1 {
        assert!(tokio::time::Instant::now() < deadline, "A indexes the subscription");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(as1.node.wait_open(a_host, T).await, "A connects to AS1");
    let as2 = direct_as_to("as2.as.example", a_host, sh_addr(&a)).await;
    let pua = as2.pur(ALICE, "mmtel", 1, Some("<cfu><target>tel:+332</target></cfu>")).await;
    assert_eq!(pua.result_code(), Some(rc::DIAMETER_SUCCESS), "{pua:?}");
    let pnr = as1.next_pnr().await;
    assert_eq!(pnr.origin_host(), Some(a_host), "sent by A, which took the PUR");
    assert_eq!(repository(&pnr)[0].1, 1);
    as1.no_pnr().await;

    // A subscription made at B after A started reaches A through the feed; removed likewise.
    let as3 = direct_as_to("as3.as.example", b_host, sh_addr(&b)).await;
    ok(&as3.snr(ALICE, 0, &[dr::REPOSITORY_DATA], &["mmtel"]).await);
    while a.udr.sh.subscriptions.len() != 2 {
        assert!(tokio::time::Instant::now() < deadline, "A indexes the second subscription");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    ok(&as3.snr(ALICE, 1, &[dr::REPOSITORY_DATA], &["mmtel"]).await);
    while a.udr.sh.subscriptions.len() != 1 {
        assert!(tokio::time::Instant::now() < deadline, "A drops the second subscription");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    a.stop().await;
    b.stop().await;
}

testkit::on_both_backends!(
    user_data_request_parts_and_errors,
    profile_update_sequence_numbers_and_errors,
    sh_answers_reach_metrics,
    subscribe_then_another_as_update_pushes_a_notification,
    subscriptions_survive_a_restart,
    sh_is_disabled_by_default,
    as_behind_freediameter,
    sh_diameter_limits_come_from_the_config,
);
