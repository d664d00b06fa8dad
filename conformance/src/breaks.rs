//! How a run tells its failures apart: each way a check failed is a [`Break`] with a
//! fingerprint (see [`baseline`](crate::baseline)), and where it stands against a baseline
//! ([`State`]).

use serde::{Deserialize, Serialize};

use crate::finding::Broke;
use crate::spec::Level;

/// How a failure stands against a baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// The baseline does not hold it: it fails the run.
    New,
    /// The baseline holds it: it fails nothing.
    Known,
    /// The baseline holds a failure of this check, and the check passed.
    Fixed,
}

impl State {
    /// `new`, `known` or `fixed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::Known => "known",
            Self::Fixed => "fixed",
        }
    }
}

/// One way a check failed, with its fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Break {
    /// Sixteen hex digits, the same in every run that breaks the fact the same way.
    pub fingerprint: String,
    /// How it broke, in words.
    pub broke: String,
    /// Against the run's baseline, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<State>,
}

impl Break {
    /// `broke`, as `check` (concerning `operation`) failed at `level`.
    pub fn new(check: &str, level: Level, operation: Option<&str>, broke: &Broke) -> Self {
        let broke = broke.to_string();
        let parts = [check, level.as_str(), operation.unwrap_or_default(), &broke];
        Self {
            fingerprint: format!("{:016x}", fnv1a(&parts)),
            broke,
            baseline: None,
        }
    }
}

/// FNV-1a (64 bits) of `parts`, each ended by a zero byte: stable across builds and platforms,
/// unlike the standard library's hasher.
fn fnv1a(parts: &[&str]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in parts.iter().flat_map(|part| part.bytes().chain([0])) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}
