//! The console in a real headless Chromium (Debian `chromium` and `chromium-driver`), driven
//! through chromedriver (WebDriver) against a real `fivecore up`: log in (a wrong password
//! refused), the NF registry, find a binding created through the BSF's API, edit a subscriber
//! and see it through the UDR's own API, deploy (or activate) a policy version, and a
//! read-only user refused a change. Skipped when Chromium is missing, unless
//! FIVECORE_REQUIRE_CHROMIUM=1 (./test.sh). With FIVECORE_CONSOLE_SCREENSHOTS=DIR it writes
//! the main pages there as PNG (docs/console/*.png).

mod console_support;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use console_support::{http, Up, ADMIN_PW, VIEWER_PW};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| PathBuf::from(d).join(name))
        .find(|p| p.is_file())
}

/// chromedriver on a free port, under a watchdog shell that kills it by PID when our end of
/// its stdin closes (also when this test panics).
struct Driver {
    port: u16,
    pid: u32,
    watchdog: Option<ChildStdin>,
    /// The watchdog shell, reaped once chromedriver has stopped.
    shell: std::process::Child,
}

impl Driver {
    fn start(bin: &PathBuf) -> Driver {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let script = "\"$0\" --port=\"$1\" --allowed-ips=127.0.0.1 >/dev/null 2>&1 </dev/null &\n\
                      pid=$!\necho \"pid $pid\"\nread _\nkill $pid 2>/dev/null\nwait $pid";
        let mut child = Command::new("sh")
            .args(["-c", script])
            .arg(bin)
            .arg(port.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let watchdog = child.stdin.take().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let pid = line.trim().strip_prefix("pid ").unwrap().parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while http("GET", port, "/status", &[], None).status != 200 {
            assert!(Instant::now() < deadline, "chromedriver did not start on {port}");
            std::thread::sleep(Duration::from_millis(100));
        }
        Driver { port, pid, watchdog: Some(watchdog), shell: child }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.pid.to_string()).status();
        drop(self.watchdog.take());
        let _ = self.shell.wait();
    }
}

struct Page {
    c: Client,
    base: String,
    shots: Option<PathBuf>,
}

impl Page {
    async fn css(&self, sel: &str) -> fantoccini::elements::Element {
        self.c
            .wait()
            .at_most(Duration::from_secs(15))
            .for_element(Locator::Css(sel))
            .await
            .unwrap_or_else(|e| panic!("{sel}: {e}"))
    }

