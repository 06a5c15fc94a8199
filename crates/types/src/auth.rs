//! Roles and API keys: who may do what.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::Timestamp;

/// What a principal may do. Each role includes the ones before it: `read` < `write` < `admin`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
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
            "read" => Ok(Role::Read),
            "write" => Ok(Role::Write),
            "admin" => Ok(Role::Admin),
            _ => Err(format!("unknown role `{text}`; expected read, write or admin")),
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
}
