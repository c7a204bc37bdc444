//! The fivecore web console (issue #27): a page served on its own port, log-in with roles, and
//! an API proxy through which every read and change goes to the NFs' own REST APIs.
//!
//! Map: [`config`] (`[console]`), [`password`] (argon2 PHC), [`session`] (cookie sessions),
//! [`auth`] (CSRF, session and the one role rule), [`proxy`] (the NF APIs the pages use),
//! [`assets`] (the embedded page and vendored toolkit). docs/console.md tells the operator's side.

pub mod assets;
pub mod auth;
pub mod config;
pub mod password;
mod problem;
pub mod proxy;
pub mod session;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::middleware;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{any, get, post};
use axum::{Extension, Json, Router};
use http::header::{CACHE_CONTROL, SET_COOKIE};
use http::{HeaderValue, StatusCode};
use sbi::client::SbiClient;
use sbi::InvalidParam;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

pub use config::{ConsoleConfig, NfUrls, Role, UserConfig};
use problem::{invalid, problem};
use proxy::Nf;
use session::{Sessions, COOKIE};

#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error("console: cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("console: {0}")]
    Password(#[from] password::PasswordError),
    #[error("console: the SBI client: {0}")]
    Client(String),
    #[error("console: users: {0}")]
    Users(String),
}

/// The NFs' API roots, by NF.
#[derive(Debug, Clone, Default)]
pub struct Urls(NfUrls);

impl Urls {
    pub fn get(&self, nf: Nf) -> Option<&str> {
        let u = &self.0;
        match nf {
            Nf::Nrf => u.nrf.as_deref(),
            Nf::Udr => u.udr.as_deref(),
            Nf::Bsf => u.bsf.as_deref(),
            Nf::Pcf => u.pcf.as_deref(),
            Nf::Dd => u.dd.as_deref(),
        }
    }
}

/// What every handler shares.
pub struct App {
    users: Vec<UserConfig>,
    sessions: Sessions,
    max_age: Duration,
    urls: Urls,
    client: SbiClient,
    /// argon2 costs tens of milliseconds of CPU by design: at most two checks run at once, on
    /// blocking threads, so a flood of log-ins cannot take the cores from the NFs.
    password_checks: Semaphore,
    /// Checked against when the user is unknown, so the answer takes as long as for a known
    /// user with a wrong password and does not tell which names exist.
    decoy_hash: String,
}

/// When `users` is empty, adds `admin` with a random password and returns that password, for
/// `up` to log once.
pub fn ensure_admin(config: &mut ConsoleConfig) -> Result<Option<String>, ConsoleError> {
    if !config.users.is_empty() {
        return Ok(None);
    }
    let pw = password::random_password()?;
    config.users.push(UserConfig {
        name: "admin".into(),
        password_hash: password::hash(&pw)?,
        role: Role::Admin,
    });
    Ok(Some(pw))
}

/// A console bound to its port, not yet serving.
pub struct Console {
    listener: TcpListener,
    router: Router,
    addr: SocketAddr,
}

impl Console {
    /// Checks the users, binds `listen` and prepares the routes.
    pub async fn bind(config: &ConsoleConfig, listen: SocketAddr) -> Result<Console, ConsoleError> {
        let mut names = std::collections::HashSet::new();
        for u in &config.users {
            password::check_phc(&u.name, &u.password_hash)?;
            if u.name.is_empty() || !names.insert(u.name.as_str()) {
                return Err(ConsoleError::Users(format!(
                    "user name {:?} empty or repeated",
                    u.name
                )));
            }
        }
        let client_config = config.client.clone().unwrap_or_default();
        let client = SbiClient::builder(client_config)
            .user_agent("fivecore-console")
            .build()
            .map_err(|e| ConsoleError::Client(e.to_string()))?;
        let idle =
            Duration::from_secs(config.session_idle_secs.unwrap_or(config::DEFAULT_IDLE_SECS));
        let max_age =
            Duration::from_secs(config.session_max_secs.unwrap_or(config::DEFAULT_MAX_SECS));
        let decoy_hash = password::hash(&password::random_token(16)?)?;
        let app = Arc::new(App {
            users: config.users.clone(),
            sessions: Sessions::new(idle, max_age),
            max_age,
            urls: Urls(config.nfs.clone()),
            client,
            password_checks: Semaphore::new(2),
            decoy_hash,
        });
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|source| ConsoleError::Bind { addr: listen, source })?;
        let addr =
            listener.local_addr().map_err(|source| ConsoleError::Bind { addr: listen, source })?;
        Ok(Console { listener, router: router(app), addr })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until `shutdown` completes, then lets requests in flight finish.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        axum::serve(self.listener, self.router).with_graceful_shutdown(shutdown).await
    }
}

