//! The head's HTTP port (`starling head --dashboard-port`, 8265 by default): Prometheus metrics
//! at `/metrics` and the state API as JSON under `/api/`, behind the cluster token.
//!
//! A small HTTP/1.1 server of its own: `GET` (and a `POST /login` form), one request per
//! connection, headers up to [`MAX_HEAD`] bytes read within [`READ_TIMEOUT`], so a slow or
//! hostile client holds one task for seconds at most. With TLS on the head, this port speaks
//! TLS with the same certificate, so the token never crosses the network in clear.
//!
//! The token is accepted as `Authorization: Bearer <token>` (Prometheus's `authorization`
//! setting), as the `starling_token` cookie, or once as `?token=` in a URL, which sets the
//! cookie (HttpOnly, SameSite=Strict) and redirects to the same page without it. Only the
//! cluster token is accepted here: a job's credential reads its own job through the RPCs.

use std::sync::Arc;
use std::time::Duration;

use starling_proto::security::{RequireToken, Scope};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::state::Head;

/// The most bytes of a request's line and headers (and of a form body) read.
pub const MAX_HEAD: usize = 16 << 10;

/// How long a client has to send its request.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The cookie that carries the token after a login.
const COOKIE: &str = "starling_token";

/// One request, as far as this server reads it.
#[derive(Debug, Default)]
pub(crate) struct Request {
    pub method: String,
    /// The path without its query.
    pub path: String,
    /// The query's pairs, percent-decoded.
    pub query: Vec<(String, String)>,
    authorization: Option<String>,
    cookie_token: Option<String>,
    /// A urlencoded form body's pairs.
    form: Vec<(String, String)>,
}

impl Request {
    /// The query value of `key`.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A response: status, content type, body, and extra headers.
pub(crate) struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    pub headers: Vec<(String, String)>,
}

impl Response {
    pub fn new(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Self {
        Response {
            status,
            content_type,
            body: body.into(),
            headers: Vec::new(),
        }
    }

    fn text(status: u16, body: &str) -> Self {
        Response::new(status, "text/plain; charset=utf-8", body)
    }

    fn redirect(to: &str) -> Self {
        let mut r = Response::new(303, "text/plain; charset=utf-8", "");
        r.headers.push(("Location".into(), to.into()));
        r
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        303 => "See Other",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Payload Too Large",
        _ => "Error",
    }
}

/// What the routes need: the head, and how to check a token.
pub(crate) struct Site {
    pub head: Arc<Head>,
    pub auth: RequireToken,
}

/// Serves the port until the task is dropped: each connection on a task of its own.
pub(crate) async fn serve(
    listener: TcpListener,
    site: Arc<Site>,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let site = site.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                Some(acceptor) => {
                    let handshake =
                        tokio::time::timeout(READ_TIMEOUT, acceptor.accept(stream)).await;
                    if let Ok(Ok(stream)) = handshake {
                        connection(stream, &site).await;
                    }
                }
                None => connection(stream, &site).await,
            }
        });
    }
}

async fn connection<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, site: &Site) {
    let response = match tokio::time::timeout(READ_TIMEOUT, read_request(&mut stream)).await {
        Ok(Ok(request)) => {
            let site_head = site.head.clone();
            let authorized = authorized(&request, &site.auth);
            // Pages walk the scheduler's state under its lock: off the I/O threads.
            let routed =
                tokio::task::spawn_blocking(move || route(&site_head, &request, authorized)).await;
            match routed {
                Ok(r) => r,
                Err(_) => Response::text(500, "the page failed"),
            }
        }
        Ok(Err(status)) => Response::text(status, reason(status)),
        Err(_) => return,
    };
    let _ = write_response(&mut stream, response).await;
    let _ = stream.shutdown().await;
}

/// Whether the request carries the cluster token (a job's credential is not enough here).
fn authorized(r: &Request, auth: &RequireToken) -> Option<String> {
    let cluster =
        |presented: &str| matches!(auth.check(presented.as_bytes()), Some(Scope::Cluster));
    if let Some(h) = &r.authorization {
        if cluster(h) {
            return Some(String::new());
        }
    }
    if let Some(t) = &r.cookie_token {
        if cluster(&format!("Bearer {t}")) {
            return Some(String::new());
        }
    }
    let given = r.param("token").or_else(|| {
        r.form
            .iter()
            .find(|(k, _)| k == "token")
            .map(|(_, v)| v.as_str())
    });
    if let Some(t) = given {
        if cluster(&format!("Bearer {t}")) {
            // A token given in the URL or the form becomes the cookie.
            return Some(t.to_string());
        }
    }
    None
}

/// The response to `request`; `authorized` is `None` without the token, `Some("")` with it,
/// and `Some(token)` when the request gave it in its URL or form (it is set as the cookie).
fn route(head: &Head, request: &Request, authorized: Option<String>) -> Response {
    if request.method != "GET" && !(request.method == "POST" && request.path == "/login") {
        return Response::text(405, "only GET (and POST /login) are served here");
    }
    let Some(new_token) = authorized else {
        return unauthorized(request);
    };
    if !new_token.is_empty() {
        // Set the cookie, then show the page without the token in its address.
        let to = if request.path == "/login" {
            "/".to_string()
        } else {
            let rest: Vec<String> = request
                .query
                .iter()
                .filter(|(k, _)| k != "token")
                .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
                .collect();
            if rest.is_empty() {
                request.path.clone()
            } else {
                format!("{}?{}", request.path, rest.join("&"))
            }
        };
        let mut r = Response::redirect(&to);
        r.headers.push((
            "Set-Cookie".into(),
            format!("{COOKIE}={new_token}; HttpOnly; SameSite=Strict; Path=/"),
        ));
        return r;
    }
    match request.path.as_str() {
        "/metrics" => Response::new(
            200,
            crate::metrics::CONTENT_TYPE,
            crate::metrics::render(head),
        ),
        path => crate::dashboard::page(head, path, request)
            .unwrap_or_else(|| Response::text(404, "no such page")),
    }
}

