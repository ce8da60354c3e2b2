//! Request routing: path and verb, outage and faults, then the store operation.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::Incoming;
use serde_json::{Value, json};

use crate::discovery;
use crate::error::ApiError;
use crate::faults::{FaultAction, Verb};
use crate::meta::{meta_str, partial_object};
use crate::ownership;
use crate::patch::{json_patch, merge_patch};
use crate::resource::{Target, parse_path};
use crate::selector::Selectors;
use crate::shared::{Body, Shared};
use crate::store::{DeleteOpts, ObjKey, Scope};
use crate::traffic::RequestRecord;
use crate::watch::{WatchRequest, watch_stream};

const MAX_BODY: usize = 16 << 20;

/// Entry point for every HTTP request.
pub(crate) async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path().to_owned();
    let query = parse_query(req.uri().query().unwrap_or(""));
    match path.as_str() {
        "/version" => {
            let version = json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0-fake-kube", "platform": "linux/amd64"});
            return Ok(json_response(StatusCode::OK, &version));
        }
        "/healthz" | "/livez" | "/readyz" => return Ok(text_response(StatusCode::OK, "ok")),
        _ => {}
    }
    if req.method() == Method::GET
        && let Some(doc) = discovery::document(&path, &shared.store.types())
    {
        return Ok(json_response(StatusCode::OK, &doc));
    }
    let Some(target) = parse_path(&path) else {
        return Ok(error_response(&ApiError::not_found("path", &path)));
    };
    let Some(verb) = verb_of(req.method(), &target, &query) else {
        return Ok(error_response(&ApiError::new(
            405,
            "MethodNotAllowed",
            format!("{} is not supported here", req.method()),
        )));
    };
    let resource = match &target.subresource {
        Some(sub) => format!("{}/{sub}", target.gvr.plural),
        None => target.gvr.plural.clone(),
    };
    let group = target
        .gvr
        .api_version
        .split_once('/')
        .map_or("", |(g, _)| g)
        .to_owned();
    shared.traffic.request(
        record(verb, &resource, &target, &query),
        content_length(&req),
    );
    let response = route(shared.clone(), req, target, query, verb, &group, &resource).await;
    // A watch counts its bytes as it streams them; everything else is one full body.
    if let Some(bytes) = hyper::body::Body::size_hint(response.body()).exact() {
        let objects = response.extensions().get::<Objects>().map_or(0, |o| o.0);
        shared.traffic.sent(verb, &resource, bytes, objects);
    }
    Ok(response)
}

/// Objects in a response body, for the traffic counters.
#[derive(Debug, Clone, Copy)]
struct Objects(u64);

fn with_objects(mut response: Response<Body>, objects: u64) -> Response<Body> {
    if response.status().is_success() {
        response.extensions_mut().insert(Objects(objects));
    }
    response
}

fn record(
    verb: Verb,
    resource: &str,
    target: &crate::resource::Target,
    query: &HashMap<String, String>,
) -> RequestRecord {
    RequestRecord {
        verb,
        resource: resource.to_owned(),
        namespace: target.namespace.clone(),
        name: target.name.clone(),
        field_selector: query.get("fieldSelector").cloned(),
        label_selector: query.get("labelSelector").cloned(),
        limit: query.get("limit").and_then(|l| l.parse().ok()),
        continued: query.get("continue").is_some_and(|c| !c.is_empty()),
    }
}

fn content_length(req: &Request<Incoming>) -> u64 {
    req.headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Outage and faults, then the store operation.
async fn route(
    shared: Arc<Shared>,
    req: Request<Incoming>,
    target: crate::resource::Target,
    query: HashMap<String, String>,
    verb: Verb,
    group: &str,
    resource: &str,
) -> Response<Body> {
    if shared.faults.outage() {
        shared.faults.count(verb, group, resource);
        return error_response(&ApiError::from_code(
            503,
            "the fake API server is in an outage",
        ));
    }
    let fault = shared
        .faults
        .on_request(verb, group, resource, target.name.as_deref());
    match fault {
        Some(FaultAction::Fail(code)) => {
            return error_response(&ApiError::from_code(
                code,
                format!("injected fault for {verb:?} {resource}"),
            ));
        }
        Some(FaultAction::FailRetryAfter {
            code,
            retry_after_secs,
        }) => {
            let err = ApiError::from_code(
                code,
                format!("injected fault for {verb:?} {resource}: please try again later"),
            );
            return retry_after_response(&err, retry_after_secs);
        }
        Some(FaultAction::Timeout) => return error_response(&timeout_error()),
        Some(FaultAction::Delay(delay)) => tokio::time::sleep(delay).await,
        Some(FaultAction::ApplyThenTimeout) | None => {}
    }
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let meta_only = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(wants_metadata_only);
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(err) => {
            return error_response(&ApiError::bad_request(format!("reading body: {err}")));
        }
    };
    let call = Call {
        shared,
        target,
        query,
        verb,
        content_type,
        meta_only,
        body,
    };
    let response = call.dispatch().unwrap_or_else(|err| error_response(&err));
    if fault == Some(FaultAction::ApplyThenTimeout) {
        return error_response(&timeout_error());
    }
    response
}

