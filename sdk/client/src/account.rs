//! The Account resource: installed apps, their credentials, and the usage statement.

use std::marker::PhantomData;
use std::num::NonZeroU64;

use intent_models::{
    AccountAppList, AppInstallation, CredentialChange, CredentialList, CredentialValue,
    UsageStatement,
};

use crate::Error;
use crate::error::invalid;
use crate::raw::Client;
use crate::raw::types::{GetStatementPeriod, RemoveCredentialName, SaveCredentialName};

/// The Account operations of an [`Intent`](crate::Intent).
///
/// Owns what it needs (a clone of the [`Intent`](crate::Intent)'s client, which shares its
/// connections and tokens), so it is `Clone + Send + 'static` and moves into a spawned task. The
/// lifetime names no borrow: every handle is `Account<'static>`, and code written as `Account<'_>`
/// still compiles.
#[derive(Debug, Clone)]
pub struct Account<'a> {
    pub(crate) client: Client,
    pub(crate) borrows: PhantomData<&'a ()>,
}

impl Account<'_> {
    /// The apps the account can install, and whether each is installed.
    pub async fn apps(&self) -> Result<AccountAppList, Error> {
        Ok(self.client.list_account_apps().send().await?.into_inner())
    }

    /// Installs an app.
    pub async fn install(&self, application: NonZeroU64) -> Result<AppInstallation, Error> {
        Ok(self
            .client
            .install_app()
            .application_id(application)
            .send()
            .await?
            .into_inner())
    }

    /// Uninstalls an app; its credentials are removed with it.
    pub async fn uninstall(&self, application: NonZeroU64) -> Result<AppInstallation, Error> {
        Ok(self
            .client
            .uninstall_app()
            .application_id(application)
            .send()
            .await?
            .into_inner())
    }

    /// The names of an app's credentials and whether each is set; never their values.
    pub async fn credentials(&self, application: NonZeroU64) -> Result<CredentialList, Error> {
        Ok(self
            .client
            .list_credentials()
            .application_id(application)
            .send()
            .await?
            .into_inner())
    }

    /// Sets credential `name` of an app.
    pub async fn save_credential(
        &self,
        application: NonZeroU64,
        name: &str,
        value: &CredentialValue,
    ) -> Result<CredentialChange, Error> {
        let name: SaveCredentialName = name.parse().map_err(invalid)?;
        let change = self
            .client
            .save_credential()
            .application_id(application)
            .name(name)
            .body(value.clone())
            .send()
            .await?;
        Ok(change.into_inner())
    }

    /// Removes credential `name` of an app.
    pub async fn remove_credential(
        &self,
        application: NonZeroU64,
        name: &str,
    ) -> Result<CredentialChange, Error> {
        let name: RemoveCredentialName = name.parse().map_err(invalid)?;
        Ok(self
            .client
            .remove_credential()
            .application_id(application)
            .name(name)
            .send()
            .await?
            .into_inner())
    }

    /// The priced usage statement of `period` (`YYYY-MM`), or of the current month.
    pub async fn statement(&self, period: Option<&str>) -> Result<UsageStatement, Error> {
        let mut request = self.client.get_statement();
        if let Some(period) = period {
            let period: GetStatementPeriod = period.parse().map_err(invalid)?;
            request = request.period(period);
        }
        Ok(request.send().await?.into_inner())
    }
}
