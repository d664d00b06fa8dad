//! Builds, their digest and commit (parts 2.1, 2.10, 3, 4.1 and 7).

use std::collections::HashSet;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{DecodingKey, Validation};
use reqwest::Method;
use serde_json::{Value, json};

use super::subjects::{build_request, lists, reference_build_request};
use super::{Tried, alter_signature, nanos, read, run, text, tried};
use crate::checks::{Category, Check};
use crate::finding::{Broke, Finding, Verdict, ensure, fail, profile, skip};
use crate::means::inconclusive;
use crate::spec::spec;
use crate::target::{Account, Reply, Role, Target, TokenRequest};

pub(super) const EVM: &str = "/v1/pipeline/evm/build";
pub(super) const SVM: &str = "/v1/pipeline/svm/stage";

pub(super) fn checks() -> Vec<Check> {
    vec![
        Check {
            id: "pipeline.build".into(),
            category: Category::Pipeline,
            requirement: "A build request MUST be answered with a Build of version 2, status `staged` or `simulated`, a future `expiresAt`, a `sha256:` digest and an attestation.",
            section: "2.1, 4.1",
            rests_on: vec!["POST /v1/pipeline/evm/build"],
            operation: None,
            run: run!(build),
        },
        Check {
            id: "pipeline.digest".into(),
            category: Category::Pipeline,
            requirement: "A Build's digest MUST be `sha256:` and the hex SHA-256 of the RFC 8785 form of the Build without `digest` and `attestation`.",
            section: "2.1",
            rests_on: vec![
                "POST /v1/pipeline/evm/build",
                "#/components/schemas/PipelineBuild/properties/digest/description",
            ],
            operation: None,
            run: run!(digest),
        },
        Check {
            id: "pipeline.attestation".into(),
            category: Category::Pipeline,
            requirement: "A Build's attestation MUST be a compact JWS, signed by the key its `kid` names in the issuer's JWKS (`jwks_uri` of its authorization-server metadata), over the Build's digest, app and expiry.",
            section: "2.1",
            rests_on: vec![
                "POST /v1/pipeline/evm/build",
                "#/components/schemas/PipelineBuild/properties/attestation/x-profile-note",
            ],
            operation: None,
            run: run!(attestation),
        },
        Check {
            id: "pipeline.apps".into(),
            category: Category::Pipeline,
            requirement: "The app catalog MUST list the app and operation that assemble a Build.",
            section: "4.1",
            rests_on: vec!["GET /v1/pipeline/apps"],
            operation: None,
            run: run!(apps),
        },
        Check {
            id: "pipeline.skill-call".into(),
            category: Category::Pipeline,
            requirement: "A skill operation called with input valid against its `inputSchema` MUST answer 200 with a JSON value (an object is a profile assertion).",
            section: "4.1",
            rests_on: vec!["POST /v1/pipeline/skills/{skill}/operations/{operation}"],
            operation: None,
            run: run!(skill_call),
        },
        Check {
            id: "pipeline.commit".into(),
            category: Category::Pipeline,
            requirement: "A fresh Build presented back to its lifecycle endpoint MUST be revalidated, re-simulated and committed (that what it committed changes what the chain simulates next is a profile assertion).",
            section: "1, 3",
            rests_on: vec!["POST /v1/pipeline/evm/build"],
            operation: None,
            run: run!(commit),
        },
        Check {
            id: "pipeline.commit-resimulates".into(),
            category: Category::Pipeline,
            requirement: "A commit MUST re-simulate the Build against the chain as it then is: of two Builds that each pass alone but together overspend an account, the second MUST NOT be committed as passing: refused in the envelope, or answered with a simulation that failed (the refusal is a profile assertion).",
            section: "1, 3",
            rests_on: vec!["POST /v1/pipeline/evm/build"],
            operation: None,
            run: run!(resimulates),
        },
        Check {
            id: "pipeline.svm".into(),
            category: Category::Pipeline,
            requirement: "The SVM lifecycle endpoint MUST answer a stage input with a Build, whose simulation, where it carries one, is an object, and commit it when presented back (a simulation on every Build is a profile assertion).",
            section: "1, 4.1",
            rests_on: vec!["POST /v1/pipeline/svm/stage"],
            operation: None,
            run: run!(svm),
        },
        Check {
            id: "pipeline.commit-tampered".into(),
            category: Category::Pipeline,
            requirement: "A Build changed in any way after it was issued (its actions, digest, attestation or expiry), or presented by another account than its owner, MUST NOT be committed.",
            section: "2.1, 3",
            rests_on: vec!["POST /v1/pipeline/evm/build"],
            operation: None,
            run: run!(tampered),
        },
        Check {
            id: "pipeline.commit-expired".into(),
            category: Category::Pipeline,
            requirement: "A Build presented for commit after its `expiresAt` MUST be rejected with an error envelope.",
            section: "3, 7.6",
            rests_on: vec!["POST /v1/pipeline/evm/build"],
            operation: None,
            run: run!(expired),
        },
        Check {
            id: "pipeline.operation-descriptor".into(),
            category: Category::Pipeline,
            requirement: "Reading an app operation MUST return an Operation descriptor: an object whose `kind` is `operation`, `name` a string, `method` an HTTP method, `href` a string and `inputSchema` an object (an `href` under `/v1` is a profile assertion).",
            section: "2.10, 4.1",
            rests_on: vec!["GET /v1/pipeline/apps/{app}/operations/{operation}"],
            operation: None,
            run: run!(operation_descriptor),
        },
        Check {
            id: "pipeline.skill-input".into(),
            category: Category::Pipeline,
            requirement: "A skill operation call whose body does not hold against the operation's input schema MUST be refused with 400.",
            section: "4.1",
            rests_on: vec![
                "POST /v1/pipeline/skills/{skill}/operations/{operation}",
                "GET /v1/pipeline/skills",
            ],
            operation: None,
            run: run!(skill_input),
        },
    ]
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs() as i64)
}