/// Whether an `Accept` header asks for `meta.k8s.io/v1` `PartialObjectMetadata` (or its
/// list): the metadata-only form controllers use to watch large objects cheaply.
fn wants_metadata_only(accept: &str) -> bool {
    accept.split(',').any(|media| {
        let mut params = media.split(';').skip(1).map(str::trim);
        params.any(|p| p == "as=PartialObjectMetadata" || p == "as=PartialObjectMetadataList")
            && media.contains("g=meta.k8s.io")
    })
}

fn timeout_error() -> ApiError {
    ApiError::from_code(
        504,
        "Timeout: request did not complete within requested timeout - context deadline exceeded",
    )
}

fn verb_of(method: &Method, target: &Target, query: &HashMap<String, String>) -> Option<Verb> {
    let named = target.name.is_some();
    Some(match (method.as_str(), named) {
        ("GET", true) => Verb::Get,
        ("GET", false) if query.get("watch").is_some_and(|w| w == "true" || w == "1") => {
            Verb::Watch
        }
        ("GET", false) => Verb::List,
        ("POST", false) => Verb::Create,
        ("PUT", true) => Verb::Update,
        ("PATCH", true) => Verb::Patch,
        ("DELETE", true) => Verb::Delete,
        ("DELETE", false) => Verb::DeleteCollection,
        _ => return None,
    })
}

struct Call {
    shared: Arc<Shared>,
    target: Target,
    query: HashMap<String, String>,
    verb: Verb,
    content_type: String,
    /// `Accept: application/json;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1`.
    meta_only: bool,
    body: Bytes,
}

impl Call {
    fn dispatch(self) -> Result<Response<Body>, ApiError> {
        let scope = match self.target.subresource.as_deref() {
            None => Scope::Main,
            Some("status") if self.target.name.is_some() => Scope::Status,
            Some(other) => return Err(ApiError::not_found("subresource", other)),
        };
        let store = &self.shared.store;
        let gvr = &self.target.gvr;
        match self.verb {
            Verb::Get => {
                let key = self.key();
                let obj = store
                    .get(gvr, &key)
                    .ok_or_else(|| ApiError::not_found(&gvr.plural, &key.1))?;
                let obj = if self.meta_only {
                    partial_object(&obj)
                } else {
                    obj
                };
                Ok(with_objects(json_response(StatusCode::OK, &obj), 1))
            }
            Verb::List => self.list(),
            Verb::Watch => self.watch(),
            Verb::Create => {
                let body = self.json_body()?;
                let keep = store.keeps_status_on_create(gvr);
                let obj = store.create(gvr, self.target.namespace.as_deref(), body, keep)?;
                Ok(with_objects(json_response(StatusCode::CREATED, &obj), 1))
            }
            Verb::Update => {
                let obj = store.replace(gvr, &self.key(), self.json_body()?, scope)?;
                Ok(with_objects(json_response(StatusCode::OK, &obj), 1))
            }
            Verb::Patch => Ok(with_objects(self.patch(scope)?, 1)),
            Verb::Delete => {
                let obj = store.delete(gvr, &self.key(), &self.delete_opts()?)?;
                Ok(with_objects(json_response(StatusCode::OK, &obj), 1))
            }
            Verb::DeleteCollection => {
                let opts = self.delete_opts()?;
                let (items, _) =
                    store.snapshot(gvr, self.target.namespace.as_deref(), &self.selectors()?);
                let mut deleted = Vec::new();
                for item in items {
                    let key = (
                        meta_str(&item, "namespace").to_owned(),
                        meta_str(&item, "name").to_owned(),
                    );
                    // Already gone (e.g. garbage-collected by an earlier delete) is fine.
                    if let Ok(obj) = store.delete(gvr, &key, &opts) {
                        deleted.push(obj);
                    }
                }
                if self.meta_only {
                    deleted = deleted.iter().map(partial_object).collect();
                }
                let count = deleted.len() as u64;
                Ok(with_objects(
                    json_response(
                        StatusCode::OK,
                        &self.list_body(deleted, store.current_rv(), None, None),
                    ),
                    count,
                ))
            }
        }
    }

    fn key(&self) -> ObjKey {
        (
            self.target.namespace.clone().unwrap_or_default(),
            self.target.name.clone().unwrap_or_default(),
        )
    }

