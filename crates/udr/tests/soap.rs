//! SOAP 1.1 provisioning over HTTP/1.1 on the UDR's SBI port: every operation of every profile
//! kind (SLF entries, Sh profiles, EIR entries, policy data), the faults, Sh and SOAP seeing the same data (and a provisioning change pushed to a
//! subscribed AS as a PNR), and docs/udr.wsdl describing exactly the dispatched operations.

mod common;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use common::*;
use diameter::builders::{user_identity_public, vendor_specific_auth_app};
use diameter::dictionary::base;
use diameter::dictionary::sh::{self, data_reference as dr, experimental_result as er};
use diameter::{ApplicationId, DiameterNode, Message, NodeConfig, PeerConfig, VENDOR_3GPP};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use udr::sh::config::ShConfig;
use udr::sh::xml::{self, Element};
use udr::UdrConfig;

const SOAP_ENV: &str = "http://schemas.xmlsoap.org/soap/envelope/";
const NS: &str = "urn:fivecore:udr:provisioning:1";
const T: Duration = Duration::from_secs(15);

struct Answer {
    status: u16,
    content_type: String,
    body: String,
}

/// One POST over a fresh HTTP/1.1 connection, as legacy SOAP stacks do.
async fn post(u: &TestUdr, headers: &[(&str, &str)], body: &str) -> Answer {
    let addr = u.base.trim_start_matches("http://").to_owned();
    let stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let (mut send, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    let mut req = http::Request::post("/udr-soap/v1")
        .header("host", addr.as_str())
        .header("content-length", body.len());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(Bytes::from(body.to_owned()))).unwrap();
    let resp = tokio::time::timeout(T, send.send_request(req)).await.unwrap().unwrap();
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    Answer { status, content_type, body: String::from_utf8(body.to_vec()).unwrap() }
}

fn envelope(op: &str, inner: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
         <soapenv:Envelope xmlns:soapenv=\"{SOAP_ENV}\" xmlns:udr=\"{NS}\">\
         <soapenv:Header/><soapenv:Body><udr:{op}>{inner}</udr:{op}></soapenv:Body>\
         </soapenv:Envelope>"
    )
}

async fn call(u: &TestUdr, op: &str, inner: &str) -> Answer {
    let action = format!("\"{NS}/{op}\"");
    post(
        u,
        &[("content-type", "text/xml; charset=utf-8"), ("soapaction", &action)],
        &envelope(op, inner),
    )
    .await
}

/// The `{op}Response` element of a successful answer.
fn response(a: &Answer, op: &str) -> Element {
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.content_type, "text/xml; charset=utf-8");
    let root = xml::parse(&a.body).unwrap();
    assert_eq!((root.ns.as_deref(), root.name.as_str()), (Some(SOAP_ENV), "Envelope"));
    let body = root.child("Body").unwrap();
    let r = &body.children[0];
    assert_eq!((r.ns.as_deref(), r.name.clone()), (Some(NS), format!("{op}Response")));
    r.clone()
}

/// Asserts a SOAP fault (HTTP 500) with this faultcode and detail code; returns the field.
fn fault(a: &Answer, faultcode: &str, code: &str) -> Option<String> {
    assert_eq!(a.status, 500, "{}", a.body);
    assert_eq!(a.content_type, "text/xml; charset=utf-8");
    let root = xml::parse(&a.body).unwrap();
    let f = root.child("Body").unwrap().child("Fault").expect("a Fault");
    assert_eq!(f.ns.as_deref(), Some(SOAP_ENV));
    assert_eq!(
        f.child_text("faultcode"),
        Some(format!("soapenv:{faultcode}").as_str()),
        "{}",
        a.body
    );
    assert!(!f.child_text("faultstring").unwrap().is_empty());
    let e = f.child("detail").unwrap().child("error").unwrap();
    assert_eq!(e.ns.as_deref(), Some(NS));
    assert_eq!(e.child_text("code"), Some(code), "{}", a.body);
    assert!(!e.child_text("message").unwrap().is_empty());
    e.child_text("field").map(str::to_owned)
}

fn texts<'a>(el: &'a Element, name: &'a str) -> Vec<&'a str> {
    el.children_named(name).map(|e| e.text.trim()).collect()
}

const SLF_ENTRY: &str = "<udr:entry><udr:subscriberId>imsi-001010000000011</udr:subscriberId>\
    <udr:subscriberId>msisdn-33600000011</udr:subscriberId>\
    <udr:group><udr:nfType>UDM</udr:nfType><udr:groupId>udm-1</udr:groupId></udr:group>\
    <udr:group><udr:nfType>PCF</udr:nfType><udr:groupId>pcf-1</udr:groupId></udr:group></udr:entry>";