async fn lifecycle(
    target: &Target,
    token: &str,
    path: &str,
    body: &Value,
) -> Result<Reply, Finding> {
    target
        .request(Method::POST, path)
        .bearer(token)
        .json(body)
        .send()
        .await
}

/// Presents `build` for commit at `path`, as `profile.commit` says.
async fn present(
    target: &Target,
    token: &str,
    path: &str,
    build: &Value,
) -> Result<Reply, Finding> {
    let body = target.settings.means.commit.request(build);
    lifecycle(target, token, path, &body).await
}

/// Commits the fresh `build` at `path`: a 2xx outside the error envelope. A refusal (4xx) of a
/// fresh Build is the commit means refused, which makes the check inconclusive.
async fn commit_fresh(
    target: &Target,
    token: &str,
    path: &str,
    build: &Value,
) -> Result<Reply, Finding> {
    let reply = present(target, token, path, build).await?;
    crate::finding::through_means("commit", (200..300).contains(&reply.status));
    if (400..500).contains(&reply.status) {
        return Err(inconclusive(
            "commit",
            format!(
                "a fresh Build presented for commit at {path} was refused: {} {}",
                reply.status,
                crate::finding::excerpt(&reply.text)
            ),
        ));
    }
    ensure(
        // The commit result's shape is not shown: only a non-null `error` reads as a refusal.
        (200..300).contains(&reply.status) && reply.body.get("error").is_none_or(Value::is_null),
        || {
            format!(
                "committing a fresh Build at {path}: {} {}",
                reply.status,
                crate::finding::excerpt(&reply.text)
            )
        },
    )?;
    Ok(reply)
}

/// A Build made from the endpoint's build request input.
async fn fresh_build(target: &Target, token: &str, path: &str) -> Result<Value, Finding> {
    build_from(target, token, path, build_request(target, path).await?).await
}

/// A Build no other check makes: the reference example sent to a recipient no run used (a
/// Build of the same request in the same second is the same Build, which commits once). A
/// configured request is the deployment's own, sent as it is.
async fn unique_build(target: &Target, token: &str, path: &str) -> Result<Value, Finding> {
    let mut request = build_request(target, path).await?;
    if target.settings.inputs.evm_build.is_none() {
        to_fresh_recipient(&mut request);
    }
    build_from(target, token, path, request).await
}

/// `request` sent to a recipient no run used, where it names one (its first operation's `to`).
fn to_fresh_recipient(request: &mut Value) {
    if let Some(to) = request.pointer_mut("/operations/0/input/to") {
        *to = json!(format!("0x{:040x}", nanos()));
    }
}

