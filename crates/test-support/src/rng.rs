//! A small seeded generator (xorshift64*): the same seed gives the same numbers on every
//! machine, for test data and the bench's corpus.

/// xorshift64*: small, fast, good enough for test data, and the same everywhere.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // Never zero, and nearby seeds start far apart.
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n`; `n` must be positive.
    pub fn below(&mut self, n: usize) -> usize {
        (((self.next_u64() >> 32) * n as u64) >> 32) as usize
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with `probability`.
    pub fn chance(&mut self, probability: f64) -> bool {
        self.unit() < probability
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn the_same_seed_gives_the_same_numbers_within_bounds() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        let drawn: Vec<usize> = (0..1_000).map(|_| a.below(10)).collect();
        assert_eq!(drawn, (0..1_000).map(|_| b.below(10)).collect::<Vec<_>>());
        assert!(drawn.iter().all(|n| *n < 10));
        assert!((0..10).all(|n| drawn.contains(&n)), "every value comes up: {drawn:?}");
        assert_ne!(Rng::new(8).next_u64(), Rng::new(7).next_u64());
        assert!((0..1_000).map(|_| a.unit()).all(|x| (0.0..1.0).contains(&x)));
    }
}
