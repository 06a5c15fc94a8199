//! The `cairn` command: `cairn serve` runs the daemon; `cairn keys` manages API keys.

mod client;
mod connectors;
mod keys;
mod model;
mod serve;

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "cairn", version, about = "Memory service and conversation runtime for AI agents")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs the daemon: the memory HTTP API and the conversation runtime.
    Serve(Box<serve::ServeArgs>),
    /// Creates, lists and revokes API keys (works while the daemon runs).
    #[command(subcommand)]
    Keys(keys::KeysCommand),
    /// Installs the local embedding model.
    #[command(subcommand)]
    Model(model::ModelCommand),
    /// Adds, lists, syncs and removes connectors through the running daemon.
    #[command(subcommand)]
    Connectors(connectors::ConnectorsCommand),
}

/// Where the database lives, shared by every subcommand that opens it.
#[derive(Debug, Clone, clap::Args)]
struct DataDirArg {
    /// The data directory [default: the user's data directory, e.g. ~/.local/share/cairn].
    #[arg(long, env = "SERVICE_DATA_DIR")]
    data_dir: Option<PathBuf>,
}

impl DataDirArg {
    /// The data directory, created if missing, and the database path in it.
    fn database(&self) -> anyhow::Result<PathBuf> {
        let data_dir = match &self.data_dir {
            Some(dir) => dir.clone(),
            None => dirs::data_dir()
                .context("no data directory is known for this user; pass --data-dir")?
                .join("cairn"),
        };
        std::fs::create_dir_all(&data_dir)
            .with_context(|| format!("cannot create the data directory {}", data_dir.display()))?;
        Ok(data_dir.join("cairn.db"))
    }

    fn open_store(&self) -> anyhow::Result<(PathBuf, cairn_store_sqlite::SqliteStore)> {
        let database = self.database()?;
        let store = cairn_store_sqlite::SqliteStore::open(&database)
            .with_context(|| format!("cannot open the database {}", database.display()))?;
        Ok((database, store))
    }
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
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    match cli.command {
        Command::Serve(args) => runtime.block_on(serve::run(*args)),
        Command::Keys(command) => runtime.block_on(keys::run(command)),
        Command::Connectors(command) => runtime.block_on(connectors::run(command)),
        Command::Model(command) => runtime.block_on(model::run(command)),
    }
}