async fn slf_entries_every_operation() {
    let dir = common::state_dir();
    let u = TestUdr::start(dir.path(), UdrConfig::default()).await;

    let r = response(&call(&u, "CreateSlfEntry", SLF_ENTRY).await, "CreateSlfEntry");
    assert_eq!(r.children_named("entry").count(), 2);
    let again = call(&u, "CreateSlfEntry", SLF_ENTRY).await;
    fault(&again, "Client", "ALREADY_EXISTS");

    let by_id = "<udr:subscriberId>imsi-001010000000011</udr:subscriberId>";
    let r = response(&call(&u, "GetSlfEntry", by_id).await, "GetSlfEntry");
    let e = r.child("entry").unwrap();
    assert_eq!(texts(e, "subscriberId"), ["imsi-001010000000011"]);
    let groups: Vec<_> = e
        .children_named("group")
        .map(|g| (g.child_text("nfType").unwrap(), g.child_text("groupId").unwrap()))
        .collect();
    assert_eq!(groups, [("PCF", "pcf-1"), ("UDM", "udm-1")]);
    // The SLF lookup (Nudr_GroupIDmap) sees what SOAP wrote.
    let c = client();
    let url =
        u.url("/nudr-group-id-map/v1/nf-group-ids?nf-type=UDM&subscriberId=msisdn-33600000011");
    assert_eq!(body(&get(&c, &url).await), serde_json::json!({"UDM": "udm-1"}));

    let upd = SLF_ENTRY.replace("udm-1", "udm-2");
    response(&call(&u, "UpdateSlfEntry", &upd).await, "UpdateSlfEntry");
    assert_eq!(body(&get(&c, &url).await), serde_json::json!({"UDM": "udm-2"}));
    let unknown = SLF_ENTRY.replace("imsi-001010000000011", "imsi-001010000000099");
    fault(&call(&u, "UpdateSlfEntry", &unknown).await, "Client", "NOT_FOUND");
    // The refused update wrote nothing, not even its known identity.
    assert_eq!(body(&get(&c, &url).await), serde_json::json!({"UDM": "udm-2"}));

    let del = "<udr:subscriberId>imsi-001010000000011</udr:subscriberId>\
               <udr:subscriberId>msisdn-33600000011</udr:subscriberId>";
    let r = response(&call(&u, "DeleteSlfEntry", del).await, "DeleteSlfEntry");
    assert_eq!(r.child_text("deleted"), Some("2"));
    fault(&call(&u, "GetSlfEntry", by_id).await, "Client", "NOT_FOUND");
    fault(&call(&u, "DeleteSlfEntry", del).await, "Client", "NOT_FOUND");
    u.stop().await;
}

async fn eir_entries_every_operation() {
    let dir = common::state_dir();
    let u = TestUdr::start(dir.path(), UdrConfig::default()).await;
    let c = client();
    let status = |pei: &str| u.url(&format!("/n5g-eir-eic/v1/equipment-status?pei={pei}"));

    let imei =
        "<udr:entry><udr:imei>352099001761481</udr:imei><udr:status>BLACKLISTED</udr:status>\
                <udr:supi>imsi-001010000000001</udr:supi></udr:entry>";
    let r = response(&call(&u, "CreateEirEntry", imei).await, "CreateEirEntry");
    let e = r.child("entry").unwrap();
    assert_eq!(e.child_text("imei"), Some("35209900176148"), "answered as 14 digits");
    assert_eq!(texts(e, "supi"), ["imsi-001010000000001"]);
    fault(&call(&u, "CreateEirEntry", imei).await, "Client", "ALREADY_EXISTS");
    // The N5g-eir lookup and the REST provisioning see what SOAP wrote.
    let url = status("imei-352099001761481&supi=imsi-001010000000001");
    assert_eq!(body(&get(&c, &url).await)["status"], "BLACKLISTED");
    let rest = body(&get(&c, &u.url("/udr-prov/v1/eir/imeis/35209900176148")).await);
    assert_eq!(rest["supis"], serde_json::json!(["imsi-001010000000001"]));

    let by_imei = "<udr:imei>35209900176148</udr:imei>";
    let r = response(&call(&u, "GetEirEntry", by_imei).await, "GetEirEntry");
    assert_eq!(r.child("entry").unwrap().child_text("status"), Some("BLACKLISTED"));
    let upd = "<udr:entry><udr:imei>35209900176148</udr:imei><udr:status>WHITELISTED</udr:status>\
               </udr:entry>";
    response(&call(&u, "UpdateEirEntry", upd).await, "UpdateEirEntry");
    assert_eq!(body(&get(&c, &url).await)["status"], "WHITELISTED");
    let unknown = upd.replace("35209900176148", "35209900176155");
    fault(&call(&u, "UpdateEirEntry", &unknown).await, "Client", "NOT_FOUND");

    // Ranges: created, overlap refused, updated, deleted.
    let range = "<udr:entry><udr:start>49015400000000</udr:start><udr:end>49015499999999</udr:end>\
                 <udr:status>GREYLISTED</udr:status><udr:gpsi>msisdn-33600000001</udr:gpsi></udr:entry>";
    response(&call(&u, "CreateEirEntry", range).await, "CreateEirEntry");
    assert_eq!(body(&get(&c, &status("imeisv-4901545555555501")).await)["status"], "GREYLISTED");
    let overlap =
        "<udr:entry><udr:start>49015450000000</udr:start><udr:end>49015460000000</udr:end>\
                   <udr:status>WHITELISTED</udr:status></udr:entry>";
    let f = fault(&call(&u, "CreateEirEntry", overlap).await, "Client", "ALREADY_EXISTS");
    assert_eq!(f.as_deref(), Some("end"));
    fault(&call(&u, "UpdateEirEntry", overlap).await, "Client", "NOT_FOUND");
    let by_start = "<udr:start>49015400000000</udr:start>";
    let r = response(&call(&u, "GetEirEntry", by_start).await, "GetEirEntry");
    let e = r.child("entry").unwrap();
    assert_eq!(
        (e.child_text("end"), texts(e, "gpsi")),
        (Some("49015499999999"), vec!["msisdn-33600000001"])
    );
    response(&call(&u, "DeleteEirEntry", by_start).await, "DeleteEirEntry");
    fault(&call(&u, "GetEirEntry", by_start).await, "Client", "NOT_FOUND");
    fault(&call(&u, "DeleteEirEntry", by_start).await, "Client", "NOT_FOUND");

    // Wrong fields: each a Client fault naming the element.
    let cases = [
        ("GetEirEntry", "", "MANDATORY_FIELD_MISSING", "imei"),
        ("GetEirEntry", "<udr:imei>352099001761482</udr:imei>", "INVALID_FIELD", "imei"),
        ("GetEirEntry", "<udr:imei>35209900176148</udr:imei><udr:start>1</udr:start>", "INVALID_FIELD", "imei"),
        ("CreateEirEntry", "", "MANDATORY_FIELD_MISSING", "entry"),
        ("CreateEirEntry", "<udr:entry><udr:imei>35209900176162</udr:imei></udr:entry>", "MANDATORY_FIELD_MISSING", "status"),
        ("CreateEirEntry", "<udr:entry><udr:imei>35209900176162</udr:imei><udr:status>OK</udr:status></udr:entry>", "INVALID_FIELD", "status"),
        ("CreateEirEntry", "<udr:entry><udr:imei>35209900176162</udr:imei><udr:status>BLACKLISTED</udr:status><udr:supi>bob</udr:supi></udr:entry>", "INVALID_FIELD", "supi"),
        ("CreateEirEntry", "<udr:entry><udr:start>35209900000009</udr:start><udr:end>35209900000001</udr:end><udr:status>GREYLISTED</udr:status></udr:entry>", "INVALID_FIELD", "end"),
    ];
    for (op, inner, code, field) in cases {
        let f = fault(&call(&u, op, inner).await, "Client", code);
        assert_eq!(f.as_deref(), Some(field), "{op} {inner}");
    }
    response(&call(&u, "DeleteEirEntry", by_imei).await, "DeleteEirEntry");
    fault(&call(&u, "DeleteEirEntry", by_imei).await, "Client", "NOT_FOUND");
    u.stop().await;
}