/// Every route; the layers say who may reach which.
pub fn router(app: Arc<App>) -> Router {
    let authed = Router::new()
        .route(auth::LOGOUT_PATH, post(logout))
        .route("/console/api/session", get(current_session))
        .route("/console/api/nfs", get(nfs))
        .route("/console/api/nf/{nf}/{*path}", any(proxy::forward))
        .layer(middleware::from_fn_with_state(app.clone(), auth::authorize));
    let api = Router::new()
        .route("/console/api/login", post(login))
        .merge(authed)
        .layer(middleware::from_fn(auth::csrf))
        // Policy projects are posted whole; 8 MiB is far above one and bounds a request.
        .layer(axum::extract::DefaultBodyLimit::max(8 << 20))
        .with_state(app);
    Router::new()
        .route("/", get(|| async { Redirect::to("/console/") }))
        .merge(api)
        .fallback(static_file)
        .layer(middleware::map_response(security_headers))
}

async fn security_headers(mut res: Response) -> Response {
    let h = res.headers_mut();
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    res
}

async fn static_file(req: Request) -> Response {
    if req.method() != http::Method::GET && req.method() != http::Method::HEAD {
        return problem(
            StatusCode::METHOD_NOT_ALLOWED,
            "METHOD_NOT_ALLOWED",
            "the page is read only",
        );
    }
    match assets::find(req.uri().path()) {
        Some(a) => a.respond(req.headers()),
        None => problem(StatusCode::NOT_FOUND, "RESOURCE_NOT_FOUND", "no such page"),
    }
}

/// `POST /console/api/login` `{"name", "password"}`: 200 `{name, role}` and the session cookie,
/// or 401 whichever of the two was wrong.
async fn login(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let parsed: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return invalid("INVALID_MSG_FORMAT", vec![InvalidParam::new("/", e.to_string())]);
        }
    };
    let field = |k: &str| parsed.get(k).and_then(|v| v.as_str()).filter(|s| !s.is_empty());
    let (name, pw) = match (field("name"), field("password")) {
        (Some(n), Some(p)) => (n.to_owned(), p.to_owned()),
        (n, p) => {
            let mut params = Vec::new();
            if n.is_none() {
                params.push(InvalidParam::new("/name", "a non-empty string is required"));
            }
            if p.is_none() {
                params.push(InvalidParam::new("/password", "a non-empty string is required"));
            }
            return invalid("MANDATORY_IE_MISSING", params);
        }
    };
    let user = app.users.iter().find(|u| u.name == name).cloned();
    let hash = user.as_ref().map_or(app.decoy_hash.clone(), |u| u.password_hash.clone());
    let Ok(_permit) = app.password_checks.acquire().await else {
        return problem(StatusCode::SERVICE_UNAVAILABLE, "NF_SERVICE_FAILOVER", "stopping");
    };
    let ok =
        tokio::task::spawn_blocking(move || password::verify(&pw, &hash)).await.unwrap_or(false);
    let Some(user) = user.filter(|_| ok) else {
        tracing::info!(user = %name, "console: log-in refused");
        return problem(StatusCode::UNAUTHORIZED, "INVALID_CREDENTIALS", "wrong name or password");
    };
    let Ok(id) = password::random_token(32) else {
        return problem(StatusCode::INTERNAL_SERVER_ERROR, "SYSTEM_FAILURE", "no random source");
    };
    app.sessions.open(id.clone(), user.name.clone(), user.role);
    tracing::info!(user = %user.name, role = user.role.as_str(), "console: logged in");
    let cookie = format!(
        "{COOKIE}={id}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={}",
        app.max_age.as_secs()
    );
    (
        [(SET_COOKIE, cookie), (CACHE_CONTROL, "no-store".to_owned())],
        Json(json!({ "name": user.name, "role": user.role })),
    )
        .into_response()
}

async fn logout(State(app): State<Arc<App>>, Extension(me): Extension<auth::Current>) -> Response {
    app.sessions.close(&me.session_id);
    let cookie = format!("{COOKIE}=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0");
    (StatusCode::NO_CONTENT, [(SET_COOKIE, cookie)]).into_response()
}

async fn current_session(
    State(app): State<Arc<App>>,
    Extension(me): Extension<auth::Current>,
) -> Response {
    (
        [(CACHE_CONTROL, "no-store")],
        Json(json!({
            "name": me.session.user,
            "role": me.session.role,
            "idleTimeoutSecs": app.sessions.idle().as_secs(),
        })),
    )
        .into_response()
}

/// The NFs this console reaches, for the pages to show or hide their parts.
async fn nfs(State(app): State<Arc<App>>) -> Response {
    let list: Vec<_> = proxy::ALL
        .into_iter()
        .map(|nf| json!({ "nf": nf, "name": nf.name(), "url": app.urls.get(nf) }))
        .collect();
    ([(CACHE_CONTROL, "no-store")], Json(list)).into_response()
}
