//! `cairn keys`: API keys, written straight to the database (the data directory's SQLite file,
//! or the PostgreSQL database of `--database-url`) so they work at once, even while the
//! daemons run.

use cairn_types::{Role, Timestamp};

use crate::StoreArgs;

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
        /// How long the key works, e.g. `30d` or `12h` [default: until revoked].
        #[arg(long, value_parser = humantime::parse_duration)]
        expires_in: Option<std::time::Duration>,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Lists keys (never the keys themselves).
    List {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Revokes a key by its id (`key_…`); requests with it fail at once.
    Revoke {
        /// The key's id, as `cairn keys list` shows it (`key_…`).
        id: String,
        #[command(flatten)]
        store: StoreArgs,
    },
}

pub(crate) async fn run(command: KeysCommand) -> anyhow::Result<()> {
    match command {
        KeysCommand::Create { role, name, expires_in, store } => {
            let role: Role = role.parse().map_err(anyhow::Error::msg)?;
            let expires_at = match expires_in {
                Some(life) if life.is_zero() => anyhow::bail!("--expires-in must be above 0"),
                Some(life) => {
                    let millis = i64::try_from(life.as_millis()).unwrap_or(i64::MAX);
                    Some(Timestamp::from_millis(
                        Timestamp::now().as_millis().saturating_add(millis),
                    ))
                }
                None => None,
            };
            let store = store.open_store(false).await?.store;
            let (secret, record) = cairn_api::new_api_key(role, name, expires_at);
            store.insert_key(&record).await?;
            let until = record.expires_at.map(|at| format!(", until {at}")).unwrap_or_default();
            println!(
                "created {} with role {}{until} (shown once; store it now):",
                record.id, record.role
            );
            println!("{secret}");
        }
        KeysCommand::List { store } => {
            let store = store.open_store(false).await?.store;
            let keys = store.list_keys().await?;
            if keys.is_empty() {
                println!("no keys; create one with `cairn keys create --role admin`");
            }
            let now = Timestamp::now();
            for key in keys {
                let state = match (key.revoked_at, key.expires_at) {
                    (Some(at), _) => format!("revoked {at}"),
                    (None, Some(at)) if key.expired(now) => format!("expired {at}"),
                    (None, Some(at)) => format!("active until {at}"),
                    (None, None) => "active".to_owned(),
                };
                let used = key
                    .last_used_at
                    .map_or_else(|| "never used".to_owned(), |at| format!("last used {at}"));
                let name = key.name.unwrap_or_default();
                println!(
                    "{}  {:<5}  {}…  {}  {state}  {used}  {name}",
                    key.id, key.role, key.prefix, key.created_at
                );
            }
        }
        KeysCommand::Revoke { id, store } => {
            let store = store.open_store(false).await?.store;
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

#[cfg(test)]
mod tests {
    use cairn_test_support::postgres::TestCluster;

    use super::*;
    use crate::serve::tests::store_args;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn keys_are_kept_in_the_database_the_url_names_else_in_the_data_directory() {
        let (_cluster, url) = TestCluster::with_database();
        let dir = tempfile::tempdir().unwrap();
        let create = |url: Option<&str>, name: &str| KeysCommand::Create {
            role: "admin".to_owned(),
            name: Some(name.to_owned()),
            expires_in: None,
            store: store_args(dir.path(), url),
        };
        run(create(Some(&url), "ops")).await.unwrap();
        run(create(None, "solo")).await.unwrap();

        let names = |keys: Vec<cairn_types::ApiKey>| -> Vec<String> {
            keys.into_iter().filter_map(|key| key.name).collect()
        };
        let shared = store_args(dir.path(), Some(&url)).open_store(false).await.unwrap();
        let keys = shared.store.list_keys().await.unwrap();
        assert_eq!(names(keys.clone()), ["ops"]);
        let solo = store_args(dir.path(), None).open_store(false).await.unwrap();
        assert_eq!(names(solo.store.list_keys().await.unwrap()), ["solo"]);
        assert!(dir.path().join("cairn.db").is_file(), "SQLite stays the default");

        run(KeysCommand::Revoke {
            id: keys[0].id.clone(),
            store: store_args(dir.path(), Some(&url)),
        })
        .await
        .unwrap();
        let revoked = shared.store.list_keys().await.unwrap();
        assert!(revoked[0].revoked_at.is_some(), "revoked in the database");
    }
}
