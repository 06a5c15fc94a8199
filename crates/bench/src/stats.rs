//! Latency samples and their percentiles, and the formatting of figures for the report.

use std::time::Duration;

/// Latency samples, sorted.
#[derive(Debug, Clone)]
pub struct Latencies {
    sorted: Vec<Duration>,
}

impl Latencies {
    pub fn new(mut samples: Vec<Duration>) -> Latencies {
        samples.sort_unstable();
        Latencies { sorted: samples }
    }

    /// The nearest-rank percentile: the smallest sample at or above `percent` of them.
    pub fn percentile(&self, percent: f64) -> Duration {
        if self.sorted.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((percent / 100.0) * self.sorted.len() as f64).ceil() as usize;
        self.sorted[rank.clamp(1, self.sorted.len()) - 1]
    }

    pub fn p50(&self) -> Duration {
        self.percentile(50.0)
    }

    pub fn p99(&self) -> Duration {
        self.percentile(99.0)
    }

    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    /// The samples, shortest first.
    pub fn sorted(&self) -> &[Duration] {
        &self.sorted
    }

    pub fn max(&self) -> Duration {
        self.sorted.last().copied().unwrap_or_default()
    }

    pub fn mean(&self) -> Duration {
        if self.sorted.is_empty() {
            return Duration::ZERO;
        }
        self.sorted.iter().sum::<Duration>() / self.sorted.len() as u32
    }
}

/// `1.234 ms`, or `456 µs` under a millisecond.
pub fn duration(value: Duration) -> String {
    let micros = value.as_secs_f64() * 1e6;
    if micros < 1000.0 { format!("{micros:.0} µs") } else { format!("{:.2} ms", micros / 1000.0) }
}

/// `12.3 s` from a second on, [`duration`] under it.
pub fn seconds(value: Duration) -> String {
    if value >= Duration::from_secs(1) {
        format!("{:.1} s", value.as_secs_f64())
    } else {
        duration(value)
    }
}

/// `12,345` with thousands separators.
pub fn count(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// `87.3 MB` (MiB, as `/proc` counts).
pub fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples = (1..=100).map(Duration::from_millis).collect();
        let latencies = Latencies::new(samples);
        assert_eq!(latencies.p50(), Duration::from_millis(50));
        assert_eq!(latencies.p99(), Duration::from_millis(99));
        assert_eq!(latencies.max(), Duration::from_millis(100));
    }

    #[test]
    fn formats() {
        assert_eq!(count(1234567.0), "1,234,567");
        assert_eq!(count(999.0), "999");
        assert_eq!(duration(Duration::from_micros(1500)), "1.50 ms");
        assert_eq!(duration(Duration::from_micros(15)), "15 µs");
        assert_eq!(seconds(Duration::from_millis(52_340)), "52.3 s");
        assert_eq!(seconds(Duration::from_micros(1500)), "1.50 ms");
    }
}