async fn policy_profiles_every_operation() {
    let dir = common::state_dir();
    let u = TestUdr::start(dir.path(), UdrConfig::default()).await;
    let c = client();
    let ue = "<udr:ueId>imsi-001010000000031</udr:ueId>";
    let create = format!(
        "{ue}<udr:profile><udr:amData>{{\"subscCats\":[\"gold\"]}}</udr:amData>\
         <udr:umData>{{\"u1\":{{\"limitId\":\"u1\"}}}}</udr:umData></udr:profile>"
    );
    let r = response(&call(&u, "CreatePolicyProfile", &create).await, "CreatePolicyProfile");
    assert_eq!(r.child_text("ueId"), Some("imsi-001010000000031"));
    let am: serde_json::Value =
        serde_json::from_str(r.child("profile").unwrap().child_text("amData").unwrap()).unwrap();
    assert_eq!(am, serde_json::json!({"subscCats": ["gold"]}));
    fault(&call(&u, "CreatePolicyProfile", &create).await, "Client", "ALREADY_EXISTS");

    // N36 and the REST provisioning see what SOAP wrote.
    let n36 = u.url("/nudr-dr/v2/policy-data/ues/imsi-001010000000031/am-data");
    assert_eq!(body(&get(&c, &n36).await), serde_json::json!({"subscCats": ["gold"]}));
    let rest = u.url("/udr-prov/v1/policy-data/ues/imsi-001010000000031");
    assert_eq!(body(&get(&c, &rest).await)["umData"]["u1"]["limitId"], "u1");

    let r = response(&call(&u, "GetPolicyProfile", ue).await, "GetPolicyProfile");
    let p = r.child("profile").unwrap();
    let names: Vec<&str> = p.children.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["amData", "umData"]);

    // Update replaces the whole profile: umData goes, smData comes.
    let update = format!(
        "{ue}<udr:profile><udr:amData>{{\"subscCats\":[\"silver\"]}}</udr:amData>\
         <udr:smData>{{\"smPolicySnssaiData\":{{\"1\":{{\"snssai\":{{\"sst\":1}}}}}}}}</udr:smData>\
         </udr:profile>"
    );
    let r = response(&call(&u, "UpdatePolicyProfile", &update).await, "UpdatePolicyProfile");
    let names: Vec<&str> =
        r.child("profile").unwrap().children.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["amData", "smData"]);
    assert_eq!(body(&get(&c, &n36).await), serde_json::json!({"subscCats": ["silver"]}));
    let um = u.url("/nudr-dr/v2/policy-data/ues/imsi-001010000000031/sm-data/u1");
    assert_eq!(get(&c, &um).await.status().as_u16(), 404);
    let other = update.replace("imsi-001010000000031", "imsi-001010000000032");
    fault(&call(&u, "UpdatePolicyProfile", &other).await, "Client", "NOT_FOUND");

    let cases = [
        ("GetPolicyProfile", "", "MANDATORY_FIELD_MISSING", "ueId"),
        ("GetPolicyProfile", "<udr:ueId>imsi-12</udr:ueId>", "INVALID_FIELD", "ueId"),
        ("CreatePolicyProfile", "<udr:ueId>imsi-001010000000033</udr:ueId>", "MANDATORY_FIELD_MISSING", "profile"),
        ("CreatePolicyProfile", "<udr:ueId>imsi-001010000000033</udr:ueId><udr:profile><udr:amData>{</udr:amData></udr:profile>", "INVALID_FIELD", "amData"),
        ("CreatePolicyProfile", "<udr:ueId>imsi-001010000000033</udr:ueId><udr:profile><udr:smData>{}</udr:smData></udr:profile>", "INVALID_FIELD", "smData"),
        ("CreatePolicyProfile", "<udr:ueId>imsi-001010000000033</udr:ueId><udr:profile><udr:colour>{}</udr:colour></udr:profile>", "INVALID_FIELD", "profile"),
        ("CreatePolicyProfile", "<udr:ueId>imsi-001010000000033</udr:ueId><udr:profile/>", "INVALID_FIELD", "profile"),
    ];
    for (op, inner, code, field) in cases {
        let f = fault(&call(&u, op, inner).await, "Client", code);
        assert_eq!(f.as_deref(), Some(field), "{op} {inner}");
    }
    // Nothing was written by the refused creations.
    let none = "<udr:ueId>imsi-001010000000033</udr:ueId>";
    fault(&call(&u, "GetPolicyProfile", none).await, "Client", "NOT_FOUND");

    let r = response(&call(&u, "DeletePolicyProfile", ue).await, "DeletePolicyProfile");
    assert!(r.children.is_empty());
    assert_eq!(get(&c, &rest).await.status().as_u16(), 404);
    fault(&call(&u, "DeletePolicyProfile", ue).await, "Client", "NOT_FOUND");
    fault(&call(&u, "GetPolicyProfile", ue).await, "Client", "NOT_FOUND");
    u.stop().await;
}

