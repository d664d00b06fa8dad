//! Every response seen in the run against openapi.json (parts 2 and 7). These checks run last.

use std::collections::{BTreeMap, BTreeSet};

use super::page_members::{PAGE_FIELDS, entry_kind};
use super::{build_simulation, run};
use crate::checks::{Category, Check};
use crate::finding::{Broke, Finding, Verdict, cite, ensure, skip};
use crate::spec::Level;
use crate::spec::spec;
use crate::target::{BrokenBody, Target};

pub(super) fn checks() -> Vec<Check> {
    vec![
        Check {
            id: "schema.error-envelope".into(),
            category: Category::Schema,
            requirement: "Every error response MUST be a JSON object with an `error` member.",
            section: "7.1",
            rests_on: vec!["#/components/schemas/ErrorEnvelope"],
            operation: None,
            run: run!(error_envelope),
        },
        Check {
            id: "schema.media-type".into(),
            category: Category::Schema,
            requirement: "Every response body of an operation of the document but a stream's MUST be `application/json`, success and error alike.",
            section: "4",
            rests_on: vec!["#/components/schemas/ErrorEnvelope"],
            operation: None,
            run: run!(media_type),
        },
        Check {
            id: "schema.simulation".into(),
            category: Category::Schema,
            requirement: "The simulation of every Build a lifecycle endpoint answers MUST hold exactly the fields of parts 2.2 to 2.8, with their types, and no other property.",
            section: "2.2",
            rests_on: vec!["#/components/schemas/PipelineSimulation"],
            operation: None,
            run: run!(simulation),
        },
        Check {
            id: "schema.event-page".into(),
            category: Category::Schema,
            requirement: "Messages, tool activity, actions, errors and lifecycle changes MUST be entries of an EventPage's `events`: no member beside its four fields MAY carry one, in any JSON type (told by its name, a turn state, or such a name or state inside it); another extra member is a profile finding.",
            section: "2.11",
            rests_on: vec!["#/components/schemas/EventPage"],
            operation: None,
            run: run!(event_page),
        },
        Check {
            id: "schema.responses".into(),
            category: Category::Schema,
            requirement: "Every response body MUST hold against its schema in openapi.json, as far as the interface shows it; the statuses, event entries and error codes of our profile are profile assertions.",
            section: "2, 7",
            rests_on: vec![
                "#/components/schemas/ErrorEnvelope",
                "#/components/schemas/EventPage",
            ],
            operation: None,
            run: run!(responses),
        },
    ]
}

async fn error_envelope(target: &Target) -> Verdict {
    let errors: Vec<_> = target
        .seen()
        .into_iter()
        .filter(|seen| seen.status >= 400 && of_the_document(&seen.request))
        .collect();
    if errors.is_empty() {
        return skip("no error response was seen in this run");
    }
    let bare: Vec<_> = errors
        .iter()
        .filter(|seen| seen.body.get("error").is_none())
        .collect();
    cite(bare.iter().map(|seen| &seen.exchange));
    let bare: Vec<String> = bare
        .iter()
        .map(|seen| format!("{} ({}, from {})", seen.request, seen.status, seen.check))
        .collect();
    ensure(bare.is_empty(), || {
        format!(
            "{} of {} error responses lack the envelope: {}",
            bare.len(),
            errors.len(),
            bare.join("; ")
        )
    })
}

/// Whether `request` (`METHOD /path?query`) is an instance of an operation the interface
/// document states (part 4), not one only our profile has, nor OAuth's or MCP's endpoints.
fn of_the_document(request: &str) -> bool {
    let (method, path) = request.split_once(' ').unwrap_or_default();
    let route = path.split('?').next().unwrap_or(path);
    spec()
        .operation(method, route)
        .is_some_and(|operation| !spec().is_profile(&operation.reference))
}

