//! The Pipeline resource: the catalog, and Builds made, simulated, verified and committed.
//! A Build travels as the exact JSON the server sent, with its typed view beside it (a
//! [`SealedBuild`]).

use std::time::{SystemTime, UNIX_EPOCH};

use intent_models::{
    OperationDescriptor, PipelineAppList, PipelineBuildRequest, PipelineChain,
    PipelineCommitResult, PipelineSkillList, PipelineStageInput, SkillResult,
};
use serde_json::{Map, Value};

use crate::build::{self, Attestation, SealedBuild};
use crate::error::invalid;
use crate::generated::types::{
    CallSkillOperationOperation, CallSkillOperationSkill, GetAppOperationApp,
    GetAppOperationOperation,
};
use crate::{Client, Error};

/// The Pipeline operations of an [`Intent`](crate::Intent).
#[derive(Debug, Clone, Copy)]
pub struct Pipeline<'a> {
    pub(crate) client: &'a Client,
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
        build::lifecycle(self.client, chain, request).await
    }

    /// Stages actions given directly on `chain` (simulated unless `simulate` is false).
    pub async fn stage(
        &self,
        chain: PipelineChain,
        input: &PipelineStageInput,
    ) -> Result<SealedBuild, Error> {
        build::lifecycle(self.client, chain, input).await
    }

    /// Checks `build`'s digest and attestation against the deployment's published keys.
    pub async fn verify(&self, build: &SealedBuild) -> Result<Attestation, Error> {
        let jwks = build::jwks(self.client).await?;
        Ok(build::verify(build, &jwks)?)
    }

    /// Commits `build` as received, unless it fails its digest or has expired.
    pub async fn commit(&self, build: &SealedBuild) -> Result<PipelineCommitResult, Error> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_secs() as i64);
        build::commit(self.client, build, now).await
    }
}
