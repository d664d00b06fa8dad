//! The Pipeline resource: the catalog, and Builds made, simulated, verified and committed.
//! A Build travels as the exact JSON the server sent, with its typed view beside it (a
//! [`SealedBuild`]).

use std::marker::PhantomData;
use std::time::{SystemTime, UNIX_EPOCH};

use intent_models::{
    OperationDescriptor, PipelineAppList, PipelineBuildRequest, PipelineChain,
    PipelineCommitResult, PipelineSkillList, PipelineStageInput, SkillResult,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::Error;
use crate::error::invalid;
use crate::raw::types::{
    CallSkillOperationOperation, CallSkillOperationSkill, GetAppOperationApp,
    GetAppOperationOperation,
};
use crate::raw::{Client, ClientInfo};
use crate::sealed::{Attestation, Jwks, SealedBuild};

/// The Pipeline operations of an [`Intent`](crate::Intent).
///
/// Owns what it needs (a clone of the [`Intent`](crate::Intent)'s client, which shares its
/// connections and tokens), so it is `Clone + Send + 'static` and moves into a spawned task. The
/// lifetime names no borrow: every handle is `Pipeline<'static>`, and code written as `Pipeline<'_>`
/// still compiles.
#[derive(Debug, Clone)]
pub struct Pipeline<'a> {
    pub(crate) client: Client,
    pub(crate) borrows: PhantomData<&'a ()>,
}

impl Pipeline<'_> {
    /// The apps whose operations assemble actions.
    pub async fn apps(&self) -> Result<PipelineAppList, Error> {
        Ok(self.client.list_pipeline_apps().send().await?.into_inner())
    }

    /// One operation of an app, with its input schema.
    pub async fn operation(
        &self,
        app: &str,
        operation: &str,
    ) -> Result<OperationDescriptor, Error> {
        let (app, operation): (GetAppOperationApp, GetAppOperationOperation) = (
            app.parse().map_err(invalid)?,
            operation.parse().map_err(invalid)?,
        );
        let descriptor = self
            .client
            .get_app_operation()
            .app(app)
            .operation(operation)
            .send()
            .await?;
        Ok(descriptor.into_inner())
    }

    /// The skills.
    pub async fn skills(&self) -> Result<PipelineSkillList, Error> {
        Ok(self
            .client
            .list_pipeline_skills()
            .send()
            .await?
            .into_inner())
    }

    /// Calls a skill's operation with `input`.
    pub async fn call_skill(
        &self,
        skill: &str,
        operation: &str,
        input: &Map<String, Value>,
    ) -> Result<SkillResult, Error> {
        let (skill, operation): (CallSkillOperationSkill, CallSkillOperationOperation) = (
            skill.parse().map_err(invalid)?,
            operation.parse().map_err(invalid)?,
        );
        let result = self
            .client
            .call_skill_operation()
            .skill(skill)
            .operation(operation)
            .body(input.clone())
            .send()
            .await?;
        Ok(result.into_inner())
    }

    /// Builds (and simulates) the request's operations on `chain`.
    pub async fn build(
        &self,
        chain: PipelineChain,
        request: &PipelineBuildRequest,
    ) -> Result<SealedBuild, Error> {
        self.lifecycle(chain, request).await
    }

    /// Stages actions given directly on `chain` (simulated unless `simulate` is false).
    pub async fn stage(
        &self,
        chain: PipelineChain,
        input: &PipelineStageInput,
    ) -> Result<SealedBuild, Error> {
        self.lifecycle(chain, input).await
    }

    /// The deployment's published keys, fetched once and kept by the client (and its clones):
    /// [`SealedBuild::verify_with`] checks a Build against them with no network I/O.
    pub async fn jwks(&self) -> Result<Jwks, Error> {
        let kept = self.kept_jwks().clone();
        match kept {
            Some(jwks) => Ok(jwks),
            None => self.fetch_jwks().await,
        }
    }

    /// Checks `build`'s digest and attestation against the deployment's published keys (those
    /// kept, fetched again once when the attestation names a key they lack: the keys rotated).
    pub async fn verify(&self, build: &SealedBuild) -> Result<Attestation, Error> {
        let mut jwks = self.jwks().await?;
        if build.key_id().is_some_and(|kid| !jwks.has_key(&kid)) {
            jwks = self.fetch_jwks().await?;
        }
        Ok(build.verify_with(&jwks)?)
    }

    /// Fetches the published keys (`/.well-known/jwks.json`) through the client's hooks (a span,
    /// the retry policy) and keeps them.
    async fn fetch_jwks(&self) -> Result<Jwks, Error> {
        let client = &self.client;
        let request = client
            .client()
            .get(format!("{}/.well-known/jwks.json", client.baseurl()))
            .build()
            .map_err(Error::Transport)?;
        let jwks: Jwks =
            crate::hooks::call(client, request, "jwks", |json| serde_json::from_slice(json))
                .await?;
        *self.kept_jwks() = Some(jwks.clone());
        Ok(jwks)
    }

    fn kept_jwks(&self) -> std::sync::MutexGuard<'_, Option<Jwks>> {
        // A panic while the lock was held left the keys as they were, or unset.
        self.client
            .inner
            .jwks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Commits `build` as received, unless it fails its digest or has expired.
    pub async fn commit(&self, build: &SealedBuild) -> Result<PipelineCommitResult, Error> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_secs() as i64);
        let chain = build.committable(now)?;
        self.lifecycle(chain, &build.json()).await
    }

    /// `POST`s `body` as it is to the lifecycle endpoint of `chain` through the client's hooks,
    /// and reads the answer as `T`.
    async fn lifecycle<T: DeserializeOwned>(
        &self,
        chain: PipelineChain,
        body: &impl Serialize,
    ) -> Result<T, Error> {
        let (path, operation) = match chain {
            PipelineChain::Evm => ("evm/build", "evmBuild"),
            PipelineChain::Svm => ("svm/stage", "svmStage"),
        };
        let client = &self.client;
        let request = client
            .client()
            .post(format!("{}/v1/pipeline/{path}", client.baseurl()))
            .json(body)
            .build()
            .map_err(Error::Transport)?;
        crate::hooks::call(client, request, operation, |json| {
            serde_json::from_slice(json)
        })
        .await
    }
}
