//! The resource oracle every target shares: an input that costs more than the issue-17 targets
//! is a crash. Time is checked here (5 s for inputs up to 1 MiB, scaled beyond); memory by
//! libFuzzer itself (`-rss_limit_mb`, `-malloc_limit_mb`, see README); report size here (each
//! rule listed at most `FINDINGS_PER_RULE` + 1 times).

use std::time::{Duration, Instant};

pub struct Oracle {
    started: Instant,
    input_len: usize,
}

impl Oracle {
    pub fn start(input_len: usize) -> Oracle {
        Oracle {
            started: Instant::now(),
            input_len,
        }
    }

    /// Panics (a libFuzzer crash) when the input cost too much.
    pub fn check(self, report: Option<&kiln_audit::Report>) {
        let limit = Duration::from_secs(5) * (1 + (self.input_len >> 20) as u32);
        let took = self.started.elapsed();
        assert!(
            took <= limit,
            "resource oracle: {took:?} for {} input bytes (limit {limit:?})",
            self.input_len
        );
        if let Some(r) = report {
            let mut per_rule = std::collections::BTreeMap::new();
            for f in &r.findings {
                *per_rule.entry((f.rule, f.severity)).or_insert(0usize) += 1;
            }
            for ((rule, _), n) in per_rule {
                assert!(
                    n <= kiln_audit::FINDINGS_PER_RULE + 1,
                    "resource oracle: {n} findings of {rule} listed"
                );
            }
        }
    }
}
