//! The Pipeline service: builds, stages and commits Builds, and reads the catalog.

use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use intent_models::error::ConversionError;
use intent_models::{
    OperationDescriptor, OperationDescriptorKind, PipelineAction, PipelineBuild,
    PipelineBuildRequest, PipelineBuildStatus, PipelineChain, PipelineCommitResult,
    PipelineCommitResultStatus, PipelineCommittedTransaction, PipelineLifecycleResponse,
    PipelineOrigin, PipelineOriginOperation, PipelineSimulationStatus, PipelineStageInput,
    PipelineSummary,
};
use serde_json::{Map, Value, json};

use super::devnet::{self, Devnet};
use super::seal::{self, Content};
use super::{Error, Result, catalog};
use crate::clock::now;
use crate::ids::AccountId;
use crate::keys::signing::SigningKeys;
use crate::store::{CommitRecorded, Meter, NewCommit, Store};

/// The body of a lifecycle endpoint, parsed once: a build request, an explicit stage input, or
/// a complete Build to commit.
#[derive(Debug)]
pub enum Lifecycle {
    /// Assemble actions with catalog operations.
    Build(PipelineBuildRequest),
    /// Seal the actions given.
    Stage(PipelineStageInput),
    /// Commit this Build, kept as presented: its digest covers every byte of it.
    Commit(Map<String, Value>),
}

/// A name in a request body that names nothing refuses the body (400 `validation_failed`); only
/// a name in the path is a missing resource (404).
fn in_body(error: Error) -> Error {
    match error {
        Error::NotFound(what) => Error::Invalid(what),
        other => other,
    }
}

impl Lifecycle {
    /// Parses the body of `chain`'s lifecycle endpoint. A Build carries `version`, a stage input
    /// `actions`; anything else is a build request. The app a request names must exist (400)
    /// and run on `chain` (422 `chain_mismatch`) before the rest of the body is read.
    pub fn parse(chain: PipelineChain, body: Value) -> Result<Self> {
        let Value::Object(fields) = body else {
            return Err(not("a build request", "the body is not a JSON object"));
        };
        if fields.contains_key("version") {
            return Ok(Self::Commit(fields));
        }
        if let Some(name) = fields.get("app").and_then(Value::as_str) {
            on_chain(catalog::app(name).map_err(in_body)?, chain)?;
        }
        let body = Value::Object(fields);
        if body.get("actions").is_some() {
            serde_json::from_value(body)
                .map(Self::Stage)
                .map_err(|e| not("a stage input", e))
        } else {
            serde_json::from_value(body)
                .map(Self::Build)
                .map_err(|e| not("a build request", e))
        }
    }
}

fn not(what: &'static str, reason: impl ToString) -> Error {
    Error::NotARequest {
        what,
        reason: reason.to_string(),
    }
}

/// Owns the devnets, the key that attests Builds, and their lifetime; records usage and commits
/// in the store. Builds themselves are never stored: they travel by value.
pub struct Pipeline {
    devnets: Devnet,
    key: Arc<SigningKeys>,
    store: Arc<Store>,
    ttl: Duration,
}

impl Pipeline {
    /// The Pipeline over `store`, attesting with `key`; Builds live `ttl`. The devnets replay
    /// the commits recorded in `store` before they first simulate.
    pub fn new(store: Arc<Store>, key: Arc<SigningKeys>, ttl: Duration) -> Self {
        Self {
            devnets: Devnet::default(),
            key,
            store,
            ttl,
        }
    }

    /// Runs a lifecycle request of `owner` on `chain`: a Build, or a commit result.
    pub async fn lifecycle(
        &self,
        owner: &AccountId,
        chain: PipelineChain,
        request: Lifecycle,
    ) -> Result<PipelineLifecycleResponse> {
        Ok(match request {
            Lifecycle::Build(request) => self.build(owner, &request).await?.into(),
            Lifecycle::Stage(input) => self.stage(owner, &input).await?.into(),
            Lifecycle::Commit(build) => self.commit(owner, chain, &build).await?.into(),
        })
    }

