//! Token counting with the o200k BPE tokenizer, the one current OpenAI models use.

/// Starts loading the tokenizer's tables on a background thread; later calls are free.
pub(crate) fn warm_up() {
    std::thread::spawn(|| {
        tiktoken_rs::o200k_base_singleton();
    });
}

/// The number of o200k tokens in `text`.
pub fn count_tokens(text: &str) -> usize {
    tiktoken_rs::o200k_base_singleton().encode_ordinary(text).len()
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_real_bpe_tokens() {
        assert_eq!(super::count_tokens(""), 0);
        assert_eq!(super::count_tokens("hello world"), 2);
        assert!(super::count_tokens("antidisestablishmentarianism") > 1);
    }
}
