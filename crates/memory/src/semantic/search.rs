//! Semantic search: the memories nearest to a query that the filter and the repository
//! admit.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use cairn_store::{MemoryFilter, Store, TextMatch};
use cairn_types::Memory;

use super::Semantic;
use crate::Result;
use crate::embed::{VectorFilter, VectorLabels};

/// The semantic ranking as full-text-style candidates: the `k` nearest memories that pass
/// `filter` and the repository rule for `repo` (see [`crate::repo_admits`]), with their
/// similarity as relevance. Fewer than `k` only when fewer such memories have vectors.
pub(crate) async fn candidates(
    semantic: &Semantic,
    store: &dyn Store,
    text: &str,
    filter: &MemoryFilter,
    repo: Option<&str>,
    k: usize,
) -> Result<Vec<TextMatch>> {
    let query = semantic.embed_query(text).await?;
    nearest_to(semantic, store, &query, filter, repo, k, &[]).await
}

/// [`candidates`] for a query's vector. A memory among `known` (the full-text side's matches,
/// read moments ago) is taken from there instead of read from the store again.
pub(crate) async fn nearest_to(
    semantic: &Semantic,
    store: &dyn Store,
    query: &Arc<[f32]>,
    filter: &MemoryFilter,
    repo: Option<&str>,
    k: usize,
    known: &[TextMatch],
) -> Result<Vec<TextMatch>> {
    if k == 0 {
        return Ok(Vec::new());
    }
    let known: HashMap<&str, &Memory> =
        known.iter().map(|hit| (hit.memory.id.as_str(), &hit.memory)).collect();
    let labels = VectorFilter {
        scope: filter.scope,
        status: filter.status,
        repo: repo.or(filter.repo.as_deref()).map(str::to_owned),
    };
    let (mut found, mut checked) = (Vec::new(), HashSet::new());
    let mut asked = k;
    loop {
        let nearest = semantic.search(query.clone(), asked, labels.clone()).await?;
        let exhausted = nearest.len() < asked;
        let fresh: Vec<(String, f32)> =
            nearest.into_iter().filter(|(id, _)| checked.insert(id.clone())).collect();
        let ids: Vec<String> = fresh
            .iter()
            .filter(|(id, _)| !known.contains_key(id.as_str()))
            .map(|(id, _)| id.clone())
            .collect();
        let mut memories: HashMap<String, Memory> = store
            .get_memories(&ids)
            .await?
            .into_iter()
            .map(|memory| (memory.id.clone(), memory))
            .collect();
        for (id, _) in &fresh {
            if let Some(memory) = known.get(id.as_str()) {
                memories.insert(id.clone(), (*memory).clone());
            }
        }
        let (mut gone, mut relabelled) = (Vec::new(), Vec::new());
        for (id, similarity) in fresh {
            let Some(memory) = memories.remove(&id) else {
                gone.push((id, None));
                continue;
            };
            if memory.archived_at.is_some() {
                gone.push((id, Some(memory.updated_at)));
                continue;
            }
            let current = VectorLabels::of(&memory);
            if !labels.admits(&current) {
                relabelled.push((id, current));
            } else if passes(&memory, filter) {
                let relevance = f64::from(similarity.max(0.0));
                found.push(TextMatch { memory, relevance });
            }
        }
        semantic.correct(gone, relabelled);
        if found.len() >= k || exhausted {
            break;
        }
        asked = asked.saturating_mul(2);
    }
    found.sort_by(|a, b| b.relevance.total_cmp(&a.relevance));
    found.truncate(k);
    Ok(found)
}

fn passes(memory: &Memory, filter: &MemoryFilter) -> bool {
    memory.archived_at.is_none()
        && filter.scope.is_none_or(|scope| scope == memory.scope)
        && filter.status.is_none_or(|status| status == memory.status)
        && filter.repo.as_deref().is_none_or(|repo| memory.repo.as_deref() == Some(repo))
}
