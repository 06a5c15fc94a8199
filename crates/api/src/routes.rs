//! The route table: every path and method the memory API answers, in one place. The
//! OpenAPI document is checked against it by a test.

use http::Method;

use cairn_types::Role;

use crate::limits::RateClass;
use cairn_http::ApiError;

/// Every operation of the memory API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    ListMemories,
    CreateMemory,
    CreateMemories,
    ImportMemories,
    GetMemory,
    UpdateMemory,
    ArchiveMemory,
    Search,
    Context,
    CodingContext,
    Guard,
    Outcome,
    PatchEvidence,
    GetEvidence,
    EvidencePack,
    ReviewQueue,
    Approve,
    Reject,
    AuditLog,
    ListConnectors,
    AddConnector,
    GetConnector,
    RemoveConnector,
    SyncConnector,
    ConnectorHealth,
    DreamCycle,
    ListConflicts,
    ResolveConflict,
    Erase,
    CreateConversationToken,
    RevokeConversationToken,
    Health,
    OpenApi,
}

impl Operation {
    /// The least role that may call the operation.
    pub fn role(self) -> Role {
        match self {
            Operation::ListMemories
            | Operation::GetMemory
            | Operation::Search
            | Operation::Context
            | Operation::CodingContext
            | Operation::Guard
            | Operation::GetEvidence
            | Operation::EvidencePack
            | Operation::ReviewQueue
            | Operation::ListConnectors
            | Operation::GetConnector
            | Operation::ConnectorHealth
            | Operation::ListConflicts
            | Operation::Health
            | Operation::OpenApi => Role::Read,
            Operation::CreateMemory
            | Operation::CreateMemories
            | Operation::UpdateMemory
            | Operation::ArchiveMemory
            | Operation::Outcome
            | Operation::PatchEvidence
            | Operation::CreateConversationToken
            | Operation::RevokeConversationToken => Role::Write,
            Operation::Approve
            | Operation::Reject
            | Operation::AuditLog
            | Operation::AddConnector
            | Operation::RemoveConnector
            | Operation::SyncConnector
            | Operation::DreamCycle
            | Operation::ResolveConflict
            | Operation::ImportMemories
            | Operation::Erase => Role::Admin,
        }
    }

    /// Whether a `runtime` API key may call it too, whatever [`Operation::role`] says: the
    /// conversation tokens that the server side of a chat widget mints for its browsers.
    pub fn for_widget_servers(self) -> bool {
        matches!(self, Operation::CreateConversationToken | Operation::RevokeConversationToken)
    }

    /// The rate-limit budget the operation spends; none for health, which a load balancer's
    /// or supervisor's probe polls: a throttled probe would take a healthy daemon out of
    /// service, and the answer costs less than the limiter's bookkeeping.
    pub fn rate_class(self) -> Option<RateClass> {
        Some(match self {
            Operation::Health => return None,
            Operation::Search | Operation::Context | Operation::CodingContext => RateClass::Context,
            Operation::CreateMemory
            | Operation::CreateMemories
            | Operation::ImportMemories
            | Operation::UpdateMemory
            | Operation::ArchiveMemory
            | Operation::Outcome
            | Operation::PatchEvidence
            | Operation::Approve
            | Operation::Reject
            | Operation::AddConnector
            | Operation::RemoveConnector
            | Operation::SyncConnector
            | Operation::DreamCycle
            | Operation::Erase
            | Operation::ResolveConflict => RateClass::Write,
            Operation::CreateConversationToken | Operation::RevokeConversationToken => {
                RateClass::Start
            }
            Operation::ListMemories
            | Operation::EvidencePack
            | Operation::ReviewQueue
            | Operation::AuditLog
            | Operation::ListConnectors
            | Operation::GetConnector
            | Operation::ConnectorHealth
            | Operation::ListConflicts
            | Operation::GetMemory
            | Operation::Guard
            | Operation::GetEvidence
            | Operation::OpenApi => RateClass::Read,
        })
    }
}

