//! A GET for the speaker's admin endpoint (plain HTTP/1.1 on loopback; no TLS), with hyper's
//! client connection over one TCP stream: hyper parses the response and decodes its framing
//! (`Content-Length`, chunked, or until close).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::header::{ACCEPT, HOST, USER_AGENT};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// The admin endpoint's default port, used when `--admin` gives none.
const DEFAULT_PORT: u16 = 9180;
/// Debug documents are small; a bigger body is not our endpoint.
const MAX_RESPONSE: usize = 64 << 20;
/// `http://127.0.0.1:9180`, `127.0.0.1:9180` or `[::1]:9180` → (authority, path prefix).
fn split_url(base: &str) -> Result<(String, String), String> {
    if base.starts_with("https://") {
        return Err(format!(
            "{base}: the admin endpoint is plain HTTP (use http://)"
        ));
    }
    let rest = base.strip_prefix("http://").unwrap_or(base);
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if authority.is_empty() {
        return Err(format!("{base}: no host"));
    }
    let has_port = if authority.starts_with('[') {
        authority.contains("]:")
    } else {
        authority.contains(':')
    };
    let authority = if has_port {
        authority.to_owned()
    } else {
        format!("{authority}:{DEFAULT_PORT}")
    };
    Ok((authority, path.trim_end_matches('/').to_owned()))
}

/// GET `base` + `path` and parse the body as JSON. Every error names the URL; the whole
/// exchange (connect, request, body) is bounded by `timeout`, the body by [`MAX_RESPONSE`].
pub async fn get_json(
    base: &str,
    path: &str,
    timeout: Duration,
) -> Result<serde_json::Value, String> {
    get_json_within(base, path, timeout, MAX_RESPONSE).await
}

/// [`get_json`] with a body limit of `limit` bytes.
async fn get_json_within(
    base: &str,
    path: &str,
    timeout: Duration,
    limit: usize,
) -> Result<serde_json::Value, String> {
    let (authority, prefix) = split_url(base)?;
    let url = format!("http://{authority}{prefix}{path}");
    let target = format!("{prefix}{path}");
    let (status, body) = tokio::time::timeout(timeout, fetch(&authority, &target, limit))
        .await
        .map_err(|_| format!("{url}: no answer within {timeout:?}"))?
        .map_err(|e| format!("{url}: {e}"))?;
    if status != StatusCode::OK {
        let text = String::from_utf8_lossy(&body);
        return Err(format!("{url}: HTTP {}: {}", status.as_u16(), text.trim()));
    }
    serde_json::from_slice(&body).map_err(|e| format!("{url}: invalid JSON: {e}"))
}

/// One request on a new connection; the status and the whole body.
async fn fetch(authority: &str, target: &str, limit: usize) -> Result<(StatusCode, Bytes), String> {
    let stream = TcpStream::connect(authority)
        .await
        .map_err(|e| e.to_string())?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    let request = Request::get(target)
        .header(HOST, authority)
        .header(ACCEPT, "application/json")
        .header(USER_AGENT, "podcidr-bgp")
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let exchange = async {
        let response = sender.send_request(request).await.map_err(http_error)?;
        let status = response.status();
        let body = Limited::new(response.into_body(), limit)
            .collect()
            .await
            .map_err(|e| match e.downcast::<hyper::Error>() {
                Ok(e) => http_error(*e),
                Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                    format!("response body larger than {limit} bytes")
                }
                Err(e) => e.to_string(),
            })?
            .to_bytes();
        Ok((status, body))
    };
    // The connection is driven here, not in a spawned task, so a timeout drops it too.
    let mut conn = std::pin::pin!(conn);
    let mut exchange = std::pin::pin!(exchange);
    tokio::select! {
        result = &mut exchange => result,
        closed = &mut conn => {
            closed.map_err(http_error)?;
            exchange.await
        }
    }
}