fn unauthorized(request: &Request) -> Response {
    if request.path == "/metrics" || request.path.starts_with("/api/") {
        let mut r = Response::text(
            401,
            "missing or wrong cluster token: send `Authorization: Bearer <token>` (the head \
             writes it to DATA_DIR/token)",
        );
        r.headers.push((
            "WWW-Authenticate".into(),
            "Bearer realm=\"starling\"".into(),
        ));
        return r;
    }
    Response::new(
        401,
        "text/html; charset=utf-8",
        crate::dashboard::LOGIN_PAGE,
    )
}

async fn write_response<S: AsyncWrite + Unpin>(s: &mut S, r: Response) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\
         Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\
         Content-Security-Policy: default-src 'self'; style-src 'self' 'unsafe-inline'; \
         script-src 'self' 'unsafe-inline'\r\n",
        r.status,
        reason(r.status),
        r.content_type,
        r.body.len()
    );
    for (k, v) in &r.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).await?;
    s.write_all(&r.body).await?;
    s.flush().await
}

/// Reads one request: its line, headers and (for a form) body. An error is the status to
/// answer with.
async fn read_request<S: AsyncRead + Unpin>(s: &mut S) -> Result<Request, u16> {
    let mut buf = Vec::with_capacity(1024);
    let end = loop {
        if let Some(at) = find(&buf, b"\r\n\r\n") {
            break at;
        }
        if buf.len() >= MAX_HEAD {
            return Err(413);
        }
        let mut chunk = [0u8; 2048];
        let n = s.read(&mut chunk).await.map_err(|_| 400u16)?;
        if n == 0 {
            return Err(400);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| 400u16)?;
    let mut lines = head.split("\r\n");
    let line = lines.next().ok_or(400u16)?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(400);
    };
    if !version.starts_with("HTTP/1.") {
        return Err(400);
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut r = Request {
        method: method.to_string(),
        path: decode(path),
        query: pairs(query),
        ..Default::default()
    };
    let mut length = 0usize;
    for l in lines {
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        let v = v.trim();
        match k.trim().to_ascii_lowercase().as_str() {
            "authorization" => r.authorization = Some(v.to_string()),
            "cookie" => {
                r.cookie_token = v
                    .split(';')
                    .filter_map(|c| c.trim().split_once('='))
                    .find(|(k, _)| *k == COOKIE)
                    .map(|(_, v)| v.to_string())
            }
            "content-length" => length = v.parse().map_err(|_| 400u16)?,
            _ => {}
        }
    }
    if r.method == "POST" {
        if length > MAX_HEAD {
            return Err(413);
        }
        let mut body = buf[end + 4..].to_vec();
        while body.len() < length {
            let mut chunk = [0u8; 2048];
            let n = s.read(&mut chunk).await.map_err(|_| 400u16)?;
            if n == 0 {
                return Err(400);
            }
            body.extend_from_slice(&chunk[..n]);
        }
        body.truncate(length);
        r.form = pairs(std::str::from_utf8(&body).map_err(|_| 400u16)?);
    }
    Ok(r)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// `a=1&b=x%20y` as decoded pairs.
fn pairs(s: &str) -> Vec<(String, String)> {
    s.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// Percent-decoding (and `+` as a space, as forms send it); a `%` not followed by two hex
/// digits stays as it is.
pub(crate) fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Percent-encoding of everything but unreserved characters.
pub(crate) fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_coding_round_trips() {
        for s in ["a b", "x=1&y", "é", "100%", "%zz", "%4"] {
            assert_eq!(decode(&encode(s)), s);
        }
        assert_eq!(decode("a+b%20c"), "a b c");
        assert_eq!(decode("%zz"), "%zz");
        assert_eq!(decode("50%"), "50%");
    }

    #[tokio::test]
    async fn requests_parse_and_oversized_ones_are_refused() {
        let raw = b"GET /api/tasks?filter=state%3DFAILED&limit=5 HTTP/1.1\r\nHost: x\r\n\
                    Cookie: a=b; starling_token=abc\r\nAuthorization: Bearer t\r\n\r\n";
        let r = read_request(&mut &raw[..]).await.unwrap();
        assert_eq!((r.method.as_str(), r.path.as_str()), ("GET", "/api/tasks"));
        assert_eq!(r.param("filter"), Some("state=FAILED"));
        assert_eq!(r.cookie_token.as_deref(), Some("abc"));
        assert_eq!(r.authorization.as_deref(), Some("Bearer t"));

        let form = b"POST /login HTTP/1.1\r\nContent-Length: 9\r\n\r\ntoken=x+y";
        let r = read_request(&mut &form[..]).await.unwrap();
        assert_eq!(r.form, vec![("token".to_string(), "x y".to_string())]);

        let huge = vec![b'a'; MAX_HEAD + 10];
        assert_eq!(read_request(&mut &huge[..]).await.unwrap_err(), 413);
        assert_eq!(
            read_request(&mut &b"NONSENSE\r\n\r\n"[..])
                .await
                .unwrap_err(),
            400
        );
    }
}
