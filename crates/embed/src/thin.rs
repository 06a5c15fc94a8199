//! The encoder's linear layers for thin inputs: a query of a few dozen tokens against weight
//! matrices of 384 × 384 and 384 × 1536.
//!
//! candle runs `x · wᵀ` through gemm, which is built for large products: for 15 rows it ran
//! at 15–20 GFLOP/s on this project's machine (`perf`: a third of a query's time in
//! `gemm_common`'s `imp_fastcall`), on two threads that wait for each other. Here every
//! output is the dot product of an input row with a weight row, both read as they are stored
//! (PyTorch's `out × in` layout, no transposition or packing), three weight rows by four input
//! rows at a time: twelve vector accumulators, so each weight vector loaded from memory serves
//! four fused multiply-adds and each input vector three. A block of three weight rows (4.5 KB
//! at 384 columns) stays in the first-level cache while every input row passes over it, so
//! the weights are read from memory once per layer. A product of four rows or more is split
//! in two halves of the weight rows (the output's columns), run on the two threads kept for a
//! request's own work (`cairn_memory::embed::query_join`): each thread reads half the
//! weights. On an idle 2-core machine a whole model's products for a 17-token question take
//! 5.9 ms (61 GFLOP/s; 11.5 ms with 4 × 3 blocks that spilled registers, split by input rows so
//! that both threads read every weight).
//!
//! The SIMD is `pulp`'s (gemm's own dependency), in safe code: AVX2 and FMA when the CPU has
//! them (checked once, at run time), plain code otherwise.

use pulp::{Simd, WithSimd};

/// The widest SIMD instructions this CPU has, for [`linear`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cpu {
    #[cfg(target_arch = "x86_64")]
    v3: Option<pulp::x86::V3>,
}

impl Cpu {
    pub(crate) fn detect() -> Cpu {
        Cpu {
            #[cfg(target_arch = "x86_64")]
            v3: pulp::x86::V3::try_new(),
        }
    }

    fn run<Op: WithSimd>(self, op: Op) -> Op::Output {
        #[cfg(target_arch = "x86_64")]
        if let Some(simd) = self.v3 {
            return Simd::vectorize(simd, op);
        }
        Simd::vectorize(pulp::Scalar, op)
    }
}

/// How many input rows and weight rows one block multiplies: twelve accumulators, three
/// weight vectors and the input's vector read straight from memory fill the sixteen AVX2
/// registers without spilling (3 × 4, one weight vector more, spilled and ran at two thirds of
/// the speed).
const ROWS: usize = 4;
const COLUMNS: usize = 3;

/// `out[i][j] = bias[j] + x[i] · w[j]`, with `x` of `m` rows of `k` and `w` of `n` rows of
/// `k` (`n` is `bias.len()`), all row-major; `out` gets `m` rows of `n`.
pub(crate) fn linear(cpu: Cpu, x: &[f32], w: &[f32], bias: &[f32], out: &mut [f32]) {
    let n = bias.len();
    assert!(n > 0 && w.len().is_multiple_of(n), "the weights are rows of the bias's length");
    let k = w.len() / n;
    assert!(k > 0 && x.len().is_multiple_of(k), "the input is rows of the weights' width");
    let m = x.len() / k;
    assert_eq!(out.len(), m * n, "the output holds one row per input row");
    let mut rows: Vec<&mut [f32]> = out.chunks_mut(n).collect();
    if m < ROWS || n < 4 * COLUMNS {
        cpu.run(Linear { x, w, bias, out: &mut rows, k });
        return;
    }
    // Two halves of the weight rows (the output's columns) on two threads (the query's own,
    // see `query_join`): each thread reads half the weights, once, and writes its half of
    // every output row.
    let half = (n / 2).div_ceil(COLUMNS) * COLUMNS;
    let (mut left, mut right): (Vec<_>, Vec<_>) =
        rows.iter_mut().map(|row| row.split_at_mut(half)).unzip();
    let ((w_left, w_right), (bias_left, bias_right)) = (w.split_at(half * k), bias.split_at(half));
    cairn_memory::embed::query_join(
        || cpu.run(Linear { x, w: w_left, bias: bias_left, out: &mut left, k }),
        || cpu.run(Linear { x, w: w_right, bias: bias_right, out: &mut right, k }),
    );
}