/// hyper's message and its causes (hyper keeps the detail, such as an I/O error, in the
/// source chain), with what it means for a reply that is not HTTP at all.
fn http_error(e: hyper::Error) -> String {
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        text = format!("{text}: {c}");
        cause = c.source();
    }
    if e.is_parse() {
        format!("not an HTTP response ({text})")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let ok = |s: &str| split_url(s).unwrap();
        assert_eq!(
            ok("http://127.0.0.1:9181"),
            ("127.0.0.1:9181".into(), "".into())
        );
        assert_eq!(ok("127.0.0.1"), ("127.0.0.1:9180".into(), "".into()));
        assert_eq!(ok("[::1]:9182/"), ("[::1]:9182".into(), "".into()));
        assert_eq!(ok("http://[::1]"), ("[::1]:9180".into(), "".into()));
        assert_eq!(ok("localhost:1/x/"), ("localhost:1".into(), "/x".into()));
        assert!(split_url("https://127.0.0.1:9180").is_err());
        assert!(split_url("http:///debug").is_err());
    }

    /// Serves one connection on loopback: reads the request head, writes `response`, closes.
    /// Yields the request head.
    async fn serve_once(response: &'static [u8]) -> (String, tokio::task::JoinHandle<String>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).await.unwrap() == 1 {
                head.push(byte[0]);
            }
            stream.write_all(response).await.unwrap();
            stream.shutdown().await.unwrap();
            String::from_utf8(head).unwrap()
        });
        (base, server)
    }

    const SECOND: Duration = Duration::from_secs(1);
    const WAIT: Duration = Duration::from_secs(10);

    #[tokio::test]
    async fn chunked_body_is_decoded_and_the_request_names_host_and_path() {
        let (base, server) = serve_once(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
              3\r\n{\"a\r\n4;x=y\r\n\":1}\r\n0\r\n\r\n",
        )
        .await;
        let doc = get_json(&format!("{base}/pre/"), "/debug/peers", WAIT)
            .await
            .unwrap();
        assert_eq!(doc, serde_json::json!({"a": 1}));
        let head = server.await.unwrap().to_ascii_lowercase();
        assert!(
            head.starts_with("get /pre/debug/peers http/1.1\r\n"),
            "{head}"
        );
        let authority = base.trim_start_matches("http://");
        assert!(
            head.contains(&format!("\r\nhost: {authority}\r\n")),
            "{head}"
        );
        assert!(head.contains("\r\naccept: application/json\r\n"), "{head}");
    }

    #[tokio::test]
    async fn body_until_close_is_read_whole() {
        let (base, _server) = serve_once(b"HTTP/1.1 200 OK\r\n\r\n[1, 2]").await;
        let doc = get_json(&base, "/debug/routes", WAIT).await.unwrap();
        assert_eq!(doc, serde_json::json!([1, 2]));
    }

    #[tokio::test]
    async fn truncated_chunked_body_is_an_error_naming_the_url() {
        let (base, _server) =
            serve_once(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab").await;
        let err = get_json(&base, "/debug/peers", WAIT).await.unwrap_err();
        assert!(err.starts_with(&format!("{base}/debug/peers: ")), "{err}");
        assert!(!err.contains("invalid JSON"), "{err}");
    }

    #[tokio::test]
    async fn bad_chunk_size_is_an_error_naming_the_url() {
        let (base, _server) = serve_once(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n",
        )
        .await;
        let err = get_json(&base, "/debug/peers", WAIT).await.unwrap_err();
        assert!(err.starts_with(&format!("{base}/debug/peers: ")), "{err}");
        assert!(!err.contains("invalid JSON"), "{err}");
    }

    #[tokio::test]
    async fn status_other_than_200_is_an_error_with_the_body() {
        let (base, _server) = serve_once(
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 11\r\n\r\nnot ready\r\n",
        )
        .await;
        let err = get_json(&base, "/debug/peers", WAIT).await.unwrap_err();
        assert_eq!(err, format!("{base}/debug/peers: HTTP 503: not ready"));
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_refused() {
        let (base, _server) = serve_once(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
              8\r\n[1,2,3,4\r\n8\r\n,5,6,7]\n\r\n0\r\n\r\n",
        )
        .await;
        let err = get_json_within(&base, "/x", WAIT, 10).await.unwrap_err();
        assert_eq!(err, format!("{base}/x: response body larger than 10 bytes"));
        let (base, _server) =
            serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n[1, 2]").await;
        assert!(get_json_within(&base, "/x", WAIT, 6).await.is_ok());
    }

    #[tokio::test]
    async fn not_http_is_named_as_such() {
        let (base, _server) = serve_once(b"SSH-2.0-OpenSSH_9.6\r\n\r\n").await;
        let err = get_json(&base, "/debug/peers", WAIT).await.unwrap_err();
        assert!(
            err.starts_with(&format!("{base}/debug/peers: not an HTTP response")),
            "{err}"
        );
    }

    #[tokio::test]
    async fn silence_is_bounded_by_the_timeout() {
        // Accepts (the kernel's backlog does) and never answers.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let timeout = SECOND / 10;
        let err = get_json(&base, "/debug/peers", timeout).await.unwrap_err();
        assert_eq!(
            err,
            format!("{base}/debug/peers: no answer within {timeout:?}")
        );
        drop(listener);
    }
}
