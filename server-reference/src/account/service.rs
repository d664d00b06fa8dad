//! The Account service: installed applications, their credentials and the usage statement.

use std::num::NonZeroU64;
use std::sync::Arc;

use intent_models::{
    AccountApp, AccountAppList, AppInstallation, CredentialChange, CredentialList,
    CredentialStatus, Money, StatementLine, StatementLineMeter, StatementPeriod, UsageStatement,
    UsageStatementCurrency,
};

use super::catalog::{self, AppSpec};
use super::{Error, Result, statement};
use crate::clock::now;
use crate::ids::{AccountId, ApplicationId, CredentialName};
use crate::keys::sealer::Sealer;
use crate::store::{Meter, Store};

/// Owns each account's installations and credentials (sealed with the sealer's key, never
/// shown again) and prices its metered usage.
pub struct Account {
    store: Arc<Store>,
    sealer: Sealer,
}

impl Account {
    /// The Account service over `store`, sealing credentials with `sealer`.
    pub fn new(store: Arc<Store>, sealer: Sealer) -> Self {
        Self { store, sealer }
    }

    /// Every application of the catalog, with whether `account` installed it.
    pub async fn apps(&self, account: &AccountId) -> Result<AccountAppList> {
        let installed = self.store.installations(account).await?;
        let apps = catalog::APPS
            .iter()
            .map(|app| {
                let installed_at = installed
                    .iter()
                    .find(|(id, _)| *id == app.id)
                    .map(|(_, at)| *at);
                AccountApp::builder()
                    .id(app_id(app))
                    .name(app.name)
                    .description(app.description)
                    .installed(installed_at.is_some())
                    .installed_at(installed_at)
                    .required_credentials(
                        app.credentials
                            .iter()
                            .filter(|c| c.required)
                            .map(|c| c.name.to_owned())
                            .collect::<Vec<_>>(),
                    )
                    .try_into()
            })
            .collect::<Result<Vec<AccountApp>, _>>()?;
        Ok(AccountAppList::builder().apps(apps).try_into()?)
    }

    /// Installs application `id` for `account`, once its required credentials are saved.
    pub async fn install(&self, account: &AccountId, id: ApplicationId) -> Result<AppInstallation> {
        let app = find_application(id)?;
        let present = self.store.credentials(account, app.id).await?;
        let missing: Vec<&str> = app
            .credentials
            .iter()
            .filter(|c| c.required && !present.iter().any(|p| p.name == c.name))
            .map(|c| c.name)
            .collect();
        if !missing.is_empty() {
            return Err(Error::CredentialsMissing { missing });
        }
        let installed_at = self.store.install(account, app.id, now()).await?;
        Ok(AppInstallation::builder()
            .application_id(app_id(app))
            .installed(true)
            .installed_at(installed_at)
            .try_into()?)
    }

    /// Uninstalls application `id` for `account`.
    pub async fn uninstall(
        &self,
        account: &AccountId,
        id: ApplicationId,
    ) -> Result<AppInstallation> {
        let app = find_application(id)?;
        self.store.uninstall(account, app.id).await?;
        Ok(AppInstallation::builder()
            .application_id(app_id(app))
            .installed(false)
            .installed_at(None::<i64>)
            .try_into()?)
    }

    /// The credentials application `id` declares, with whether `account` saved each.
    pub async fn credentials(
        &self,
        account: &AccountId,
        id: ApplicationId,
    ) -> Result<CredentialList> {
        let app = find_application(id)?;
        let present = self.store.credentials(account, app.id).await?;
        let credentials = app
            .credentials
            .iter()
            .map(|spec| {
                let updated_at = present
                    .iter()
                    .find(|p| p.name == spec.name)
                    .map(|p| p.updated_at);
                CredentialStatus::builder()
                    .name(spec.name)
                    .description(spec.description)
                    .required(spec.required)
                    .present(updated_at.is_some())
                    .updated_at(updated_at)
                    .try_into()
            })
            .collect::<Result<Vec<CredentialStatus>, _>>()?;
        Ok(CredentialList::builder()
            .application_id(app_id(app))
            .credentials(credentials)
            .try_into()?)
    }

    /// Saves `value` as `account`'s credential `name` of application `id`, sealed.
    pub async fn save_credential(
        &self,
        account: &AccountId,
        id: ApplicationId,
        name: &CredentialName,
        value: &str,
    ) -> Result<CredentialChange> {
        let (app, name) = credential(id, name)?;
        let sealed = self
            .sealer
            .seal(&sealing_context(account, app, name), value);
        self.store
            .save_credential(account, app.id, name, &sealed, now())
            .await?;
        Ok(credential_change(app, name, true)?)
    }

