//! The metrics endpoint: a small HTTP/1 server (hyper) on the scheduler's tokio runtime.
//! `GET /metrics` answers the Prometheus text format; `/` says where the metrics are;
//! anything else is 404. Encoding runs on the blocking pool, never on the runtime task.
//! Connections are capped, per client address and in all (`Open`): one client holding
//! connections open cannot take the scheduler's descriptors or shut out Prometheus.

use super::Metrics;
use crate::counted::{Counts, Held, Over};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Request, Response, StatusCode};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use tokio::net::TcpListener;

/// Why the metrics endpoint cannot listen; the error names the address.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("metrics address `{0}` is not ADDR:PORT (for example 127.0.0.1:9400)")]
    Address(String),
    #[error("cannot listen for metrics on {addr}: {source}")]
    Listen {
        addr: String,
        source: std::io::Error,
    },
}

/// Listen on `addr`.
pub async fn bind(addr: &str) -> Result<TcpListener, BindError> {
    let parsed: SocketAddr = addr
        .parse()
        .map_err(|_| BindError::Address(addr.to_string()))?;
    TcpListener::bind(parsed)
        .await
        .map_err(|source| BindError::Listen {
            addr: addr.to_string(),
            source,
        })
}

/// The most connections one client address may have open at once (a scraper needs one).
pub const PER_CLIENT: u64 = 4;
/// The most connections open at once, from all clients together.
pub const TOTAL: u64 = 64;

/// Count a connection of `ip` against [`PER_CLIENT`] and [`TOTAL`], or say why it is one
/// too many.
fn take(open: &Counts<IpAddr>, ip: IpAddr) -> Result<Held<IpAddr>, String> {
    open.take_within(ip, PER_CLIENT, TOTAL)
        .map_err(|over| match over {
            Over::Total => format!("too many connections (at most {TOTAL})"),
            Over::Key => {
                format!("too many connections from {ip} (at most {PER_CLIENT} per client)")
            }
        })
}

/// Tell a connection over the cap why (if its socket takes the few bytes now) and close it.
fn refuse(stream: tokio::net::TcpStream, why: &str) {
    let body = format!("{why}: try again shortly\n");
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.try_write(answer.as_bytes());
}

/// Serve `/metrics` until the task is dropped.
pub async fn serve(listener: TcpListener, metrics: Arc<Metrics>) {
    let open = Counts::default();
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("metrics accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let counted = match take(&open, peer.ip()) {
            Ok(c) => c,
            Err(why) => {
                tracing::debug!("metrics connection refused: {why}");
                refuse(stream, &why);
                continue;
            }
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let _counted = counted;
            let io = hyper_util::rt::TokioIo::new(stream);
            let service = hyper::service::service_fn(move |req| answer(req, metrics.clone()));
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(std::time::Duration::from_secs(10))
                .serve_connection(io, service);
            if let Err(e) = conn.await {
                tracing::debug!("metrics connection ended: {e}");
            }
        });
    }
}

async fn answer(
    req: Request<hyper::body::Incoming>,
    metrics: Arc<Metrics>,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let reply = |status: StatusCode, ctype: &str, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        if let Ok(v) = ctype.parse() {
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
        }
        Ok(r)
    };
    let text = "text/plain; charset=utf-8";
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return reply(
            StatusCode::METHOD_NOT_ALLOWED,
            text,
            "only GET is served\n".into(),
        );
    }
    match req.uri().path() {
        "/metrics" => {
            let body = tokio::task::spawn_blocking(move || metrics.encode())
                .await
                .unwrap_or_default();
            reply(
                StatusCode::OK,
                prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
                body,
            )
        }
        "/" => reply(
            StatusCode::OK,
            text,
            "shareq: Prometheus metrics at /metrics\n".into(),
        ),
        _ => reply(
            StatusCode::NOT_FOUND,
            text,
            "not found: try /metrics\n".into(),
        ),
    }
}
