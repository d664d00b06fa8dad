//! What a check acts on and sends where the deployment's catalog and runtime decide what is
//! valid: the subjects the run made or found (a Build request, an install, a skill call, a
//! concrete path) and the inputs it sends (the config file's `inputs`, [`crate::inputs`]).
//!
//! A configured input ([`crate::inputs::Inputs`]) is sent as given. Without one, a check sends
//! openapi.json's reference example, but only where the deployment's catalog lists the app and
//! operations (or the skill operation) it names; otherwise the check skips and says which key to
//! set.

use reqwest::Method;
use serde_json::Value;

use crate::finding::{Finding, skip};
use crate::inputs::{AppOperation, Install, SkillCall};
use crate::spec::{Operation, spec};
use crate::target::{Role, Target};

/// The message that makes the reference runtime raise an action.
pub const REFERENCE_ACTION_CHAT: &str = "send 1 USDC to 0x70997970C51812dc3A010C7d01b50e0d17dc79C8";

/// The config key of the build request input of the lifecycle endpoint at `path`, and its
/// configured value.
fn configured<'a>(target: &'a Target, path: &str) -> (&'static str, Option<&'a Value>) {
    let inputs = &target.settings.inputs;
    match path {
        "/v1/pipeline/svm/stage" => ("svmStage", inputs.svm_stage.as_ref()),
        _ => ("evmBuild", inputs.evm_build.as_ref()),
    }
}

/// openapi.json's build request example of the lifecycle endpoint at `path`.
pub(crate) fn reference_build_request(path: &str) -> Result<Value, Finding> {
    spec()
        .request_example("POST", path, "operations")
        .ok_or_else(|| {
            Finding::Error(format!(
                "openapi.json has no build request example for {path}"
            ))
        })
}

/// A build request body for the lifecycle endpoint at `path`, as given: the configured
/// `evmBuild` or `svmStage`, else openapi.json's example, whether or not the catalog lists
/// what it names.
pub fn given_build_request(target: &Target, path: &str) -> Result<Value, Finding> {
    match configured(target, path) {
        (_, Some(body)) => Ok(body.clone()),
        (_, None) => reference_build_request(path),
    }
}

