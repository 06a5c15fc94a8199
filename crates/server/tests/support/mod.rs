//! What the transport's tests share: the daemon's services on a SQLite store in a temporary
//! directory, served by `cairn_server::serve` on a free loopback port, stopped on demand.

use std::net::SocketAddr;
use std::sync::Arc;

use cairn_api::{ApiConfig, MemoryApi};
use cairn_memory::Engine;
use cairn_runtime::{HandlerOptions, Runtime};
use cairn_server::{MemoryAuthorize, RUNTIME_BASE_PATH, ServerConfig, Services, serve};
use tokio::sync::oneshot;

/// A daemon served in this process.
pub struct Daemon {
    pub address: SocketAddr,
    /// Sends the shutdown signal `serve` waits for.
    pub stop: Option<oneshot::Sender<()>>,
    /// `serve`'s task: it ends once the daemon has shut down.
    pub served: tokio::task::JoinHandle<std::io::Result<()>>,
    _directory: tempfile::TempDir,
}

/// A daemon with the memory API configured by `api` and, when given, a conversation runtime
/// at [`RUNTIME_BASE_PATH`] behind the memory API's authorization.
pub async fn start(
    api: ApiConfig,
    runtime: Option<Arc<dyn Runtime>>,
    config: ServerConfig,
) -> Daemon {
    let directory = tempfile::tempdir().unwrap();
    let store =
        Arc::new(cairn_store_sqlite::SqliteStore::open(&directory.path().join("c.db")).unwrap());
    let memory = MemoryApi::new(Engine::new(store), api);
    let runtime = runtime.map(|runtime| {
        HandlerOptions::new(runtime)
            .base_path(RUNTIME_BASE_PATH)
            .authorize(MemoryAuthorize { memory: memory.clone(), trusted_origins: Vec::new() })
            .build()
            .unwrap()
    });
    let services = Services { memory, runtime, mcp: None, metrics: None };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let served = tokio::spawn(serve(listener, services, config, async {
        let _ = stopped.await;
    }));
    Daemon { address, stop: Some(stop), served, _directory: directory }
}