const PROFILE: &str = "<udr:profile><udr:publicIdentity>sip:carol@ims.example</udr:publicIdentity>\
    <udr:publicIdentity>tel:+33600000021</udr:publicIdentity><udr:msisdn>33600000021</udr:msisdn>\
    <udr:imsUserState>REGISTERED</udr:imsUserState><udr:scscfName>sip:scscf1.ims.example</udr:scscfName>\
    <udr:repositoryData><udr:serviceIndication>mmtel</udr:serviceIndication>\
    <udr:serviceData><cfu xmlns=\"urn:x\"><to>tel:+331</to></cfu></udr:serviceData></udr:repositoryData>\
    </udr:profile>";

/// A node acting as an AS, collecting the PNRs it receives.
async fn as_node(
    udr_sh: SocketAddr,
) -> (DiameterNode, tokio::sync::mpsc::UnboundedReceiver<Message>) {
    let mut c = NodeConfig::new("as1.as.example", "as.example");
    c.applications = vec![ApplicationId::tgpp(sh::APP_ID)];
    c.peers = vec![PeerConfig::connect("udr.fivecore.local", udr_sh)];
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let node = DiameterNode::builder(c)
        .handler(sh::APP_ID, move |req: Message| {
            let tx = tx.clone();
            async move {
                let a = Message::answer_to(&req)
                    .avp(vendor_specific_auth_app(VENDOR_3GPP, sh::APP_ID))
                    .avp(base::AUTH_SESSION_STATE.enumerated(1))
                    .result_code_avp(2001);
                let _ = tx.send(req);
                a
            }
        })
        .start()
        .await
        .unwrap();
    assert!(node.wait_open("udr.fivecore.local", T).await);
    (node, rx)
}

fn sh_request(node: &DiameterNode, cmd: u32, user: &str, refs: &[u32]) -> Message {
    let mut m = Message::request(sh::APP_ID, cmd)
        .session_id_avp(&node.new_session_id())
        .avp(vendor_specific_auth_app(VENDOR_3GPP, sh::APP_ID))
        .avp(base::AUTH_SESSION_STATE.enumerated(1))
        .origin("as1.as.example", "as.example")
        .destination("fivecore.local", None)
        .avp(user_identity_public(user));
    for r in refs {
        m.push(sh::DATA_REFERENCE.enumerated(*r));
    }
    m
}

