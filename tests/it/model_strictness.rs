//! The generated models read tolerantly and keep the document's types: a model a response
//! carries accepts members it does not know, while openapi.json's schemas (which the server holds
//! every request body to) refuse them; request-only models refuse them too; and JSON null is
//! accepted exactly where a field is nullable.

use intent_models::{ActionResult, PipelineAction, PipelineBuild, PipelineSimulation};
use intent_tests::openapi;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The EVM Build of the commit example in openapi.json.
fn build() -> Value {
    openapi()
        .pointer("/paths/~1v1~1pipeline~1evm~1build/post/requestBody/content/application~1json/examples/commit/value")
        .expect("the EVM commit example")
        .clone()
}

fn simulation() -> Value {
    build()["simulation"].clone()
}

fn approval() -> Value {
    json!({
        "account": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
        "spender": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
        "asset": "0x5FbDB2315678afecb367f032d93F642f64180aa3",
        "kind": "allowance",
        "standard": "erc20",
        "amount": "115792089237316195423570985008687907853269984665640564039457584007913129639935",
        "unlimited": true,
        "step": 1
    })
}

fn decodes<T: DeserializeOwned>(value: Value) -> Result<T, String> {
    serde_json::from_value(value).map_err(|e| e.to_string())
}

/// Applies `change` to a copy of `base` and returns it.
fn with(base: &Value, change: impl FnOnce(&mut Value)) -> Value {
    let mut value = base.clone();
    change(&mut value);
    value
}

#[test]
fn the_example_simulation_and_an_approval_decode() {
    let with_approval = with(&simulation(), |s| s["approvals"] = json!([approval()]));
    let decoded: PipelineSimulation = decodes(with_approval).unwrap();
    assert_eq!(decoded.approvals.len(), 1);
    assert_eq!(decoded.balance_changes.len(), 2);
}

/// openapi.json's schema of the component `name`.
fn schema(name: &str) -> intent_models::schema::SchemaValidator {
    intent_models::schema::Schemas::from_openapi(openapi())
        .and_then(|schemas| schemas.component(name))
        .expect("the component's schema")
}

#[test]
fn an_unknown_field_anywhere_in_a_simulation_is_read_and_the_schema_refuses_it() {
    let base = with(&simulation(), |s| s["approvals"] = json!([approval()]));
    let places = [
        "",
        "/balanceChanges/0",
        "/approvals/0",
        "/fees/0",
        "/guards/0",
        "/gas",
        "/logs/0",
    ];
    for place in places {
        let tampered = with(&base, |s| {
            s.pointer_mut(place)
                .unwrap()
                .as_object_mut()
                .unwrap()
                .insert("extra".into(), json!(1));
        });
        decodes::<PipelineSimulation>(tampered.clone())
            .unwrap_or_else(|e| panic!("{place}: an unknown member was refused: {e}"));
        assert!(
            !schema("PipelineSimulation").is_valid(&tampered),
            "{place}: the schema accepts an unknown member"
        );
    }
}

#[test]
fn request_only_models_refuse_unknown_fields() {
    let cases = [
        json!({ "title": "t", "extra": 1 }),
        json!({ "message": "hi", "extra": 1 }),
        json!({ "value": "v", "extra": 1 }),
    ];
    assert!(decodes::<intent_models::SessionUpdate>(cases[0].clone()).is_err());
    assert!(decodes::<intent_models::ChatStartRequest>(cases[1].clone()).is_err());
    assert!(decodes::<intent_models::CredentialValue>(cases[2].clone()).is_err());
}

#[test]
fn null_is_accepted_where_the_document_allows_it() {
    let nullable = [
        "/balanceChanges/0/direction",
        "/balanceChanges/0/standard",
        "/balanceChanges/0/step",
        "/balanceChanges/0/account",
        "/approvals/0/amount",
        "/approvals/0/unlimited",
        "/fees/0/kind",
        "/guards/0/message",
        "/gas",
        "/gas/units",
        "/logs/0/chainId",
        "/logs/0/step",
    ];
    let base = with(&simulation(), |s| s["approvals"] = json!([approval()]));
    for place in nullable {
        let (parent, field) = place.rsplit_once('/').unwrap();
        let value = with(&base, |s| {
            s.pointer_mut(parent).unwrap()[field] = Value::Null;
        });
        decodes::<PipelineSimulation>(value)
            .unwrap_or_else(|e| panic!("{place}: null refused: {e}"));
    }
}