/// A path pattern (`{id}` matches one segment) and the operations on it by method.
#[derive(Debug)]
pub struct Route {
    pub path: &'static str,
    pub operations: &'static [(Method, Operation)],
    /// The `Allow` header for a 405 on this path.
    pub allow: &'static str,
}

impl Route {
    /// The operation `method` names on this route's `path`; a 405 when it has none.
    fn operation(&self, method: &Method, path: &str) -> Result<Operation, ApiError> {
        match self.operations.iter().find(|(allowed, _)| allowed == method) {
            Some((_, operation)) => Ok(*operation),
            None => Err(ApiError::method_not_allowed(method, path, self.allow)),
        }
    }
}

pub const ROUTES: &[Route] = &[
    Route {
        path: "/api/memories",
        operations: &[
            (Method::GET, Operation::ListMemories),
            (Method::POST, Operation::CreateMemory),
        ],
        allow: "GET, POST",
    },
    // Before `/api/memories/{id}`: the first route that fits wins (ids start with `mem_`).
    Route {
        path: "/api/memories/batch",
        operations: &[(Method::POST, Operation::CreateMemories)],
        allow: "POST",
    },
    Route {
        path: "/api/memories/import",
        operations: &[(Method::POST, Operation::ImportMemories)],
        allow: "POST",
    },
    Route {
        path: "/api/memories/{id}",
        operations: &[
            (Method::GET, Operation::GetMemory),
            (Method::PATCH, Operation::UpdateMemory),
            (Method::DELETE, Operation::ArchiveMemory),
        ],
        allow: "GET, PATCH, DELETE",
    },
    Route { path: "/api/search", operations: &[(Method::GET, Operation::Search)], allow: "GET" },
    Route {
        path: "/api/context",
        operations: &[(Method::POST, Operation::Context)],
        allow: "POST",
    },
    Route {
        path: "/api/coding-context",
        operations: &[(Method::POST, Operation::CodingContext)],
        allow: "POST",
    },
    Route { path: "/api/guard", operations: &[(Method::POST, Operation::Guard)], allow: "POST" },
    Route {
        path: "/api/outcome",
        operations: &[(Method::POST, Operation::Outcome)],
        allow: "POST",
    },
    Route {
        path: "/api/patch-evidence",
        operations: &[(Method::POST, Operation::PatchEvidence)],
        allow: "POST",
    },
    Route {
        path: "/api/evidence/{id}",
        operations: &[(Method::GET, Operation::GetEvidence)],
        allow: "GET",
    },
    Route {
        path: "/api/evidence-pack",
        operations: &[(Method::POST, Operation::EvidencePack)],
        allow: "POST",
    },
    Route {
        path: "/api/governance/review",
        operations: &[(Method::GET, Operation::ReviewQueue)],
        allow: "GET",
    },
    Route {
        path: "/api/governance/review/{id}/approve",
        operations: &[(Method::POST, Operation::Approve)],
        allow: "POST",
    },
    Route {
        path: "/api/governance/review/{id}/reject",
        operations: &[(Method::POST, Operation::Reject)],
        allow: "POST",
    },
    Route {
        path: "/api/governance/audit",
        operations: &[(Method::GET, Operation::AuditLog)],
        allow: "GET",
    },
    Route {
        path: "/api/connectors",
        operations: &[
            (Method::GET, Operation::ListConnectors),
            (Method::POST, Operation::AddConnector),
        ],
        allow: "GET, POST",
    },
    Route {
        path: "/api/connectors/{id}",
        operations: &[
            (Method::GET, Operation::GetConnector),
            (Method::DELETE, Operation::RemoveConnector),
        ],
        allow: "GET, DELETE",
    },
    Route {
        path: "/api/connectors/{id}/sync",
        operations: &[(Method::POST, Operation::SyncConnector)],
        allow: "POST",
    },
    Route {
        path: "/api/connectors/{id}/health",
        operations: &[(Method::GET, Operation::ConnectorHealth)],
        allow: "GET",
    },
    Route {
        path: "/api/dream-cycle",
        operations: &[(Method::POST, Operation::DreamCycle)],
        allow: "POST",
    },
    Route {
        path: "/api/conflicts",
        operations: &[(Method::GET, Operation::ListConflicts)],
        allow: "GET",
    },
    Route {
        path: "/api/conflicts/{id}/resolve",
        operations: &[(Method::POST, Operation::ResolveConflict)],
        allow: "POST",
    },
    Route { path: "/api/erase", operations: &[(Method::POST, Operation::Erase)], allow: "POST" },
    Route {
        path: "/api/conversation-tokens",
        operations: &[(Method::POST, Operation::CreateConversationToken)],
        allow: "POST",
    },
    Route {
        path: "/api/conversation-tokens/{id}",
        operations: &[(Method::DELETE, Operation::RevokeConversationToken)],
        allow: "DELETE",
    },
    Route {
        path: crate::HEALTH_PATH,
        operations: &[(Method::GET, Operation::Health)],
        allow: "GET",
    },
    Route { path: "/openapi.json", operations: &[(Method::GET, Operation::OpenApi)], allow: "GET" },
];

