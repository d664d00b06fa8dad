//! Why an Account call failed.

use intent_models::ErrorCode;
use intent_models::error::ConversionError;

use crate::error::ApiError;
use crate::store;

/// An Account failure. It becomes the error envelope (`ApiError`, below), which the HTTP layer answers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A path parameter is malformed.
    #[error("{0}")]
    InvalidParameter(String),
    /// No such application, or no such credential of it.
    #[error("{0}")]
    NotFound(String),
    /// Install needs credentials that are not saved.
    #[error("save the required credentials first: {}", missing.join(", "))]
    CredentialsMissing {
        /// Their names.
        missing: Vec<&'static str>,
    },
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
            Self::InvalidParameter(_) => ErrorCode::InvalidParameter,
            Self::NotFound(_) => ErrorCode::NotFound,
            Self::CredentialsMissing { .. } => ErrorCode::CredentialsMissing,
            Self::Store(_) | Self::Model(_) => ErrorCode::Internal,
        }
    }
}

/// The answer of an Account failure: its code, its message, and its details.
impl From<Error> for ApiError {
    fn from(error: Error) -> Self {
        let api = ApiError::new(error.code(), error.to_string());
        match error {
            Error::Store(error) => error.into(),
            Error::Model(error) => error.into(),
            Error::CredentialsMissing { missing } => api.with_detail("missing", missing.into()),
            _ => api,
        }
    }
}

/// `Result` with the Account's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
