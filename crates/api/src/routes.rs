//! The route table: every path and method the memory API answers, in one place. The
//! OpenAPI document is checked against it by a test.

use http::Method;

use cairn_types::Role;

use crate::limits::RateClass;
use cairn_http::{ApiError, match_path};

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

/// One route of the API: a method on a path pattern (`{id}` matches one segment), the
/// operation it names, the least role that may call it, and the rate-limit budget it spends
/// (none for health, which a load balancer's or supervisor's probe polls: a throttled probe
/// would take a healthy daemon out of service, and the answer costs less than the limiter's
/// bookkeeping). Routing, the OpenAPI document's access notes and the role table of
/// docs/api.md all come from [`ENDPOINTS`].
#[derive(Debug)]
pub struct Endpoint {
    pub method: Method,
    pub path: &'static str,
    pub operation: Operation,
    pub role: Role,
    pub rate: Option<RateClass>,
    /// A `runtime` API key may call it too, whatever `role` says: the conversation tokens
    /// that the server side of a chat widget mints for its browsers.
    pub for_widget_servers: bool,
}

const fn at(
    method: Method,
    path: &'static str,
    operation: Operation,
    role: Role,
    rate: RateClass,
) -> Endpoint {
    Endpoint { method, path, operation, role, rate: Some(rate), for_widget_servers: false }
}

impl Endpoint {
    /// The route, which `runtime` keys may call too (see [`Endpoint::for_widget_servers`]).
    const fn and_widget_servers(mut self) -> Endpoint {
        self.for_widget_servers = true;
        self
    }

    /// The route, spending no rate limit.
    const fn unlimited(mut self) -> Endpoint {
        self.rate = None;
        self
    }
}

use Method as M;
use Operation as O;
use RateClass as C;
use Role::{Admin, Read, Write};

/// Every route, each operation once and in the order of [`Operation`], which is the order
/// routing tries them: the first whose path fits wins, so `/api/memories/batch` stands
/// before `/api/memories/{id}` (ids start with `mem_`).
pub const ENDPOINTS: &[Endpoint] = &[
    at(M::GET, "/api/memories", O::ListMemories, Read, C::Read),
    at(M::POST, "/api/memories", O::CreateMemory, Write, C::Write),
    at(M::POST, "/api/memories/batch", O::CreateMemories, Write, C::Write),
    at(M::POST, "/api/memories/import", O::ImportMemories, Admin, C::Write),
    at(M::GET, "/api/memories/{id}", O::GetMemory, Read, C::Read),
    at(M::PATCH, "/api/memories/{id}", O::UpdateMemory, Write, C::Write),
    at(M::DELETE, "/api/memories/{id}", O::ArchiveMemory, Write, C::Write),
    at(M::GET, "/api/search", O::Search, Read, C::Context),
    at(M::POST, "/api/context", O::Context, Read, C::Context),
    at(M::POST, "/api/coding-context", O::CodingContext, Read, C::Context),
    at(M::POST, "/api/guard", O::Guard, Read, C::Read),
    at(M::POST, "/api/outcome", O::Outcome, Write, C::Write),
    at(M::POST, "/api/patch-evidence", O::PatchEvidence, Write, C::Write),
    at(M::GET, "/api/evidence/{id}", O::GetEvidence, Read, C::Read),
    at(M::POST, "/api/evidence-pack", O::EvidencePack, Read, C::Read),
    at(M::GET, "/api/governance/review", O::ReviewQueue, Read, C::Read),
    at(M::POST, "/api/governance/review/{id}/approve", O::Approve, Admin, C::Write),
    at(M::POST, "/api/governance/review/{id}/reject", O::Reject, Admin, C::Write),
    at(M::GET, "/api/governance/audit", O::AuditLog, Admin, C::Read),
    at(M::GET, "/api/connectors", O::ListConnectors, Read, C::Read),
    at(M::POST, "/api/connectors", O::AddConnector, Admin, C::Write),
    at(M::GET, "/api/connectors/{id}", O::GetConnector, Read, C::Read),
    at(M::DELETE, "/api/connectors/{id}", O::RemoveConnector, Admin, C::Write),
    at(M::POST, "/api/connectors/{id}/sync", O::SyncConnector, Admin, C::Write),
    at(M::GET, "/api/connectors/{id}/health", O::ConnectorHealth, Read, C::Read),
    at(M::POST, "/api/dream-cycle", O::DreamCycle, Admin, C::Write),
    at(M::GET, "/api/conflicts", O::ListConflicts, Read, C::Read),
    at(M::POST, "/api/conflicts/{id}/resolve", O::ResolveConflict, Admin, C::Write),
    at(M::POST, "/api/erase", O::Erase, Admin, C::Write),
    at(M::POST, "/api/conversation-tokens", O::CreateConversationToken, Write, C::Start)
        .and_widget_servers(),
    at(M::DELETE, "/api/conversation-tokens/{id}", O::RevokeConversationToken, Write, C::Start)
        .and_widget_servers(),
    at(M::GET, crate::HEALTH_PATH, O::Health, Read, C::Read).unlimited(),
    at(M::GET, "/openapi.json", O::OpenApi, Read, C::Read),
];

