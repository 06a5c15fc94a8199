//! Roles and API keys: who may do what.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::Timestamp;

/// What a principal may do. Each role includes the ones before it: `read` < `write` < `admin`.
/// `runtime` stands apart: the conversation runtime only (as `write` there), never the memory
/// API; it is for the server side of a chat widget, and the role of conversation tokens.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The conversation runtime only; nothing of the memory API.
    Runtime,
    /// Read memories, search, get context packs, check guards.
    Read,
    /// Also store and change memories, record outcomes and evidence.
    Write,
    /// Also connectors, the dream cycle, governance decisions and the audit log.
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Runtime => "runtime",
            Role::Read => "read",
            Role::Write => "write",
            Role::Admin => "admin",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = String;

    fn from_str(text: &str) -> Result<Role, String> {
        match text {
            "runtime" => Ok(Role::Runtime),
            "read" => Ok(Role::Read),
            "write" => Ok(Role::Write),
            "admin" => Ok(Role::Admin),
            _ => Err(format!("unknown role `{text}`; expected read, write, admin or runtime")),
        }
    }
}

/// An API key as stored: never the key itself, only its SHA-256.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiKey {
    /// `key_` followed by a lower-case ULID; names the key in lists and the audit log.
    pub id: String,
    pub name: Option<String>,
    pub role: Role,
    /// The key's first characters, to tell keys apart.
    pub prefix: String,
    /// Lower-case hex SHA-256 of the whole key.
    pub hash: String,
    pub created_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
    /// When the key stops working, if it was created with an expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    /// When the key was last used (kept to the minute: a key's uses within a minute of the
    /// last noted one are not written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used_at: Option<Timestamp>,
}

impl ApiKey {
    /// Whether the key has expired at `now`.
    pub fn expired(&self, now: Timestamp) -> bool {
        self.expires_at.is_some_and(|expires| expires <= now)
    }
}

/// A conversation token as stored: its hash, the conversation it opens, and its life.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversationTokenRecord {
    /// `tok_` followed by a lower-case ULID.
    pub id: String,
    pub conversation_id: String,
    /// Lower-case hex SHA-256 of the whole token.
    pub hash: String,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
}

/// The body of `POST /api/conversation-tokens`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConversationTokenRequest {
    /// The conversation the token opens.
    pub conversation_id: String,
    /// How long it lasts, in seconds (default 3600, at most 86400).
    #[serde(default)]
    pub ttl_seconds: Option<u32>,
}

/// A conversation token, shown once: it allows that conversation's runtime operations and
/// its event stream (as `Authorization: Bearer <token>`, or `?token=` where a browser's
/// `EventSource` cannot send headers), and nothing else.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConversationToken {
    /// `cvt_…`: the secret, shown this once.
    pub token: String,
    /// Names the token, to revoke it.
    pub token_id: String,
    pub conversation_id: String,
    pub expires_at: Timestamp,
}