    fn json_body(&self) -> Result<Value, ApiError> {
        serde_json::from_slice(&self.body)
            .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
    }

    fn selectors(&self) -> Result<Selectors, ApiError> {
        Selectors::parse(
            self.query.get("labelSelector").map(String::as_str),
            self.query.get("fieldSelector").map(String::as_str),
        )
    }

    fn list_body(
        &self,
        items: Vec<Value>,
        rv: u64,
        cont: Option<String>,
        remaining: Option<u64>,
    ) -> Value {
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if let Some(cont) = cont {
            metadata["continue"] = json!(cont);
        }
        if let Some(remaining) = remaining {
            metadata["remainingItemCount"] = json!(remaining);
        }
        if self.meta_only {
            // Items arrive as PartialObjectMetadata already (see `list`).
            return json!({
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": metadata,
                "items": items,
            });
        }
        json!({
            "kind": format!("{}List", self.shared.store.kind_of(&self.target.gvr)),
            "apiVersion": self.target.gvr.api_version,
            "metadata": metadata,
            "items": items,
        })
    }

    fn list(&self) -> Result<Response<Body>, ApiError> {
        let store = &self.shared.store;
        let current = store.current_rv();
        let rv = self
            .query
            .get("resourceVersion")
            .filter(|rv| !rv.is_empty());
        if let Some(rv) = rv {
            let rv: u64 = rv
                .parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv:?}")))?;
            if rv > current {
                return Err(ApiError::from_code(
                    504,
                    format!("Timeout: Too large resource version: {rv}, current: {current}"),
                ));
            }
            // Only an exact-match list needs the old state; we keep none, so old is gone.
            if self
                .query
                .get("resourceVersionMatch")
                .is_some_and(|m| m == "Exact")
                && rv < current
            {
                store
                    .events_after(None, rv)
                    .map_err(|_| ApiError::gone(format!("too old resource version: {rv}")))?;
            }
        }
        let limit = match self.query.get("limit") {
            Some(l) => Some(
                l.parse::<usize>()
                    .map_err(|_| ApiError::bad_request("invalid limit"))?,
            )
            .filter(|l| *l > 0),
            None => None,
        };
        let cont = self
            .query
            .get("continue")
            .map(String::as_str)
            .filter(|c| !c.is_empty());
        let meta_only = self.meta_only;
        let page = store.list_page(
            &self.target.gvr,
            self.target.namespace.as_deref(),
            &self.selectors()?,
            limit,
            cont,
            |obj| {
                if meta_only {
                    partial_object(obj)
                } else {
                    obj.clone()
                }
            },
        )?;
        let count = page.items.len() as u64;
        let body = self.list_body(
            page.items,
            page.resource_version,
            page.continue_token,
            page.remaining,
        );
        Ok(with_objects(json_response(StatusCode::OK, &body), count))
    }

    fn watch(&self) -> Result<Response<Body>, ApiError> {
        let flag = |name: &str| {
            self.query
                .get(name)
                .is_some_and(|v| v == "true" || v == "1")
        };
        let timeout = match self.query.get("timeoutSeconds") {
            Some(t) => {
                Some(Duration::from_secs(t.parse().map_err(|_| {
                    ApiError::bad_request("invalid timeoutSeconds")
                })?))
            }
            None => None,
        };
        let req = WatchRequest {
            gvr: self.target.gvr.clone(),
            namespace: self.target.namespace.clone(),
            selectors: self.selectors()?,
            resource_version: self.query.get("resourceVersion").cloned(),
            send_initial_events: flag("sendInitialEvents"),
            bookmarks: flag("allowWatchBookmarks"),
            timeout,
            meta_only: self.meta_only,
        };
        let stream = watch_stream(self.shared.clone(), req)?;
        let body = BodyExt::boxed_unsync(StreamBody::new(stream));
        Ok(Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::CACHE_CONTROL, "no-cache, private")
            .body(body)
            .unwrap_or_else(|_| Response::new(empty_body())))
    }

    fn patch(&self, scope: Scope) -> Result<Response<Body>, ApiError> {
        let store = &self.shared.store;
        let gvr = &self.target.gvr;
        let key = self.key();
        let mime = self.content_type.split(';').next().unwrap_or("").trim();
        let patch = self.json_body();
        match mime {
            "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
                let patch = patch?;
                let obj = store.update_with(gvr, &key, scope, |old| {
                    check_precondition(gvr, &key, old, &patch)?;
                    let mut new = old.clone();
                    merge_patch(&mut new, &patch);
                    Ok(new)
                })?;
                Ok(json_response(StatusCode::OK, &obj))
            }
            "application/json-patch+json" => {
                let ops = patch?;
                let obj = store.update_with(gvr, &key, scope, |old| {
                    let new = json_patch(old, &ops)?;
                    check_precondition(gvr, &key, old, &new)?;
                    Ok(new)
                })?;
                Ok(json_response(StatusCode::OK, &obj))
            }
            // Server-side apply: a merge that may create, with field ownership.
            "application/apply-patch+yaml" => {
                let patch = patch.map_err(|_| {
                    ApiError::unsupported_media("fake-kube accepts apply bodies in JSON only")
                })?;
                let manager = match self.query.get("fieldManager") {
                    Some(m) if !m.is_empty() => m.clone(),
                    _ => {
                        return Err(ApiError::invalid(
                            "fieldManager: Required value: is required for apply patch",
                        ));
                    }
                };
                let (obj, created) = store.upsert_with(gvr, &key, scope, |old| {
                    check_precondition(gvr, &key, old, &patch)?;
                    let mut new = old.clone();
                    merge_patch(&mut new, &patch);
                    ownership::apply(old, &mut new, &patch, &manager, scope);
                    Ok(new)
                })?;
                if created {
                    let resource = match scope {
                        Scope::Status => format!("{}/status", gvr.plural),
                        _ => gvr.plural.clone(),
                    };
                    self.shared.traffic.apply_created(&resource);
                }
                let code = if created {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                };
                Ok(json_response(code, &obj))
            }
            other => Err(ApiError::unsupported_media(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {other:?})"
            ))),
        }
    }

    fn delete_opts(&self) -> Result<DeleteOpts, ApiError> {
        let body: Value = if self.body.is_empty() {
            json!({})
        } else {
            self.json_body()?
        };
        let policy = self
            .query
            .get("propagationPolicy")
            .map(String::as_str)
            .or_else(|| body["propagationPolicy"].as_str());
        Ok(DeleteOpts {
            precondition_rv: body["preconditions"]["resourceVersion"]
                .as_str()
                .map(str::to_owned),
            precondition_uid: body["preconditions"]["uid"].as_str().map(str::to_owned),
            orphan: policy == Some("Orphan") || body["orphanDependents"] == json!(true),
        })
    }
}