impl Operation {
    /// The operation's row of [`ENDPOINTS`] (which lists the operations in their order).
    pub fn endpoint(self) -> &'static Endpoint {
        &ENDPOINTS[self as usize]
    }

    /// The least role that may call the operation.
    pub fn role(self) -> Role {
        self.endpoint().role
    }

    /// Whether a `runtime` API key may call it too, whatever [`Operation::role`] says.
    pub fn for_widget_servers(self) -> bool {
        self.endpoint().for_widget_servers
    }

    /// The rate-limit budget the operation spends; none for health.
    pub fn rate_class(self) -> Option<RateClass> {
        self.endpoint().rate
    }
}

/// A path pattern and the operations on it by method, from [`ENDPOINTS`].
#[derive(Debug)]
pub struct Route {
    pub path: &'static str,
    pub operations: Vec<(Method, Operation)>,
    /// The `Allow` header for a 405 on this path.
    pub allow: String,
}

impl Route {
    /// The operation `method` names on this route's `path`; a 405 when it has none.
    fn operation(&self, method: &Method, path: &str) -> Result<Operation, ApiError> {
        match self.operations.iter().find(|(allowed, _)| allowed == method) {
            Some((_, operation)) => Ok(*operation),
            None => Err(ApiError::method_not_allowed(method, path, &self.allow)),
        }
    }
}

/// [`ENDPOINTS`] by path, in the order of each path's first row.
pub static ROUTES: std::sync::LazyLock<Vec<Route>> = std::sync::LazyLock::new(|| {
    let mut routes: Vec<Route> = Vec::new();
    for endpoint in ENDPOINTS {
        let route = match routes.iter_mut().position(|route| route.path == endpoint.path) {
            Some(at) => &mut routes[at],
            None => {
                let path = endpoint.path;
                routes.push(Route { path, operations: Vec::new(), allow: String::new() });
                routes.last_mut().expect("just pushed")
            }
        };
        route.operations.push((endpoint.method.clone(), endpoint.operation));
        if !route.allow.is_empty() {
            route.allow.push_str(", ");
        }
        route.allow.push_str(endpoint.method.as_str());
    }
    routes
});

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
    for route in ROUTES.iter() {
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
    let routes: &'static [Route] = &ROUTES;
    let mut literal = std::collections::HashMap::new();
    for (index, route) in routes.iter().enumerate() {
        let shadowed =
            routes[..index].iter().any(|earlier| match_path(earlier.path, route.path).is_some());
        if !route.path.contains('{') && !shadowed {
            literal.insert(route.path, route);
        }
    }
    literal
});

/// The role table of docs/api.md: for each role, the routes that need it (`:id` for a
/// segment), in [`ENDPOINTS`]' order.
pub fn role_table() -> String {
    let mut table = String::from("| role | routes |\n|---|---|\n");
    for role in [Read, Write, Admin] {
        let routes: Vec<String> = ENDPOINTS
            .iter()
            .filter(|endpoint| endpoint.role == role)
            .map(|endpoint| {
                let route =
                    format!("`{} {}`", endpoint.method, endpoint.path.replace("{id}", ":id"));
                if endpoint.for_widget_servers {
                    format!("{route} (also `runtime`)")
                } else {
                    route
                }
            })
            .collect();
        table.push_str(&format!("| `{role}` | {} |\n", routes.join(", ")));
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_has_one_row_in_its_order() {
        for (index, endpoint) in ENDPOINTS.iter().enumerate() {
            assert_eq!(endpoint.operation as usize, index, "{:?}", endpoint.operation);
            assert_eq!(endpoint.operation.endpoint().path, endpoint.path);
        }
        assert_eq!(ENDPOINTS.len(), Operation::OpenApi as usize + 1);
    }

    #[test]
    fn the_docs_role_table_is_the_route_table() {
        let docs = include_str!("../../../docs/api.md");
        let table = role_table();
        assert!(docs.contains(&table), "docs/api.md should hold this table:\n{table}");
    }

    #[test]
    fn the_literal_lookup_answers_as_the_scan_does() {
        let methods = [Method::GET, Method::POST, Method::PATCH, Method::DELETE, Method::PUT];
        for route in ROUTES.iter() {
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
