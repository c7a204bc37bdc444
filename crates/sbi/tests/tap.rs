//! The message-copy tap over real sockets: the server's (ingress request and response) and the
//! client's (egress request and response), with what each knows of the exchange.

mod common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use sbi::client::{ClientConfig, SbiClient};
use sbi::layer::tap::{Exchange, MessageCopy, MessageTap, Peer, TriggerPoint};
use sbi::{NfIdentity, Observability, SbiServer, ServerConfig};

/// One copy as owned values.
#[derive(Debug, Clone)]
struct Seen {
    trigger: TriggerPoint,
    operation: String,
    method: String,
    path: String,
    stream_id: u32,
    peer: String,
    status: Option<u16>,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    transaction: u64,
    answered_after_request: bool,
}

#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<Seen>>,
    next: std::sync::atomic::AtomicU64,
}

impl MessageTap for Recorder {
    fn copy(&self, m: &MessageCopy<'_>, ex: &mut Exchange) {
        if matches!(m.trigger, TriggerPoint::IngressRequest | TriggerPoint::EgressRequest) {
            ex.transaction = 1 + self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        self.seen.lock().unwrap().push(Seen {
            trigger: m.trigger,
            operation: m.operation.to_owned(),
            method: m.method.to_string(),
            path: m.uri.path().to_owned(),
            stream_id: m.stream_id,
            peer: match m.peer {
                Peer::Addr(a) => a.to_string(),
                Peer::Authority(a) => a.to_owned(),
                Peer::Unknown => String::new(),
            },
            status: m.status.map(|s| s.as_u16()),
            headers: m
                .headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("").to_owned()))
                .collect(),
            body: m.body.to_vec(),
            transaction: ex.transaction,
            answered_after_request: m.answer_at.is_none_or(|a| a >= m.request_at),
        });
    }
}

impl Recorder {
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn json(b: &[u8]) -> serde_json::Value {
    serde_json::from_slice(b).unwrap()
}

fn header<'a>(s: &'a Seen, name: &str) -> Option<&'a str> {
    s.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

#[tokio::test]
async fn server_and_client_copy_both_messages_of_an_exchange() {
    let server_tap = Arc::new(Recorder::default());
    let server = SbiServer::bind(
        ServerConfig::default(),
        NfIdentity::new("TEST", "7a0f6d3e-0000-4000-8000-000000000001"),
        common::router(Arc::default()),
        Observability::new(),
    )
    .await
    .unwrap()
    .with_tap(server_tap.clone());
    let addr: SocketAddr = server.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(async {
        let _ = stopped.await;
    }));

    let client = SbiClient::new(&ClientConfig::default()).unwrap();
    let client_tap = Arc::new(Recorder::default());
    assert!(client.set_tap(client_tap.clone()));
    assert!(!client.clone().set_tap(Arc::new(Recorder::default())), "one tap per client");
    let body = serde_json::json!({"name": "a", "count": 1});
    for _ in 0..2 {
        let rsp =
            client.post(&format!("http://{addr}/ntest/v1/items")).json(&body).send().await.unwrap();
        assert_eq!(rsp.status(), 201);
    }
    // Not a routed operation: answered before the layers, never copied.
    let rsp = client.get(&format!("http://{addr}/metrics")).send().await.unwrap();
    assert_eq!(rsp.status(), 200);

    let egress = client_tap.seen();
    let ingress = server_tap.seen();
    let _ = stop.send(());
    task.await.unwrap().unwrap();

    let triggers = |s: &[Seen]| s.iter().map(|c| c.trigger).collect::<Vec<_>>();
    use TriggerPoint::*;
    assert_eq!(
        triggers(&egress),
        [
            EgressRequest,
            EgressResponse,
            EgressRequest,
            EgressResponse,
            EgressRequest,
            EgressResponse
        ]
    );
    assert_eq!(
        triggers(&ingress),
        [IngressRequest, IngressResponse, IngressRequest, IngressResponse]
    );

    let sent = serde_json::to_vec(&body).unwrap();
    for pair in egress[..4].chunks(2) {
        let (req, ans) = (&pair[0], &pair[1]);
        assert_eq!((req.method.as_str(), req.path.as_str()), ("POST", "/ntest/v1/items"));
        assert_eq!((ans.method.as_str(), ans.path.as_str()), ("POST", "/ntest/v1/items"));
        assert_eq!(req.operation, "", "the client is not told the operation");
        assert_eq!(req.peer, addr.to_string());
        assert_eq!(req.body, sent);
        assert_eq!(header(req, "content-type"), Some("application/json"));
        assert!(header(req, "user-agent").is_some());
        assert_eq!((req.status, ans.status), (None, Some(201)));
        assert_eq!(header(ans, "location"), Some("/ntest/v1/items/a"));
        assert_eq!(json(&ans.body), body);
        // The client's own h2 stream: odd, the same for request and answer.
        assert_eq!(req.stream_id % 2, 1);
        assert_eq!(req.stream_id, ans.stream_id);
        assert_eq!(req.transaction, ans.transaction);
        assert!(ans.answered_after_request);
    }
    assert_ne!(egress[0].stream_id, egress[2].stream_id, "two streams on one connection");
    assert_ne!(egress[0].transaction, egress[2].transaction);

    for pair in ingress.chunks(2) {
        let (req, ans) = (&pair[0], &pair[1]);
        assert_eq!(
            (req.operation.as_str(), ans.operation.as_str()),
            ("Ntest_Create", "Ntest_Create")
        );
        assert_eq!(req.body, sent);
        assert_eq!((req.status, ans.status), (None, Some(201)));
        assert_eq!(json(&ans.body), body);
        assert_eq!(req.stream_id, 0, "hyper does not tell a served request's stream id");
        let peer: SocketAddr = req.peer.parse().unwrap();
        assert!(peer.ip().is_loopback() && peer.port() != addr.port(), "{peer}");
        assert_eq!(req.peer, ans.peer);
        assert_eq!(req.transaction, ans.transaction);
        assert!(ans.answered_after_request);
    }
}