/// A `metadata.resourceVersion` in a patch is a precondition on the current object.
fn check_precondition(
    gvr: &crate::Gvr,
    key: &ObjKey,
    old: &Value,
    patched: &Value,
) -> Result<(), ApiError> {
    match patched["metadata"]["resourceVersion"].as_str() {
        Some(rv) if !rv.is_empty() && rv != meta_str(old, "resourceVersion") => {
            Err(ApiError::conflict(&gvr.plural, &key.1))
        }
        _ => Ok(()),
    }
}

fn full(bytes: Vec<u8>) -> Body {
    BodyExt::boxed_unsync(Full::new(Bytes::from(bytes)))
}

fn empty_body() -> Body {
    full(Vec::new())
}

pub(crate) fn json_response(code: StatusCode, value: &Value) -> Response<Body> {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    let mut resp = Response::new(full(bytes));
    *resp.status_mut() = code;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}

fn text_response(code: StatusCode, text: &str) -> Response<Body> {
    let mut resp = Response::new(full(text.as_bytes().to_vec()));
    *resp.status_mut() = code;
    resp
}

pub(crate) fn error_response(err: &ApiError) -> Response<Body> {
    let code = StatusCode::from_u16(err.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(code, &err.to_status())
}

/// An error with `Retry-After` and `details.retryAfterSeconds`, as kube-apiserver sends them.
fn retry_after_response(err: &ApiError, secs: u32) -> Response<Body> {
    let code = StatusCode::from_u16(err.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut status = err.to_status();
    status["details"] = json!({ "retryAfterSeconds": secs });
    let mut resp = json_response(code, &status);
    resp.headers_mut()
        .insert(header::RETRY_AFTER, http::HeaderValue::from(secs));
    resp
}

fn parse_query(query: &str) -> HashMap<String, String> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let hex = |b: u8| {
        char::from(b)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    };
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let decoded = match bytes[i] {
            b'%' if i + 2 < bytes.len() => hex(bytes[i + 1])
                .zip(hex(bytes[i + 2]))
                .map(|(h, l)| h * 16 + l),
            _ => None,
        };
        match (decoded, bytes[i]) {
            (Some(b), _) => {
                out.push(b);
                i += 3;
            }
            (None, b'+') => {
                out.push(b' ');
                i += 1;
            }
            (None, b) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_are_percent_decoded() {
        let q = parse_query(
            "labelSelector=app+in+%28a%2Cb%29&fieldSelector=metadata.name%3Dn1&watch=true&x=%zz",
        );
        assert_eq!(q["labelSelector"], "app in (a,b)");
        assert_eq!(q["fieldSelector"], "metadata.name=n1");
        assert_eq!(q["watch"], "true");
        assert_eq!(q["x"], "%zz");
    }
}
