//! Mounting Cairn's default conversation runtime inside your own hyper server.
//!
//! The runtime's handler is a function from `http::Request` to `http::Response`, so it
//! sits beside your own routes: here `/` is the application's and everything under
//! `/chat` is the runtime's. An `authorize` hook lets requests through by the
//! application's own rule (an `x-app-user` header).
//!
//! ```sh
//! cargo run -p cairn-agents --example embed -- /tmp/chat.db
//! curl -XPOST -H 'x-app-user: ada' localhost:3000/chat/conversations
//! ```

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use cairn_agents::{DefaultRuntime, RuntimeConfig};
use cairn_http::{ResponseBody, bytes_response};
use cairn_runtime::{Authorization, Authorize, HandlerOptions, RuntimeHandler};
use cairn_store_sqlite::SqliteStore;
use http::request::Parts;
use http::{Request, Response, StatusCode};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

/// The application's rule: a user header is required, and user `banned` gets the
/// application's own refusal.
pub struct HeaderGate;

#[async_trait::async_trait]
impl Authorize for HeaderGate {
    async fn authorize(&self, _path: &str, request: &Parts) -> Authorization {
        match request.headers.get("x-app-user").and_then(|user| user.to_str().ok()) {
            None => Authorization::Deny,
            Some("banned") => Authorization::Respond(bytes_response(
                StatusCode::FORBIDDEN,
                "text/plain",
                Bytes::from_static(b"this account is suspended"),
            )),
            Some(_) => Authorization::Allow,
        }
    }
}

/// The runtime over a SQLite file, mounted at `/chat`.
pub fn chat_handler(database: &std::path::Path) -> RuntimeHandler {
    let store = Arc::new(SqliteStore::open(database).expect("the database opens"));
    let runtime = DefaultRuntime::new(store, None, RuntimeConfig::default());
    HandlerOptions::new(Arc::new(runtime))
        .base_path("/chat")
        .authorize(HeaderGate)
        .build()
        .expect("valid options")
}

/// The application's router: its own page, and the runtime under `/chat`.
async fn route(
    request: Request<hyper::body::Incoming>,
    chat: RuntimeHandler,
) -> Response<ResponseBody> {
    let path = request.uri().path();
    if path == "/chat" || path.starts_with("/chat/") {
        return chat.handle(request).await;
    }
    match path {
        "/" => bytes_response(StatusCode::OK, "text/plain", Bytes::from_static(b"my application")),
        _ => bytes_response(StatusCode::NOT_FOUND, "text/plain", Bytes::from_static(b"not here")),
    }
}

/// Serves the application on `listener` forever.
pub async fn serve(listener: TcpListener, chat: RuntimeHandler) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let chat = chat.clone();
        let service = service_fn(move |request| {
            let chat = chat.clone();
            async move { Ok::<_, Infallible>(route(request, chat).await) }
        });
        tokio::spawn(async move {
            let builder = auto::Builder::new(TokioExecutor::new());
            let _ = builder.serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

#[allow(dead_code)] // The embedding test uses the functions above, not `main`.
#[tokio::main]
async fn main() {
    let database = std::env::args().nth(1).unwrap_or_else(|| "chat.db".to_owned());
    let listener = TcpListener::bind("127.0.0.1:3000").await.expect("port 3000 is free");
    println!("listening on http://127.0.0.1:3000 (runtime under /chat)");
    serve(listener, chat_handler(std::path::Path::new(&database))).await;
}