/// How many times a Build another check of this process made already is built again.
const REBUILDS: usize = 3;

/// A Build made from `request` that no other check of this process has made on this deployment:
/// a Build of the same request in the same second is the same Build, which commits once, so a
/// digest made before is built again a second later (a configured request is the deployment's
/// own, sent as it is). Runs against other deployments (such as tests' servers, each with its own
/// key and store) never wait on each other.
async fn build_from(
    target: &Target,
    token: &str,
    path: &str,
    request: Value,
) -> Result<Value, Finding> {
    static MADE: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Mutex::default);
    let mut build = build_once(target, token, path, &request).await?;
    for _ in 0..REBUILDS {
        let digest = build["digest"].as_str().unwrap_or_default();
        let made = format!("{} {digest}", target.base());
        if MADE.lock().expect("the digests made").insert(made) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1100)).await;
        build = build_once(target, token, path, &request).await?;
    }
    Ok(build)
}

/// A Build made from `request`.
async fn build_once(
    target: &Target,
    token: &str,
    path: &str,
    request: &Value,
) -> Result<Value, Finding> {
    let reply = lifecycle(target, token, path, request).await?;
    if (400..500).contains(&reply.status) {
        // The fields of a build request are not shown (part 4.1): the input is the deployment's.
        let key = if path == SVM { "svmStage" } else { "evmBuild" };
        return skip(format!(
            "inconclusive: POST {path} refused the build request with {}; set inputs.{key} in \
             the config file",
            reply.status
        ));
    }
    reply.ensure_status(
        200,
        &format!(
            "POST {path} {}",
            crate::finding::excerpt(&request.to_string())
        ),
    )?;
    let Some(schema) = spec().normative_component("PipelineBuild") else {
        return Err(Finding::Error("no PipelineBuild schema".into()));
    };
    let errors = schema.errors(&reply.body);
    if !errors.is_empty() {
        let violations = schema.violations(&reply.body);
        crate::finding::breaking(violations.iter().map(|v| Broke::schema(None, v)));
    }
    ensure(errors.is_empty(), || {
        format!(
            "POST {path} answered a build request with no Build: {}",
            errors.join("; ")
        )
    })?;
    Ok(reply.body)
}

async fn build(target: &Target) -> Verdict {
    let token = &target.role(Role::Pipeline).await?;
    let request = build_request(target, EVM).await?;
    let build = build_from(target, token, EVM, request.clone()).await?;
    ensure(build["version"] == 2, || {
        format!("version {}", build["version"])
    })?;
    let status = text(&build, "/status")?;
    ensure(["staged", "simulated"].contains(&status), || {
        format!("status {status:?}")
    })?;
    profile(build["origin"]["app"] == request["app"], || {
        format!(
            "origin.app {} for the profile's request of app {}",
            build["origin"]["app"], request["app"]
        )
    });
    // A Build lives until `expiresAt` (part 8): one already past it, beyond the clocks' skew,
    // could never be committed.
    let expires = build["expiresAt"].as_i64().unwrap_or(0);
    ensure(expires + CLOCK_SKEW > now(), || {
        format!("expiresAt {expires} is past, by more than {CLOCK_SKEW} s of clock skew")
    })?;
    let digest = text(&build, "/digest")?;
    ensure(
        digest.len() == 71
            && digest.starts_with("sha256:")
            && digest[7..]
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        || format!("digest {digest:?}"),
    )?;
    let attestation = text(&build, "/attestation")?;
    profile(!attestation.is_empty(), || {
        "an empty attestation, where the profile's authenticates the Build".into()
    });
    Ok(())
}

/// How far the deployment's clock may be from the suite's, in seconds.
const CLOCK_SKEW: i64 = 5;

async fn digest(target: &Target) -> Verdict {
    let token = &target.role(Role::Pipeline).await?;
    for path in [EVM, SVM] {
        let build = fresh_build(target, token, path).await?;
        let object = build
            .as_object()
            .ok_or_else(|| crate::finding::failure("a Build that is not an object"))?;
        let expected = intent_models::digest::build_digest(object);
        ensure(build["digest"] == expected.as_str(), || {
            format!(
                "{path}: digest {} but the content hashes to {expected}",
                build["digest"]
            )
        })?;
    }
    Ok(())
}