async fn sh_profiles_over_soap_and_sh_see_the_same_data() {
    let dir = common::state_dir();
    let config = UdrConfig {
        sh: ShConfig {
            enabled: true,
            listen: SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0),
            ..ShConfig::default()
        },
        ..UdrConfig::default()
    };
    let u = TestUdr::start(dir.path(), config).await;
    let r = response(&call(&u, "CreateShProfile", PROFILE).await, "CreateShProfile");
    let p = r.child("profile").unwrap();
    assert_eq!(texts(p, "publicIdentity"), ["sip:carol@ims.example", "tel:+33600000021"]);
    assert_eq!(p.child("repositoryData").unwrap().child_text("sequenceNumber"), Some("0"));
    fault(&call(&u, "CreateShProfile", PROFILE).await, "Client", "ALREADY_EXISTS");

    // Sh reads what SOAP wrote, and an AS's PUR shows in a SOAP Get.
    let sh_addr = u.udr.sh.node().unwrap().local_addr().unwrap();
    let (node, mut pnrs) = as_node(sh_addr).await;
    let m = sh_request(
        &node,
        sh::CMD_USER_DATA,
        "sip:carol@ims.example",
        &[dr::REPOSITORY_DATA, dr::IMS_USER_STATE],
    )
    .avp(sh::SERVICE_INDICATION.utf8("mmtel"));
    let uda = node.request(m).await.unwrap();
    assert_eq!(uda.result_code(), Some(2001));
    let doc = String::from_utf8(uda.user_data().unwrap().to_vec()).unwrap();
    assert!(
        doc.contains("<ServiceData><cfu xmlns=\"urn:x\"><to>tel:+331</to></cfu></ServiceData>"),
        "{doc}"
    );
    assert!(doc.contains("<IMSUserState>1</IMSUserState>"), "{doc}");
    let pur_doc = "<Sh-Data><RepositoryData><ServiceIndication>mmtel</ServiceIndication>\
                   <SequenceNumber>1</SequenceNumber><ServiceData><cfu xmlns=\"urn:x\"><to>tel:+339</to></cfu></ServiceData>\
                   </RepositoryData></Sh-Data>";
    let m =
        sh_request(&node, sh::CMD_PROFILE_UPDATE, "sip:carol@ims.example", &[dr::REPOSITORY_DATA])
            .avp(sh::USER_DATA.bytes(pur_doc.as_bytes().to_vec()));
    assert_eq!(node.request(m).await.unwrap().result_code(), Some(2001));
    let by_msisdn = "<udr:msisdn>33600000021</udr:msisdn>";
    let r = response(&call(&u, "GetShProfile", by_msisdn).await, "GetShProfile");
    let repo = r.child("profile").unwrap().child("repositoryData").unwrap();
    assert_eq!(repo.child_text("sequenceNumber"), Some("1"));
    let text = &r.child("profile").unwrap();
    assert_eq!(text.child_text("imsUserState"), Some("REGISTERED"));

    // Subscribed to the repository data and the IMS user state: a provisioning Update is pushed.
    let m = sh_request(
        &node,
        sh::CMD_SUBSCRIBE_NOTIFICATIONS,
        "sip:carol@ims.example",
        &[dr::REPOSITORY_DATA, dr::IMS_USER_STATE],
    )
    .avp(sh::SUBS_REQ_TYPE.enumerated(0))
    .avp(sh::SERVICE_INDICATION.utf8("mmtel"));
    assert_eq!(node.request(m).await.unwrap().result_code(), Some(2001));
    let changed = PROFILE.replace("REGISTERED", "NOT_REGISTERED").replace("tel:+331", "tel:+332");
    let key = "<udr:publicIdentity>tel:+33600000021</udr:publicIdentity>";
    let r =
        response(&call(&u, "UpdateShProfile", &format!("{key}{changed}")).await, "UpdateShProfile");
    let repo = r.child("profile").unwrap().child("repositoryData").unwrap();
    assert_eq!(repo.child_text("sequenceNumber"), Some("2"), "provisioning continues the sequence");
    let pnr = tokio::time::timeout(T, pnrs.recv()).await.unwrap().unwrap();
    assert_eq!(pnr.command_code(), sh::CMD_PUSH_NOTIFICATION);
    let doc = String::from_utf8(pnr.user_data().unwrap().to_vec()).unwrap();
    assert!(doc.contains("<SequenceNumber>2</SequenceNumber><ServiceData><cfu xmlns=\"urn:x\"><to>tel:+332</to></cfu></ServiceData>"), "{doc}");
    assert!(doc.contains("<IMSUserState>0</IMSUserState>"), "{doc}");
    // The AS's next PUR follows the provisioned number.
    let stale =
        sh_request(&node, sh::CMD_PROFILE_UPDATE, "sip:carol@ims.example", &[dr::REPOSITORY_DATA])
            .avp(
                sh::USER_DATA
                    .bytes(pur_doc.replace("<SequenceNumber>1", "<SequenceNumber>2").into_bytes()),
            );
    let ans = node.request(stale).await.unwrap();
    assert_eq!(
        ans.experimental_result().map(|e| e.code),
        Some(er::DIAMETER_ERROR_TRANSPARENT_DATA_OUT_OF_SYNC)
    );

    // Delete: Sh no longer knows the user, and the subscriptions are gone.
    response(&call(&u, "DeleteShProfile", key).await, "DeleteShProfile");
    assert!(u.udr.sh.subscriptions.is_empty());
    let m = sh_request(&node, sh::CMD_USER_DATA, "sip:carol@ims.example", &[dr::MSISDN]);
    let ans = node.request(m).await.unwrap();
    assert_eq!(ans.experimental_result().map(|e| e.code), Some(er::DIAMETER_ERROR_USER_UNKNOWN));
    fault(&call(&u, "GetShProfile", key).await, "Client", "NOT_FOUND");
    fault(&call(&u, "UpdateShProfile", &format!("{key}{PROFILE}")).await, "Client", "NOT_FOUND");
    fault(&call(&u, "DeleteShProfile", key).await, "Client", "NOT_FOUND");
    node.shutdown().await;
    u.stop().await;
}

