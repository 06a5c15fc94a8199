//! The `cairn` command: `cairn serve` runs the daemon.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use cairn_api::{ApiConfig, MemoryApi};
use cairn_memory::Engine;
use cairn_server::{ServerConfig, Services};
use cairn_store_sqlite::SqliteStore;
use clap::{Parser, Subcommand};
use tokio::net::TcpListener;

#[derive(Debug, Parser)]
#[command(name = "cairn", version, about = "Memory service and conversation runtime for AI agents")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs the daemon: the memory HTTP API on 127.0.0.1.
    Serve(ServeArgs),
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// The port to listen on; 0 picks a free one.
    #[arg(long, env = "SERVICE_PORT", default_value_t = 8787)]
    port: u16,
    /// Where the database lives [default: the user's data directory, e.g. ~/.local/share/cairn].
    #[arg(long, env = "SERVICE_DATA_DIR")]
    data_dir: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match cli.command {
        Command::Serve(args) => {
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            runtime.block_on(serve(args))
        }
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let data_dir = match args.data_dir {
        Some(dir) => dir,
        None => dirs::data_dir()
            .context("no data directory is known for this user; pass --data-dir")?
            .join("cairn"),
    };
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("cannot create the data directory {}", data_dir.display()))?;
    let database = data_dir.join("cairn.db");
    let store = SqliteStore::open(&database)
        .with_context(|| format!("cannot open the database {}", database.display()))?;
    let engine = Engine::new(Arc::new(store));
    let services = Services { memory: MemoryApi::new(engine.clone(), ApiConfig::default()) };

    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, args.port));
    let listener =
        TcpListener::bind(address).await.with_context(|| format!("cannot listen on {address}"))?;
    let local = listener.local_addr()?;
    tracing::info!(database = %database.display(), "storage ready");
    println!("cairn listening on http://{local}");
    cairn_server::serve(listener, services, ServerConfig::default(), shutdown_signal()).await?;
    engine.settled().await;
    Ok(())
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => tracing::info!("interrupted"),
        () = terminate => tracing::info!("terminated"),
    }
}
