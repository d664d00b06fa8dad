//! The entry of a kind this version does not know. The accessors of what every
//! [`AgentEvent`](crate::AgentEvent) carries (`seq()`, `turn_id()`, `kind()`) are generated with
//! it, so that a kind added to openapi.json needs no change here.

use std::num::NonZeroU64;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// An event entry of a kind this version does not know. The interface leaves kind names and
/// entry shapes open (parts 2.11 and 6), so the entry is kept whole; only its position in the
/// log and its turn are read, which ordering and following need.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
pub struct UnknownEvent {
    /// The entry's kind (`type`).
    #[serde(rename = "type")]
    pub kind: String,
    /// Position in the session log.
    pub seq: NonZeroU64,
    /// The turn the entry belongs to.
    #[serde(rename = "turnId")]
    pub turn_id: String,
    /// Every other member, as sent.
    #[serde(flatten)]
    pub members: Map<String, Value>,
}
