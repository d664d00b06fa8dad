//! Apps, credentials and the priced statement (part 4.3).

use reqwest::Method;
use serde_json::{Value, json};

use super::{read, run};
use crate::checks::{Category, Check};
use crate::finding::excerpt;
use crate::finding::{Verdict, ensure, profile};
use crate::target::{Role, Target};

pub(super) fn checks() -> Vec<Check> {
    vec![
        Check {
            id: "account.statement".into(),
            category: Category::Account,
            requirement: "The priced usage statement MUST be returned as JSON with a success status.",
            section: "4.3",
            rests_on: vec!["GET /v1/account/statement"],
            operation: None,
            run: run!(statement),
        },
        Check {
            id: "account.install-remove".into(),
            category: Category::Account,
            requirement: "Installing an app MUST be refused while a required credential is missing and MUST answer a JSON object once it is saved; removing a credential MUST answer a JSON object; no answer MUST carry a credential's value.",
            section: "4.3",
            rests_on: vec![
                "POST /v1/account/apps/{applicationId}",
                "DELETE /v1/account/apps/{applicationId}/secrets/{name}",
            ],
            operation: None,
            run: run!(install_and_remove),
        },
        Check {
            id: "account.install".into(),
            category: Category::Account,
            requirement: "Installing an app MUST be refused with 422 while a required credential is missing, MUST succeed once it is saved, the credential list MUST show it present, removing it MUST answer and list its absence, never its value, and the app list MUST show the app installed until it is uninstalled.",
            section: "4.3",
            rests_on: vec![
                "POST /v1/account/apps/{applicationId}",
                "DELETE /v1/account/apps/{applicationId}/secrets/{name}",
                "PUT /v1/account/apps/{applicationId}/secrets/{name}",
                "GET /v1/account/apps",
                "GET /v1/account/apps/{applicationId}/secrets",
            ],
            operation: None,
            run: run!(install),
        },
    ]
}

async fn statement(target: &Target) -> Verdict {
    let token = &target.role(Role::Account).await?;
    let reply = target
        .request(Method::GET, "/v1/account/statement")
        .bearer(token)
        .send()
        .await?;
    ensure(
        (200..300).contains(&reply.status) && !reply.body.is_null(),
        || {
            format!(
                "GET /v1/account/statement: {} {}, not a JSON statement",
                reply.status,
                excerpt(&reply.text)
            )
        },
    )?;
    profile(reply.status == 200 && reply.body.is_object(), || {
        format!(
            "the profile's statement is a 200 object: {} {}",
            reply.status,
            excerpt(&reply.text)
        )
    });
    Ok(())
}

async fn install_and_remove(target: &Target) -> Verdict {
    let token = &target.role(Role::Account).await?;
    let install = super::subjects::install(target).await?;
    let app_path = format!("/v1/account/apps/{}", install.application_id);
    let secret_path = |name: &str| format!("{app_path}/secrets/{name}");
    let call = |method: Method, path: String| target.request(method, &path).bearer(token).send();
    // From nothing installed and no credential saved (uninstalling is our profile's means): a
    // deployment that cannot uninstall may answer an app still installed with a success, so the
    // refusal while a credential is missing is judged only from nothing installed.
    let uninstalled = call(Method::DELETE, app_path.clone()).await?;
    let from_nothing = (200..300).contains(&uninstalled.status) || uninstalled.status == 404;
    for name in install.credentials.keys() {
        let removed = call(Method::DELETE, secret_path(name)).await?;
        ensure(
            (200..300).contains(&removed.status) && removed.body.is_object()
                || (400..500).contains(&removed.status) && removed.body.get("error").is_some(),
            || {
                format!(
                    "DELETE {}: {} {}, neither a JSON object nor a refusal in the envelope",
                    secret_path(name),
                    removed.status,
                    excerpt(&removed.text)
                )
            },
        )?;
    }
    let missing = call(Method::POST, app_path.clone()).await?;
    if from_nothing {
        ensure(
            (400..500).contains(&missing.status) && missing.body.get("error").is_some(),
            || {
                format!(
                    "POST {app_path} without its required credentials: {} {}, not a refusal in the envelope",
                    missing.status,
                    excerpt(&missing.text)
                )
            },
        )?;
    } else {
        crate::finding::warn(format!(
            "DELETE {app_path} answered {}, so the app may still be installed: the refusal of an install while a credential is missing was not judged",
            uninstalled.status
        ));
    }
    let means = &target.settings.means.credential;
    for (name, value) in &install.credentials {
        let path = means.path(install.application_id, name);
        let saved = target
            .request(means.http_method(), &path)
            .bearer(token)
            .json(&means.request(name, value))
            .send()
            .await?;
        let took = (200..300).contains(&saved.status);
        crate::finding::through_means("credential", took);
        if !took {
            return Err(crate::means::inconclusive(
                "credential",
                format!(
                    "saving a credential ({} {path}) was answered {}",
                    means.http_method(),
                    saved.status
                ),
            ));
        }
        target.made(&secret_path(name), token);
    }
    let installed = call(Method::POST, app_path.clone()).await?;
    ensure(
        (200..300).contains(&installed.status) && installed.body.is_object(),
        || {
            format!(
                "POST {app_path} with its credentials saved: {} {}, not a JSON object",
                installed.status,
                excerpt(&installed.text)
            )
        },
    )?;
    let values: Vec<&String> = install.credentials.values().collect();
    for name in install.credentials.keys() {
        let removed = call(Method::DELETE, secret_path(name)).await?;
        ensure(
            (200..300).contains(&removed.status) && removed.body.is_object(),
            || {
                format!(
                    "DELETE {}: {} {}, not a JSON object",
                    secret_path(name),
                    removed.status,
                    excerpt(&removed.text)
                )
            },
        )?;
        ensure(
            !values.iter().any(|value| {
                installed.text.contains(value.as_str()) || removed.text.contains(value.as_str())
            }),
            || "an answer carries a credential's value".into(),
        )?;
    }
    Ok(())
}