/// What an attestation asserts, as far as the check compares it with the Build.
#[derive(serde::Deserialize)]
struct Attested {
    digest: String,
    app: String,
    exp: i64,
}

async fn attestation(target: &Target) -> Verdict {
    let token = &target.role(Role::Pipeline).await?;
    let metadata = "/.well-known/oauth-authorization-server";
    let reply = target.request(Method::GET, metadata).send().await?;
    let jwks_uri = text(&reply.ensure_status(200, metadata)?.body, "/jwks_uri")?;
    let response = target.http().get(jwks_uri).send().await;
    let jwks: JwkSet = match response {
        Ok(response) => response.json().await,
        Err(error) => Err(error),
    }
    .map_err(|e| crate::finding::failure(format!("GET {jwks_uri}: {e}")))?;
    for path in [EVM, SVM] {
        let build = fresh_build(target, token, path).await?;
        let jws = text(&build, "/attestation")?;
        let header = jsonwebtoken::decode_header(jws).map_err(|e| {
            crate::finding::failure(format!("{path}: the attestation is not a JWS: {e}"))
        })?;
        let kid = header.kid.unwrap_or_default();
        let jwk = jwks.find(&kid).ok_or_else(|| {
            crate::finding::failure(format!(
                "{path}: the JWKS has no key {kid:?}, which signed the attestation"
            ))
        })?;
        let key = DecodingKey::from_jwk(jwk)
            .map_err(|e| crate::finding::failure(format!("the JWKS key {kid:?}: {e}")))?;
        let mut validation = Validation::new(header.alg);
        validation.validate_exp = false;
        validation.required_spec_claims.clear();
        let attested: Attested = jsonwebtoken::decode(jws, &key, &validation)
            .map_err(|e| {
                crate::finding::failure(format!("{path}: the attestation does not verify: {e}"))
            })?
            .claims;
        let asserted = json!([attested.digest, attested.app, attested.exp]);
        let content = json!([build["digest"], build["origin"]["app"], build["expiresAt"]]);
        ensure(asserted == content, || {
            format!(
                "{path}: the attestation asserts digest, app and expiry {asserted}; the Build has {content}"
            )
        })?;
    }
    Ok(())
}

async fn commit(target: &Target) -> Verdict {
    let token = &target.role(Role::Pipeline).await?;
    let mut request = build_request(target, EVM).await?;
    // A recipient no run used, so that no other commit shares the Build.
    to_fresh_recipient(&mut request);
    let build = build_from(target, token, EVM, request.clone()).await?;
    commit_once(target, token, EVM, &build).await?;
    if target.settings.inputs.evm_build.is_some() {
        // What a configured operation changes on its chain is the deployment's to know.
        return Ok(());
    }
    // The reference example is a token transfer: its first transfer to a fresh recipient writes
    // the recipient's zero balance, so once it is committed the same transfer needs less gas.
    let again = build_from(target, token, EVM, request).await?;
    let gas = |build: &Value| build["simulation"]["gas"]["units"].clone();
    let (before, after) = (gas(&build), gas(&again));
    // The document never says a commit executes on chain (part 1: "before custody").
    crate::finding::profile(
        before.is_null() || after.is_null() || before != after,
        || {
            format!(
                "the same transfer to a fresh recipient simulated with {before} gas units before its \
             commit and {after} after: the commit did not change the chain, as the profile's do"
            )
        },
    );
    Ok(())
}

/// The reference catalog's operation that moves the EVM chain's native coin.
const NATIVE_TRANSFER: &str = "native-transfer";

/// A build request of the reference catalog's native transfer of `amount` from `from` to a fresh
/// address, in the app and on the chain of `example`, openapi.json's build example.
fn native_transfer(example: &Value, from: &str, amount: &str) -> Value {
    json!({ "app": example["app"], "operations": [{ "operation": NATIVE_TRANSFER, "input": {
        "chainId": example["operations"][0]["input"]["chainId"],
        "from": from,
        "to": format!("0x{:040x}", nanos()),
        "amount": amount,
    } }] })
}

