//! The console's server over real sockets, in front of a real `fivecore up`: log-in, session
//! expiry, the role rule, the CSRF defence, and the NFs' answers passed through unchanged.

mod console_support;

use std::sync::OnceLock;
use std::time::Duration;

use console_support::{http, Answer, Up, ADMIN_PW, VIEWER_PW};

const CSRF: (&str, &str) = ("x-fivecore-console", "1");

fn up() -> &'static Up {
    static UP: OnceLock<Up> = OnceLock::new();
    // A short idle timeout, for the expiry test; every other test works within it.
    UP.get_or_init(|| Up::start("console-api", "session_idle_secs = 2"))
}

fn login(name: &str, pw: &str) -> Answer {
    let body = serde_json::json!({ "name": name, "password": pw }).to_string();
    http("POST", up().console, "/console/api/login", &[CSRF], Some(&body))
}

fn session(name: &str, pw: &str) -> String {
    let a = login(name, pw);
    assert_eq!(a.status, 200, "{a:?}");
    a.cookie()
}

fn problem(a: &Answer, status: u16, cause: &str) -> serde_json::Value {
    assert_eq!(a.status, status, "{a:?}");
    assert_eq!(a.header("content-type"), Some("application/problem+json"), "{a:?}");
    let p = a.json();
    assert_eq!(p["status"], status, "{p}");
    assert_eq!(p["cause"], cause, "{p}");
    p
}

#[test]
fn log_in_with_the_right_password_only() {
    let a = login("admin", ADMIN_PW);
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(a.json()["role"], "admin");
    let set = a.header("set-cookie").unwrap();
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/console"] {
        assert!(set.contains(attr), "{set}");
    }
    let cookie = a.cookie();
    let me = http("GET", up().console, "/console/api/session", &[("cookie", &cookie)], None);
    assert_eq!((me.status, me.json()["name"].as_str()), (200, Some("admin")), "{me:?}");

    problem(&login("admin", "wrong"), 401, "INVALID_CREDENTIALS");
    problem(&login("nobody", ADMIN_PW), 401, "INVALID_CREDENTIALS");
    let p = problem(
        &http("POST", up().console, "/console/api/login", &[CSRF], Some("{\"name\":\"admin\"}")),
        400,
        "MANDATORY_IE_MISSING",
    );
    assert_eq!(p["invalidParams"][0]["param"], "/password", "{p}");
    let p = problem(
        &http("POST", up().console, "/console/api/login", &[CSRF], Some("{")),
        400,
        "INVALID_MSG_FORMAT",
    );
    assert_eq!(p["invalidParams"][0]["param"], "/", "{p}");
}

#[test]
fn without_a_session_every_api_is_401() {
    for path in [
        "/console/api/session",
        "/console/api/nfs",
        "/console/api/nf/udr/udr-prov/v1/slf-entries/imsi-1",
    ] {
        problem(&http("GET", up().console, path, &[], None), 401, "NOT_LOGGED_IN");
    }
    problem(
        &http(
            "GET",
            up().console,
            "/console/api/nfs",
            &[("cookie", "fivecore_console=forged")],
            None,
        ),
        401,
        "NOT_LOGGED_IN",
    );
}

#[test]
fn a_session_ends_when_idle_and_at_log_out() {
    let cookie = session("viewer", VIEWER_PW);
    let get = |c: &str| http("GET", up().console, "/console/api/session", &[("cookie", c)], None);
    assert_eq!(get(&cookie).status, 200);
    std::thread::sleep(Duration::from_millis(2500));
    problem(&get(&cookie), 401, "NOT_LOGGED_IN");

    let cookie = session("viewer", VIEWER_PW);
    let out = http("POST", up().console, "/console/api/logout", &[CSRF, ("cookie", &cookie)], None);
    assert_eq!(out.status, 204, "{out:?}");
    assert!(out.header("set-cookie").unwrap().contains("Max-Age=0"));
    problem(&get(&cookie), 401, "NOT_LOGGED_IN");
}

#[test]
fn a_change_needs_the_console_header_and_its_origin() {
    let body = serde_json::json!({ "name": "admin", "password": ADMIN_PW }).to_string();
    problem(
        &http("POST", up().console, "/console/api/login", &[], Some(&body)),
        403,
        "CSRF_HEADER_MISSING",
    );
    let evil = [CSRF, ("origin", "http://evil.example")];
    problem(
        &http("POST", up().console, "/console/api/login", &evil, Some(&body)),
        403,
        "CROSS_ORIGIN_REQUEST",
    );
    let cookie = session("admin", ADMIN_PW);
    let entry = r#"{"subscriberIds":["imsi-001019000000077"],"nfGroupIds":{"UDM":"g1"}}"#;
    problem(
        &http(
            "POST",
            up().console,
            "/console/api/nf/udr/udr-prov/v1/slf-entries",
            &[("cookie", &cookie)],
            Some(entry),
        ),
        403,
        "CSRF_HEADER_MISSING",
    );
    // Nothing reached the UDR.
    assert_eq!(
        http("GET", up().udr, "/udr-prov/v1/slf-entries/imsi-001019000000077", &[], None).status,
        404
    );
}