    /// Assembles, simulates (unless `simulate` is false) and seals a Build for `owner`.
    pub async fn build(
        &self,
        owner: &AccountId,
        request: &PipelineBuildRequest,
    ) -> Result<PipelineBuild> {
        let app = catalog::app(&request.app).map_err(in_body)?;
        let mut draft = Draft::new(app, request.simulate, &request.skills);
        for call in &request.operations {
            let operation = app.operation(&call.operation).map_err(in_body)?;
            let first = draft.actions.len() as u64 + 1;
            let assembled = operation.assemble(&call.input, first)?;
            let steps: Vec<NonZeroU64> = (first..first + assembled.actions.len() as u64)
                .map(|step| NonZeroU64::new(step).expect("steps start at 1"))
                .collect();
            draft.actions.extend(assembled.actions);
            draft.titles.push(assembled.title);
            draft.operations.push(
                PipelineOriginOperation::builder()
                    .input(call.input.clone())
                    .operation(operation.name)
                    .steps(steps)
                    .try_into()?,
            );
        }
        self.seal(owner, draft).await
    }

    /// Seals the actions given directly in a stage input, simulated unless `simulate` is false.
    pub async fn stage(
        &self,
        owner: &AccountId,
        input: &PipelineStageInput,
    ) -> Result<PipelineBuild> {
        let app = catalog::app(&input.app).map_err(in_body)?;
        let mut draft = Draft::new(app, input.simulate, &input.skills);
        for (index, action) in input.actions.iter().enumerate() {
            let (step, chain) = match action {
                PipelineAction::Evm { step, .. } | PipelineAction::Svm { step, .. } => {
                    (step.get(), devnet::chain_of(action))
                }
            };
            if chain != app.chain {
                return Err(Error::ChainMismatch(format!(
                    "app {} runs on {}; step {step} is for {chain}",
                    app.name, app.chain
                )));
            }
            if step != index as u64 + 1 {
                return Err(Error::Invalid(
                    "actions are numbered by step from 1, in order".to_owned(),
                ));
            }
        }
        draft.actions = input.actions.clone();
        draft
            .titles
            .push(format!("Stage {} actions", input.actions.len()));
        self.seal(owner, draft).await
    }

    /// Commits the Build `build` for `caller` on `chain`: revalidates it (digest, attestation,
    /// owner, app, expiry), re-simulates it against the current devnet state, and takes custody
    /// only when the simulation passes. The commit and its usage are recorded in one transaction
    /// while the chain stays locked, and applied to the chain only once recorded.
    pub async fn commit(
        &self,
        caller: &AccountId,
        chain: PipelineChain,
        build: &Map<String, Value>,
    ) -> Result<PipelineCommitResult> {
        let at = now();
        let typed = seal::verify(&self.key, build, caller.as_str(), at)?;
        on_chain(catalog::app(&typed.origin.app).map_err(in_body)?, chain)?;
        let actions = serde_json::to_string(&typed.actions).expect("actions serialize");
        let chain_name = chain.to_string();
        // Another process may commit on the chain between the re-simulation and the record:
        // then catch up and re-simulate on the newer state.
        let (prepared, seq) = loop {
            let prepared = self
                .devnets
                .prepare(chain, &typed, at, self.store.as_ref())
                .await?;
            if prepared.simulation.status != PipelineSimulationStatus::Passed {
                return Err(Error::SimulationFailed(Box::new(prepared.simulation)));
            }
            let commit = NewCommit {
                chain: &chain_name,
                applied_through: prepared.applied_through,
                digest: &typed.digest,
                account: caller,
                actions: &actions,
                at,
            };
            match self.store.record_commit(&commit).await? {
                CommitRecorded::Done(seq) => break (prepared, seq),
                CommitRecorded::Behind => continue,
                CommitRecorded::Duplicate => return Err(Error::AlreadyCommitted),
            }
        };
        let (simulation, transactions) = prepared.apply(seq);
        let transactions = transactions
            .into_iter()
            .map(|(step, id)| {
                PipelineCommittedTransaction::builder()
                    .id(id)
                    .step(step)
                    .try_into()
            })
            .collect::<Result<Vec<PipelineCommittedTransaction>, _>>()?;
        Ok(PipelineCommitResult::builder()
            .chain(chain)
            .committed_at(at)
            .digest(typed.digest.to_string())
            .simulation(simulation)
            .status(PipelineCommitResultStatus::Committed)
            .transactions(transactions)
            .try_into()?)
    }

    /// Every app with the descriptors of its operations.
    pub fn apps(&self) -> Result<Value> {
        let apps = catalog::APPS
            .iter()
            .map(|app| {
                let operations = app
                    .operations
                    .iter()
                    .map(|op| app_descriptor(app, op))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(json!({
                    "name": app.name,
                    "chain": app.chain,
                    "description": app.description,
                    "operations": operations,
                }))
            })
            .collect::<Result<Vec<Value>>>()?;
        Ok(json!({ "apps": apps }))
    }