async fn resimulates(target: &Target) -> Verdict {
    let token = &target.role(Role::Pipeline).await?;
    tried(|| resimulates_once(target, token)).await
}

/// Whether `build`'s `expiresAt` is at most a second away, so that what a commit of it is
/// answered tells nothing of its simulation: a Build past its `expiresAt` is rejected (part 2.1).
fn expiring(build: &Value) -> bool {
    build["expiresAt"]
        .as_i64()
        .is_some_and(|expires| now() + 1 >= expires)
}

/// What a try of `resimulates` came to when a Build it holds reached its `expiresAt` first.
fn build_outlived() -> Tried {
    Tried::Outlived("a Build reached its expiresAt before it was judged".into())
}

/// One try of `resimulates`: the two spends of `inputs.overspend`, else two of 0.6 from a fresh
/// account the reference catalog funds with 1 coin.
async fn resimulates_once(target: &Target, token: &str) -> Result<Tried, Finding> {
    let requests = match &target.settings.inputs.overspend {
        Some(given) => given.to_vec(),
        None => match reference_spends(target, token).await? {
            Ok(requests) => requests,
            Err(tried) => return Ok(tried),
        },
    };
    let mut spends = Vec::new();
    for request in requests {
        let build = build_from(target, token, EVM, request).await?;
        // A Build may be staged, without a simulation (part 2.1): only a failed one stops.
        if let Some(other) = build["simulation"]["status"]
            .as_str()
            .filter(|s| *s != "passed")
        {
            return skip(format!(
                "inconclusive: a spend that should pass alone simulated {other}, so the two spends \
                 do not each pass alone; set inputs.overspend to two build requests that each \
                 pass alone and together overspend"
            ));
        }
        spends.push(build);
    }
    match commit_fresh(target, token, EVM, &spends[0]).await {
        Err(_) if expiring(&spends[0]) => return Ok(build_outlived()),
        other => other?,
    };
    let second = present(target, token, EVM, &spends[1]).await?;
    // Refused once expired, it would be refused for its age, not for the spend.
    if expiring(&spends[1]) {
        return Ok(build_outlived());
    }
    // The document says a commit re-simulates, not how a failed re-simulation is answered: a
    // refusal in the envelope, or a result whose simulation failed. Our profile refuses.
    let failed_result =
        (200..300).contains(&second.status) && second.body["simulation"]["status"] == "failed";
    if !failed_result {
        refused(
            &second,
            "the second spend, which the first left the account unable to pay,",
        )?;
    }
    profile(!failed_result, || {
        "the profile refuses a commit whose re-simulation fails; it was answered a result whose simulation failed".into()
    });
    Ok(Tried::Judged)
}

/// Two build requests of 0.6 each from a fresh account that the reference catalog funds with 1
/// coin (committed here), or what the try came to when the funding's Build expired first.
async fn reference_spends(
    target: &Target,
    token: &str,
) -> Result<Result<Vec<Value>, Tried>, Finding> {
    let example = reference_build_request(EVM)?;
    let funder = text(&example, "/operations/0/input/from")?;
    let funding = native_transfer(&example, funder, "1");
    let account = text(&funding, "/operations/0/input/to")?.to_owned();
    let funded = lifecycle(target, token, EVM, &funding).await?;
    if funded.status != 200 {
        return skip(format!(
            "needs the reference catalog's {NATIVE_TRANSFER}, to move a known amount (POST {EVM} \
             answered {}); set inputs.overspend to two build requests that each pass alone and \
             together overspend",
            funded.status
        ));
    }
    match commit_fresh(target, token, EVM, &funded.body).await {
        Err(_) if expiring(&funded.body) => return Ok(Err(build_outlived())),
        other => other?,
    };
    Ok(Ok((0..2)
        .map(|_| native_transfer(&example, &account, "0.6"))
        .collect()))
}

/// Commits `build` at `path`. The document asks a commit to be accepted; our profile's result
/// is `committed` with the Build's digest, and the same Build presented again is refused.
async fn commit_once(target: &Target, token: &str, path: &str, build: &Value) -> Verdict {
    let reply = commit_fresh(target, token, path, build).await?;
    let result = json!([reply.body["status"], reply.body["digest"]]);
    let expected = json!(["committed", build["digest"]]);
    profile(result == expected, || {
        format!("the commit result's status and digest are {result}; the profile's are {expected}")
    });
    let again = present(target, token, path, build).await?;
    profile(
        (400..500).contains(&again.status) && again.body.get("error").is_some(),
        || {
            format!(
                "the same Build committed again at {path} was answered {}",
                again.status
            )
        },
    );
    Ok(())
}

