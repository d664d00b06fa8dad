//! SARIF 2.1.0, the format code-scanning tools read (GitHub's among them): one rule per check
//! that ran, one result per way a check failed or broke (its [`Break`]), located at the
//! `openapi.json` operation it concerns, with the break's fingerprint in `partialFingerprints`.
//! A break the run's baseline knows is a warning whose `baselineState` is `unchanged`; the others
//! are errors, `new`.

use serde_json::{Value, json};

use crate::breaks::{Break, State};
use crate::checks::Status;
use crate::spec::OPENAPI;
use crate::suite::{Outcome, Report};

/// Where the results point: the document, as this repository names it.
const DOCUMENT: &str = "openapi.json";

/// `report` as a SARIF log.
pub fn sarif(report: &Report) -> String {
    let ran = || {
        report
            .outcomes
            .iter()
            .filter(|outcome| outcome.status != Status::Disabled)
    };
    let rules: Vec<Value> = ran().map(rule).collect();
    let results: Vec<Value> = ran()
        .enumerate()
        .filter(|(_, outcome)| matches!(outcome.status, Status::Fail | Status::Error))
        .flat_map(|(index, outcome)| {
            outcome
                .broke
                .iter()
                .map(move |broken| result(index, outcome, broken))
        })
        .collect();
    let log = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "intent-conformance",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "invocations": [{ "executionSuccessful": true }],
            "properties": { "target": report.target },
            "results": results,
        }],
    });
    serde_json::to_string_pretty(&log).expect("a SARIF log serializes") + "\n"
}

/// The rule of a check: its requirement, level and section.
fn rule(outcome: &Outcome) -> Value {
    json!({
        "id": outcome.id,
        "shortDescription": { "text": outcome.requirement },
        "properties": {
            "category": outcome.category,
            "level": outcome.level,
            "section": outcome.section,
        },
    })
}

/// The result of one way a check failed or broke.
fn result(index: usize, outcome: &Outcome, broken: &Break) -> Value {
    let (level, state) = match broken.baseline {
        Some(State::Known) => ("warning", "unchanged"),
        _ => ("error", "new"),
    };
    let mut text = format!(
        "{} {} [{}] (part {}): {}\nbroke: {}",
        outcome.id,
        outcome.status.as_str(),
        outcome.level.as_str(),
        outcome.section,
        outcome.message.as_deref().unwrap_or_default(),
        broken.broke,
    );
    if let Some(curl) = &outcome.reproduce {
        text.push_str(&format!("\nreproduce: {curl}"));
    }
    let mut physical = json!({ "artifactLocation": { "uri": DOCUMENT } });
    let mut location = json!({});
    if let Some((reference, line)) = located(outcome) {
        physical["region"] = json!({ "startLine": line });
        location["logicalLocations"] = json!([{ "fullyQualifiedName": reference }]);
    }
    location["physicalLocation"] = physical;
    json!({
        "ruleId": outcome.id,
        "ruleIndex": index,
        "level": level,
        "kind": "fail",
        "baselineState": state,
        "message": { "text": text },
        "locations": [location],
        // The same from run to run while the fact breaks the same way, as in a baseline.
        "partialFingerprints": { "break/v1": broken.fingerprint },
    })
}

/// The first element `outcome` rests on that `openapi.json` holds, and its line: an operation's
/// method under its path, or a component's name.
fn located(outcome: &Outcome) -> Option<(&'static str, usize)> {
    outcome.rests_on.iter().find_map(|&reference| {
        let key = |name: &str| format!("\"{name}\": {{");
        let at = match reference.strip_prefix("#/components/") {
            Some(path) => OPENAPI.find(&key(path.split('/').nth(1)?))?,
            None => {
                let (method, path) = reference.split_once(' ')?;
                let at = OPENAPI.find(&key(path))?;
                at + OPENAPI[at..].find(&key(&method.to_lowercase()))?
            }
        };
        Some((reference, OPENAPI[..at].matches('\n').count() + 1))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_holds_against_the_published_schema_and_points_at_the_operation() {
        let schema: Value =
            serde_json::from_str(include_str!("../../schemas/sarif-schema-2.1.0.json")).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        let report = crate::suite::fixture();
        let mut baselined = report.clone();
        let baseline = crate::baseline::Baseline::of(&report);
        crate::baseline::compare(&mut baselined, &baseline, false);
        for (report, known) in [(&report, false), (&baselined, true)] {
            let log: Value = serde_json::from_str(&sarif(report)).unwrap();
            let errors: Vec<String> = validator
                .iter_errors(&log)
                .map(|e| format!("{} at {}", e, e.instance_path()))
                .collect();
            assert!(errors.is_empty(), "{errors:#?}");
            let results = log["runs"][0]["results"].as_array().unwrap();
            assert_eq!(results.len(), 1, "the one failure");
            let line = results[0]["locations"][0]["physicalLocation"]["region"]["startLine"]
                .as_u64()
                .unwrap() as usize;
            let lines: Vec<&str> = OPENAPI.lines().take(line).collect();
            assert_eq!(lines[line - 1].trim(), "\"post\": {");
            let path = lines.iter().rev().find(|line| line.starts_with("    \"/"));
            assert_eq!(path.unwrap().trim(), "\"/v1/pipeline/evm/build\": {");
            let expected = if known { "warning" } else { "error" };
            assert_eq!(results[0]["level"], expected);
            assert_eq!(
                results[0]["partialFingerprints"]["break/v1"],
                report.outcomes[1].broke[0].fingerprint
            );
        }
        let mut broken: Value = serde_json::from_str(&sarif(&report)).unwrap();
        broken["runs"][0]["results"][0]["level"] = json!("fatal");
        assert!(!validator.is_valid(&broken), "the schema is applied");
    }
}
