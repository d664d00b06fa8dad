//! Apps, credentials and the priced statement (part 4.3).

use reqwest::Method;
use serde_json::{Value, json};

use super::{read, run};
use crate::check::{Category, Check};
use crate::finding::{Verdict, ensure};
use crate::target::{Role, Target};

pub(super) fn checks() -> Vec<Check> {
    vec![
        Check {
            id: "account.statement",
            category: Category::Account,
            requirement: "The priced usage statement MUST be returned with 200 as a JSON object.",
            section: "4.3",
            rests_on: &["GET /v1/account/statement"],
            operation: None,
            run: run!(statement),
        },
        Check {
            id: "account.install",
            category: Category::Account,
            requirement: "Installing an app MUST be refused with 422 while a required credential is missing, MUST succeed once it is saved, the credential list MUST show it present, removing it MUST answer and list its absence, never its value, and the app list MUST show the app installed until it is uninstalled.",
            section: "4.3",
            rests_on: &[
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
    reply.expect(200, "GET /v1/account/statement")?;
    ensure(reply.body.is_object(), || {
        format!("the statement is {}", crate::target::excerpt(&reply.text))
    })
}

async fn install(target: &Target) -> Verdict {
    let token = &target.role(Role::Account).await?;
    let install = crate::inputs::install(target).await?;
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
        .expect(
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
            .expect(200, &format!("PUT {}", secret_path(name)))?;
        present(target, token, id, name, true).await?;
    }
    let installed = target
        .request(Method::POST, &app_path)
        .bearer(token)
        .send()
        .await?;
    installed.expect(
        200,
        &format!("POST {app_path} with {} saved", names.join(", ")),
    )?;
    ensure(installed.body.is_object(), || {
        "the installation is not a JSON object".into()
    })?;
    listed(target, token, id, true).await?;
    for name in &names {
        let removed = remove(name).await?;
        removed.expect(200, &format!("DELETE {}", secret_path(name)))?;
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
        .expect(200, &format!("DELETE {app_path} after the check"))?;
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