async fn install(target: &Target) -> Verdict {
    let token = &target.role(Role::Account).await?;
    let install = super::subjects::install(target).await?;
    let id = install.application_id;
    let app_path = format!("/v1/account/apps/{id}");
    let secret_path = |name: &str| format!("/v1/account/apps/{id}/secrets/{name}");
    let remove = |name: &str| {
        target
            .request(Method::DELETE, &secret_path(name))
            .bearer(token)
            .send()
    };
    let names: Vec<&str> = install.credentials.keys().map(String::as_str).collect();
    for name in &names {
        let cleared = remove(name).await?;
        ensure([200, 404].contains(&cleared.status), || {
            format!(
                "DELETE {} before the check: {} {}",
                secret_path(name),
                cleared.status,
                cleared.text
            )
        })?;
    }
    target
        .request(Method::POST, &app_path)
        .bearer(token)
        .send()
        .await?
        .ensure_status(
            422,
            &format!("POST {app_path} without {}", names.join(", ")),
        )?;
    for (name, value) in &install.credentials {
        target
            .request(Method::PUT, &secret_path(name))
            .bearer(token)
            .json(&json!({ "value": value }))
            .send()
            .await?
            .ensure_status(200, &format!("PUT {}", secret_path(name)))?;
        present(target, token, id, name, true).await?;
    }
    let installed = target
        .request(Method::POST, &app_path)
        .bearer(token)
        .send()
        .await?;
    installed.ensure_status(
        200,
        &format!("POST {app_path} with {} saved", names.join(", ")),
    )?;
    ensure(installed.body.is_object(), || {
        "the installation is not a JSON object".into()
    })?;
    listed(target, token, id, true).await?;
    for name in &names {
        let removed = remove(name).await?;
        removed.ensure_status(200, &format!("DELETE {}", secret_path(name)))?;
        ensure(
            removed.body.is_object() && removed.body["present"] != Value::Bool(true),
            || format!("after removal: {}", removed.text),
        )?;
        present(target, token, id, name, false).await?;
    }
    let seen = target.seen();
    let leaked: Vec<_> = seen
        .iter()
        .filter(|seen| {
            let body = seen.body.to_string();
            install
                .credentials
                .values()
                .any(|value| body.contains(value))
        })
        .collect();
    crate::finding::cite(leaked.iter().map(|seen| &seen.exchange));
    ensure(leaked.is_empty(), || {
        "a response carried a credential's value".into()
    })?;
    target
        .request(Method::DELETE, &app_path)
        .bearer(token)
        .send()
        .await?
        .ensure_status(200, &format!("DELETE {app_path} after the check"))?;
    listed(target, token, id, false).await
}

/// Fails unless the app list shows app `id` with `installed` as `expected`.
async fn listed(target: &Target, token: &str, id: i64, expected: bool) -> Verdict {
    let entry = ("id", json!(id), "installed");
    shows(target, token, "/v1/account/apps", "apps", entry, expected).await
}

/// Fails unless the credential list of app `id` shows `name` with presence `expected`.
async fn present(target: &Target, token: &str, id: i64, name: &str, expected: bool) -> Verdict {
    let path = format!("/v1/account/apps/{id}/secrets");
    let entry = ("name", json!(name), "present");
    shows(target, token, &path, "credentials", entry, expected).await
}

/// Fails unless `GET path` lists under `list` the entry whose `key` is `value`, with `member`
/// equal to `expected`.
async fn shows(
    target: &Target,
    token: &str,
    path: &str,
    list: &str,
    (key, value, member): (&str, Value, &str),
    expected: bool,
) -> Verdict {
    let shown = read(target, token, path).await?[list]
        .as_array()
        .into_iter()
        .flatten()
        .find(|entry| entry[key] == value)
        .map(|entry| entry[member].clone());
    ensure(shown == Some(Value::Bool(expected)), || {
        format!("GET {path} lists {key} {value} with {member} {shown:?}; expected {expected}")
    })
}