    /// The descriptor of `app`'s `operation`: POST a build request naming it to the app's
    /// lifecycle endpoint.
    pub fn app_operation(&self, app: &str, operation: &str) -> Result<OperationDescriptor> {
        let app = catalog::app(app)?;
        Ok(app_descriptor(app, app.operation(operation)?)?)
    }

    /// Every skill with the descriptors of its operations.
    pub fn skills(&self) -> Result<Value> {
        let skills = catalog::SKILLS
            .iter()
            .map(|skill| {
                let operations = skill
                    .operations
                    .iter()
                    .map(|op| {
                        let href =
                            format!("/v1/pipeline/skills/{}/operations/{}", skill.name, op.name);
                        descriptor(op.name, href, &op.input)
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(json!({ "name": skill.name, "description": skill.description, "operations": operations }))
            })
            .collect::<Result<Vec<Value>>>()?;
        Ok(json!({ "skills": skills }))
    }

    /// Runs `skill`'s `operation` on `input`: a request-local result.
    pub fn call_skill(&self, skill: &str, operation: &str, input: &Value) -> Result<Value> {
        let skill = catalog::skill(skill)?;
        let operation = skill.operation(operation)?;
        let result = operation.run(input)?;
        Ok(json!({ "skill": skill.name, "operation": operation.name, "result": result }))
    }

    /// Simulates (when asked) and seals `draft` for `owner`, recording usage.
    async fn seal(&self, owner: &AccountId, draft: Draft) -> Result<PipelineBuild> {
        let at = now();
        let expires_at = at + i64::try_from(self.ttl.as_secs()).unwrap_or(i64::MAX);
        let simulation = if draft.simulate {
            let simulation = self
                .devnets
                .simulate(
                    draft.app.chain,
                    &draft.actions,
                    expires_at,
                    at,
                    self.store.as_ref(),
                )
                .await?;
            self.store
                .record_usage(owner, Meter::Simulation, at)
                .await?;
            Some(simulation)
        } else {
            None
        };
        self.store.record_usage(owner, Meter::Build, at).await?;
        let content = Content {
            status: if draft.simulate {
                PipelineBuildStatus::Simulated
            } else {
                PipelineBuildStatus::Staged
            },
            summary: PipelineSummary::builder()
                .action_count(draft.actions.len() as i64)
                .chain(draft.app.chain)
                .network(network(&draft.actions))
                .title(draft.titles.join("; "))
                .try_into()?,
            origin: PipelineOrigin::builder()
                .app(draft.app.name)
                .operations(draft.operations)
                .skills(draft.skills)
                .try_into()?,
            actions: draft.actions,
            simulation,
            expires_at,
        };
        Ok(seal::seal(&self.key, content, owner.as_str())?)
    }
}

/// A Build before its simulation and its seal.
struct Draft {
    app: &'static catalog::App,
    actions: Vec<PipelineAction>,
    operations: Vec<PipelineOriginOperation>,
    titles: Vec<String>,
    skills: Vec<intent_models::PipelineOriginSkillsItem>,
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
            skills: skills
                .iter()
                .map(|s| s.parse().expect("skill names are 1 to 160 characters"))
                .collect(),
            simulate: simulate.unwrap_or(true),
        }
    }
}

/// 422 `chain_mismatch` unless `app` runs on `chain`.
fn on_chain(app: &catalog::App, chain: PipelineChain) -> Result<()> {
    if app.chain == chain {
        return Ok(());
    }
    Err(Error::ChainMismatch(format!(
        "app {} runs on {}, not {chain}",
        app.name, app.chain
    )))
}

fn descriptor(
    name: &str,
    href: String,
    input: &catalog::Schema,
) -> Result<OperationDescriptor, ConversionError> {
    OperationDescriptor::builder()
        .href(href)
        .input_schema(input.json.as_object().cloned().unwrap_or_default())
        .kind(OperationDescriptorKind::Operation)
        .method("POST")
        .name(name)
        .try_into()
}

fn app_descriptor(
    app: &catalog::App,
    operation: &catalog::AppOperation,
) -> Result<OperationDescriptor, ConversionError> {
    let href = match app.chain {
        PipelineChain::Evm => "/v1/pipeline/evm/build",
        PipelineChain::Svm => "/v1/pipeline/svm/stage",
    };
    descriptor(operation.name, href.to_owned(), &operation.input)
}

/// The network of a Build's summary: the chain id of its first action.
fn network(actions: &[PipelineAction]) -> String {
    match actions.first() {
        Some(PipelineAction::Evm { chain_id, .. }) => chain_id.to_string(),
        Some(PipelineAction::Svm { cluster, .. }) => cluster.to_string(),
        None => String::new(),
    }
}
