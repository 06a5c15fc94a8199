//! `cairn connectors`: add, list, sync and remove connectors through the daemon's API, with a
//! progress bar on long syncs.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

use crate::client::{Client, ClientArgs};

#[derive(Debug, clap::Subcommand)]
pub(crate) enum ConnectorsCommand {
    /// Adds a connector: `folder` (Markdown and text files) or `git` (commit history).
    Add {
        #[arg(value_parser = ["folder", "git"])]
        kind: String,
        /// The folder or repository (made absolute).
        path: std::path::PathBuf,
        #[arg(long)]
        name: Option<String>,
        /// The repository its memories belong to [default: the folder's name].
        #[arg(long)]
        repo: Option<String>,
        #[arg(long, value_parser = ["repo", "user", "global", "task"])]
        scope: Option<String>,
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
            let mut body = json!({"kind": kind, "path": path});
            for (field, value) in [("name", name), ("repo", repo), ("scope", scope)] {
                if let Some(value) = value {
                    body[field] = Value::String(value);
                }
            }
            if let Some(max_commits) = max_commits {
                body["maxCommits"] = json!(max_commits);
            }
            let connector = Client::new(&client).post("/api/connectors", Some(body)).await?;
            println!(
                "added {} ({} {})",
                text(&connector["id"]),
                text(&connector["kind"]),
                text(&connector["path"])
            );
            println!("sync it with `cairn connectors sync {}`", text(&connector["id"]));
        }
        ConnectorsCommand::List { client } => {
            let client = Client::new(&client);
            let list = client.get("/api/connectors").await?;
            let connectors = list["connectors"].as_array().cloned().unwrap_or_default();
            if connectors.is_empty() {
                println!("no connectors; add one with `cairn connectors add folder PATH`");
            }
            for connector in connectors {
                let health = client
                    .get(&format!("/api/connectors/{}/health", text(&connector["id"])))
                    .await?;
                println!(
                    "{}  {:<6}  {}  {}  {}  {} memories",
                    text(&connector["id"]),
                    text(&connector["kind"]),
                    text(&connector["name"]),
                    text(&connector["path"]),
                    text(&health["status"]),
                    health["memories"],
                );
            }
        }
        ConnectorsCommand::Sync { id, client } => {
            let client = Client::new(&client);
            let report = sync_with_progress(&client, &id).await?;
            if report["status"] == "error" {
                anyhow::bail!("sync of {id} failed: {}", text(&report["error"]));
            }
            println!(
                "synced {id}: imported {}, updated {}, unchanged {}, archived {}, skipped {}",
                report["imported"],
                report["updated"],
                report["unchanged"],
                report["archived"],
                report["skipped"]
            );
        }
        ConnectorsCommand::Remove { id, client } => {
            let removed = Client::new(&client).delete(&format!("/api/connectors/{id}")).await?;
            println!(
                "removed {id}; archived {} memories (restorable)",
                removed["archivedMemories"]
            );
        }
    }
    Ok(())
}

/// Runs the sync request while polling the connector's health for progress.
async fn sync_with_progress(client: &Client, id: &str) -> anyhow::Result<Value> {
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
        let (client, path) = (client.clone(), format!("/api/connectors/{id}/sync"));
        tokio::spawn(async move { client.post(&path, None).await })
    };
    let health_path = format!("/api/connectors/{id}/health");
    while !sync.is_finished() {
        let progress = client.get(&health_path).await.map(|health| health["progress"].clone());
        if let Ok(progress) = progress
            && let (Some(done), Some(total)) =
                (progress["done"].as_u64(), progress["total"].as_u64())
        {
            bar.set_length(total);
            bar.set_position(done);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bar.finish_and_clear();
    sync.await?
}

fn text(value: &Value) -> String {
    value.as_str().map_or_else(|| value.to_string(), str::to_owned)
}