async fn every_mistake_is_a_fault() {
    let dir = common::state_dir();
    let u = TestUdr::start(dir.path(), UdrConfig::default()).await;
    let xml_ct = ("content-type", "text/xml; charset=utf-8");
    let get = envelope("GetSlfEntry", "<udr:subscriberId>imsi-001010000000011</udr:subscriberId>");

    // Transport-level mistakes.
    let a = post(&u, &[("content-type", "application/json"), ("soapaction", "")], &get).await;
    fault(&a, "Client", "UNSUPPORTED_MEDIA_TYPE");
    fault(&post(&u, &[xml_ct], &get).await, "Client", "SOAP_ACTION_MISSING");
    let a = post(
        &u,
        &[xml_ct, ("soapaction", "\"urn:fivecore:udr:provisioning:1/DeleteSlfEntry\"")],
        &get,
    )
    .await;
    fault(&a, "Client", "SOAP_ACTION_MISMATCH");
    // An empty SOAPAction is allowed (SOAP 1.1 §6.1.1: the intent is the body's).
    let a = post(&u, &[xml_ct, ("soapaction", "\"\"")], &get).await;
    fault(&a, "Client", "NOT_FOUND");

    // Envelope-level mistakes.
    let sa = ("soapaction", "");
    fault(
        &post(&u, &[xml_ct, sa], "<soapenv:Envelope xmlns:soapenv=").await,
        "Client",
        "MALFORMED_XML",
    );
    fault(&post(&u, &[xml_ct, sa], "<a><b></a>").await, "Client", "MALFORMED_XML");
    fault(&post(&u, &[xml_ct, sa], "<Request/>").await, "Client", "INVALID_ENVELOPE");
    // An Envelope outside SOAP 1.1's namespace, unqualified included (SOAP 1.1 §4.4.1).
    fault(&post(&u, &[xml_ct, sa], "<Envelope/>").await, "VersionMismatch", "VERSION_MISMATCH");
    let soap12 = get.replace(SOAP_ENV, "http://www.w3.org/2003/05/soap-envelope");
    fault(&post(&u, &[xml_ct, sa], &soap12).await, "VersionMismatch", "VERSION_MISMATCH");
    let must = get.replace(
        "<soapenv:Header/>",
        "<soapenv:Header><x:Auth xmlns:x=\"urn:other\" soapenv:mustUnderstand=\"1\"/></soapenv:Header>",
    );
    fault(&post(&u, &[xml_ct, sa], &must).await, "MustUnderstand", "MUST_UNDERSTAND");
    let no_body = format!(
        "<soapenv:Envelope xmlns:soapenv=\"{SOAP_ENV}\"><soapenv:Header/></soapenv:Envelope>"
    );
    fault(&post(&u, &[xml_ct, sa], &no_body).await, "Client", "INVALID_ENVELOPE");
    let doctype = format!("<!DOCTYPE x [<!ENTITY e \"e\">]>{get}");
    fault(&post(&u, &[xml_ct, sa], &doctype).await, "Client", "MALFORMED_XML");

    // Operation-level mistakes.
    fault(&call(&u, "GetImsiEntry", "").await, "Client", "UNKNOWN_OPERATION");
    let other_ns = get.replace(&format!("xmlns:udr=\"{NS}\""), "xmlns:udr=\"urn:other\"");
    fault(&post(&u, &[xml_ct, sa], &other_ns).await, "Client", "UNKNOWN_OPERATION");
    assert_eq!(
        fault(&call(&u, "GetSlfEntry", "").await, "Client", "MANDATORY_FIELD_MISSING").as_deref(),
        Some("subscriberId")
    );
    let bad_id = "<udr:subscriberId>imsi-12</udr:subscriberId>";
    assert_eq!(
        fault(&call(&u, "GetSlfEntry", bad_id).await, "Client", "INVALID_FIELD").as_deref(),
        Some("subscriberId")
    );
    let no_group =
        "<udr:entry><udr:subscriberId>imsi-001010000000011</udr:subscriberId></udr:entry>";
    assert_eq!(
        fault(&call(&u, "CreateSlfEntry", no_group).await, "Client", "MANDATORY_FIELD_MISSING")
            .as_deref(),
        Some("group")
    );
    let bad_type = SLF_ENTRY.replace(">UDM<", ">udm<");
    assert_eq!(
        fault(&call(&u, "CreateSlfEntry", &bad_type).await, "Client", "INVALID_FIELD").as_deref(),
        Some("group")
    );
    let bad_state = PROFILE.replace(">REGISTERED<", ">ONLINE<");
    assert_eq!(
        fault(&call(&u, "CreateShProfile", &bad_state).await, "Client", "INVALID_FIELD").as_deref(),
        Some("imsUserState")
    );
    let bad_uri = PROFILE.replace("sip:carol@ims.example", "carol");
    assert_eq!(
        fault(&call(&u, "CreateShProfile", &bad_uri).await, "Client", "INVALID_FIELD").as_deref(),
        Some("publicIdentity")
    );
    let unknown_el = PROFILE.replace("<udr:msisdn>", "<udr:nickname>x</udr:nickname><udr:msisdn>");
    assert_eq!(
        fault(&call(&u, "CreateShProfile", &unknown_el).await, "Client", "INVALID_FIELD")
            .as_deref(),
        Some("profile")
    );
    assert_eq!(
        fault(&call(&u, "CreateShProfile", "").await, "Client", "MANDATORY_FIELD_MISSING")
            .as_deref(),
        Some("profile")
    );
    let both =
        "<udr:publicIdentity>sip:a@b</udr:publicIdentity><udr:msisdn>33600000021</udr:msisdn>";
    fault(&call(&u, "GetShProfile", both).await, "Client", "INVALID_FIELD");
    let unknown = "<udr:publicIdentity>sip:nobody@ims.example</udr:publicIdentity>";
    fault(&call(&u, "GetShProfile", unknown).await, "Client", "NOT_FOUND");
    // Nothing of the refused creations was written.
    fault(
        &call(&u, "GetShProfile", "<udr:msisdn>33600000021</udr:msisdn>").await,
        "Client",
        "NOT_FOUND",
    );
    u.stop().await;
}

