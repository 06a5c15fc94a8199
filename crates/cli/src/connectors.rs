//! `cairn connectors`: add, list, sync and remove connectors through the daemon's API, with a
//! progress bar on long syncs.

use std::time::Duration;

use cairn_client::Client;
use cairn_client::types::{ConnectorKind, NewConnector, Scope, SyncReport, SyncStatus};
use indicatif::{ProgressBar, ProgressStyle};

use crate::client::ClientArgs;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum ConnectorsCommand {
    /// Adds a connector: `folder` (Markdown and text files) or `git` (commit history).
    Add {
        #[arg(value_parser = ["folder", "git"])]
        kind: String,
        /// The folder or repository (made absolute).
        path: std::path::PathBuf,
        /// A name to recognise it by [default: the folder's name].
        #[arg(long)]
        name: Option<String>,
        /// The repository its memories belong to [default: the folder's name].
        #[arg(long)]
        repo: Option<String>,
        /// repo, user, global or task [default: repo].
        #[arg(long)]
        scope: Option<Scope>,
        /// Git: how many of the newest commits to import.
        #[arg(long)]
        max_commits: Option<u32>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Lists connectors and how their last sync went.
    List {
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Syncs a connector now.
    Sync {
        id: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Removes a connector; its memories are archived.
    Remove {
        id: String,
        #[command(flatten)]
        client: ClientArgs,
    },
}

pub(crate) async fn run(command: ConnectorsCommand) -> anyhow::Result<()> {
    match command {
        ConnectorsCommand::Add { kind, path, name, repo, scope, max_commits, client } => {
            let path = std::path::absolute(&path)?;
            let kind = if kind == "git" { ConnectorKind::Git } else { ConnectorKind::Folder };
            let connector = NewConnector {
                kind,
                path: path.to_string_lossy().into_owned(),
                name,
                scope,
                repo,
                max_commits,
            };
            let connector = client.connect()?.add_connector(&connector).await?;
            println!("added {} ({} {})", connector.id, connector.kind.as_str(), connector.path);
            println!("sync it with `cairn connectors sync {}`", connector.id);
        }
        ConnectorsCommand::List { client } => {
            let client = client.connect()?;
            let list = client.list_connectors().await?;
            if list.connectors.is_empty() {
                println!("no connectors; add one with `cairn connectors add folder PATH`");
            }
            for connector in list.connectors {
                let health = client.connector_health(&connector.id).await?;
                println!(
                    "{}  {:<6}  {}  {}  {}  {} memories",
                    connector.id,
                    connector.kind.as_str(),
                    connector.name,
                    connector.path,
                    health.status,
                    health.memories,
                );
            }
        }
        ConnectorsCommand::Sync { id, client } => {
            // A large source takes a while: the progress bar shows it moving.
            let client = client.connect_with(Duration::from_secs(24 * 3600))?;
            let report = sync_with_progress(&client, &id).await?;
            if report.status == SyncStatus::Error {
                anyhow::bail!("sync of {id} failed: {}", report.error.unwrap_or_default());
            }
            println!(
                "synced {id}: imported {}, updated {}, unchanged {}, archived {}, skipped {}",
                report.imported, report.updated, report.unchanged, report.archived, report.skipped
            );
        }
        ConnectorsCommand::Remove { id, client } => {
            let removed = client.connect()?.remove_connector(&id).await?;
            println!("removed {id}; archived {} memories (restorable)", removed.archived_memories);
        }
    }
    Ok(())
}

/// Runs the sync request while polling the connector's health for progress.
async fn sync_with_progress(client: &Client, id: &str) -> anyhow::Result<SyncReport> {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} syncing {msg} [{bar:30}] {pos}/{len} pieces ({eta})",
        )
        .expect("the template is valid")
        .progress_chars("=> "),
    );
    bar.set_message(id.to_owned());
    let sync = {
        let (client, id) = (client.clone(), id.to_owned());
        tokio::spawn(async move { client.sync_connector(&id).await })
    };
    while !sync.is_finished() {
        if let Ok(Some(progress)) = client.connector_health(id).await.map(|health| health.progress)
        {
            bar.set_length(progress.total);
            bar.set_position(progress.done);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bar.finish_and_clear();
    Ok(sync.await??)
}
