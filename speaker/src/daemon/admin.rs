//! The local admin endpoint: `/livez`, `/readyz`, `/metrics`, `/debug/peers`, `/debug/routes`,
//! `/debug/status`.
//!
//! Served by [`crate::process::http::serve`]: header-read timeout, idle timeout and
//! connection cap as in [`HttpLimits::default`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use podcidr_api::SpeakerReport;
use serde_json::json;
use tokio::net::TcpListener;

use super::core::report::ReportInputs;
use super::metrics::Metrics;
use crate::process::http::{self, HttpLimits};

/// The main loop must tick within this many seconds for `/livez`.
const LIVENESS_WINDOW: u64 = 60;

#[derive(Debug)]
pub struct AdminState {
    pub node: String,
    pub metrics: Arc<Metrics>,
    /// Source synced and BGP sessions settled (see `core::readiness`).
    pub ready: AtomicBool,
    /// Why not ready (the `/readyz` body).
    not_ready_why: std::sync::Mutex<String>,
    /// Unix seconds of the main loop's last tick.
    pub heartbeat: AtomicU64,
    /// Rendered per request (see `ReportInputs`).
    report_inputs: std::sync::Mutex<Option<Arc<ReportInputs>>>,
}

impl AdminState {
    pub fn new(node: String, metrics: Arc<Metrics>) -> Self {
        AdminState {
            node,
            metrics,
            ready: AtomicBool::new(false),
            not_ready_why: std::sync::Mutex::new("starting".into()),
            heartbeat: AtomicU64::new(now()),
            report_inputs: std::sync::Mutex::new(None),
        }
    }

    pub fn set_readiness(&self, r: super::core::readiness::Readiness) {
        if let Ok(mut why) = self.not_ready_why.lock() {
            *why = r.why;
        }
        self.ready.store(r.ready, Ordering::Relaxed);
    }

    pub fn beat(&self) {
        self.heartbeat.store(now(), Ordering::Relaxed);
    }

    pub fn set_report_inputs(&self, inputs: Arc<ReportInputs>) {
        if let Ok(mut cur) = self.report_inputs.lock() {
            *cur = Some(inputs);
        }
    }

    fn report(&self) -> SpeakerReport {
        // Clone the Arc and let go of the lock before rendering.
        let inputs = self.report_inputs.lock().ok().and_then(|i| i.clone());
        inputs.map(|i| i.render(now())).unwrap_or_default()
    }
}

use crate::time::unix_now as now;

fn text(status: StatusCode, body: String, content_type: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    if let Ok(v) = content_type.parse() {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

fn json_response(v: serde_json::Value) -> Response<Full<Bytes>> {
    text(StatusCode::OK, format!("{v:#}\n"), "application/json")
}

pub fn handle(state: &AdminState, method: &Method, path: &str) -> Response<Full<Bytes>> {
    if method != Method::GET {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "GET only\n".into(),
            "text/plain",
        );
    }
    match path {
        "/livez" => {
            let age = now().saturating_sub(state.heartbeat.load(Ordering::Relaxed));
            if age <= LIVENESS_WINDOW {
                text(StatusCode::OK, "ok\n".into(), "text/plain")
            } else {
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("main loop stalled for {age}s\n"),
                    "text/plain",
                )
            }
        }
        "/readyz" => {
            if state.ready.load(Ordering::Relaxed) {
                text(StatusCode::OK, "ready\n".into(), "text/plain")
            } else {
                let why = state
                    .not_ready_why
                    .lock()
                    .map(|w| w.clone())
                    .unwrap_or_default();
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("not ready: {why}\n"),
                    "text/plain",
                )
            }
        }
        "/metrics" => text(
            StatusCode::OK,
            state.metrics.encode(),
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
        "/debug/peers" => {
            let report = state.report();
            let peers: Vec<serde_json::Value> = report
                .peers
                .iter()
                .map(|p| {
                    let mut v = serde_json::to_value(p).unwrap_or_default();
                    if let Some(o) = v.as_object_mut() {
                        o.remove("routes");
                    }
                    v
                })
                .collect();
            json_response(json!({
                "node": state.node,
                "localAsn": report.local_asn,
                "localAsnSource": report.local_asn_source,
                "peers": peers,
            }))
        }
        "/debug/routes" => {
            let report = state.report();
            let peers: Vec<serde_json::Value> = report
                .peers
                .iter()
                .map(|p| json!({"name": p.name, "address": p.address, "state": p.state, "routes": p.routes}))
                .collect();
            json_response(json!({"node": state.node, "peers": peers}))
        }
        "/debug/status" => json_response(json!({"node": state.node, "status": state.report()})),
        _ => text(StatusCode::NOT_FOUND, "not found\n".into(), "text/plain"),
    }
}

/// The metrics-only listener (`admin.metricsListen`): `/metrics`, nothing else, so the
/// `/debug/*` pages never leave loopback.
pub async fn serve_metrics(listener: TcpListener, state: Arc<AdminState>) {
    let handler = move |req: Request<Incoming>| {
        let response = if req.uri().path() == "/metrics" {
            handle(&state, req.method(), "/metrics")
        } else {
            text(StatusCode::NOT_FOUND, "not found\n".into(), "text/plain")
        };
        std::future::ready(response)
    };
    http::serve(listener, handler, HttpLimits::default()).await;
}

/// Serves until the task is aborted, with the default [`HttpLimits`].
pub async fn serve(listener: TcpListener, state: Arc<AdminState>) {
    serve_with(listener, state, HttpLimits::default()).await;
}

/// [`serve`] with explicit limits (tests shorten the timeouts).
pub async fn serve_with(listener: TcpListener, state: Arc<AdminState>, limits: HttpLimits) {
    let handler = move |req: Request<Incoming>| {
        std::future::ready(handle(&state, req.method(), req.uri().path()))
    };
    http::serve(listener, handler, limits).await;
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::process::http::testing::{closed_within, get, half_open, short_limits};

    /// The speaker's admin endpoint goes through the shared server: a request head that never
    /// finishes is closed after the header-read timeout, and the endpoints answer as before.
    #[tokio::test]
    async fn speaker_admin_closes_a_half_open_request() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(AdminState::new("node-a".into(), Arc::new(Metrics::new())));
        state.ready.store(true, Ordering::Relaxed);
        let task = tokio::spawn(serve_with(listener, state, short_limits()));
        let mut slow = half_open(addr).await;
        assert_eq!(get(addr, "/livez").await, (200, "ok\n".to_owned()));
        assert_eq!(get(addr, "/readyz").await, (200, "ready\n".to_owned()));
        assert_eq!(get(addr, "/nope").await.0, 404);
        let (status, body) = get(addr, "/debug/peers").await;
        assert_eq!(status, 200);
        assert!(body.contains("node-a"), "{body}");
        closed_within(&mut slow, Duration::from_secs(4))
            .await
            .expect("half-open request closed by the header-read timeout");
        task.abort();
    }
}