#[test]
fn null_is_refused_where_the_document_does_not_allow_it() {
    let not_nullable = [
        "/status",
        "/warnings",
        "/balanceChanges/0/asset",
        "/balanceChanges/0/amount",
        "/approvals/0/standard",
        "/approvals/0/kind",
        "/guards/0/status",
        "/logs/0/topics",
        "/logs/0/data",
    ];
    let base = with(&simulation(), |s| s["approvals"] = json!([approval()]));
    for place in not_nullable {
        let (parent, field) = place.rsplit_once('/').unwrap();
        let value = with(&base, |s| {
            s.pointer_mut(parent).unwrap()[field] = Value::Null;
        });
        assert!(
            decodes::<PipelineSimulation>(value).is_err(),
            "{place}: null accepted"
        );
    }
}

#[test]
fn gas_is_required_even_though_it_may_be_null() {
    let without_gas = with(&simulation(), |s| {
        s.as_object_mut().unwrap().remove("gas");
    });
    let error = decodes::<PipelineSimulation>(without_gas).expect_err("missing gas accepted");
    assert!(error.contains("gas"), "{error}");
}

#[test]
fn step_below_1_and_enum_values_outside_the_document_are_refused() {
    let step_zero = with(&simulation(), |s| s["logs"][0]["step"] = json!(0));
    assert!(
        decodes::<PipelineSimulation>(step_zero).is_err(),
        "step 0 accepted"
    );
    let sideways = with(&simulation(), |s| {
        s["balanceChanges"][0]["direction"] = json!("sideways")
    });
    assert!(
        decodes::<PipelineSimulation>(sideways).is_err(),
        "direction sideways accepted"
    );
    let warned = with(&simulation(), |s| {
        s["guards"][0]["status"] = json!("warning")
    });
    decodes::<PipelineSimulation>(warned).expect("guard status warning");
    let unknown_guard = with(&simulation(), |s| {
        s["guards"][0]["status"] = json!("skipped")
    });
    assert!(decodes::<PipelineSimulation>(unknown_guard).is_err());
}

#[test]
fn a_build_holds_version_2_a_known_status_and_a_sha256_digest() {
    decodes::<PipelineBuild>(build()).expect("the example Build");
    let cases = [
        ("version 3", with(&build(), |b| b["version"] = json!(3))),
        (
            "status committed",
            with(&build(), |b| b["status"] = json!("committed")),
        ),
        (
            "uppercase digest",
            with(&build(), |b| {
                b["digest"] = json!(format!("sha256:{}", "A".repeat(64)))
            }),
        ),
        (
            "short digest",
            with(&build(), |b| b["digest"] = json!("sha256:abc")),
        ),
        (
            "no attestation",
            with(&build(), |b| {
                b.as_object_mut().unwrap().remove("attestation");
            }),
        ),
    ];
    for (case, value) in cases {
        assert!(decodes::<PipelineBuild>(value).is_err(), "{case} accepted");
    }
}

#[test]
fn the_schemas_refuse_caller_authored_fields_on_action_results_and_actions() {
    let digest = build()["digest"].clone();
    let approval = json!({ "outcome": "approved", "digest": digest });
    decodes::<ActionResult>(approval.clone()).expect("approval");
    assert!(schema("ActionResult").is_valid(&approval));
    let with_transaction = with(&approval, |a| {
        a["to"] = json!("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")
    });
    assert!(
        !schema("ActionResult").is_valid(&with_transaction),
        "transaction field accepted"
    );
    assert!(decodes::<ActionResult>(json!({ "outcome": "maybe", "digest": digest })).is_err());

    let action = build()["actions"][0].clone();
    decodes::<PipelineAction>(action.clone()).expect("the example action");
    let with_nonce = with(&action, |a| a["nonce"] = json!(7));
    assert!(
        !schema("PipelineAction").is_valid(&with_nonce),
        "unknown action field accepted"
    );
}

#[test]
fn values_the_interface_leaves_open_are_kept_as_they_came() {
    use intent_models::{ErrorCode, Resync, ResyncReason, StatementLineMeter};
    let resync: Resync = decodes(json!({ "reason": "compacted" })).unwrap();
    assert_eq!(resync.reason, ResyncReason::Unknown("compacted".into()));
    assert_eq!(
        serde_json::to_value(&resync).unwrap()["reason"],
        "compacted"
    );
    let known: ResyncReason = decodes(json!("lagged")).unwrap();
    assert_eq!(known, ResyncReason::Lagged);
    let meter: StatementLineMeter = decodes(json!("storage")).unwrap();
    assert_eq!(meter.to_string(), "storage");
    let code: ErrorCode = "quota_exceeded".parse().unwrap();
    assert_eq!(code, ErrorCode::Unknown("quota_exceeded".into()));
    // Values the interface fixes stay closed.
    assert!(decodes::<intent_models::TurnState>(json!("paused")).is_err());
}