/// A build request body for the lifecycle endpoint at `path`: the configured `evmBuild` or
/// `svmStage`, else openapi.json's example where the catalog lists its app and operations.
pub async fn build_request(target: &Target, path: &str) -> Result<Value, Finding> {
    let key = match configured(target, path) {
        (_, Some(body)) => return Ok(body.clone()),
        (key, None) => key,
    };
    let request = reference_build_request(path)?;
    let app = request["app"].as_str().unwrap_or_default();
    let operations: Vec<&str> = request["operations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|operation| operation["operation"].as_str())
        .collect();
    let catalog = listing(target, "/v1/pipeline/apps", "apps").await?;
    if !operations
        .iter()
        .all(|operation| lists(&catalog, app, operation))
    {
        return skip(format!(
            "the catalog lacks the reference app {app}'s {}; set inputs.{key} in the config file",
            operations.join(", ")
        ));
    }
    Ok(request)
}

/// The app operation to read: the configured `appOperation`, else the app and first operation
/// of openapi.json's build request example where the catalog lists them. A configured
/// `evmBuild` is the deployment's own shape, which the suite does not read names from.
pub async fn app_operation(target: &Target) -> Result<AppOperation, Finding> {
    let inputs = &target.settings.inputs;
    if let Some(named) = &inputs.app_operation {
        return Ok(named.clone());
    }
    if inputs.evm_build.is_some() {
        return skip(
            "needs an app operation of the deployment's catalog; set inputs.appOperation (`{\"app\", \"operation\"}`) in the config file",
        );
    }
    let request = build_request(target, "/v1/pipeline/evm/build")
        .await
        .map_err(|finding| match finding {
            Finding::Skip(reason) => Finding::Skip(format!(
                "{reason}, or inputs.appOperation (`{{\"app\", \"operation\"}}`)"
            )),
            other => other,
        })?;
    let name = |pointer: &str| {
        request
            .pointer(pointer)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    match (name("/app"), name("/operations/0/operation")) {
        (Some(app), Some(operation)) => Ok(AppOperation { app, operation }),
        _ => Err(Finding::Error(
            "openapi.json's build request example names no app and operation".into(),
        )),
    }
}

/// Whether `entries` (apps or skills) hold `name` with the operation `operation`.
pub(crate) fn lists(entries: &[Value], name: &str, operation: &str) -> bool {
    entries
        .iter()
        .filter(|entry| entry["name"] == name)
        .flat_map(|entry| entry["operations"].as_array().into_iter().flatten())
        .any(|listed| listed["name"] == operation)
}

/// The entries under `member` of the catalog list at `path`.
async fn listing(target: &Target, path: &str, member: &str) -> Result<Vec<Value>, Finding> {
    let token = target.role(Role::Pipeline).await?;
    let reply = target
        .request(Method::GET, path)
        .bearer(&token)
        .send()
        .await?;
    if reply.status != 200 {
        // `pipeline.apps` judges the catalog; here it only tells which inputs to send.
        return skip(format!(
            "GET {path} answered {}, so the catalog cannot tell whether the reference inputs \
             apply; set inputs in the config file",
            reply.status
        ));
    }
    Ok(reply.body[member].as_array().cloned().unwrap_or_default())
}

/// The skill operation to call: the configured `skillCall`, else openapi.json's examples of
/// the skill call where the skill list holds that operation.
pub async fn skill_call(target: &Target) -> Result<SkillCall, Finding> {
    if let Some(call) = &target.settings.inputs.skill_call {
        return Ok(call.clone());
    }
    let example = |parameter: &str| {
        spec()
            .element(&format!("#/components/parameters/{parameter}/example"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (skill, operation) = (example("Skill"), example("SkillOperation"));
    let template = "/v1/pipeline/skills/{skill}/operations/{operation}";
    let input = spec()
        .request_examples("POST", template)
        .first()
        .map(|input| (*input).clone())
        .ok_or_else(|| Finding::Error(format!("openapi.json has no example for {template}")))?;
    let skills = listing(target, "/v1/pipeline/skills", "skills").await?;
    if !lists(&skills, &skill, &operation) {
        return skip(format!(
            "the skill list lacks the reference skill {skill}'s {operation}; set inputs.skillCall \
             in the config file"
        ));
    }
    Ok(SkillCall {
        skill,
        operation,
        input,
    })
}

/// A chat message that ends a turn: the configured `chat`, else `label`.
pub fn chat<'a>(target: &'a Target, label: &'a str) -> &'a str {
    target.settings.inputs.chat.as_deref().unwrap_or(label)
}

/// A chat message that makes the runtime raise an action: the configured `actionChat`, else
/// the reference runtime's.
pub fn action_chat(target: &Target) -> &str {
    target
        .settings
        .inputs
        .action_chat
        .as_deref()
        .unwrap_or(REFERENCE_ACTION_CHAT)
}

/// The app to install and its credentials: the configured `install`, else the first app of the
/// account's list that needs a credential, with a fresh value for each (kept as secrets).
pub async fn install(target: &Target) -> Result<Install, Finding> {
    if let Some(install) = &target.settings.inputs.install {
        for value in install.credentials.values() {
            target.secret(value);
        }
        return Ok(install.clone());
    }
    let token = target.role(Role::Account).await?;
    let reply = target
        .request(Method::GET, "/v1/account/apps")
        .bearer(&token)
        .send()
        .await?;
    if reply.status != 200 {
        // The app list is our profile's: a deployment without it is told to name the app.
        return skip(format!(
            "GET /v1/account/apps answered {}; set inputs.install in the config file",
            reply.status
        ));
    }
    let needing = reply.body["apps"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|app| {
            app["requiredCredentials"]
                .as_array()
                .is_some_and(|names| !names.is_empty())
        });
    let Some(app) = needing else {
        return skip("no listed app needs a credential; set inputs.install in the config file");
    };
    let credentials = app["requiredCredentials"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|name| {
            let value = super::fresh_key("secret");
            target.secret(&value);
            (name.to_owned(), value)
        })
        .collect();
    Ok(Install {
        application_id: app["id"].as_i64().unwrap_or(0),
        credentials,
    })
}

/// The path of `operation` on the deployment: `session` and `action` for their parameters, and
/// for every other one the run's own value where the document shows only an example (the app
/// operation it reads, the skill operation it calls, the app it installs
/// and the first credential that app needs), else that example. Each source the template needs
/// is read once.
pub(crate) async fn path_of(
    target: &Target,
    operation: &Operation,
    session: &str,
    action: &str,
) -> String {
    let template = &operation.template;
    let needs = |name: &str| template.contains(&format!("{{{name}}}"));
    let skill = match needs("skill") {
        true => skill_call(target).await.ok(),
        false => None,
    };
    let app = match needs("app") {
        true => app_operation(target).await.ok(),
        false => None,
    };
    let installed = match needs("applicationId") || needs("name") {
        true => install(target).await.ok(),
        false => None,
    };
    let object = spec()
        .operation_object(&operation.method, template)
        .expect("operations come from the document");
    let mut path = template.clone();
    for parameter in object["parameters"].as_array().into_iter().flatten() {
        let parameter = spec().resolve(parameter);
        if parameter["in"] != "path" {
            continue;
        }
        let name = parameter["name"].as_str().unwrap_or_default();
        let own = match name {
            "sessionId" => Some(session.to_owned()),
            "actionId" => Some(action.to_owned()),
            "skill" => skill.as_ref().map(|call| call.skill.clone()),
            "operation" if skill.is_some() => skill.as_ref().map(|call| call.operation.clone()),
            "app" => app.as_ref().map(|named| named.app.clone()),
            "operation" => app.as_ref().map(|named| named.operation.clone()),
            "applicationId" => installed.as_ref().map(|app| app.application_id.to_string()),
            "name" => installed
                .as_ref()
                .and_then(|app| app.credentials.keys().next().cloned()),
            _ => None,
        };
        let value = own.unwrap_or_else(|| match &parameter["example"] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        });
        path = path.replace(&format!("{{{name}}}"), &super::encode(&value));
    }
    path
}