/// Finds the operation for a request, and the `{id}` segment if the path has one.
pub fn resolve<'p>(
    method: &Method,
    path: &'p str,
) -> Result<(Operation, Option<&'p str>), ApiError> {
    let trimmed = if path.len() > 1 { path.trim_end_matches('/') } else { path };
    // Most requests name a path without an `{id}`: one hash lookup finds its route.
    if let Some(route) = LITERAL_ROUTES.get(trimmed) {
        return Ok((route.operation(method, path)?, None));
    }
    scan(method, path, trimmed)
}

/// The liveness probe: the process answers. Without credentials, in every profile.
pub const LIVE_PATH: &str = "/api/health/live";
/// The readiness probe: storage answers and its migrations are current. Without
/// credentials, in every profile.
pub const READY_PATH: &str = "/api/health/ready";

/// The route pattern `path` fits (`/api/memories/{id}`), whatever the method: a label of
/// bounded variety for logs and metrics; `None` for a path no route has.
pub fn template(path: &str) -> Option<&'static str> {
    let trimmed = if path.len() > 1 { path.trim_end_matches('/') } else { path };
    if let Some(route) = LITERAL_ROUTES.get(trimmed) {
        return Some(route.path);
    }
    if let Some(probe) = [LIVE_PATH, READY_PATH].into_iter().find(|probe| *probe == trimmed) {
        return Some(probe);
    }
    ROUTES.iter().find(|route| match_path(route.path, trimmed).is_some()).map(|route| route.path)
}

/// [`resolve`] by trying every route in order: the first whose path fits decides.
fn scan<'p>(
    method: &Method,
    path: &str,
    trimmed: &'p str,
) -> Result<(Operation, Option<&'p str>), ApiError> {
    for route in ROUTES {
        let Some(id) = match_path(route.path, trimmed) else { continue };
        return Ok((route.operation(method, path)?, id));
    }
    Err(ApiError::not_found(path))
}

/// The routes without an `{id}` by their path, each one that [`resolve`]'s scan of
/// [`ROUTES`] in order would also pick: a route that an earlier pattern matches too is left
/// to the scan.
static LITERAL_ROUTES: std::sync::LazyLock<
    std::collections::HashMap<&'static str, &'static Route>,
> = std::sync::LazyLock::new(|| {
    let mut literal = std::collections::HashMap::new();
    for (index, route) in ROUTES.iter().enumerate() {
        let shadowed =
            ROUTES[..index].iter().any(|earlier| match_path(earlier.path, route.path).is_some());
        if !route.path.contains('{') && !shadowed {
            literal.insert(route.path, route);
        }
    }
    literal
});

