//! A minimal HTTP/1.1 GET for the speaker's admin endpoint (plain HTTP on loopback; no TLS).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The admin endpoint's default port, used when `--admin` gives none.
const DEFAULT_PORT: u16 = 9180;
/// Debug documents are small; anything bigger is not our endpoint.
const MAX_RESPONSE: u64 = 64 << 20;

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

fn decode_chunked(mut body: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let line_end = body
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("truncated chunked body")?;
        let size_text = std::str::from_utf8(&body[..line_end]).map_err(|e| e.to_string())?;
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("bad chunk size {size_text:?}"))?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        let chunk = body.get(..size).ok_or("truncated chunk")?;
        out.extend_from_slice(chunk);
        body = body.get(size + 2..).ok_or("truncated chunk")?;
    }
}

/// GET `base` + `path` and parse the body as JSON.
pub async fn get_json(
    base: &str,
    path: &str,
    timeout: Duration,
) -> Result<serde_json::Value, String> {
    let (authority, prefix) = split_url(base)?;
    let url = format!("http://{authority}{prefix}{path}");
    let fetch = async {
        let mut stream = TcpStream::connect(&authority)
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        let request = format!(
            "GET {prefix}{path} HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json\r\n\
             User-Agent: podcidr-bgp\r\nConnection: close\r\n\r\n"
        );
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        let mut raw = Vec::new();
        stream
            .take(MAX_RESPONSE)
            .read_to_end(&mut raw)
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        Ok::<_, String>(raw)
    };
    let raw = tokio::time::timeout(timeout, fetch)
        .await
        .map_err(|_| format!("{url}: no answer within {timeout:?}"))??;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("{url}: not an HTTP response"))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("{url}: not an HTTP response"))?;
    let chunked = lines.any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let body = &raw[split + 4..];
    let body = if chunked {
        decode_chunked(body).map_err(|e| format!("{url}: {e}"))?
    } else {
        body.to_vec()
    };
    if status != 200 {
        let text = String::from_utf8_lossy(&body);
        return Err(format!("{url}: HTTP {status}: {}", text.trim()));
    }
    serde_json::from_slice(&body).map_err(|e| format!("{url}: invalid JSON: {e}"))
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

    #[test]
    fn chunked_bodies() {
        assert_eq!(
            decode_chunked(b"3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n").unwrap(),
            b"abcde"
        );
        assert!(decode_chunked(b"5\r\nab").is_err());
    }
}