async fn media_type(target: &Target) -> Verdict {
    // Every answer with a body but streams (part 6) and the MCP resources (JSON-RPC).
    let bodies: Vec<_> = target
        .seen()
        .into_iter()
        .filter(|seen| {
            seen.exchange
                .response_body
                .as_deref()
                .is_some_and(|body| !body.is_empty())
                && of_the_document(&seen.request)
        })
        .collect();
    if bodies.is_empty() {
        return skip("no response with a body was seen in this run");
    }
    let other: Vec<_> = bodies
        .iter()
        .filter(|seen| {
            let kind = seen.exchange.response_headers.get("content-type");
            !kind.is_some_and(|kind| kind.starts_with("application/json"))
        })
        .collect();
    cite(other.iter().map(|seen| &seen.exchange));
    let other: Vec<String> = other
        .iter()
        .map(|seen| {
            let kind = seen.exchange.response_headers.get("content-type");
            format!(
                "{} ({}, {kind:?}, from {})",
                seen.request, seen.status, seen.check
            )
        })
        .collect();
    ensure(other.is_empty(), || {
        format!(
            "{} of {} responses with a body are not application/json: {}",
            other.len(),
            bodies.len(),
            other.join("; ")
        )
    })
}

async fn simulation(target: &Target) -> Verdict {
    // The document's view (parts 2.2 to 2.8); our profile's bounds are a profile finding.
    let (Some(validator), Some(profiled)) = (
        spec().normative_component("PipelineSimulation"),
        spec().component("PipelineSimulation"),
    ) else {
        return Err(Finding::Error(
            "openapi.json has no PipelineSimulation".into(),
        ));
    };
    let mut count = 0;
    let mut wrong = Vec::new();
    let mut cited = Vec::new();
    let mut broke = Vec::new();
    let seen = target.seen();
    // Simulations of Builds, as the lifecycle endpoints answer them.
    for seen in &seen {
        if let Some(simulation) = build_simulation(seen) {
            count += 1;
            let differs = profiled.errors(simulation);
            crate::finding::profile(differs.is_empty(), || {
                format!("{}: {}", seen.request, differs.join(", "))
            });
            let errors = validator.errors(simulation);
            if !errors.is_empty() {
                let at = operation_of(&seen.request);
                let violations = validator.violations(simulation);
                broke.extend(violations.iter().map(|v| Broke::schema(Some(&at), v)));
                wrong.push(format!(
                    "{} ({}): {}",
                    seen.request,
                    seen.check,
                    errors.join(", ")
                ));
                cited.push(&seen.exchange);
            }
        }
    }
    cite(cited);
    if count == 0 {
        return skip("no simulation was seen in this run (run the pipeline checks too)");
    }
    crate::finding::breaking(broke);
    ensure(wrong.is_empty(), || {
        format!(
            "{} of {count} simulations break the schema: {}",
            wrong.len(),
            wrong.join("; ")
        )
    })
}

async fn event_page(target: &Target) -> Verdict {
    let pages: Vec<_> = target
        .seen()
        .into_iter()
        .filter(|seen| {
            (200..300).contains(&seen.status) && seen.request.starts_with("GET /v1/agent/chat/")
        })
        .collect();
    if pages.is_empty() {
        return skip("no event page was seen in this run (run the agent checks too)");
    }
    // A member beside the four fields that carries an entry breaks part 2.11; another is only
    // off our profile.
    let mut cited = Vec::new();
    let mut other = Vec::new();
    let mut entries = Vec::new();
    for seen in &pages {
        let members = seen.body.as_object().into_iter().flatten();
        for (name, value) in members.filter(|(name, _)| !PAGE_FIELDS.contains(&name.as_str())) {
            let line = format!("`{name}` in {} (from {})", seen.request, seen.check);
            match entry_kind(name, value) {
                Some(kind) => {
                    cited.push(&seen.exchange);
                    entries.push(format!("{line}, carrying {kind}"));
                }
                None => other.push(line),
            }
        }
    }
    cite(cited);
    crate::finding::profile(other.is_empty(), || {
        format!("members beside the EventPage fields: {}", other.join("; "))
    });
    ensure(entries.is_empty(), || {
        format!(
            "{} members of {} pages carry entries beside `events`: {}",
            entries.len(),
            pages.len(),
            entries
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        )
    })
}

