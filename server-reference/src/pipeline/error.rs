//! Why a Pipeline call failed.

use intent_models::error::ConversionError;
use intent_models::{ErrorCode, PipelineSimulation};
use serde_json::Value;

use crate::error::ApiError;
use crate::store;

/// A Pipeline failure. It becomes the error envelope (`ApiError`, below), which the HTTP layer answers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No app, skill or operation of that name.
    #[error("{0}")]
    NotFound(String),
    /// The body is neither a build request, a stage input nor a Build.
    #[error("not {what}: {reason}")]
    NotARequest {
        /// What the body was taken for.
        what: &'static str,
        /// Why it is not one.
        reason: String,
    },
    /// An operation's input does not match its schema.
    #[error("the input of {operation} does not match its schema")]
    InvalidInput {
        /// The operation.
        operation: String,
        /// Every schema error, as `{path, message}`.
        errors: Vec<Value>,
    },
    /// The input is well-formed but cannot be assembled.
    #[error("{0}")]
    Invalid(String),
    /// The app or an action runs on another chain than the endpoint's.
    #[error("{0}")]
    ChainMismatch(String),
    /// The presented Build is not an intact Build of this server for the caller.
    #[error("{0}")]
    BuildInvalid(String),
    /// The presented Build was committed before: its effect holds, and is not repeated.
    #[error("this Build was committed already")]
    AlreadyCommitted,
    /// The presented Build expired.
    #[error("the Build expired at {0}")]
    BuildExpired(i64),
    /// The re-simulation at commit failed; nothing was committed.
    #[error("the Build no longer simulates successfully; nothing was committed")]
    SimulationFailed(Box<PipelineSimulation>),
    /// The durable store failed.
    #[error(transparent)]
    Store(#[from] store::Error),
    /// An answer's model was left without a required member (a bug of this server).
    #[error("an answer was left incomplete: {0}")]
    Model(#[from] ConversionError),
}

impl Error {
    /// The machine-readable code of this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::NotFound(_) => ErrorCode::NotFound,
            Self::NotARequest { .. } => ErrorCode::InvalidRequest,
            Self::InvalidInput { .. } | Self::Invalid(_) => ErrorCode::ValidationFailed,
            Self::ChainMismatch(_) => ErrorCode::ChainMismatch,
            Self::BuildInvalid(_) | Self::AlreadyCommitted => ErrorCode::BuildInvalid,
            Self::BuildExpired(_) => ErrorCode::BuildExpired,
            Self::SimulationFailed(_) => ErrorCode::SimulationFailed,
            Self::Store(_) | Self::Model(_) => ErrorCode::Internal,
        }
    }
}

/// The answer of a Pipeline failure: its code, its message, and its details.
impl From<Error> for ApiError {
    fn from(error: Error) -> Self {
        let api = ApiError::new(error.code(), error.to_string());
        match error {
            Error::Store(error) => error.into(),
            Error::Model(error) => error.into(),
            Error::InvalidInput { errors, .. } => api.with_detail("errors", Value::Array(errors)),
            Error::SimulationFailed(simulation) => api.with_detail(
                "simulation",
                serde_json::to_value(simulation).expect("a simulation serializes"),
            ),
            _ => api,
        }
    }
}

/// `Result` with the Pipeline's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
