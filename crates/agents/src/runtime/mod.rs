//! [`DefaultRuntime`]: conversations and their event log in Cairn's storage, agents and
//! journeys from definition files, answers from the memory engine, and an optional
//! OpenAI-compatible language model for the replies.
//!
//! Steps of one conversation run one at a time (a lock per conversation, shared through the
//! store with every daemon on the same database), so each step sees the state the previous
//! one left; the store still assigns offsets atomically, so other processes writing the
//! same log keep it gapless too. What other daemons append reaches this one's event streams
//! through [`DefaultRuntime::external_change`].

mod api;
mod channel;
mod commit;
mod history;
#[cfg(test)]
mod tests;
mod turn;
mod voice;
mod words;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cairn_memory::Engine;
use cairn_store::{ConversationStore, ExternalChange, SharedLock};
use cairn_types::{Conversation, Lifecycle, Snapshot};
use tokio::sync::watch;

use cairn_runtime::*;

use crate::journey::{Agent, Definitions};
use crate::llm::{ChatClient, ChatConfig};
use crate::voice::VoiceConfig;

/// Options of the default runtime.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub definitions: Arc<Definitions>,
    /// The agent of conversations created without one (default: the definitions' first).
    pub default_agent_id: Option<String>,
    /// An OpenAI-compatible chat-completions endpoint that writes the replies.
    pub chat: Option<ChatConfig>,
    /// How many memories an answer draws on.
    pub answer_limit: u32,
    /// Speech and turn-taking for voice conversations.
    pub voice: VoiceConfig,
}

impl Default for RuntimeConfig {
    fn default() -> RuntimeConfig {
        RuntimeConfig {
            definitions: Arc::new(Definitions::bundled()),
            default_agent_id: None,
            chat: None,
            answer_limit: 3,
            voice: VoiceConfig::default(),
        }
    }
}

/// The default [`Runtime`]. Cheap to clone: clones share everything (a voice session keeps
/// one for as long as its socket is open).
#[derive(Clone)]
pub struct DefaultRuntime {
    shared: Arc<Shared>,
}

/// What every clone of a [`DefaultRuntime`] shares.
struct Shared {
    store: Arc<dyn ConversationStore>,
    engine: Option<Engine>,
    definitions: Arc<Definitions>,
    default_agent_id: String,
    chat: Option<ChatClient>,
    answer_limit: u32,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    appended: Mutex<HashMap<String, watch::Sender<u64>>>,
    voice: Arc<VoiceConfig>,
}

impl DefaultRuntime {
    /// A runtime over `store`, answering from `engine` when one is given.
    pub fn new(
        store: Arc<dyn ConversationStore>,
        engine: Option<Engine>,
        config: RuntimeConfig,
    ) -> DefaultRuntime {
        let default_agent_id = config
            .default_agent_id
            .or_else(|| config.definitions.default_agent_id().map(str::to_owned))
            .unwrap_or_else(|| "default".to_owned());
        let shared = Shared {
            store,
            engine,
            definitions: config.definitions,
            default_agent_id,
            chat: config.chat.map(ChatClient::new),
            answer_limit: config.answer_limit.max(1),
            locks: Mutex::new(HashMap::new()),
            appended: Mutex::new(HashMap::new()),
            voice: Arc::new(config.voice),
        };
        DefaultRuntime { shared: Arc::new(shared) }
    }

    pub fn definitions(&self) -> &Definitions {
        &self.shared.definitions
    }

    /// Holds the conversation's step lock until the guard is dropped: this process's first
    /// (so its own steps queue here, not on the database), then the store's, shared with
    /// every daemon on the same database (none for a store that one process uses).
    async fn lock(&self, conversation_id: &str) -> Result<StepGuard<'_>> {
        let lock = {
            let mut locks = self.shared.locks.lock().expect("lock table poisoned");
            locks.entry(conversation_id.to_owned()).or_default().clone()
        };
        let guard = lock.clone().lock_owned().await;
        let mut step = StepGuard {
            runtime: self,
            id: conversation_id.to_owned(),
            lock,
            _guard: guard,
            _shared: None,
        };
        step._shared =
            self.shared.store.lock(conversation_id).await.map_err(RuntimeError::internal)?;
        Ok(step)
    }

    /// Takes in what other processes sharing the store changed: appends by other daemons
    /// wake this daemon's event streams, and while the store cannot say what changed (or
    /// may have missed something), every open stream reads its log again.
    pub fn external_change(&self, change: &ExternalChange) {
        match change {
            ExternalChange::Appended { conversation_id, next_offset } => {
                self.announce(conversation_id, *next_offset);
            }
            ExternalChange::Poll | ExternalChange::Resync => {
                let appended = self.shared.appended.lock().expect("notification table poisoned");
                for sender in appended.values().filter(|sender| sender.receiver_count() > 0) {
                    // Marks the value changed without changing it: each stream reads on
                    // from its last offset.
                    sender.send_modify(|_| {});
                }
            }
            ExternalChange::Memories { .. } | ExternalChange::Vectors { .. } => {}
        }
    }

    async fn load(&self, conversation_id: &str) -> Result<(Conversation, Snapshot)> {
        let conversation = self
            .shared
            .store
            .get_conversation(conversation_id)
            .await
            .map_err(RuntimeError::internal)?
            .ok_or_else(|| RuntimeError::ConversationNotFound(conversation_id.to_owned()))?;
        let snapshot = self
            .shared
            .store
            .get_snapshot(conversation_id)
            .await
            .map_err(RuntimeError::internal)?
            .unwrap_or_else(|| Snapshot::empty(&conversation));
        Ok((conversation, snapshot))
    }

    /// Loads a conversation that must not be closed.
    async fn load_open(&self, conversation_id: &str) -> Result<(Conversation, Snapshot)> {
        let (conversation, snapshot) = self.load(conversation_id).await?;
        if conversation.lifecycle == Lifecycle::Closed {
            return Err(RuntimeError::ConversationClosed(conversation.id));
        }
        Ok((conversation, snapshot))
    }

    fn agent(&self, conversation: &Conversation) -> Option<&Agent> {
        self.shared.definitions.agent(&conversation.agent_id)
    }

    fn announce(&self, conversation_id: &str, next_offset: u64) {
        let mut appended = self.shared.appended.lock().expect("notification table poisoned");
        if let Some(sender) = appended.get(conversation_id) {
            if sender.receiver_count() == 0 {
                appended.remove(conversation_id);
            } else {
                // Announced by this daemon's commit and again by the store's notice of it:
                // a stream wakes once, and never for an offset it has passed.
                sender.send_if_modified(|current| {
                    let grew = next_offset > *current;
                    if grew {
                        *current = next_offset;
                    }
                    grew
                });
            }
        }
    }
}

/// Releases a conversation's step lock, forgetting it when nobody else waits.
struct StepGuard<'a> {
    runtime: &'a DefaultRuntime,
    id: String,
    lock: Arc<tokio::sync::Mutex<()>>,
    _guard: tokio::sync::OwnedMutexGuard<()>,
    /// The store's lock of the same name, when the store is shared.
    _shared: Option<SharedLock>,
}

impl Drop for StepGuard<'_> {
    fn drop(&mut self) {
        let mut locks = self.runtime.shared.locks.lock().expect("lock table poisoned");
        // Held by the table, this guard's `lock` and the owned guard: nobody else.
        if Arc::strong_count(&self.lock) == 3 {
            locks.remove(&self.id);
        }
    }
}