async fn responses(target: &Target) -> Verdict {
    let seen = target.seen().len();
    if seen == 0 {
        return skip("no response was seen in this run");
    }
    let (normative, profile): (Vec<BrokenBody>, Vec<BrokenBody>) = target
        .violations()
        .into_iter()
        .partition(|violation| violation.level == Level::Normative);
    cite(
        normative
            .iter()
            .chain(&profile)
            .map(|violation| &violation.exchange),
    );
    // What only our profile declares (event entries, error codes, statuses) is a profile finding.
    crate::finding::profile(profile.is_empty(), || {
        format!(
            "{} of {seen} responses break the profile's schemas: {}",
            profile.len(),
            listed(&profile)
        )
    });
    crate::finding::breaking(normative.iter().flat_map(|v| v.broke.iter().cloned()));
    ensure(normative.is_empty(), || {
        format!(
            "{} of {seen} responses break openapi.json: {}",
            normative.len(),
            listed(&normative)
        )
    })
}

/// The distinct causes of `violations`, one clause each: what broke (array indices read as `*`),
/// in how many responses, of which operations, most frequent first.
fn listed(violations: &[BrokenBody]) -> String {
    let mut causes: BTreeMap<String, (usize, BTreeSet<String>)> = BTreeMap::new();
    for violation in violations {
        let operation = operation_of(&violation.request);
        for error in &violation.errors {
            let cause = causes.entry(cause_of(error)).or_default();
            cause.0 += 1;
            cause.1.insert(operation.clone());
        }
    }
    let mut causes: Vec<_> = causes.into_iter().collect();
    causes.sort_by_key(|(_, (count, _))| std::cmp::Reverse(*count));
    causes
        .iter()
        .map(|(cause, (count, operations))| {
            let operations: Vec<&str> = operations.iter().map(String::as_str).collect();
            let responses = if *count == 1 { "response" } else { "responses" };
            format!("{cause} ({count} {responses} of {})", operations.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The id of the operation a request (`METHOD /path?query`) went to, or the request's method
/// and route when openapi.json has none.
fn operation_of(request: &str) -> String {
    let (method, path) = request.split_once(' ').unwrap_or(("", request));
    let route = path.split('?').next().unwrap_or(path);
    spec()
        .operation(method, route)
        .map_or_else(|| format!("{method} {route}"), |o| o.id.clone())
}

/// `error` (`pointer: message`) with the array indices of its pointer as `*`, so that the same
/// cause in different entries reads the same.
fn cause_of(error: &str) -> String {
    let (pointer, message) = error.split_once(": ").unwrap_or(("", error));
    format!("{}: {message}", crate::finding::any_index(pointer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_cause_seen_in_many_responses_is_listed_once_with_its_count_and_operations() {
        let violation = |request: &str, errors: &[&str]| BrokenBody {
            check: "pipeline.build",
            request: request.into(),
            status: 200,
            level: Level::Normative,
            errors: errors.iter().map(|e| e.to_string()).collect(),
            broke: Vec::new(),
            exchange: crate::exchange::Exchange::sent(
                &reqwest::Client::new().get("http://x/").build().unwrap(),
                |_| false,
            ),
        };
        let violations = [
            violation(
                "POST /v1/pipeline/evm/build",
                &["/actions/0/gas: \"gas\" is a required property"],
            ),
            violation(
                "POST /v1/pipeline/svm/stage?x=1",
                &["/actions/3/gas: \"gas\" is a required property"],
            ),
            violation("GET /v1/pipeline/apps", &["/: 5 is not of type \"object\""]),
        ];
        assert_eq!(
            listed(&violations),
            "/actions/*/gas: \"gas\" is a required property (2 responses of evmBuild, svmStage); \
             /: 5 is not of type \"object\" (1 response of listPipelineApps)"
        );
    }
}