/// One thread's share of a product: every input row against the weight rows of `bias`'s
/// length, into `out`'s rows (one per input row, as long as `bias`).
struct Linear<'a, 'b> {
    x: &'a [f32],
    w: &'a [f32],
    bias: &'a [f32],
    out: &'a mut [&'b mut [f32]],
    k: usize,
}

impl WithSimd for Linear<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let Linear { x, w, bias, out, k } = self;
        let (m, n) = (x.len() / k, bias.len());
        let mut column = 0;
        while column < n {
            let width = COLUMNS.min(n - column);
            let w = &w[column * k..(column + width) * k];
            let mut row = 0;
            while row < m {
                let height = ROWS.min(m - row);
                let x = &x[row * k..(row + height) * k];
                let mut sums = [[0f32; COLUMNS]; ROWS];
                // A whole block, or the last rows and columns with a block of their size.
                match (height, width) {
                    (4, 3) => block::<S, 4, 3>(simd, x, w, k, &mut sums),
                    (3, 3) => block::<S, 3, 3>(simd, x, w, k, &mut sums),
                    (2, 3) => block::<S, 2, 3>(simd, x, w, k, &mut sums),
                    (1, 3) => block::<S, 1, 3>(simd, x, w, k, &mut sums),
                    _ => {
                        for i in 0..height {
                            for j in 0..width {
                                let mut one = [[0f32; COLUMNS]; ROWS];
                                let (x, w) = (&x[i * k..(i + 1) * k], &w[j * k..(j + 1) * k]);
                                block::<S, 1, 1>(simd, x, w, k, &mut one);
                                sums[i][j] = one[0][0];
                            }
                        }
                    }
                }
                for (out, sums) in out[row..row + height].iter_mut().zip(&sums) {
                    let out = &mut out[column..column + width];
                    for ((out, sum), bias) in out.iter_mut().zip(sums).zip(&bias[column..]) {
                        *out = sum + bias;
                    }
                }
                row += height;
            }
            column += width;
        }
    }
}

/// The `R × C` dot products of `R` rows of `x` with `C` rows of `w` (each `k` long), into
/// `sums`.
#[inline(always)]
fn block<S: Simd, const R: usize, const C: usize>(
    simd: S,
    x: &[f32],
    w: &[f32],
    k: usize,
    sums: &mut [[f32; COLUMNS]; ROWS],
) {
    let xs: [(&[S::f32s], &[f32]); R] =
        std::array::from_fn(|i| S::as_simd_f32s(&x[i * k..(i + 1) * k]));
    let ws: [(&[S::f32s], &[f32]); C] =
        std::array::from_fn(|j| S::as_simd_f32s(&w[j * k..(j + 1) * k]));
    let mut acc = [[simd.splat_f32s(0.0); C]; R];
    for step in 0..xs[0].0.len() {
        let wv: [S::f32s; C] = std::array::from_fn(|j| ws[j].0[step]);
        for i in 0..R {
            let xv = xs[i].0[step];
            for j in 0..C {
                acc[i][j] = simd.mul_add_f32s(xv, wv[j], acc[i][j]);
            }
        }
    }
    for i in 0..R {
        for j in 0..C {
            let tail: f32 = xs[i].1.iter().zip(ws[j].1).map(|(a, b)| a * b).sum();
            sums[i][j] = simd.reduce_sum_f32s(acc[i][j]) + tail;
        }
    }
}

/// Exact GELU, `x · (1 + erf(x / √2)) / 2`, in place. `erf` is the rational approximation of
/// Eigen and XLA (an odd polynomial over an even one, inputs clamped to ±4, where `f32`'s erf
/// is ±1), within 4.5e-7 of the true one (see `erf_is_within_a_few_ulps_of_the_true_one`), in
/// straight-line code the compiler vectorises. candle's `libm::erff` is exact to the last bit
/// but branches: 21 ns a value, 2.3 ms of a 12-token query's 110,000 (now 0.06 ms).
pub(crate) fn gelu(cpu: Cpu, values: &mut [f32]) {
    cpu.run(Gelu(values));
}

