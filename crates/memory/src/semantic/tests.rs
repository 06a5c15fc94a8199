//! Tests of semantic retrieval: the worker, the index as a cache of the store, search, and
//! fusion.

use cairn_store::conformance::sample_memory;
use cairn_store::{MemoryFilter, TextMatch};
use cairn_types::Scope;

use super::fusion::combine;
use super::*;
use crate::embed::HashingEmbedder;

fn ranked(names: &[&str]) -> Vec<TextMatch> {
    names
        .iter()
        .map(|name| {
            let mut memory = sample_memory(name, Scope::User, 0);
            memory.id = (*name).to_owned();
            TextMatch { memory, relevance: 1.0 }
        })
        .collect()
}

/// Dropping the engine lets go of the store at once: the embedding worker ends instead of
/// holding it through its idle wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_engine_lets_go_of_its_store() {
    let directory = tempfile::tempdir().unwrap();
    let store =
        Arc::new(cairn_store_sqlite::SqliteStore::open(&directory.path().join("c.db")).unwrap());
    let engine =
        crate::Engine::new(store.clone()).with_embedder(Arc::new(HashingEmbedder::new(64)));
    engine.embeddings_settled().await.unwrap();
    drop(engine);
    let started = std::time::Instant::now();
    while Arc::strong_count(&store) > 1 {
        assert!(started.elapsed() < IDLE / 2, "the worker still holds the store");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memories_are_embedded_in_the_background_and_found_by_meaning() {
    use cairn_types::{RetrievalMode, SearchQuery};

    use crate::Engine;

    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("cairn.db");
    let open = || Arc::new(cairn_store_sqlite::SqliteStore::open(&path).unwrap());
    let engine = Engine::new(open()).with_embedder(Arc::new(HashingEmbedder::new(256)));
    let new = |content: &str| crate::testing::memory(content, Scope::User);
    let texts = [
        "the staging cluster restarts nightly",
        "coffee machine on floor two",
        "release notes go in CHANGELOG",
    ];
    let created = engine
        .create_memories(texts.iter().map(|text| new(text)).collect(), "tester")
        .await
        .unwrap();
    engine.embeddings_settled().await.unwrap();
    assert_eq!(engine.embeddings_pending(), 0);
    assert_eq!(engine.retrieval(), RetrievalMode::Hybrid);

    let search = |q: &str, mode| SearchQuery {
        q: Some(q.to_owned()),
        mode: Some(mode),
        ..SearchQuery::default()
    };
    let semantic =
        engine.search(search("staging cluster restarts", RetrievalMode::Semantic)).await.unwrap();
    assert_eq!(semantic.hits[0].memory.id, created[0].id);
    let hybrid = engine.search(search("coffee floor", RetrievalMode::Hybrid)).await.unwrap();
    assert_eq!(hybrid.hits[0].memory.id, created[1].id);

    let patch = cairn_types::MemoryPatch {
        content: Some("the coffee machine moved to floor three".to_owned()),
        ..Default::default()
    };
    engine.update_memory(&created[1].id, patch, "tester").await.unwrap();
    engine.embeddings_settled().await.unwrap();
    let moved =
        engine.search(search("machine moved floor three", RetrievalMode::Semantic)).await.unwrap();
    assert_eq!(moved.hits[0].memory.id, created[1].id, "a changed memory is embedded again");

    drop(engine);
    let reopened = Engine::new(open()).with_embedder(Arc::new(HashingEmbedder::new(256)));
    reopened.embeddings_settled().await.unwrap();
    let again =
        reopened.search(search("release notes changelog", RetrievalMode::Semantic)).await.unwrap();
    assert_eq!(again.hits[0].memory.id, created[2].id, "stored vectors are loaded at start");
    let fulltext_only = Engine::new(open());
    let refused =
        fulltext_only.search(search("anything", RetrievalMode::Semantic)).await.unwrap_err();
    assert!(matches!(refused, Error::Invalid { field: "mode", .. }));
}

/// Waits up to 2 s for `check` to hold.
async fn eventually(check: impl Fn() -> bool) -> bool {
    for _ in 0..200 {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    check()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vectors_another_daemon_stored_are_taken_in_when_announced() {
    use cairn_store::ExternalChange;

    use crate::Engine;

    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("cairn.db");
    let open = || Arc::new(cairn_store_sqlite::SqliteStore::open(&path).unwrap());
    let embedder = || Arc::new(HashingEmbedder::new(256));
    let reader = Engine::new(open()).with_embedder(embedder());
    reader.embeddings_settled().await.unwrap();
    let writer = Engine::new(open()).with_embedder(embedder());
    let memory = |content: &str| cairn_types::NewMemory {
        content: content.to_owned(),
        scope: Scope::User,
        repo: None,
        tags: vec![],
        source: None,
        metadata: Default::default(),
    };
    let first = writer.create_memory(memory("the staging cluster restarts"), "t").await;
    let first = first.unwrap().id;
    writer.embeddings_settled().await.unwrap();
    let index = reader.semantic.clone().unwrap().index.clone();
    let known = |id: &str| index.read().unwrap().labels(id).is_some();
    assert!(!known(&first), "the reader's worker has nothing to embed: the writer did");

    let ids = vec![first.clone()];
    reader.external_change(&ExternalChange::Vectors { model: "other".into(), ids });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!known(&first), "another model's vectors are not this index's");
    let ids = vec![first.clone()];
    reader.external_change(&ExternalChange::Vectors { model: "hashing".into(), ids });
    assert!(eventually(|| known(&first)).await, "announced vectors are read into the index");
    let query = cairn_types::SearchQuery {
        q: Some("staging cluster restarts".to_owned()),
        mode: Some(cairn_types::RetrievalMode::Semantic),
        ..cairn_types::SearchQuery::default()
    };
    let found = reader.search(query).await.unwrap();
    assert_eq!(found.hits[0].memory.id, first);

    // News that may have been missed: everything stored is loaded again.
    let second = writer.create_memory(memory("coffee on floor two"), "t").await;
    let second = second.unwrap().id;
    writer.embeddings_settled().await.unwrap();
    assert!(!known(&second));
    reader.external_change(&ExternalChange::Resync);
    assert!(eventually(|| known(&second) && known(&first)).await, "a resync reloads all");

    // Memories another daemon erased leave the index when it says so.
    let erase =
        cairn_types::ErasureRequest { memory_ids: vec![first.clone()], ..Default::default() };
    writer.erase(erase, "t").await.unwrap();
    let ids = vec![first.clone(), second.clone()];
    reader.external_change(&ExternalChange::Memories { ids });
    assert!(eventually(|| !known(&first)).await, "the erased memory's vector is dropped");
    assert!(known(&second), "the one still stored stays");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_int8_scan_finds_what_an_exact_scan_finds_but_for_near_ties() {
    use cairn_store::VectorStore as _;

    let directory = tempfile::tempdir().unwrap();
    let store = Arc::new(
        cairn_store_sqlite::SqliteStore::open(&directory.path().join("cairn.db")).unwrap(),
    );
    let engine =
        crate::Engine::new(store.clone()).with_embedder(Arc::new(HashingEmbedder::new(384)));
    // Near neighbours on purpose: many memories share most of their words.
    let words = ["deploy", "shop", "cluster", "staging", "nightly", "cache", "build", "tests"];
    let inputs = (0..400)
        .map(|i: usize| {
            let text: Vec<&str> =
                (0..5).map(|j| words[(i * 7 + j * (i % 5 + 1)) % words.len()]).collect();
            new_memory(&format!("{} {i}", text.join(" ")), None)
        })
        .collect();
    engine.create_memories(inputs, "tester").await.unwrap();
    engine.embeddings_settled().await.unwrap();
    let semantic = engine.semantic.clone().unwrap();
    let stored = store.load_embeddings("hashing").await.unwrap();
    for text in ["deploy the shop nightly", "staging cluster cache", "build tests"] {
        let query = HashingEmbedder::new(384).embed_one(text);
        let mut exact: Vec<(String, f32)> = stored
            .iter()
            .map(|(id, vector)| (id.clone(), crate::embed::dot(vector, &query)))
            .collect();
        exact.sort_by(|a, b| b.1.total_cmp(&a.1));
        let filter = MemoryFilter::default();
        let found = candidates(&semantic, store.as_ref(), text, &filter, None, 10).await.unwrap();
        let found: Vec<(String, f32)> =
            found.into_iter().map(|hit| (hit.memory.id, hit.relevance as f32)).collect();
        // The int8 rows' similarities are within about 0.002 of the exact ones, so a hit may
        // trade places only with one that close to it.
        let exact_of: HashMap<&str, f32> =
            exact.iter().map(|(id, similarity)| (id.as_str(), *similarity)).collect();
        for ((id, similarity), (_, exact_similarity)) in found.iter().zip(&exact) {
            assert!(
                (similarity - exact_of[id.as_str()]).abs() < 0.004,
                "{text}: {id}'s similarity"
            );
            assert!((similarity - exact_similarity).abs() < 0.008, "{text}: the exact order");
        }
        assert_eq!(found.len(), 10);
    }
}

#[test]
fn fusion_combines_normalised_scores() {
    let scored = |pairs: &[(&str, f64)]| -> Vec<TextMatch> {
        let mut hits = ranked(&pairs.iter().map(|(name, _)| *name).collect::<Vec<_>>());
        for (hit, (_, score)) in hits.iter_mut().zip(pairs) {
            hit.relevance = *score;
        }
        hits
    };
    let order = |fulltext: &[(&str, f64)], semantic: &[(&str, f64)], extra: &[(&str, f64)]| {
        let mut similarity: HashMap<String, f64> =
            semantic.iter().map(|(name, cos)| ((*name).to_owned(), *cos)).collect();
        similarity.extend(extra.iter().map(|(name, cos)| ((*name).to_owned(), *cos)));
        combine(scored(fulltext), scored(semantic), &similarity, 0.5)
            .into_iter()
            .map(|hit| (hit.memory.id, (hit.relevance * 1000.0).round() / 1000.0))
            .collect::<Vec<_>>()
    };
    let name = |pairs: Vec<(String, f64)>| -> Vec<String> {
        pairs.into_iter().map(|(name, _)| name).collect()
    };
    // BM25 8 and 4 (z 1 and −1; "c" has none: the lowest, −1); cosines 0.6, 0.5, 0.4
    // (z 1.22, 0, −1.22), "a"'s read from the index.
    let fused = order(&[("a", 8.0), ("b", 4.0)], &[("c", 0.6), ("b", 0.5)], &[("a", 0.4)]);
    assert_eq!(
        fused,
        [("c".to_owned(), 0.112), ("a".to_owned(), -0.112), ("b".to_owned(), -0.5)],
        "half of each side's standardised score"
    );
    assert_eq!(
        name(order(&[("a", 8.0), ("b", 7.0)], &[("b", 0.7), ("c", 0.6)], &[("a", 0.3)])),
        ["b", "a", "c"],
        "a near tie in words is decided by meaning"
    );
    assert_eq!(
        name(order(
            &[("a", 9.0), ("b", 3.0), ("c", 2.9)],
            &[("c", 0.62), ("d", 0.6)],
            &[("a", 0.58), ("b", 0.3)]
        )),
        ["a", "c", "d", "b"],
        "a clear winner in words stays ahead of a near tie in meaning"
    );
    assert_eq!(
        name(order(&[("words", 5.0)], &[("meaning", 0.9), ("other", 0.5)], &[])),
        ["meaning", "words", "other"],
        "a memory with no vector yet ranks by its words: above one only meaning found weakly"
    );
    assert_eq!(
        name(order(&[], &[("m", 0.9), ("n", 0.8)], &[])),
        ["m", "n"],
        "one ranking alone keeps its order"
    );
}

/// A stand-in for a sentence model: words of one meaning embed alike, so a query finds
/// memories by meaning that share no word with it (and full text finds none of them).
/// It counts the texts it is asked to embed.
struct Synonyms(HashingEmbedder, std::sync::atomic::AtomicUsize);

impl Synonyms {
    fn canonical(text: &str) -> String {
        let word = |word: String| match word.as_str() {
            "apples" | "berries" | "fruit" => "fruit".to_owned(),
            _ => word,
        };
        crate::text::words(text).map(word).collect::<Vec<_>>().join(" ")
    }
}

#[async_trait::async_trait]
impl Embedder for Synonyms {
    fn model(&self) -> &str {
        "synonyms"
    }

    fn dimensions(&self) -> usize {
        self.0.dimensions()
    }

    async fn embed(
        &self,
        texts: &[String],
    ) -> std::result::Result<Vec<Vec<f32>>, crate::embed::EmbedError> {
        self.1.fetch_add(texts.len(), Ordering::SeqCst);
        Ok(texts.iter().map(|text| self.0.embed_one(&Self::canonical(text))).collect())
    }
}

#[test]
fn the_query_cache_keeps_the_latest_queries() {
    let mut cache = QueryCache::default();
    let vector = |x: f32| -> Arc<[f32]> { vec![x; 3].into() };
    for n in 0..QUERY_CACHE + 10 {
        cache.insert(&format!("query {n}"), vector(n as f32));
    }
    cache.insert("query 20", vector(-1.0));
    assert_eq!(cache.vectors.len(), QUERY_CACHE);
    assert!(cache.get("query 0").is_none() && cache.get("query 9").is_none());
    assert_eq!(cache.get("query 10").unwrap()[0], 10.0);
    assert_eq!(cache.get("query 20").unwrap()[0], -1.0, "a query asked again keeps its slot");
    assert!(cache.get(&format!("query {}", QUERY_CACHE + 9)).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asking_the_same_query_again_embeds_it_once_with_the_same_hits() {
    use cairn_types::{RetrievalMode, SearchQuery};

    let directory = tempfile::tempdir().unwrap();
    let store = cairn_store_sqlite::SqliteStore::open(&directory.path().join("cairn.db"));
    let embedder = Arc::new(Synonyms(HashingEmbedder::new(256), Default::default()));
    let engine = crate::Engine::new(Arc::new(store.unwrap())).with_embedder(embedder.clone());
    let memories = ["the staging cluster restarts nightly", "coffee machine on floor two"];
    let memories = memories.iter().map(|text| new_memory(text, None)).collect();
    engine.create_memories(memories, "tester").await.unwrap();
    engine.embeddings_settled().await.unwrap();
    let stored = embedder.1.load(Ordering::SeqCst);
    let query = || SearchQuery {
        q: Some("when does staging restart".to_owned()),
        mode: Some(RetrievalMode::Semantic),
        ..SearchQuery::default()
    };
    let ids = |result: cairn_types::SearchResult| -> Vec<String> {
        result.hits.into_iter().map(|hit| hit.memory.id).collect()
    };
    let first = ids(engine.search(query()).await.unwrap());
    let again = ids(engine.search(query()).await.unwrap());
    assert!(!first.is_empty());
    assert_eq!(first, again);
    assert_eq!(embedder.1.load(Ordering::SeqCst), stored + 1, "the query embedded once");
}

fn engine_with_synonyms(directory: &tempfile::TempDir) -> crate::Engine {
    let store = cairn_store_sqlite::SqliteStore::open(&directory.path().join("cairn.db"));
    crate::Engine::new(Arc::new(store.unwrap()))
        .with_embedder(Arc::new(Synonyms(HashingEmbedder::new(256), Default::default())))
}

fn new_memory(content: &str, repo: Option<&str>) -> cairn_types::NewMemory {
    let scope = if repo.is_some() { Scope::Repo } else { Scope::User };
    cairn_types::NewMemory {
        repo: repo.map(str::to_owned),
        ..crate::testing::memory(content, scope)
    }
}

fn by_meaning(q: &str, repo: Option<&str>, limit: u32) -> cairn_types::SearchQuery {
    cairn_types::SearchQuery {
        q: Some(q.to_owned()),
        repo: repo.map(str::to_owned),
        limit: Some(limit),
        mode: Some(cairn_types::RetrievalMode::Hybrid),
        ..cairn_types::SearchQuery::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archived_and_erased_memories_leave_no_gap_in_hybrid_results() {
    let directory = tempfile::tempdir().unwrap();
    let engine = engine_with_synonyms(&directory);
    // The nearest fifty say only "apples" (a search ranks at least fifty candidates);
    // ten more are further off; the rest unrelated.
    const GONE: usize = 50;
    let mut texts: Vec<String> = vec!["apples".to_owned(); GONE];
    texts.extend((0..10).map(|i| format!("apples in crate {i} of the cellar")));
    texts.extend((0..40).map(|i| format!("the staging cluster restarts at {i}")));
    let inputs = texts.iter().map(|text| new_memory(text, None)).collect();
    let created = engine.create_memories(inputs, "tester").await.unwrap();
    engine.embeddings_settled().await.unwrap();
    let nearest: Vec<&str> = created[..GONE].iter().map(|memory| memory.id.as_str()).collect();

    let before = engine.search(by_meaning("berries", None, 5)).await.unwrap();
    assert_eq!(before.hits.len(), 5, "found by meaning alone: no word is shared");
    assert!(before.hits.iter().all(|hit| nearest.contains(&hit.memory.id.as_str())));

    // Four ways out of retrieval: archive, a PATCH archiving, another with a change, erase.
    for id in &nearest[3..] {
        engine.archive_memory(id, "tester").await.unwrap();
    }
    let archive = cairn_types::MemoryPatch { archived: Some(true), ..Default::default() };
    engine.update_memory(nearest[0], archive.clone(), "tester").await.unwrap();
    let archive_stale =
        cairn_types::MemoryPatch { status: Some(cairn_types::Status::Stale), ..archive.clone() };
    engine.update_memory(nearest[1], archive_stale, "tester").await.unwrap();
    let erase = cairn_types::ErasureRequest {
        memory_ids: vec![nearest[2].to_owned()],
        ..Default::default()
    };
    engine.erase(erase, "tester").await.unwrap();

    for round in 0..2 {
        let after = engine.search(by_meaning("berries", None, 5)).await.unwrap();
        let found: Vec<&str> = after.hits.iter().map(|hit| hit.memory.id.as_str()).collect();
        assert_eq!(found.len(), 5, "round {round}: still five hits, {found:?}");
        assert!(found.iter().all(|id| !nearest.contains(id)), "round {round}: {found:?}");
    }
    let semantic = engine.semantic.clone().unwrap();
    let mut left = usize::MAX;
    for _ in 0..100 {
        left = semantic.index.read().unwrap().len();
        if left == created.len() - GONE {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(left, created.len() - GONE, "the index let go of what left retrieval");

    // A restored memory is embedded again and found again.
    let restore = cairn_types::MemoryPatch { archived: Some(false), ..Default::default() };
    engine.update_memory(nearest[5], restore, "tester").await.unwrap();
    engine.embeddings_settled().await.unwrap();
    let restored = engine.search(by_meaning("berries", None, 5)).await.unwrap();
    assert_eq!(restored.hits[0].memory.id, nearest[5]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_finds_its_own_memories_among_a_thousand_closer_ones() {
    let directory = tempfile::tempdir().unwrap();
    let engine = engine_with_synonyms(&directory);
    let others: Vec<_> =
        (0..1_000).map(|i| new_memory("apples", Some(&format!("repo{i}")))).collect();
    engine.create_memories(others, "tester").await.unwrap();
    let own = vec![
        new_memory("apples in the cairn crate", Some("cairn")),
        new_memory("apples go in the cairn cellar", Some("cairn")),
        new_memory("apples are kept somewhere cool", None),
    ];
    let own: Vec<String> = engine
        .create_memories(own, "tester")
        .await
        .unwrap()
        .into_iter()
        .map(|memory| memory.id)
        .collect();
    engine.embeddings_settled().await.unwrap();

    let result = engine.search(by_meaning("berries", Some("cairn"), 3)).await.unwrap();
    let mut found: Vec<String> = result.hits.into_iter().map(|hit| hit.memory.id).collect();
    found.sort();
    let mut expected = own.clone();
    expected.sort();
    assert_eq!(found, expected, "its own and the repo-less, never another repository's");

    let request = cairn_types::ContextRequest {
        task: "berries".to_owned(),
        repo: Some("cairn".to_owned()),
        token_budget: Some(200),
    };
    let pack = engine.context(request).await.unwrap();
    assert!(own.iter().all(|id| pack.memory_ids.contains(id)), "{:?}", pack.memory_ids);
    assert_eq!(pack.memory_ids.len(), 3, "{}", pack.context);
}
