//! The Pipeline area (parts 2.1 to 2.8 and 4.1): stateless builds, simulation against the
//! devnet, and commit after revalidation and re-simulation. Nothing about a Build is kept
//! between calls: the envelope carries it all, and its attestation proves it.

pub mod catalog;
mod devnet;
pub mod envelope;

use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::routing::post;
use axum::{Json, Router};
use intent_models::{
    ErrorCode, PipelineAction, PipelineBuild, PipelineBuildRequest, PipelineChain,
    PipelineCommitResult, PipelineCommittedTransaction, PipelineSimulationStatus,
};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::gateway::Principal;
use crate::store::Meter;
use crate::{AppState, now};

pub use devnet::Devnet;

/// Routes under `/v1/pipeline`.
pub fn router() -> Router<AppState> {
    Router::new().route("/evm/build", post(evm_build))
}

/// `POST /v1/pipeline/evm/build`: a build request gives a simulated Build; a complete Build
/// envelope is committed.
async fn evm_build(
    State(state): State<AppState>,
    principal: Principal,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(body) = body?;
    if body.get("version").is_some() {
        let committed = commit(&state, &principal.account, &body).await?;
        return Ok(Json(
            serde_json::to_value(committed).expect("a commit result serializes"),
        ));
    }
    let request: PipelineBuildRequest = serde_json::from_value(body).map_err(|e| {
        ApiError::new(
            ErrorCode::InvalidRequest,
            format!("not a build request: {e}"),
        )
    })?;
    let build = build(&state, &principal.account, &request).await?;
    Ok(Json(
        serde_json::to_value(build).expect("a Build serializes"),
    ))
}

/// Assembles, simulates (unless `simulate` is false) and seals a Build for `owner`.
pub async fn build(
    state: &AppState,
    owner: &str,
    request: &PipelineBuildRequest,
) -> Result<PipelineBuild, ApiError> {
    let app = catalog::app(&request.app)?;
    let mut actions: Vec<PipelineAction> = Vec::new();
    let mut operations = Vec::new();
    let mut titles = Vec::new();
    for call in &request.operations {
        let operation = app.operation(&call.operation)?;
        let first = actions.len() as u64 + 1;
        let assembled = operation.assemble(&call.input, first)?;
        let steps: Vec<u64> = (first..first + assembled.actions.len() as u64).collect();
        actions.extend(assembled.actions);
        titles.push(assembled.title);
        operations.push(json!({
            "operation": operation.name,
            "input": call.input,
            "steps": steps,
        }));
    }
    let at = now();
    let expires_at = at + i64::try_from(state.config().build_ttl.as_secs()).unwrap_or(i64::MAX);
    let simulate = request.simulate.unwrap_or(true);
    let mut envelope = json!({
        "version": 2,
        "status": if simulate { "simulated" } else { "staged" },
        "actions": actions,
        "origin": { "app": app.name, "operations": operations },
        "summary": {
            "title": titles.join("; "),
            "chain": "evm",
            "network": network(&actions),
            "actionCount": actions.len(),
        },
        "expiresAt": expires_at,
    });
    if !request.skills.is_empty() {
        envelope["origin"]["skills"] = json!(request.skills);
    }
    if simulate {
        let simulation = state.devnet().simulate(&actions, expires_at, at).await;
        envelope["simulation"] = serde_json::to_value(simulation).expect("a simulation serializes");
        state
            .store()
            .record_usage(owner, Meter::Simulation, at)
            .await?;
    }
    state.store().record_usage(owner, Meter::Build, at).await?;
    let Value::Object(content) = envelope else {
        unreachable!("the envelope is an object")
    };
    let sealed = envelope::seal(state.signing_key(), content, owner);
    serde_json::from_value(sealed).map_err(|e| {
        tracing::error!(error = %e, "a sealed Build does not match its model");
        ApiError::internal()
    })
}

/// Commits the Build `build` for `caller`: revalidates it (digest, attestation, owner, app,
/// expiry), re-simulates it against the current devnet state, and takes custody only when the
/// simulation passes.
pub async fn commit(
    state: &AppState,
    caller: &str,
    build: &Value,
) -> Result<PipelineCommitResult, ApiError> {
    let at = now();
    let typed = envelope::verify(state.signing_key(), build, caller, at)?;
    let committed = state
        .devnet()
        .commit(state.store(), &typed, caller, at)
        .await?;
    if committed.simulation.status != PipelineSimulationStatus::Passed {
        return Err(ApiError::new(
            ErrorCode::SimulationFailed,
            "the Build no longer simulates successfully; nothing was committed",
        )
        .with_detail(
            "simulation",
            serde_json::to_value(&committed.simulation).expect("a simulation serializes"),
        ));
    }
    state
        .store()
        .record_usage(caller, Meter::Commit, at)
        .await?;
    Ok(PipelineCommitResult {
        chain: PipelineChain::Evm,
        committed_at: at,
        digest: typed.digest.to_string().parse().expect("a checked digest"),
        simulation: committed.simulation,
        status: intent_models::PipelineCommitResultStatus::Committed,
        transactions: committed
            .transactions
            .into_iter()
            .map(|(step, id)| PipelineCommittedTransaction {
                id,
                step: std::num::NonZeroU64::new(step).expect("steps start at 1"),
            })
            .collect(),
    })
}

/// The network of a Build's summary: the chain id of its first action.
fn network(actions: &[PipelineAction]) -> String {
    match actions.first() {
        Some(PipelineAction::Evm { chain_id, .. }) => chain_id.to_string(),
        Some(PipelineAction::Svm { cluster, .. }) => cluster.to_string(),
        None => String::new(),
    }
}