struct Gelu<'a>(&'a mut [f32]);

impl WithSimd for Gelu<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _: S) {
        for x in self.0.iter_mut() {
            *x = (erf(*x * std::f32::consts::FRAC_1_SQRT_2) + 1.0) * 0.5 * *x;
        }
    }
}

#[inline(always)]
fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = x2 * -2.726_142_3e-10 + 2.770_681_4e-8;
    p = x2 * p + -2.101_024e-6;
    p = x2 * p + -5.692_506_4e-5;
    p = x2 * p + -7.349_906_3e-4;
    p = x2 * p + -2.954_600_1e-3;
    p = x2 * p + -1.609_603_3e-2;
    let mut q = x2 * -1.456_607_2e-5 + -2.133_740_6e-4;
    q = x2 * q + -1.682_827e-3;
    q = x2 * q + -7.373_329e-3;
    q = x2 * q + -1.426_473_9e-2;
    x * p / q
}

#[cfg(test)]
mod tests {
    use cairn_test_support::rng::Rng;

    use super::*;

    /// `count` numbers in `-1.0..=1.0`, in steps of a thousandth.
    fn numbers(count: usize, seed: u64) -> Vec<f32> {
        let mut rng = Rng::new(seed);
        (0..count).map(|_| rng.range(0, 2_000) as f32 / 1_000.0 - 1.0).collect()
    }

    /// The same product, one plain sum at a time in `f64`.
    fn plain(x: &[f32], w: &[f32], bias: &[f32]) -> Vec<f32> {
        let (n, k) = (bias.len(), w.len() / bias.len());
        let m = x.len() / k;
        let mut out = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                let dot: f64 =
                    (0..k).map(|p| f64::from(x[i * k + p]) * f64::from(w[j * k + p])).sum();
                out[i * n + j] = (dot + f64::from(bias[j])) as f32;
            }
        }
        out
    }

    #[test]
    fn matches_the_plain_product_at_every_shape() {
        let cpu = Cpu::detect();
        // Rows and columns that fill the blocks, and that leave edges of every size; widths
        // that are whole vectors and that leave a tail.
        for (m, n, k) in [
            (15, 384, 384),
            (1, 1536, 384),
            (2, 5, 7),
            (4, 7, 384),
            (7, 9, 45),
            (3, 4, 8),
            (6, 5, 7),
            (9, 14, 20),
            (5, 13, 384),
        ] {
            let (x, w, bias) = (numbers(m * k, 1), numbers(n * k, 2), numbers(n, 3));
            let mut out = vec![f32::NAN; m * n];
            linear(cpu, &x, &w, &bias, &mut out);
            let expected = plain(&x, &w, &bias);
            for (index, (got, want)) in out.iter().zip(&expected).enumerate() {
                assert!((got - want).abs() < 1e-3, "{m}×{n}×{k}, element {index}: {got} vs {want}");
            }
        }
    }

    #[test]
    #[should_panic(expected = "one row per input row")]
    fn an_output_of_the_wrong_size_is_refused() {
        let mut out = vec![0f32; 3];
        linear(Cpu::detect(), &[1.0; 8], &[1.0; 8], &[0.0; 2], &mut out);
    }

    #[test]
    fn erf_is_within_a_few_ulps_of_the_true_one() {
        let mut worst = 0f64;
        for i in -1_000_000..=1_000_000 {
            let x = i as f32 / 100_000.0;
            let error = (f64::from(erf(x)) - candle_core::cpu::erf::erf_f64(f64::from(x))).abs();
            worst = worst.max(error);
        }
        assert!(worst < 5e-7, "{worst}");
        let mut values = vec![-3.0, -1.0, 0.0, 0.5, 2.0];
        gelu(Cpu::detect(), &mut values);
        for (got, x) in values.iter().zip([-3.0f64, -1.0, 0.0, 0.5, 2.0]) {
            let exact = x * (1.0 + candle_core::cpu::erf::erf_f64(x / 2f64.sqrt())) / 2.0;
            assert!((f64::from(*got) - exact).abs() < 1e-6, "gelu({x}) = {got}, not {exact}");
        }
    }
}
