//! Tool results as a model reads them: an answer's JSON as structured content and as text, and
//! a refusal as text alone, so that it never contradicts the tool's output schema.

use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock};
use serde_json::Value;

/// A tool error a model reads: `reason`, as the result's text.
pub(super) fn refused(reason: String) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(reason)]).into()
}

/// A tool's answer a model reads: `structured` as the structured content, and its JSON as the
/// text, for hosts that hand the model only the text.
pub(super) fn answered(structured: Value) -> CallToolResponse {
    let text = structured.to_string();
    let mut result = CallToolResult::structured(structured);
    result.content = vec![ContentBlock::text(text)];
    result.into()
}