    /// Removes `account`'s credential `name` of application `id`.
    pub async fn remove_credential(
        &self,
        account: &AccountId,
        id: ApplicationId,
        name: &CredentialName,
    ) -> Result<CredentialChange> {
        let (app, name) = credential(id, name)?;
        if !self.store.remove_credential(account, app.id, name).await? {
            return Err(Error::NotFound(format!(
                "no credential {name} is saved for this application"
            )));
        }
        Ok(credential_change(app, name, false)?)
    }

    /// `account`'s priced usage in `period` (a month as `YYYY-MM`; the current one by default).
    pub async fn statement(
        &self,
        account: &AccountId,
        period: Option<&str>,
    ) -> Result<UsageStatement> {
        let month = match period {
            None => statement::Month::containing(now()),
            Some(text) => statement::Month::parse(text).ok_or_else(|| {
                Error::InvalidParameter("period must be a month as YYYY-MM".to_owned())
            })?,
        };
        let (start, end) = month.bounds();
        let usage = self.store.usage(account, start, end).await?;
        let mut total = 0;
        let lines = Meter::ALL
            .into_iter()
            .map(|meter| {
                let quantity = usage
                    .iter()
                    .find(|(m, _)| *m == meter)
                    .map_or(0, |(_, n)| *n);
                let price = statement::unit_price_millis(meter);
                total += quantity * price;
                StatementLine::builder()
                    .meter(statement_meter(meter))
                    .quantity(quantity)
                    .unit_price(money(price))
                    .amount(money(quantity * price))
                    .try_into()
            })
            .collect::<Result<Vec<StatementLine>, _>>()?;
        let period: StatementPeriod = StatementPeriod::builder()
            .start(start)
            .end(end)
            .try_into()?;
        Ok(UsageStatement::builder()
            .period(period)
            .currency(UsageStatementCurrency::Usd)
            .lines(lines)
            .total(money(total))
            .try_into()?)
    }
}

/// The application `id` names: 404 for an unknown one.
fn find_application(id: ApplicationId) -> Result<&'static AppSpec> {
    catalog::app(id.get()).ok_or_else(|| Error::NotFound(format!("no application {}", id.get())))
}

/// The application and a credential name it declares.
fn credential(
    id: ApplicationId,
    name: &CredentialName,
) -> Result<(&'static AppSpec, &'static str)> {
    let app = find_application(id)?;
    let spec = app.credential(name.as_str()).ok_or_else(|| {
        Error::NotFound(format!(
            "application {} declares no credential {name}",
            app.id
        ))
    })?;
    Ok((app, spec.name))
}

/// What a sealed value is bound to: it opens for this account, application and name only.
fn sealing_context(account: &AccountId, app: &AppSpec, name: &str) -> String {
    format!("{account}\u{0}{}\u{0}{name}", app.id)
}

fn credential_change(
    app: &AppSpec,
    name: &str,
    present: bool,
) -> Result<CredentialChange, intent_models::error::ConversionError> {
    CredentialChange::builder()
        .application_id(app_id(app))
        .name(name)
        .present(present)
        .try_into()
}

fn app_id(app: &AppSpec) -> NonZeroU64 {
    NonZeroU64::new(app.id.unsigned_abs()).expect("catalog ids start at 1")
}

fn money(millis: i64) -> Money {
    statement::format_millis(millis)
        .parse()
        .expect("formatted money matches the Money pattern")
}

fn statement_meter(meter: Meter) -> StatementLineMeter {
    match meter {
        Meter::Turn => StatementLineMeter::Turn,
        Meter::Build => StatementLineMeter::Build,
        Meter::Simulation => StatementLineMeter::Simulation,
        Meter::Commit => StatementLineMeter::Commit,
    }
}

#[cfg(test)]
mod tests {
    use intent_models::ErrorCode;

    use super::*;

    #[test]
    fn unknown_applications_are_absent() {
        let id = |n: &str| ApplicationId::try_from(n.to_owned()).unwrap();
        assert_eq!(
            find_application(id("999")).unwrap_err().code(),
            ErrorCode::NotFound
        );
        assert_eq!(find_application(id("1")).unwrap().name, "price-feeds");
    }

    #[test]
    fn every_catalog_credential_name_is_valid() {
        for app in catalog::APPS {
            for credential in app.credentials {
                let name = CredentialName::try_from(credential.name.to_owned());
                assert!(name.is_ok(), "{}", credential.name);
            }
        }
    }
}
