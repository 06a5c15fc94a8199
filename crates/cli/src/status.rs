//! `cairn status`: what a client here would use: the daemon it reaches and its state, how
//! it authenticates, and the repository as seen from this folder.

use std::process::ExitCode;
use std::time::Duration;

use crate::client::ClientArgs;

#[derive(Debug, clap::Args)]
pub(crate) struct StatusArgs {
    /// The repository to report [default: the one this folder is in].
    #[arg(long, env = "CAIRN_REPO")]
    repo: Option<String>,
    #[command(flatten)]
    client: ClientArgs,
}

pub(crate) async fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let here = std::env::current_dir()?;
    let repository = match (&args.repo, cairn_memory::repo_identity(&here)) {
        (Some(repo), _) => format!("{repo} (from --repo or CAIRN_REPO)"),
        (None, Some((name, source, root))) => {
            let from = match source {
                cairn_memory::RepoSource::Origin => "its origin remote",
                cairn_memory::RepoSource::Folder => "its folder's name",
            };
            format!("{name} (the git repository at {}, named by {from})", root.display())
        }
        (None, None) => {
            "none (not inside a git repository; --repo or CAIRN_REPO names one)".to_owned()
        }
    };
    let credentials = match &args.client.api_key {
        Some(_) => "an API key (CAIRN_API_KEY)",
        None => "none (the solo profile's owner needs none)",
    };
    let health = args.client.connect_with(Duration::from_secs(5))?.health().await;
    let mut failed = false;
    match &health {
        Ok(health) => {
            println!(
                "daemon      {} (cairn {}, {}, up {:.0} s)",
                args.client.url, health.version, health.status, health.uptime
            );
            println!(
                "memories    {} (retrieval: {}, {} waiting to be embedded)",
                health.memory_count, health.retrieval, health.embeddings_pending
            );
        }
        Err(error) => {
            failed = true;
            println!("daemon      {} does not answer: {error}", args.client.url);
        }
    }
    println!("credentials {credentials}");
    println!("repository  {repository}");
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
