//! Exponential backoff, the one rule for "how long to wait before trying again".

use std::time::Duration;

/// Waits that double from `base` with each attempt, never longer than `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The wait before the first retry.
    pub base: Duration,
    /// No wait is longer than this.
    pub max: Duration,
}

impl Backoff {
    pub const fn new(base: Duration, max: Duration) -> Self {
        Self { base, max }
    }

    /// The wait before retry number `attempt` (1-based; 0 is treated as 1):
    /// `base × 2^(attempt − 1)`, at most `max`. Never overflows.
    pub fn delay(&self, attempt: u32) -> Duration {
        self.base
            .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)))
            .min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn waits_double_from_the_base_up_to_the_cap() {
        let backoff = Backoff::new(SECOND, Duration::from_secs(30));
        let waits: Vec<u64> = (1..=7).map(|n| backoff.delay(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
    }

    #[test]
    fn attempt_zero_waits_like_the_first_retry() {
        let backoff = Backoff::new(SECOND, Duration::from_secs(60));
        assert_eq!(backoff.delay(0), SECOND);
    }

    #[test]
    fn huge_attempt_numbers_saturate_at_the_cap_instead_of_overflowing() {
        let backoff = Backoff::new(SECOND, Duration::from_secs(60));
        assert_eq!(backoff.delay(u32::MAX), Duration::from_secs(60));
        let unbounded = Backoff::new(Duration::MAX, Duration::MAX);
        assert_eq!(unbounded.delay(200), Duration::MAX);
    }
}
