//! A loopback HTTP server for a handler, as an embedder would mount one: hyper-util's auto
//! builder (HTTP/1.1 and HTTP/2) on a free port of 127.0.0.1, with upgrades, so a handler's
//! WebSocket answers work too. Each connection runs on a task of its own.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;

/// A server started by [`serve`]; it runs until the test's runtime ends.
#[derive(Debug, Clone, Copy)]
pub struct Loopback {
    pub address: SocketAddr,
}

impl Loopback {
    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// `ws://127.0.0.1:<port>`.
    pub fn ws_url(&self) -> String {
        format!("ws://{}", self.address)
    }
}

/// Serves every request with `handler` on a free loopback port. To answer a WebSocket
/// upgrade, the handler takes `hyper::upgrade::on(&mut request)` before it answers 101.
pub async fn serve<F, Fut, B>(handler: F) -> Loopback
where
    F: Fn(http::Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = http::Response<B>> + Send + 'static,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let listener =
        tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
    let address = listener.local_addr().expect("a bound address");
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let handler = handler.clone();
            let service = service_fn(move |request| {
                let answer = handler(request);
                async move { Ok::<_, Infallible>(answer.await) }
            });
            tokio::spawn(async move {
                let builder = auto::Builder::new(TokioExecutor::new());
                let _ = builder.serve_connection_with_upgrades(TokioIo::new(stream), service).await;
            });
        }
    });
    Loopback { address }
}
