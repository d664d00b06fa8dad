//! `spec/normative.json`, the normative view of openapi.json: what it keeps and leaves out.

use intent_models::openapi::{Document, fills, normative};
use intent_models::schema::Schemas;
use intent_tests::{openapi, workspace_root};
use serde_json::Value;

fn view() -> Value {
    let path = workspace_root().join("spec/normative.json");
    let text = std::fs::read_to_string(&path).expect("spec/normative.json is written by codegen");
    serde_json::from_str(&text).expect("spec/normative.json is JSON")
}

#[test]
fn the_written_view_is_the_rule_applied_to_openapi_json() {
    assert!(view() == normative(openapi()), "run `cargo xtask codegen`");
}

#[test]
fn the_build_examples_hold_against_the_lifecycle_success_of_the_view() {
    let view = Document::new(view());
    let schemas = Schemas::from_openapi(view.value()).unwrap();
    let written = Document::new(openapi().clone());
    let mut builds = 0;
    for template in ["/v1/pipeline/evm/build", "/v1/pipeline/svm/stage"] {
        let success = view
            .by_template("POST", template)
            .unwrap()
            .response(200)
            .unwrap();
        let validator = schemas
            .inline(&success["content"]["application/json"]["schema"])
            .unwrap();
        let answer = success["x-answer-to-build-request"].as_str().unwrap();
        let build = schemas
            .component(answer.rsplit('/').next().unwrap())
            .unwrap();
        let declared = written
            .by_template("POST", template)
            .unwrap()
            .response(200)
            .unwrap();
        let examples = declared["content"]["application/json"]["examples"]
            .as_object()
            .unwrap();
        for (name, example) in examples {
            let value = &written.resolve(example)["value"];
            assert!(
                validator.is_valid(value),
                "{template} {name}: {:?}",
                validator.errors(value)
            );
            if value.get("attestation").is_some() {
                builds += 1;
                assert!(
                    build.is_valid(value),
                    "{template} {name}: {:?}",
                    build.errors(value)
                );
            }
        }
    }
    assert!(builds >= 2, "each lifecycle endpoint has a Build example");
}

#[test]
fn the_view_declares_every_path_parameter_and_keeps_no_profile_mark_but_required_keywords() {
    let view = Document::new(view());
    for op in view.operations() {
        for segment in op.template.split('/').filter(|s| s.starts_with('{')) {
            let name = segment.trim_matches(['{', '}']);
            let declared = op.parameter(name).is_some_and(|p| p.location == "path");
            assert!(declared, "{}: {{{name}}} is not declared", op.reference);
        }
        assert!(!op.profile, "{}", op.reference);
    }
    let text = view.value().to_string();
    assert!(!text.contains("\"x-profile\"") && !text.contains("x-profile-note"));
    let mut kept = Vec::new();
    marks(view.value(), &mut kept);
    kept.sort();
    assert_eq!(kept, ["default", "default"]);
    let ids: Vec<&str> = view.operations().iter().map(|op| op.id.as_str()).collect();
    assert!(
        !ids.contains(&"resolveAction"),
        "its path and method are not shown"
    );
    assert_eq!(ids.len(), 12, "{ids:?}");
}

fn marks<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::Object(members) => {
            out.extend(fills(value));
            members.values().for_each(|member| marks(member, out));
        }
        Value::Array(items) => items.iter().for_each(|item| marks(item, out)),
        _ => {}
    }
}

#[test]
fn every_fill_names_a_member_of_its_object() {
    fn walk(value: &Value, at: &str, wrong: &mut Vec<String>) {
        match value {
            Value::Object(members) => {
                // A response's `status` is its key in its Responses Object.
                let response = at.rsplit('/').nth(1) == Some("responses");
                let named =
                    |fill: &&str| members.contains_key(*fill) || (response && *fill == "status");
                for fill in fills(value).into_iter().filter(|fill| !named(fill)) {
                    wrong.push(format!("{at}: {fill}"));
                }
                for (key, member) in members {
                    walk(member, &format!("{at}/{key}"), wrong);
                }
            }
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    walk(item, &format!("{at}/{index}"), wrong);
                }
            }
            _ => {}
        }
    }
    let mut wrong = Vec::new();
    walk(openapi(), "#", &mut wrong);
    assert!(wrong.is_empty(), "fills that name no member: {wrong:?}");
}