/// docs/udr.wsdl lists exactly the operations the UDR dispatches, each with its soapAction and
/// its request and response elements.
#[test]
fn wsdl_operations_match_the_dispatch_table() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/udr.wsdl");
    let text = std::fs::read_to_string(path).unwrap();
    let wsdl = xml::parse(&text).unwrap();
    assert_eq!(wsdl.name, "definitions");
    assert_eq!(wsdl.attr("targetNamespace"), Some(NS));
    let mut served = udr::soap::operation_names();
    served.sort();

    let port_type = wsdl.child("portType").unwrap();
    let mut in_port: Vec<String> =
        port_type.children_named("operation").map(|o| o.attr("name").unwrap().to_owned()).collect();
    in_port.sort();
    assert_eq!(in_port, served, "portType operations");

    let binding = wsdl.child("binding").unwrap();
    let mut in_binding = Vec::new();
    for o in binding.children_named("operation") {
        let name = o.attr("name").unwrap().to_owned();
        let action = o.child("operation").unwrap().attr("soapAction").unwrap();
        assert_eq!(action, udr::soap::soap_action(&name));
        in_binding.push(name);
    }
    in_binding.sort();
    assert_eq!(in_binding, served, "binding operations");

    let schema = wsdl.child("types").unwrap().child("schema").unwrap();
    let elements: Vec<&str> =
        schema.children_named("element").map(|e| e.attr("name").unwrap()).collect();
    for op in &served {
        assert!(elements.contains(&op.as_str()), "no element {op}");
        assert!(elements.contains(&format!("{op}Response").as_str()), "no element {op}Response");
    }
    let location = wsdl.child("service").unwrap().child("port").unwrap().child("address").unwrap();
    assert!(location.attr("location").unwrap().ends_with(udr::soap::PATH));
}

/// Lists are capped (`[udr.provisioning]`): at the limit a request works; past it, however long,
/// it is one Client fault naming the list's element.
async fn list_limits() {
    let dir = common::state_dir();
    let u = TestUdr::start(dir.path(), UdrConfig::default()).await;
    let ids = |n: usize, at: usize| -> String {
        (0..n)
            .map(|i| format!("<udr:subscriberId>imsi-0010{:011}</udr:subscriberId>", at + i))
            .collect()
    };
    let group =
        "<udr:group><udr:nfType>UDM</udr:nfType><udr:groupId>udm-1</udr:groupId></udr:group>";

    // SLF: 32 identities per entry, 1000 subscriberIds per Get or Delete.
    let entry = |n: usize, at: usize| format!("<udr:entry>{}{group}</udr:entry>", ids(n, at));
    response(&call(&u, "CreateSlfEntry", &entry(32, 0)).await, "CreateSlfEntry");
    let f = fault(&call(&u, "CreateSlfEntry", &entry(33, 100)).await, "Client", "INVALID_FIELD");
    assert_eq!(f.as_deref(), Some("subscriberId"));
    let r = response(&call(&u, "GetSlfEntry", &ids(32, 0)).await, "GetSlfEntry");
    assert_eq!(r.children_named("entry").count(), 32);
    // 1000 named: past the limit check, the first unknown one is the answer.
    fault(&call(&u, "GetSlfEntry", &ids(1000, 0)).await, "Client", "NOT_FOUND");
    // 30,000 (1.7 MB): refused as a whole.
    let a = call(&u, "GetSlfEntry", &ids(30_000, 0)).await;
    assert_eq!(fault(&a, "Client", "INVALID_FIELD").as_deref(), Some("subscriberId"));
    assert!(a.body.contains("at most 1000 subscriberIds"), "{}", a.body);
    let twice = format!("{}{}", ids(2, 0), ids(1, 0));
    let a = call(&u, "DeleteSlfEntry", &twice).await;
    assert_eq!(fault(&a, "Client", "INVALID_FIELD").as_deref(), Some("subscriberId"));
    assert!(a.body.contains("listed twice"), "{}", a.body);

    // EIR: 100 SUPIs (and GPSIs) per entry.
    let eir = |imei: &str, n: usize| {
        let supis: String =
            (0..n).map(|i| format!("<udr:supi>imsi-0010{i:011}</udr:supi>")).collect();
        format!("<udr:entry><udr:imei>{imei}</udr:imei><udr:status>BLACKLISTED</udr:status>{supis}</udr:entry>")
    };
    let r =
        response(&call(&u, "CreateEirEntry", &eir("35209900176148", 100)).await, "CreateEirEntry");
    assert_eq!(r.child("entry").unwrap().children_named("supi").count(), 100);
    let a = call(&u, "CreateEirEntry", &eir("35209900176149", 40_000)).await;
    assert_eq!(fault(&a, "Client", "INVALID_FIELD").as_deref(), Some("supi"));
    fault(
        &call(&u, "GetEirEntry", "<udr:imei>35209900176149</udr:imei>").await,
        "Client",
        "NOT_FOUND",
    );

    // Sh: 100 identities per profile (publicIdentity and msisdn together), 256 KiB.
    let sh = |n: usize, at: usize| {
        let msisdns: String =
            (1..n).map(|i| format!("<udr:msisdn>336{:08}</udr:msisdn>", at + i)).collect();
        format!("<udr:profile><udr:publicIdentity>sip:u{at}@ims.example</udr:publicIdentity>{msisdns}</udr:profile>")
    };
    let r = response(&call(&u, "CreateShProfile", &sh(100, 0)).await, "CreateShProfile");
    assert_eq!(r.child("profile").unwrap().children_named("msisdn").count(), 99);
    let a = call(&u, "CreateShProfile", &sh(30_000, 100_000)).await;
    assert_eq!(fault(&a, "Client", "INVALID_FIELD").as_deref(), Some("publicIdentity"));
    fault(
        &call(
            &u,
            "GetShProfile",
            "<udr:publicIdentity>sip:u100000@ims.example</udr:publicIdentity>",
        )
        .await,
        "Client",
        "NOT_FOUND",
    );
    let big = "x".repeat(10_000);
    let repo: String = (0..30)
        .map(|i| format!("<udr:repositoryData><udr:serviceIndication>s{i}</udr:serviceIndication><udr:serviceData><d>{big}</d></udr:serviceData></udr:repositoryData>"))
        .collect();
    let p = format!("<udr:profile><udr:publicIdentity>sip:big@ims.example</udr:publicIdentity>{repo}</udr:profile>");
    let a = call(&u, "CreateShProfile", &p).await;
    assert_eq!(fault(&a, "Client", "INVALID_FIELD").as_deref(), Some("profile"));
    assert!(a.body.contains("at most 262144 bytes"), "{}", a.body);
    u.stop().await;
}