#[test]
fn read_only_reads_admin_changes_through_the_udrs_api() {
    let u = up();
    let viewer = session("viewer", VIEWER_PW);
    let admin = session("admin", ADMIN_PW);
    let path = "/console/api/nf/udr/udr-prov/v1/slf-entries/imsi-001019000000001";
    let entry = r#"{"subscriberIds":["imsi-001019000000001","msisdn-15550000001"],"nfGroupIds":{"UDM":"udm-a"}}"#;
    let p = problem(
        &http("PUT", u.console, path, &[CSRF, ("cookie", &viewer)], Some(entry)),
        403,
        "ROLE_NOT_ALLOWED",
    );
    assert!(p["detail"].as_str().unwrap().contains("read-only"), "{p}");
    assert_eq!(
        http("GET", u.udr, "/udr-prov/v1/slf-entries/imsi-001019000000001", &[], None).status,
        404
    );

    let created = http(
        "POST",
        u.console,
        "/console/api/nf/udr/udr-prov/v1/slf-entries",
        &[CSRF, ("cookie", &admin)],
        Some(entry),
    );
    assert_eq!(created.status, 201, "{created:?}");
    // The UDR's own API sees the change.
    let direct = http("GET", u.udr, "/udr-prov/v1/slf-entries/msisdn-15550000001", &[], None);
    assert_eq!(direct.status, 200, "{direct:?}");
    assert_eq!(direct.json()["nfGroupIds"]["UDM"], "udm-a");
    // And the viewer reads it through the console.
    let read = http("GET", u.console, path, &[("cookie", &viewer)], None);
    assert_eq!((read.status, read.json()), (200, direct.json()));
    assert_eq!(read.header("cache-control"), Some("no-store"));
    problem(
        &http("DELETE", u.console, path, &[CSRF, ("cookie", &viewer)], None),
        403,
        "ROLE_NOT_ALLOWED",
    );
    let deleted = http("DELETE", u.console, path, &[CSRF, ("cookie", &admin)], None);
    assert_eq!(deleted.status, 204, "{deleted:?}");
    assert_eq!(
        http("GET", u.udr, "/udr-prov/v1/slf-entries/imsi-001019000000001", &[], None).status,
        404
    );
}

#[test]
fn the_nfs_problem_details_come_through_unchanged() {
    let u = up();
    let admin = session("admin", ADMIN_PW);
    let bad = r#"{"subscriberIds":["not-an-identity"],"nfGroupIds":{}}"#;
    let direct = http("POST", u.udr, "/udr-prov/v1/slf-entries", &[], Some(bad));
    let via = http(
        "POST",
        u.console,
        "/console/api/nf/udr/udr-prov/v1/slf-entries",
        &[CSRF, ("cookie", &admin)],
        Some(bad),
    );
    assert_eq!(direct.status, 400, "{direct:?}");
    assert_eq!(via.status, direct.status);
    assert_eq!(via.header("content-type"), direct.header("content-type"));
    assert_eq!(via.json(), direct.json());
    assert!(!via.json()["invalidParams"].as_array().unwrap().is_empty(), "{}", via.body);
    // The BSF's discovery without a UE address: its own 400.
    let bsf = http(
        "GET",
        u.console,
        "/console/api/nf/bsf/nbsf-management/v1/pcfBindings?supi=imsi-001010000000001",
        &[("cookie", &admin)],
        None,
    );
    let direct =
        http("GET", u.bsf, "/nbsf-management/v1/pcfBindings?supi=imsi-001010000000001", &[], None);
    assert_eq!((bsf.status, bsf.json()), (direct.status, direct.json()));
    assert_eq!(bsf.status, 400);
}

#[test]
fn only_the_pages_apis_are_reachable() {
    let admin = session("admin", ADMIN_PW);
    for path in [
        "/console/api/nf/udr/nudr-dr/v1/policy-data/ues/imsi-1/am-data",
        "/console/api/nf/udr/udr-prov/v1/../../nudr-dr/v1/x",
        "/console/api/nf/nrf/nnrf-disc/v1/nf-instances?target-nf-type=BSF&requester-nf-type=PCF",
        "/console/api/nf/amf/metrics",
    ] {
        problem(
            &http("GET", up().console, path, &[("cookie", &admin)], None),
            404,
            "RESOURCE_NOT_FOUND",
        );
    }
    let metrics =
        http("GET", up().console, "/console/api/nf/pcf/metrics", &[("cookie", &admin)], None);
    assert_eq!(metrics.status, 200);
    assert!(metrics.body.contains("sbi_requests"), "{}", metrics.body);
    let nfs = http("GET", up().console, "/console/api/nfs", &[("cookie", &admin)], None).json();
    assert_eq!(nfs.as_array().unwrap().len(), 5);
    assert_eq!(nfs[2]["url"], format!("http://127.0.0.1:{}", up().bsf));
}

#[test]
fn the_page_is_embedded_with_etags_and_a_strict_policy() {
    let u = up();
    let root = http("GET", u.console, "/", &[], None);
    assert_eq!((root.status, root.header("location")), (303, Some("/console/")));
    let page = http("GET", u.console, "/console/", &[], None);
    assert_eq!(page.status, 200);
    assert!(page.body.contains("<script type=\"importmap\">"));
    let csp = page.header("content-security-policy").unwrap();
    assert!(
        csp.contains("script-src 'self' 'sha256-") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    assert_eq!(page.header("cache-control"), Some("no-cache"));
    let etag = page.header("etag").unwrap().to_owned();
    let again = http("GET", u.console, "/console/", &[("if-none-match", &etag)], None);
    assert_eq!((again.status, again.body.as_str()), (304, ""));
    for f in ["app.js", "metrics.js", "app.css", "vendor/preact.module.js", "vendor/uPlot.esm.js"] {
        let a = http("GET", u.console, &format!("/console/{f}"), &[], None);
        assert_eq!(a.status, 200, "{f}");
        assert!(
            a.header("etag").is_some() && a.header("x-content-type-options") == Some("nosniff")
        );
    }
    assert_eq!(http("GET", u.console, "/console/nothing.js", &[], None).status, 404);
}
