//! `cairn keys`: API keys, written straight to the database so they work at once, even while
//! the daemon runs.

use cairn_store::KeyStore;
use cairn_types::{Role, Timestamp};

use crate::DataDirArg;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum KeysCommand {
    /// Creates a key and prints it once, alone on the last line.
    Create {
        /// What the key may do: `read`, `write` (and read), `admin` (everything), or `runtime`
        /// (the conversation runtime only, for the server side of a chat widget).
        #[arg(long, value_parser = ["read", "write", "admin", "runtime"])]
        role: String,
        /// A name to recognise the key by (not empty).
        #[arg(long, value_parser = key_name)]
        name: Option<String>,
        #[command(flatten)]
        data_dir: DataDirArg,
    },
    /// Lists keys (never the keys themselves).
    List {
        #[command(flatten)]
        data_dir: DataDirArg,
    },
    /// Revokes a key by its id (`key_…`); requests with it fail at once.
    Revoke {
        /// The key's id, as `cairn keys list` shows it (`key_…`).
        id: String,
        #[command(flatten)]
        data_dir: DataDirArg,
    },
}

pub(crate) async fn run(command: KeysCommand) -> anyhow::Result<()> {
    match command {
        KeysCommand::Create { role, name, data_dir } => {
            let role: Role = role.parse().map_err(anyhow::Error::msg)?;
            let (_, store) = data_dir.open_store()?;
            let (secret, record) = cairn_api::new_api_key(role, name);
            store.insert_key(&record).await?;
            println!("created {} with role {} (shown once; store it now):", record.id, record.role);
            println!("{secret}");
        }
        KeysCommand::List { data_dir } => {
            let (_, store) = data_dir.open_store()?;
            let keys = store.list_keys().await?;
            if keys.is_empty() {
                println!("no keys; create one with `cairn keys create --role admin`");
            }
            for key in keys {
                let state = key
                    .revoked_at
                    .map_or_else(|| "active".to_owned(), |at| format!("revoked {at}"));
                let name = key.name.unwrap_or_default();
                println!(
                    "{}  {:<5}  {}…  {}  {state}  {name}",
                    key.id, key.role, key.prefix, key.created_at
                );
            }
        }
        KeysCommand::Revoke { id, data_dir } => {
            let (_, store) = data_dir.open_store()?;
            if !store.revoke_key(&id, Timestamp::now()).await? {
                anyhow::bail!("no active key has the id `{id}`; see `cairn keys list`");
            }
            println!("revoked {id}");
        }
    }
    Ok(())
}

fn key_name(text: &str) -> Result<String, String> {
    let name = text.trim();
    if name.is_empty() {
        return Err("a key's name cannot be empty; leave --name out for none".to_owned());
    }
    Ok(name.to_owned())
}