/// An element the WSDL does not name is refused wherever it stands, by a fault naming it: in the
/// operation element (GetPolicyProfile ignored it once), in an entry, a group, a profile.
async fn unknown_elements_are_refused_everywhere() {
    let dir = common::state_dir();
    let u = TestUdr::start(dir.path(), UdrConfig::default()).await;
    let cases = [
        ("GetPolicyProfile", "<udr:ueId>imsi-001010000000001</udr:ueId><udr:colour>red</udr:colour>", "operation", "<colour>"),
        ("DeletePolicyProfile", "<udr:ueId>imsi-001010000000001</udr:ueId><udr:profile/>", "operation", "<profile>"),
        ("CreatePolicyProfile", "<udr:ueId>imsi-001010000000001</udr:ueId><udr:profile><udr:amData>{}</udr:amData><udr:colour/></udr:profile>", "profile", "<colour>"),
        ("GetSlfEntry", "<udr:subscriberId>imsi-001010000000001</udr:subscriberId><udr:groupId>x</udr:groupId>", "operation", "<groupId>"),
        ("CreateSlfEntry", "<udr:entry><udr:subscriberId>imsi-001010000000001</udr:subscriberId><udr:group><udr:nfType>UDM</udr:nfType><udr:groupId>u</udr:groupId><udr:colour/></udr:group></udr:entry>", "group", "<colour>"),
        ("CreateSlfEntry", "<udr:entry><udr:subscriberId>imsi-001010000000001</udr:subscriberId><udr:supi>x</udr:supi></udr:entry>", "entry", "<supi>"),
        ("GetEirEntry", "<udr:imei>35209900176148</udr:imei><udr:end>35209900176149</udr:end>", "operation", "<end>"),
        ("CreateEirEntry", "<udr:entry><udr:imei>35209900176148</udr:imei><udr:status>BLACKLISTED</udr:status><udr:colour/></udr:entry>", "entry", "<colour>"),
        ("GetShProfile", "<udr:msisdn>33600000001</udr:msisdn><udr:colour/>", "operation", "<colour>"),
        ("CreateShProfile", "<udr:profile><udr:publicIdentity>sip:a@ims.example</udr:publicIdentity><udr:colour/></udr:profile>", "profile", "<colour>"),
        ("CreateShProfile", "<udr:profile><udr:publicIdentity>sip:a@ims.example</udr:publicIdentity><udr:repositoryData><udr:serviceIndication>s</udr:serviceIndication><udr:serviceData/><udr:colour/></udr:repositoryData></udr:profile>", "repositoryData", "<colour>"),
        // The right name in another namespace is another element.
        ("GetPolicyProfile", "<udr:ueId>imsi-001010000000001</udr:ueId><x:ueId xmlns:x=\"urn:other\">imsi-001010000000002</x:ueId>", "operation", "{urn:other}ueId"),
    ];
    for (op, inner, field, named) in cases {
        let a = call(&u, op, inner).await;
        assert_eq!(fault(&a, "Client", "INVALID_FIELD").as_deref(), Some(field), "{op} {inner}");
        assert!(a.body.contains(&xml::escape(named).into_owned()), "{op}: {}", a.body);
    }
    u.stop().await;
}

/// The SOAP endpoint answers in SOAP whatever `Accept` says, and what the SBI layers refuse
/// before the handler (an oversized body) is a SOAP fault too; JSON endpoints keep their 406.
async fn soap_clients_are_answered_in_soap() {
    let dir = common::state_dir();
    let u = TestUdr::start(dir.path(), UdrConfig::default()).await;
    let xml_ct = ("content-type", "text/xml; charset=utf-8");
    let action = ("soapaction", "\"urn:fivecore:udr:provisioning:1/CreateSlfEntry\"");
    let create = envelope("CreateSlfEntry", SLF_ENTRY);
    let a = post(&u, &[xml_ct, action, ("accept", "text/xml")], &create).await;
    response(&a, "CreateSlfEntry");
    let a = post(&u, &[xml_ct, action, ("accept", "text/xml, multipart/related")], &create).await;
    fault(&a, "Client", "ALREADY_EXISTS");
    let a = post(&u, &[xml_ct, action, ("accept", "application/soap+xml")], "<oops").await;
    fault(&a, "Client", "MALFORMED_XML");

    let huge = envelope("GetSlfEntry", &"<!-- padding -->".repeat(140_000));
    assert!(huge.len() > 2 * 1024 * 1024);
    let a = post(&u, &[xml_ct, action, ("accept", "text/xml")], &huge).await;
    fault(&a, "Client", "PAYLOAD_TOO_LARGE");

    let c = client();
    let r = c
        .get(&u.url("/udr-prov/v1/slf-entries/imsi-001010000000011"))
        .header("accept", "text/xml")
        .send()
        .await
        .unwrap();
    problem(&r, 406, "NOT_ACCEPTABLE");
    u.stop().await;
}

testkit::on_both_backends!(
    slf_entries_every_operation,
    eir_entries_every_operation,
    policy_profiles_every_operation,
    sh_profiles_over_soap_and_sh_see_the_same_data,
    every_mistake_is_a_fault,
    list_limits,
    unknown_elements_are_refused_everywhere,
    soap_clients_are_answered_in_soap,
);