/// `Some(id)` when `path` fits `pattern`; the inner option is the `{id}` segment, if any.
/// Compares the literal parts in place (no splitting: this runs for every route on every
/// request, `GET /api/health` included).
fn match_path<'p>(pattern: &str, path: &'p str) -> Option<Option<&'p str>> {
    let (mut pattern, mut path, mut id) = (pattern, path, None);
    loop {
        // A byte search: `{` appears in patterns only as `{id}`.
        let Some(at) = pattern.find('{') else {
            return (pattern == path).then_some(id);
        };
        // `{id}` is a whole segment: what comes before it ends with `/`.
        let rest = path.strip_prefix(&pattern[..at])?;
        let end = rest.find('/').unwrap_or(rest.len());
        if end == 0 {
            return None;
        }
        id = Some(&rest[..end]);
        (pattern, path) = (&pattern[at + "{id}".len()..], &rest[end..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_literal_lookup_answers_as_the_scan_does() {
        let methods = [Method::GET, Method::POST, Method::PATCH, Method::DELETE, Method::PUT];
        for route in ROUTES {
            for path in [route.path.replace("{id}", "batch"), route.path.replace("{id}", "x_1")] {
                for method in &methods {
                    let (fast, scanned) = (resolve(method, &path), scan(method, &path, &path));
                    match (fast, scanned) {
                        (Ok(fast), Ok(scanned)) => assert_eq!(fast, scanned, "{method} {path}"),
                        (Err(fast), Err(scanned)) => {
                            assert_eq!(fast.code(), scanned.code(), "{method} {path}")
                        }
                        (fast, scanned) => panic!("{method} {path}: {fast:?} vs {scanned:?}"),
                    }
                }
            }
        }
        assert!(LITERAL_ROUTES.contains_key("/api/health"));
        assert!(LITERAL_ROUTES.contains_key("/api/memories/batch"));
    }

    #[test]
    fn paths_resolve_to_operations() {
        assert_eq!(
            resolve(&Method::GET, "/api/memories").unwrap(),
            (Operation::ListMemories, None)
        );
        assert_eq!(
            resolve(&Method::GET, "/api/memories/").unwrap(),
            (Operation::ListMemories, None)
        );
        assert_eq!(
            resolve(&Method::DELETE, "/api/memories/mem_1").unwrap(),
            (Operation::ArchiveMemory, Some("mem_1"))
        );
        assert_eq!(
            resolve(&Method::POST, "/api/memories/batch").unwrap(),
            (Operation::CreateMemories, None)
        );
        assert_eq!(
            resolve(&Method::GET, "/api/memories/batch").unwrap_err().code(),
            cairn_types::ErrorCode::MethodNotAllowed
        );
        assert_eq!(
            resolve(&Method::PUT, "/api/memories/mem_1").unwrap_err().code(),
            cairn_types::ErrorCode::MethodNotAllowed
        );
        assert_eq!(
            resolve(&Method::GET, "/api/memories/mem_1/x").unwrap_err().code(),
            cairn_types::ErrorCode::NotFound
        );
        assert_eq!(
            resolve(&Method::GET, "/api/memories//").unwrap(),
            (Operation::ListMemories, None)
        );
        assert_eq!(
            resolve(&Method::POST, "/api/governance/review/mem_2/approve").unwrap(),
            (Operation::Approve, Some("mem_2"))
        );
        assert_eq!(
            resolve(&Method::POST, "/api/governance/review//approve").unwrap_err().code(),
            cairn_types::ErrorCode::NotFound
        );
        assert_eq!(
            resolve(&Method::GET, "/api/healthz").unwrap_err().code(),
            cairn_types::ErrorCode::NotFound
        );
        assert_eq!(
            resolve(&Method::GET, "/nope").unwrap_err().code(),
            cairn_types::ErrorCode::NotFound
        );
    }
}
