//! The seam a runtime plugs into: what turns an intent into events. The reference server's
//! runtime is [`ReferenceRuntime`](super::ReferenceRuntime); a model-backed one implements the
//! same trait.

use async_trait::async_trait;
use intent_models::{ActionRequest, ActionResult};

use super::turn::{RunEnd, Turn, TurnError};

/// Turns intents into events. Implementations write through [`Turn`] and return how the step
/// ended; the driver writes the final state.
///
/// A turn whose process stopped is run again, from the same input, by the process that carries
/// it on: what its log holds of [`Turn::say`] and [`Turn::tool`] is returned, not done again. An
/// implementation therefore takes every step with an effect, or whose answer varies (a model's
/// call), through [`Turn::tool`], and takes the same steps again given the same answers.
#[async_trait]
pub trait Runtime: Send + Sync + 'static {
    /// Starts a turn from the user's intent.
    async fn start(&self, turn: &Turn, intent: &str) -> Result<RunEnd, TurnError>;
    /// Continues a turn after the client resolved its action.
    async fn resume(
        &self,
        turn: &Turn,
        request: &ActionRequest,
        result: &ActionResult,
    ) -> Result<RunEnd, TurnError>;
}