    /// Waits until the text of `sel` contains `want`; returns it.
    async fn text_with(&self, sel: &str, want: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut last = String::new();
        while Instant::now() < deadline {
            if let Ok(e) = self.c.find(Locator::Css(sel)).await {
                last = e.text().await.unwrap_or_default();
                if last.contains(want) {
                    return last;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{sel} never showed {want:?}; last: {last:?}");
    }

    /// Empties the field as a user would (the page sees an input event), then types `text`.
    async fn fill(&self, sel: &str, text: &str) {
        let e = self.css(sel).await;
        self.c
            .execute(
                "const e = document.querySelector(arguments[0]); e.value = ''; \
                 e.dispatchEvent(new Event('input', { bubbles: true }));",
                vec![json!(sel)],
            )
            .await
            .unwrap();
        if !text.is_empty() {
            e.send_keys(text).await.unwrap();
        }
    }

    async fn click(&self, sel: &str) {
        self.css(sel).await.click().await.unwrap();
    }

    async fn go(&self, page: &str) {
        self.click(&format!("#nav-{page}")).await;
        self.css(&format!("#page-{page}")).await;
    }

    async fn shot(&self, name: &str) {
        if let Some(dir) = &self.shots {
            let png = self.c.screenshot().await.unwrap();
            std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
        }
    }

    async fn login(&self, name: &str, pw: &str) {
        self.fill("#login-name", name).await;
        self.fill("#login-password", pw).await;
        self.click("#login-submit").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_main_flows_in_a_real_browser() {
    let (Some(chromium), Some(driver)) = (which("chromium"), which("chromedriver")) else {
        if std::env::var("FIVECORE_REQUIRE_CHROMIUM").as_deref() == Ok("1") {
            panic!("FIVECORE_REQUIRE_CHROMIUM=1 but chromium or chromedriver is missing");
        }
        eprintln!(
            "skipped: chromium and chromedriver (Debian chromium, chromium-driver) not installed"
        );
        return;
    };
    let up = tokio::task::spawn_blocking(|| Up::start("console-browser", "")).await.unwrap();
    let driver = tokio::task::spawn_blocking(move || Driver::start(&driver)).await.unwrap();
    let profile = up.dir.join("chromium-profile");
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1280,860",
                format!("--user-data-dir={}", profile.display()),
            ],
        }),
    );
    let c = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{}", driver.port))
        .await
        .expect("a Chromium session");
    let shots = std::env::var_os("FIVECORE_CONSOLE_SCREENSHOTS").map(PathBuf::from);
    if let Some(d) = &shots {
        std::fs::create_dir_all(d).unwrap();
    }
    let p = Page { c, base: format!("http://127.0.0.1:{}/console/", up.console), shots };
    let result = flows(&p, &up).await;
    let _ = p.c.close().await;
    drop(driver);
    result
}

async fn flows(p: &Page, up: &Up) {
    // Log in: a wrong password is refused with the console's problem, then the right one.
    p.c.goto(&p.base).await.unwrap();
    p.css("#login-form").await;
    p.shot("login").await;
    p.login("admin", "not-the-password").await;
    p.text_with("#login-error", "INVALID_CREDENTIALS").await;
    p.login("admin", ADMIN_PW).await;
    p.text_with("#who", "admin (admin)").await;

    // The registry: the NFs `up` started registered themselves with its NRF.
    for t in ["BSF", "UDR", "PCF"] {
        p.text_with("#nf-registry", t).await;
    }
    p.text_with("#nf-registry", "REGISTERED").await;
    p.shot("registry").await;

    // A binding made through the BSF's own API, found by UE address.
    let binding = json!({"supi": "imsi-001010000000042", "gpsi": "msisdn-15550000042",
        "ipv4Addr": "10.45.0.42", "dnn": "internet", "snssai": {"sst": 1},
        "pcfFqdn": "pcf.example.org", "pcfId": "5a3c4c9e-0000-4000-8000-000000000001"});
    let made =
        http("POST", up.bsf, "/nbsf-management/v1/pcfBindings", &[], Some(&binding.to_string()));
    assert_eq!(made.status, 201, "{made:?}");
    p.go("bindings").await;
    p.fill("#b-ipv4Addr", "10.45.0.42").await;
    p.click("#binding-search").await;
    let shown = p.text_with("#binding-result", "imsi-001010000000042").await;
    assert!(shown.contains("pcf.example.org"), "{shown}");
    p.shot("bindings").await;
    // The BSF's own refusal, shown as it sent it: no UE address.
    p.fill("#b-ipv4Addr", "").await;
    p.fill("#b-supi", "imsi-001010000000042").await;
    p.click("#binding-search").await;
    p.text_with("#binding-error", "MANDATORY_QUERY_PARAM_MISSING").await;

    // A subscriber's policy data: provisioned through the UDR, edited in the page, and the
    // change read back from the UDR's own API.
    let ue = "imsi-001010000000077";
    let prov = format!("/udr-prov/v1/policy-data/ues/{ue}");
    let put = http("PUT", up.udr, &prov, &[], Some(r#"{"amData":{"subscCats":["silver"]}}"#));
    assert_eq!(put.status, 201, "{put:?}");
    p.go("subscribers").await;
    p.fill("#policy-key", ue).await;
    p.click("#policy-load").await;
    let loaded = p.css("#policy-json").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !loaded.prop("value").await.unwrap().unwrap_or_default().contains("silver") {
        assert!(Instant::now() < deadline, "the profile never loaded");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    p.fill("#policy-json", r#"{"amData":{"subscCats":["gold","vip"]}}"#).await;
    p.click("#policy-save").await;
    p.text_with("#policy-result", "200 saved").await;
    let after = http("GET", up.udr, &prov, &[], None).json();
    assert_eq!(after["amData"]["subscCats"], json!(["gold", "vip"]), "{after}");
    // The UDR's validation is the page's: a wrong data set comes back as its ProblemDetails.
    p.fill("#policy-json", r#"{"amData":{"subscCats":"gold"}}"#).await;
    p.click("#policy-save").await;
    p.text_with("#policy-result", "400").await;
    p.shot("subscribers").await;
    assert_eq!(http("GET", up.udr, &prov, &[], None).json(), after);

    // Policy: a new version deployed by the page, a broken one refused, then the versions
    // table: the diff of the older version, its activation, and the roll back.
    let before = http("GET", up.pcf, "/policy-admin/v1/project", &[], None).json();
    let first = before["version"].to_string().trim_matches('"').to_owned();
    p.go("policy").await;
    p.text_with("#project-version", &first).await;
    let v2 = up.dir.join("policy-v2");
    let cp = Command::new("cp")
        .arg("-r")
        .arg(up.dir.join("data/policy-default"))
        .arg(&v2)
        .status()
        .unwrap();
    assert!(cp.success());
    let manifest = v2.join("project.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let old = format!("version = {}", before["version"]);
    assert!(text.contains(&old), "{text}");
    std::fs::write(&manifest, text.replacen(&old, "version = \"9.9.9-console\"", 1)).unwrap();
    p.fill("#deploy-dir", v2.to_str().unwrap()).await;
    p.click("#deploy-btn").await;
    p.text_with("#policy-outcome", "200: deployed").await;
    let now = http("GET", up.pcf, "/policy-admin/v1/project", &[], None).json();
    assert_eq!(now["version"], "9.9.9-console", "{now}");
    p.text_with("#project-version", "9.9.9-console").await;
    // A broken version is refused by the PCF's check, shown as its ProblemDetails, and the
    // version in force stays.
    let good = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, "name = ").unwrap();
    p.click("#deploy-btn").await;
    p.text_with("#policy-outcome", "POLICY_CHECK_FAILED").await;
    let still = http("GET", up.pcf, "/policy-admin/v1/project", &[], None).json();
    assert_eq!(still["version"], "9.9.9-console", "{still}");
    std::fs::write(&manifest, good).unwrap();
    // The first version, no longer active: its diff against the one in force names the
    // manifest; activating it puts it back in force, and the roll back returns to 9.9.9.
    p.text_with("#versions", "9.9.9-console").await;
    p.click("#versions button.diff").await;
    p.text_with("#policy-detail", "project.toml").await;
    p.click("#versions button.activate").await;
    p.text_with("#policy-outcome", "activated").await;
    let now = http("GET", up.pcf, "/policy-admin/v1/project", &[], None).json();
    assert_eq!(now["version"].as_str(), Some(first.as_str()), "{now}");
    p.text_with("#project-version", &first).await;
    p.click("#rollback").await;
    p.text_with("#policy-outcome", "rolled back").await;
    let now = http("GET", up.pcf, "/policy-admin/v1/project", &[], None).json();
    assert_eq!(now["version"], "9.9.9-console", "{now}");
    p.shot("policy").await;

    // Data Director feeds and the live charts render from the NFs' own /metrics.
    p.go("feeds").await;
    p.css("#feeds").await;
    p.shot("feeds").await;
    p.go("metrics").await;
    p.css("#chart-rate canvas").await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    p.shot("metrics").await;

    // A read-only user may look, not change: the console refuses before the UDR is asked.
    p.click("#logout").await;
    p.css("#login-form").await;
    p.login("viewer", VIEWER_PW).await;
    p.text_with("#who", "viewer (read-only)").await;
    p.go("subscribers").await;
    p.fill("#policy-key", ue).await;
    p.click("#policy-load").await;
    let loaded = p.css("#policy-json").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !loaded.prop("value").await.unwrap().unwrap_or_default().contains("vip") {
        assert!(Instant::now() < deadline, "the profile never loaded for the viewer");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    p.fill("#policy-json", r#"{"amData":{"subscCats":["bronze"]}}"#).await;
    p.click("#policy-save").await;
    p.text_with("#policy-result", "ROLE_NOT_ALLOWED").await;
    p.shot("read-only-refused").await;
    assert_eq!(http("GET", up.udr, &prov, &[], None).json(), after);
}
