//! The Pipeline area (parts 2.1 to 2.8 and 4.1): stateless builds, simulation against the
//! devnet, and commit after revalidation and re-simulation. Nothing about a Build is kept
//! between calls: the envelope carries it all, and its attestation proves it.

pub mod catalog;
pub mod devnet;
pub mod envelope;

use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use intent_models::{
    ErrorCode, OperationDescriptor, OperationDescriptorKind, PipelineAction, PipelineBuild,
    PipelineBuildRequest, PipelineChain, PipelineCommitResult, PipelineCommittedTransaction,
    PipelineSimulationStatus, PipelineStageInput,
};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::gateway::Principal;
use crate::store::Meter;
use crate::{AppState, now};

pub use devnet::Devnet;

/// Routes under `/v1/pipeline`.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/apps", get(list_apps))
        .route("/apps/{app}/operations/{operation}", get(app_operation))
        .route("/skills", get(list_skills))
        .route("/skills/{skill}/operations/{operation}", post(call_skill))
        .route("/evm/build", post(evm_build))
        .route("/svm/stage", post(svm_stage))
}

/// Longest app, skill or operation name (part 8).
const MAX_NAME: usize = 160;

/// `app`, `skill` and `operation` path parameters: 1 to 160 characters.
fn names(
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<(String, String), ApiError> {
    let Path((first, second)) =
        path.map_err(|e| ApiError::new(ErrorCode::InvalidParameter, e.body_text()))?;
    for name in [&first, &second] {
        if name.is_empty() || name.chars().count() > MAX_NAME {
            return Err(ApiError::new(
                ErrorCode::InvalidParameter,
                format!("names are 1 to {MAX_NAME} characters"),
            ));
        }
    }
    Ok((first, second))
}

fn descriptor(name: &str, href: String, input: &catalog::Schema) -> OperationDescriptor {
    OperationDescriptor {
        href,
        input_schema: input.json.as_object().cloned().unwrap_or_default(),
        kind: OperationDescriptorKind::Operation,
        method: "POST".to_owned(),
        name: name.to_owned(),
    }
}

/// An app operation's descriptor: POST a build request naming it to the app's lifecycle
/// endpoint.
fn app_descriptor(app: &catalog::App, operation: &catalog::Operation) -> OperationDescriptor {
    let href = match app.chain {
        PipelineChain::Evm => "/v1/pipeline/evm/build",
        PipelineChain::Svm => "/v1/pipeline/svm/stage",
    };
    descriptor(operation.name, href.to_owned(), &operation.input)
}

async fn list_apps() -> Json<Value> {
    let apps: Vec<Value> = catalog::APPS
        .iter()
        .map(|app| {
            json!({
                "name": app.name,
                "chain": app.chain,
                "description": app.description,
                "operations": app.operations.iter().map(|op| app_descriptor(app, op)).collect::<Vec<_>>(),
            })
        })
        .collect();
    Json(json!({ "apps": apps }))
}

async fn app_operation(
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Json<OperationDescriptor>, ApiError> {
    let (app, operation) = names(path)?;
    let app = catalog::app(&app)?;
    Ok(Json(app_descriptor(app, app.operation(&operation)?)))
}

async fn list_skills() -> Json<Value> {
    let skills: Vec<Value> = catalog::SKILLS
        .iter()
        .map(|skill| {
            let operations: Vec<OperationDescriptor> = skill
                .operations
                .iter()
                .map(|op| {
                    let href = format!("/v1/pipeline/skills/{}/operations/{}", skill.name, op.name);
                    descriptor(op.name, href, &op.input)
                })
                .collect();
            json!({ "name": skill.name, "description": skill.description, "operations": operations })
        })
        .collect();
    Json(json!({ "skills": skills }))
}

async fn call_skill(
    path: Result<Path<(String, String)>, PathRejection>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let (skill, operation) = names(path)?;
    let Json(input) = body?;
    let skill = catalog::skill(&skill)?;
    let operation = skill.operation(&operation)?;
    let result = operation.run(&input)?;
    Ok(Json(
        json!({ "skill": skill.name, "operation": operation.name, "result": result }),
    ))
}

/// `POST /v1/pipeline/evm/build`.
async fn evm_build(
    State(state): State<AppState>,
    principal: Principal,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    lifecycle(&state, &principal, PipelineChain::Evm, body).await
}

/// `POST /v1/pipeline/svm/stage`.
async fn svm_stage(
    State(state): State<AppState>,
    principal: Principal,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    lifecycle(&state, &principal, PipelineChain::Svm, body).await
}

/// A lifecycle endpoint of `chain`: a build request or a stage input gives a Build; a complete
/// Build envelope is committed. An app of another chain is 422 `chain_mismatch`.
async fn lifecycle(
    state: &AppState,
    principal: &Principal,
    chain: PipelineChain,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(body) = body?;
    if body.get("version").is_some() {
        let committed = commit(state, &principal.account, chain, &body).await?;
        return Ok(Json(
            serde_json::to_value(committed).expect("a commit result serializes"),
        ));
    }
    let not = |what: &str, e: serde_json::Error| {
        ApiError::new(ErrorCode::InvalidRequest, format!("not {what}: {e}"))
    };
    if let Some(name) = body["app"].as_str() {
        on_chain(catalog::app(name)?, chain)?;
    }
    let build = if body.get("actions").is_some() {
        let input: PipelineStageInput =
            serde_json::from_value(body).map_err(|e| not("a stage input", e))?;
        stage(state, &principal.account, &input).await?
    } else {
        let request: PipelineBuildRequest =
            serde_json::from_value(body).map_err(|e| not("a build request", e))?;
        build(state, &principal.account, &request).await?
    };
    Ok(Json(
        serde_json::to_value(build).expect("a Build serializes"),
    ))
}

/// 422 `chain_mismatch` unless `app` runs on `chain`.
fn on_chain(app: &catalog::App, chain: PipelineChain) -> Result<(), ApiError> {
    if app.chain == chain {
        return Ok(());
    }
    Err(ApiError::new(
        ErrorCode::ChainMismatch,
        format!("app {} runs on {}, not {chain}", app.name, app.chain),
    ))
}

/// Assembles, simulates (unless `simulate` is false) and seals a Build for `owner`.
pub async fn build(
    state: &AppState,
    owner: &str,
    request: &PipelineBuildRequest,
) -> Result<PipelineBuild, ApiError> {
    let app = catalog::app(&request.app)?;
    let mut draft = Draft::new(app, request.simulate, &request.skills);
    for call in &request.operations {
        let operation = app.operation(&call.operation)?;
        let first = draft.actions.len() as u64 + 1;
        let assembled = operation.assemble(&call.input, first)?;
        let steps: Vec<u64> = (first..first + assembled.actions.len() as u64).collect();
        draft.actions.extend(assembled.actions);
        draft.titles.push(assembled.title);
        draft.operations.push(json!({
            "operation": operation.name,
            "input": call.input,
            "steps": steps,
        }));
    }
    seal(state, owner, draft).await
}

/// Seals the actions given directly in a stage input, simulated unless `simulate` is false.
pub async fn stage(
    state: &AppState,
    owner: &str,
    input: &PipelineStageInput,
) -> Result<PipelineBuild, ApiError> {
    let app = catalog::app(&input.app)?;
    let mut draft = Draft::new(app, input.simulate, &input.skills);
    for (index, action) in input.actions.iter().enumerate() {
        let (step, chain) = match action {
            PipelineAction::Evm { step, .. } | PipelineAction::Svm { step, .. } => {
                (step.get(), devnet::chain_of(action))
            }
        };
        if chain != app.chain {
            return Err(ApiError::new(
                ErrorCode::ChainMismatch,
                format!(
                    "app {} runs on {}; step {step} is for {chain}",
                    app.name, app.chain
                ),
            ));
        }
        if step != index as u64 + 1 {
            return Err(ApiError::new(
                ErrorCode::ValidationFailed,
                "actions are numbered by step from 1, in order",
            ));
        }
    }
    draft.actions = input.actions.clone();
    draft
        .titles
        .push(format!("Stage {} actions", input.actions.len()));
    seal(state, owner, draft).await
}

/// A Build before its simulation and its seal.
struct Draft {
    app: &'static catalog::App,
    actions: Vec<PipelineAction>,
    operations: Vec<Value>,
    titles: Vec<String>,
    skills: Vec<String>,
    simulate: bool,
}

impl Draft {
    fn new(
        app: &'static catalog::App,
        simulate: Option<bool>,
        skills: &[impl std::ops::Deref<Target = String>],
    ) -> Self {
        Self {
            app,
            actions: Vec::new(),
            operations: Vec::new(),
            titles: Vec::new(),
            skills: skills.iter().map(|s| s.to_string()).collect(),
            simulate: simulate.unwrap_or(true),
        }
    }
}

/// Simulates (when asked) and seals `draft` for `owner`, recording usage.
async fn seal(state: &AppState, owner: &str, draft: Draft) -> Result<PipelineBuild, ApiError> {
    let at = now();
    let expires_at = at + i64::try_from(state.config().build_ttl.as_secs()).unwrap_or(i64::MAX);
    let mut envelope = json!({
        "version": 2,
        "status": if draft.simulate { "simulated" } else { "staged" },
        "actions": draft.actions,
        "origin": { "app": draft.app.name, "operations": draft.operations },
        "summary": {
            "title": draft.titles.join("; "),
            "chain": draft.app.chain,
            "network": network(&draft.actions),
            "actionCount": draft.actions.len(),
        },
        "expiresAt": expires_at,
    });
    if !draft.skills.is_empty() {
        envelope["origin"]["skills"] = json!(draft.skills);
    }
    if draft.simulate {
        let simulation = state
            .devnet()
            .simulate(draft.app.chain, &draft.actions, expires_at, at)
            .await;
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

/// Commits the Build `build` for `caller` on `chain`: revalidates it (digest, attestation,
/// owner, app, expiry), re-simulates it against the current devnet state, and takes custody
/// only when the simulation passes.
pub async fn commit(
    state: &AppState,
    caller: &str,
    chain: PipelineChain,
    build: &Value,
) -> Result<PipelineCommitResult, ApiError> {
    let at = now();
    let typed = envelope::verify(state.signing_key(), build, caller, at)?;
    on_chain(catalog::app(&typed.origin.app)?, chain)?;
    let committed = state
        .devnet()
        .commit(chain, state.store(), &typed, caller, at)
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
        chain,
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