async fn svm(target: &Target) -> Verdict {
    let token = &target.role(Role::Pipeline).await?;
    let mut request = build_request(target, SVM).await?;
    // An amount no other check sends, so that no other commit shares the Build: a Build of the
    // same request in the same second is the same Build, and `stateful.svmStage` commits the
    // reference request while this check runs. A configured request is the deployment's own.
    if target.settings.inputs.svm_stage.is_none()
        && let Some(amount) = request.pointer_mut("/operations/0/input/amount")
    {
        *amount = json!(format!("0.{:06}", 1 + nanos() % 999_999));
    }
    let build = build_from(target, token, SVM, request).await?;
    // A Build may be staged, without a simulation (part 2.1): the simulation is judged where the
    // Build carries one, which our profile's always does.
    let simulated = build.get("simulation").is_some_and(|s| !s.is_null());
    for fact in [
        "1.build-by-value",
        "1.build-evm-svm",
        "4.1.svm-stage",
        "4.1.lifecycle-body-build",
        "4.1.lifecycle-body-stage-input",
        "4.1.lifecycle-response",
        "4.1.lifecycle-request-object",
    ] {
        crate::finding::asserted_fact(fact);
    }
    if simulated {
        crate::finding::asserted_fact("1.simulation-svm");
        ensure(build["simulation"].is_object(), || {
            format!(
                "the SVM Build's simulation is {}, not an object",
                build["simulation"]
            )
        })?;
    } else {
        crate::finding::warn(
            "the SVM Build carries no simulation (it may be staged): set inputs.svmStage to a stage input that simulates, for part 1's SVM simulation".into(),
        );
    }
    profile(simulated, || {
        "the profile's SVM Builds carry their simulation".into()
    });
    let chains: Vec<&Value> = build["actions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| &a["chain"])
        .collect();
    profile(chains.iter().all(|chain| *chain == "svm"), || {
        format!("actions on chains {chains:?}, not the profile's `svm`")
    });
    commit_once(target, token, SVM, &build).await
}

/// Changes an action of `build`: its `value` (ten times the amount) when it has one, else the
/// last string member of the first action.
fn alter_action(build: &mut Value) -> bool {
    let Some(action) = build
        .pointer_mut("/actions/0")
        .and_then(Value::as_object_mut)
    else {
        return false;
    };
    let member = match action.get("value") {
        Some(Value::String(_)) => action.get_mut("value"),
        _ => action.values_mut().filter(|value| value.is_string()).last(),
    };
    match member {
        Some(Value::String(text)) => {
            text.push('0');
            true
        }
        _ => false,
    }
}

/// `text` with its last character changed: for a hex digest, a different digest.
fn flip_last(text: &str) -> String {
    let mut changed = text.to_owned();
    let last = changed.pop().unwrap_or('0');
    changed.push(if last == '0' { '1' } else { '0' });
    changed
}

/// Fails unless `reply` refuses the Build `what` names: a 4xx with an error envelope.
fn refused(reply: &Reply, what: &str) -> Verdict {
    ensure(
        (400..500).contains(&reply.status) && reply.body.get("error").is_some(),
        || {
            format!(
                "{what} was answered {} {}",
                reply.status,
                crate::finding::excerpt(&reply.text)
            )
        },
    )
}

async fn tampered(target: &Target) -> Verdict {
    let token = &target.role(Role::Pipeline).await?;
    // A Build of its own, so that no refusal of a Build already committed hides what this
    // checks, and its control commits.
    let build = unique_build(target, token, EVM).await?;
    let mut variants = Vec::new();
    let mut actions = build.clone();
    if alter_action(&mut actions) {
        variants.push(("an action changed", actions));
    }
    let mut digest = build.clone();
    digest["digest"] = Value::String(flip_last(text(&build, "/digest")?));
    variants.push(("the digest changed", digest));
    let mut attestation = build.clone();
    attestation["attestation"] = Value::String(alter_signature(text(&build, "/attestation")?));
    variants.push(("the attestation changed", attestation));
    let mut expiry = build.clone();
    expiry["expiresAt"] = Value::from(build["expiresAt"].as_i64().unwrap_or(0) + 3600);
    variants.push(("expiresAt moved an hour later", expiry));
    for (what, variant) in variants {
        let reply = present(target, token, EVM, &variant).await?;
        refused(&reply, &format!("a Build with {what}"))?;
    }
    // The attestation authenticates the Build's owner: another account cannot commit it.
    let scopes = ["pipeline:execute", "pipeline:catalog"];
    let other = target
        .token(&TokenRequest::new(Account::Secondary, "pipeline", &scopes))
        .await?;
    let reply = present(target, &other, EVM, &build).await?;
    refused(&reply, "another account's Build")?;
    // The control: the untouched Build commits, so that the refusals above were not the commit
    // means refused.
    control(target, token, build).await
}

async fn expired(target: &Target) -> Verdict {
    let token = &target.role(Role::Pipeline).await?;
    let build = unique_build(target, token, EVM).await?;
    let expires = build["expiresAt"].as_i64().unwrap_or(0);
    let left = expires - now();
    if left > 15 {
        return skip(format!(
            "Builds live {left} s here; the check waits out at most 15 s"
        ));
    }
    tokio::time::sleep(Duration::from_secs(left.max(0) as u64 + 1)).await;
    let reply = present(target, token, EVM, &build).await?;
    refused(&reply, "a Build past its expiresAt")?;
    // The control: a fresh Build commits, so that the refusal was the expiry's, not the means'.
    let fresh = unique_build(target, token, EVM).await?;
    control(target, token, fresh).await
}

/// How many fresh Builds a control commit tries.
const CONTROLS: usize = 3;

/// The control of a check whose commits were refused: `build`, fresh, commits at the EVM
/// endpoint, so that the refusals were not the commit means refused. Another check's commit may
/// have moved the chain past `build` (it no longer simulates), so a refused control is tried
/// again with a new unique Build before the means counts as refused.
async fn control(target: &Target, token: &str, build: Value) -> Verdict {
    let mut build = build;
    for _ in 1..CONTROLS {
        match commit_fresh(target, token, EVM, &build).await {
            Err(Finding::Skip(_)) => build = unique_build(target, token, EVM).await?,
            committed => return committed.map(|_| ()),
        }
    }
    commit_fresh(target, token, EVM, &build).await.map(|_| ())
}

async fn operation_descriptor(target: &Target) -> Verdict {
    let token = &target.role(Role::Pipeline).await?;
    let named = super::subjects::app_operation(target).await?;
    let path = format!(
        "/v1/pipeline/apps/{}/operations/{}",
        super::encode(&named.app),
        super::encode(&named.operation)
    );
    let reply = target
        .request(Method::GET, &path)
        .bearer(token)
        .send()
        .await?;
    crate::finding::asserted_fact("4.1.app-operation");
    crate::finding::asserted_fact("1.catalog-operations");
    reply.ensure_status(200, &format!("GET {path}"))?;
    let descriptor = &reply.body;
    [
        "2.10.descriptor-fields",
        "2.10.kind-operation",
        "2.10.method",
        "2.10.input-schema",
    ]
    .into_iter()
    .for_each(crate::finding::asserted_fact);
    ensure(descriptor.is_object(), || {
        format!("GET {path} answered {}, not an object", descriptor)
    })?;
    // Part 2.10 gives each member's type and no required list: each is judged where present.
    let member = |name: &str| descriptor.get(name).filter(|value| !value.is_null());
    ensure(
        member("kind").is_none_or(|kind| kind == "operation"),
        || format!("kind {}", descriptor["kind"]),
    )?;
    ensure(member("name").is_none_or(Value::is_string), || {
        format!("name {}", descriptor["name"])
    })?;
    // An HTTP method is a token (RFC 9110 9.1, 5.6.2): HEAD and OPTIONS are ones too.
    let tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    ensure(
        member("method").is_none_or(|method| {
            method
                .as_str()
                .is_some_and(|method| !method.is_empty() && method.chars().all(tchar))
        }),
        || format!("method {}, not an HTTP method", descriptor["method"]),
    )?;
    ensure(member("href").is_none_or(Value::is_string), || {
        format!("href {}", descriptor["href"])
    })?;
    // What an href names is not said to be a path of the interface: ours are, under /v1.
    profile(
        member("href").is_none_or(|href| {
            href.as_str().is_some_and(|href| {
                href.strip_prefix(target.base())
                    .unwrap_or(href)
                    .starts_with("/v1/")
            })
        }),
        || {
            format!(
                "href {}, not the profile's path under /v1",
                descriptor["href"]
            )
        },
    );
    ensure(member("inputSchema").is_none_or(Value::is_object), || {
        format!("inputSchema {}", descriptor["inputSchema"])
    })?;
    profile(
        ["kind", "name", "method", "href", "inputSchema"]
            .iter()
            .all(|name| member(name).is_some())
            && descriptor["name"] == named.operation.as_str(),
        || {
            format!(
                "the profile's descriptor has all five members, named {}: {descriptor}",
                named.operation
            )
        },
    );
    Ok(())
}

async fn apps(target: &Target) -> Verdict {
    let token = &target.role(Role::Pipeline).await?;
    // What assembles a Build here, whether or not the catalog lists it: only a request the
    // deployment builds can show a catalog that leaves it out.
    let request = super::subjects::given_build_request(target, EVM)?;
    let built = lifecycle(target, token, EVM, &request).await?;
    if built.status != 200 {
        return skip(format!(
            "POST {EVM} {} was answered {}; set inputs.evmBuild in the config file",
            crate::finding::excerpt(&request.to_string()),
            built.status
        ));
    }
    let (app, operation) = (
        text(&request, "/app")?,
        text(&request, "/operations/0/operation")?,
    );
    let catalog = read(target, token, "/v1/pipeline/apps").await?;
    let apps = catalog["apps"].as_array().map_or(&[][..], Vec::as_slice);
    ensure(lists(apps, app, operation), || {
        format!("GET /v1/pipeline/apps does not list {app}'s {operation}, which builds use")
    })
}

async fn skill_call(target: &Target) -> Verdict {
    let token = &target.role(Role::Pipeline).await?;
    let call = super::subjects::skill_call(target).await?;
    let path = format!(
        "/v1/pipeline/skills/{}/operations/{}",
        call.skill, call.operation
    );
    let reply = target
        .request(Method::POST, &path)
        .bearer(token)
        .json(&call.input)
        .send()
        .await?;
    reply.ensure_status(200, &format!("POST {path} {}", call.input))?;
    // Part 4.1: the result's fields are not shown, so any JSON value; ours is an object.
    let json = serde_json::from_str::<Value>(&reply.text).is_ok();
    ensure(json, || {
        format!(
            "POST {path} answered {}, not JSON",
            crate::finding::excerpt(&reply.text)
        )
    })?;
    profile(reply.body.is_object(), || {
        format!(
            "POST {path} answered {}, where the profile's result is an object",
            crate::finding::excerpt(&reply.text)
        )
    });
    Ok(())
}

async fn skill_input(target: &Target) -> Verdict {
    let token = &target.role(Role::Pipeline).await?;
    let list = read(target, token, "/v1/pipeline/skills").await?;
    let Some((skill, operation)) =
        list["skills"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|skill| {
                let operation = skill["operations"].as_array()?.iter().find(|op| {
                    op["inputSchema"]["required"]
                        .as_array()
                        .is_some_and(|required| !required.is_empty())
                })?;
                Some((
                    skill["name"].as_str()?.to_owned(),
                    operation["name"].as_str()?.to_owned(),
                ))
            })
    else {
        return skip("no skill operation has a required input");
    };
    let path = format!("/v1/pipeline/skills/{skill}/operations/{operation}");
    let reply = target
        .request(Method::POST, &path)
        .bearer(token)
        .json(&serde_json::json!({}))
        .send()
        .await?;
    if reply.status == 200 {
        return fail(format!(
            "POST {path} with an empty body, which lacks the required input, was answered 200"
        ));
    }
    reply.ensure_status(400, &format!("POST {path} with an empty body"))?;
    Ok(())
}
