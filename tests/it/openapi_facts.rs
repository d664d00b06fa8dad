//! openapi.json says, fact by fact, what `shared/interface.md` states: endpoints, fields,
//! required lists, nullability, enums, scopes and limits. Gap-fills carry `x-profile`.

use std::collections::{BTreeMap, BTreeSet};

use intent_tests::{openapi, operations, resolve};
use serde_json::{Value, json};

fn schema(name: &str) -> &'static Value {
    openapi()["components"]["schemas"]
        .get(name)
        .unwrap_or_else(|| panic!("no component schema {name}"))
}

fn operation(method: &str, path: &str) -> &'static Value {
    let operation = intent_tests::document().by_template(method, path);
    &operation
        .unwrap_or_else(|| panic!("no operation {method} {path}"))
        .object
}

fn is_profile(value: &Value) -> bool {
    value.get("x-profile") == Some(&json!("reference"))
}

fn fills(value: &Value) -> Vec<&str> {
    value["x-profile-fills"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// A property's type in a compact form: `string`, `integer`, `array<string>`, `ref:Name`,
/// `array<ref:Name>`, or `any` for a schema with neither type nor reference.
fn kind(property: &Value) -> String {
    if let Some(schema) = or_null(property) {
        return kind(schema);
    }
    if let Some(reference) = property.get("$ref").and_then(Value::as_str) {
        // A named primitive (such as SessionId) is its type; other references keep their name.
        let name = reference.rsplit('/').next().unwrap();
        let target = schema(name);
        let primitive = ["string", "integer", "number", "boolean"];
        if primitive.contains(&target["type"].as_str().unwrap_or_default()) {
            return kind(target);
        }
        return format!("ref:{name}");
    }
    if let Some([only]) = property
        .get("allOf")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    {
        return kind(only);
    }
    match property.get("type").and_then(Value::as_str) {
        Some("array") => format!("array<{}>", kind(&property["items"])),
        Some(other) => other.to_owned(),
        None => "any".to_owned(),
    }
}

/// The schema of a property written `oneOf: [schema, null]`, the strict OpenAPI 3.0 form of a
/// nullable reference (the null branch is `{enum: [null]}`: no `type`, and so no `nullable`,
/// which OpenAPI 3.0.3 reads only beside a `type`).
fn or_null(property: &Value) -> Option<&Value> {
    match property
        .get("oneOf")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    {
        Some([schema, null]) if null["enum"] == json!([null]) => Some(schema),
        _ => None,
    }
}

/// Field rows of a table in part 2: name, type, required, nullable.
type Row = (&'static str, &'static str, bool, bool);

/// Asserts that schema `name` has each member the interface lists in `rows` as it lists it
/// ([`differences`]), and beside them only members of our profile.
fn assert_fields(name: &str, rows: &[Row]) {
    let found = differences(schema(name), name, rows);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// How `schema` (named `name`) differs from the members the interface lists in `rows`: each
/// must be there, with its stated type (read without what our profile fills in, its
/// `x-profile-fills`), required or not and nullable or not, and not marked as ours; every other
/// member must be marked `x-profile: reference`, a member of our profile beside the document's
/// (docs/profile.md). One line per difference, naming the member.
fn differences(schema: &Value, name: &str, rows: &[Row]) -> Vec<String> {
    let mut found = Vec::new();
    let Some(properties) = schema["properties"].as_object() else {
        return vec![format!("{name} has no properties")];
    };
    let documented: BTreeSet<&str> = rows.iter().map(|row| row.0).collect();
    for (member, property) in properties {
        if !documented.contains(member.as_str()) && !is_profile(property) {
            found.push(format!(
                "{name}.{member}: the interface does not list it, so it is marked x-profile: \
                 reference"
            ));
        }
    }
    let required: BTreeSet<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    for &(field, ty, is_required, is_nullable) in rows {
        let Some(property) = properties.get(field) else {
            found.push(format!(
                "{name}.{field}: the interface lists it, and openapi.json has no such member"
            ));
            continue;
        };
        if is_profile(property) {
            found.push(format!(
                "{name}.{field}: the interface lists it, so it is not x-profile: reference (list \
                 what of its content is ours in its x-profile-fills)"
            ));
        }
        let stated = kind(&stated(property));
        if stated != ty {
            found.push(format!(
                "{name}.{field}: type {stated}, the interface's {ty}"
            ));
        }
        if required.contains(field) != is_required {
            found.push(format!("{name}.{field}: required is not {is_required}"));
        }
        let nullable =
            property.get("nullable") == Some(&json!(true)) || or_null(property).is_some();
        if nullable != is_nullable {
            found.push(format!("{name}.{field}: nullable is not {is_nullable}"));
        }
    }
    found
}

/// `property` without the keywords its `x-profile-fills` lists: what the interface states of it.
fn stated(property: &Value) -> Value {
    let mut stated = property.clone();
    if let Some(members) = stated.as_object_mut() {
        for fill in fills(property) {
            members.remove(fill);
        }
    }
    stated
}

fn assert_strict(name: &str, strict: bool) {
    assert_eq!(
        schema(name).get("additionalProperties") == Some(&json!(false)),
        strict,
        "{name}: additionalProperties false"
    );
}

fn enum_of(value: &Value) -> Vec<Value> {
    value["enum"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("no enum in {value}"))
}

#[test]
fn document_is_openapi_3_0_3_version_1_0_0_with_both_servers() {
    let doc = openapi();
    assert_eq!(doc["openapi"], "3.0.3");
    assert_eq!(doc["info"]["version"], "1.0.0");
    let variables: BTreeSet<&str> = doc["servers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|server| server["variables"].as_object().unwrap().keys())
        .map(String::as_str)
        .collect();
    assert_eq!(variables, BTreeSet::from(["base_url", "staging_base_url"]));
}

#[test]
fn every_path_begins_with_v1() {
    for (_, path, _) in operations() {
        assert!(path.starts_with("/v1/"), "{path}");
    }
}

/// Part 4: every endpoint the interface names, with its tag.
const INTERFACE_ENDPOINTS: &[(&str, &str, &str)] = &[
    ("POST", "/v1/pipeline/svm/stage", "pipeline"),
    ("POST", "/v1/pipeline/evm/build", "pipeline"),
    (
        "POST",
        "/v1/pipeline/skills/{skill}/operations/{operation}",
        "pipeline",
    ),
    (
        "GET",
        "/v1/pipeline/apps/{app}/operations/{operation}",
        "pipeline",
    ),
    ("POST", "/v1/agent/chat", "agent"),
    ("GET", "/v1/agent/chat/{sessionId}", "agent"),
    ("GET", "/v1/agent/chat/{sessionId}/stream", "agent"),
    ("GET", "/v1/agent/sessions/{sessionId}", "agent"),
    ("PATCH", "/v1/agent/sessions/{sessionId}", "agent"),
    ("POST", "/v1/account/apps/{applicationId}", "account"),
    (
        "DELETE",
        "/v1/account/apps/{applicationId}/secrets/{name}",
        "account",
    ),
    ("GET", "/v1/account/statement", "account"),
];

#[test]
fn every_endpoint_of_part_4_is_present_with_its_tag() {
    for &(method, path, tag) in INTERFACE_ENDPOINTS {
        let op = operation(method, path);
        assert_eq!(op["tags"], json!([tag]), "{method} {path}");
        assert!(
            !is_profile(op),
            "{method} {path} is normative, not a profile choice"
        );
    }
}

#[test]
fn operations_beyond_part_4_are_marked_profile() {
    for (method, path, op) in operations() {
        let named = INTERFACE_ENDPOINTS
            .iter()
            .any(|&(m, p, _)| m == method && p == path);
        // Action resolution's path and method are not shown (part 4.2): the operation is ours,
        // and what the document states of it stands in `ActionResolutionRequest`.
        if !named {
            assert!(
                is_profile(op),
                "{method} {path} is a gap-fill and must carry x-profile"
            );
        }
    }
}

#[test]
fn every_operation_has_id_tag_one_scope_one_success_and_the_error_envelope() {
    let mut ids = BTreeSet::new();
    for (method, path, op) in operations() {
        let id = op["operationId"]
            .as_str()
            .unwrap_or_else(|| panic!("{method} {path}: operationId"));
        assert!(ids.insert(id), "duplicate operationId {id}");
        let tags = op["tags"].as_array().unwrap();
        assert!(
            tags.len() == 1
                && ["pipeline", "agent", "account"].contains(&tags[0].as_str().unwrap()),
            "{id}: tag"
        );
        assert_eq!(
            op["x-resource"], tags[0],
            "{id}: x-resource names the token's resource"
        );
        let scopes = op["security"][0]["oauth2"]
            .as_array()
            .unwrap_or_else(|| panic!("{id}: security"));
        assert_eq!(scopes.len(), 1, "{id}: one scope");
        let responses = op["responses"].as_object().unwrap();
        let successes: Vec<&String> = responses
            .keys()
            .filter(|code| code.starts_with('2'))
            .collect();
        assert_eq!(successes.len(), 1, "{id}: exactly one success response");
        // Parts 4 and 7.2: every endpoint may return an error envelope, and any other status
        // falls to the same envelope.
        assert_eq!(
            responses.get("default"),
            Some(&json!({ "$ref": "#/components/responses/Error" })),
            "{id}: default is the error envelope"
        );
        let errors = responses
            .iter()
            .filter(|(code, _)| !code.starts_with(['2', 'x']));
        for (code, response) in errors {
            let response = resolve(response);
            assert_eq!(
                response["content"]["application/json"]["schema"],
                json!({ "$ref": "#/components/schemas/ErrorEnvelope" }),
                "{id} {code}: error body is the ErrorEnvelope"
            );
        }
        for code in ["401", "403"] {
            assert!(responses.contains_key(code), "{id}: declares {code}");
        }
    }
    let error = &openapi()["components"]["responses"]["Error"];
    assert!(
        !is_profile(error) && fills(error).is_empty(),
        "the default response is the document's"
    );
}

#[test]
fn scopes_named_by_part_5_and_the_rest_marked_profile() {
    let scope_of = |method, path| operation(method, path)["security"][0]["oauth2"][0].clone();
    assert_eq!(
        scope_of("POST", "/v1/pipeline/svm/stage"),
        "pipeline:execute"
    );
    let resolve_op = operations()
        .into_iter()
        .find(|(_, _, op)| op["operationId"] == "resolveAction")
        .expect("action resolution exists")
        .2;
    assert_eq!(
        resolve_op["security"][0]["oauth2"][0],
        "agent:actions:resolve"
    );
    let normative = [("POST", "/v1/pipeline/svm/stage")];
    for (method, path, op) in operations() {
        if normative.contains(&(method.as_str(), path)) || op["operationId"] == "resolveAction" {
            continue;
        }
        assert!(
            is_profile(op) || fills(op).contains(&"security"),
            "{method} {path}: the scope is a profile choice and must be marked"
        );
    }
}

#[test]
fn all_sixteen_scopes_with_their_descriptions() {
    let expected = BTreeMap::from([
        ("agent:read", "Read owned Agent turns and sessions"),
        (
            "agent:write",
            "Start, continue, interrupt, update or delete Agent sessions",
        ),
        ("agent:actions:resolve", "Resolve a durable Agent Action"),
        (
            "pipeline:catalog",
            "Browse public Pipeline apps, skills and operations",
        ),
        (
            "pipeline:execute",
            "Attempt Pipeline execution, subject to a policy gate",
        ),
        (
            "account:apps:read",
            "Read available applications and installed state",
        ),
        ("account:apps:write", "Install and remove applications"),
        (
            "account:credentials:read",
            "Read credential declarations and presence, without values",
        ),
        (
            "account:credentials:write",
            "Save and remove owned application credentials",
        ),
        (
            "account:credits:read",
            "Read included allowance and credit-bank activity",
        ),
        (
            "account:credits:topup",
            "Buy durable credit-bank value through an x402 payment",
        ),
        ("account:usage:read", "Read priced account usage"),
        ("mcp:agent", "Use the Agent MCP protected resource"),
        ("mcp:pipeline", "Use the Pipeline MCP protected resource"),
        ("payments:submit", "Attach a client-held payment signature"),
        (
            "custody:delegate",
            "Permit separately approved delegated custody",
        ),
    ]);
    let scheme = &openapi()["components"]["securitySchemes"]["oauth2"];
    assert_eq!(scheme["type"], "oauth2");
    let flow = &scheme["flows"]["authorizationCode"];
    let scopes: BTreeMap<&str, &str> = flow["scopes"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(scope, description)| (scope.as_str(), description.as_str().unwrap()))
        .collect();
    assert_eq!(scopes, expected);
    for (_, _, op) in operations() {
        let scope = op["security"][0]["oauth2"][0].as_str().unwrap();
        assert!(
            expected.contains_key(scope),
            "{scope} is not a scope of part 5"
        );
    }
}

#[test]
fn oauth_addresses_and_the_five_resources() {
    let scheme = &openapi()["components"]["securitySchemes"]["oauth2"];
    let flow = &scheme["flows"]["authorizationCode"];
    // Part 5.3: `{base_url}/api/auth/...`. OpenAPI 3.0.3 resolves a relative URL against the
    // server's, whose URL is `{base_url}`: so each address is written as the document writes it.
    assert_eq!(openapi()["servers"][0]["url"], "{base_url}");
    assert_eq!(flow["authorizationUrl"], "/api/auth/oauth2/authorize");
    assert_eq!(flow["tokenUrl"], "/api/auth/oauth2/token");
    assert_eq!(
        scheme["x-device-authorization-url"],
        "/api/auth/device/code"
    );
    assert!(fills(flow).contains(&"x-profile-note"));
    let description = scheme["description"].as_str().unwrap();
    for address in [
        "{base_url}/api/auth/oauth2/authorize",
        "{base_url}/api/auth/oauth2/token",
        "{base_url}/api/auth/device/code",
    ] {
        assert!(description.contains(address), "{address}");
    }
    assert_eq!(
        scheme["x-resources"],
        json!({
            "agent": "{base_url}/v1/agent",
            "pipeline": "{base_url}/v1/pipeline",
            "agent-mcp": "{base_url}/v1/agent/mcp",
            "pipeline-mcp": "{base_url}/v1/pipeline/mcp",
            "account": "{base_url}/v1/account",
        })
    );
}

#[test]
fn pipeline_build_has_the_fields_of_2_1() {
    assert_fields(
        "PipelineBuild",
        &[
            ("version", "integer", true, false),
            ("status", "string", true, false),
            ("actions", "array<ref:PipelineAction>", true, false),
            ("origin", "ref:PipelineOrigin", true, false),
            ("simulation", "ref:PipelineSimulation", false, false),
            ("summary", "any", false, false),
            ("expiresAt", "integer", true, false),
            ("digest", "string", true, false),
            ("attestation", "string", true, false),
        ],
    );
    let build = schema("PipelineBuild");
    assert_eq!(enum_of(&build["properties"]["version"]), [json!(2)]);
    assert_eq!(
        enum_of(&build["properties"]["status"]),
        [json!("staged"), json!("simulated")]
    );
    assert_eq!(
        build["properties"]["digest"]["pattern"],
        "^sha256:[0-9a-f]{64}$"
    );
    // `summary` is the interface's member, any JSON value; the shape here is ours.
    assert_eq!(
        fills(&build["properties"]["summary"]),
        ["allOf", "x-profile-note"]
    );
    assert!(
        is_profile(schema("PipelineAction")),
        "action item shape is a gap-fill"
    );
    assert_fields(
        "PipelineOrigin",
        &[
            ("app", "string", true, false),
            ("skills", "array<string>", false, false),
            (
                "operations",
                "array<ref:PipelineOriginOperation>",
                true,
                false,
            ),
        ],
    );
    assert!(
        is_profile(schema("PipelineOriginOperation")),
        "operation item shape is a gap-fill"
    );
}

#[test]
fn pipeline_simulation_has_the_fields_of_2_2_and_no_extra_properties() {
    assert_fields(
        "PipelineSimulation",
        &[
            ("status", "string", true, false),
            (
                "balanceChanges",
                "array<ref:PipelineBalanceChange>",
                true,
                false,
            ),
            (
                "approvals",
                "array<ref:PipelineApprovalChange>",
                true,
                false,
            ),
            ("fees", "array<ref:PipelineFeeEstimate>", true, false),
            ("warnings", "array<string>", true, false),
            ("guards", "array<ref:PipelineGuardResult>", true, false),
            ("gas", "ref:PipelineGasEstimate", true, true),
            ("logs", "array<ref:PipelineLog>", true, false),
        ],
    );
    assert_strict("PipelineSimulation", true);
    let status = &schema("PipelineSimulation")["properties"]["status"];
    assert_eq!(enum_of(status), [json!("passed"), json!("failed")]);
}

#[test]
fn balance_change_has_the_fields_of_2_3() {
    assert_fields(
        "PipelineBalanceChange",
        &[
            ("asset", "string", true, false),
            ("amount", "string", true, false),
            ("account", "string", false, true),
            ("direction", "string", false, true),
            ("symbol", "string", false, true),
            ("decimals", "integer", false, true),
            ("chainId", "integer", false, true),
            ("cluster", "string", false, true),
            ("standard", "string", false, true),
            ("name", "string", false, true),
            ("tokenId", "string", false, true),
            ("counterparty", "string", false, true),
            ("step", "integer", false, true),
        ],
    );
    assert_strict("PipelineBalanceChange", true);
    let properties = &schema("PipelineBalanceChange")["properties"];
    assert_eq!(
        enum_of(&properties["direction"]),
        [json!("in"), json!("out"), Value::Null]
    );
    assert_eq!(
        enum_of(&properties["standard"]),
        [
            json!("native"),
            json!("erc20"),
            json!("erc721"),
            json!("erc1155"),
            json!("erc721_or_erc1155"),
            Value::Null
        ]
    );
}

#[test]
fn approval_change_has_the_fields_of_2_4() {
    assert_fields(
        "PipelineApprovalChange",
        &[
            ("account", "string", true, false),
            ("spender", "string", true, false),
            ("asset", "string", true, false),
            ("kind", "string", true, false),
            ("standard", "string", true, false),
            ("amount", "string", false, true),
            ("approved", "boolean", false, true),
            ("unlimited", "boolean", false, true),
            ("tokenId", "string", false, true),
            ("symbol", "string", false, true),
            ("name", "string", false, true),
            ("decimals", "integer", false, true),
            ("chainId", "integer", false, true),
            ("step", "integer", false, true),
        ],
    );
    assert_strict("PipelineApprovalChange", true);
    let properties = &schema("PipelineApprovalChange")["properties"];
    assert_eq!(
        enum_of(&properties["kind"]),
        [json!("allowance"), json!("token"), json!("operator")]
    );
    assert_eq!(
        enum_of(&properties["standard"]),
        [
            json!("native"),
            json!("erc20"),
            json!("erc721"),
            json!("erc1155"),
            json!("erc721_or_erc1155")
        ]
    );
}

#[test]
fn fee_guard_gas_and_log_have_the_fields_of_2_5_to_2_8() {
    assert_fields(
        "PipelineFeeEstimate",
        &[
            ("asset", "string", true, false),
            ("amount", "string", true, false),
            ("account", "string", false, true),
            ("symbol", "string", false, true),
            ("decimals", "integer", false, true),
            ("chainId", "integer", false, true),
            ("cluster", "string", false, true),
            ("kind", "string", false, true),
        ],
    );
    assert_fields(
        "PipelineGuardResult",
        &[
            ("name", "string", true, false),
            ("status", "string", true, false),
            ("message", "string", false, true),
        ],
    );
    let guard_status = &schema("PipelineGuardResult")["properties"]["status"];
    assert_eq!(
        enum_of(guard_status),
        [json!("passed"), json!("failed"), json!("warning")]
    );
    assert_fields(
        "PipelineGasEstimate",
        &[
            ("units", "string", false, true),
            ("priceWei", "string", false, true),
            ("nativeCost", "string", false, true),
        ],
    );
    assert_fields(
        "PipelineLog",
        &[
            ("address", "string", true, false),
            ("topics", "array<string>", true, false),
            ("data", "string", true, false),
            ("chainId", "integer", false, true),
            ("cluster", "string", false, true),
            ("step", "integer", false, true),
        ],
    );
    for name in [
        "PipelineFeeEstimate",
        "PipelineGuardResult",
        "PipelineGasEstimate",
        "PipelineLog",
    ] {
        assert_strict(name, true);
    }
}

#[test]
fn step_has_minimum_1_on_balance_approval_and_log_entries() {
    for name in [
        "PipelineBalanceChange",
        "PipelineApprovalChange",
        "PipelineLog",
    ] {
        assert_eq!(
            schema(name)["properties"]["step"]["minimum"],
            1,
            "{name}.step"
        );
    }
}

#[test]
fn session_operation_descriptor_event_page_and_error_envelope_of_2_9_to_2_12() {
    assert_fields("Session", &SESSION);
    assert_fields(
        "OperationDescriptor",
        &[
            ("kind", "string", true, false),
            ("name", "string", true, false),
            ("method", "string", true, false),
            ("href", "string", true, false),
            ("inputSchema", "object", true, false),
        ],
    );
    assert_eq!(
        enum_of(&schema("OperationDescriptor")["properties"]["kind"]),
        [json!("operation")]
    );
    assert_fields(
        "EventPage",
        &[
            ("session_id", "string", true, false),
            ("cursor", "string", true, false),
            ("events", "array<ref:AgentEvent>", true, false),
            ("has_more", "boolean", true, false),
        ],
    );
    // The interface lists these fields without a required column: requiring them is ours.
    for name in ["Session", "OperationDescriptor", "EventPage"] {
        assert!(
            fills(schema(name)).contains(&"required"),
            "{name}: required list is a profile choice"
        );
    }
    assert_fields("ErrorEnvelope", &[("error", "any", true, false)]);
}

/// The rows of `Session` in part 2.9.
const SESSION: [Row; 4] = [
    ("id", "string", true, false),
    ("updatedAt", "integer", true, false),
    ("archived", "boolean", true, false),
    ("title", "string", true, false),
];

#[test]
fn a_member_of_our_profile_may_join_a_model_and_a_member_of_the_document_may_not_go() {
    let session = schema("Session");
    // A maintainer's optional member, marked as ours: the model still holds the facts.
    let mut added = session.clone();
    added["properties"]["turnCount"] = json!({ "type": "integer", "x-profile": "reference" });
    assert_eq!(
        differences(&added, "Session", &SESSION),
        Vec::<String>::new()
    );
    // Unmarked, it reads as a member the interface does not list.
    added["properties"]["turnCount"] = json!({ "type": "integer" });
    let found = differences(&added, "Session", &SESSION);
    assert!(
        found[0].starts_with("Session.turnCount: the interface does not list it"),
        "{found:?}"
    );
    // A member of the document renamed: named as missing.
    let mut renamed = session.clone();
    let properties = renamed["properties"].as_object_mut().unwrap();
    let title = properties.remove("title").unwrap();
    properties.insert("name".into(), title);
    let missing = "Session.title: the interface lists it, and openapi.json has no such member";
    let found = differences(&renamed, "Session", &SESSION);
    assert!(found.iter().any(|line| line == missing), "{found:?}");
    // Or marked as ours.
    let mut marked = session.clone();
    marked["properties"]["title"]["x-profile"] = json!("reference");
    let found = differences(&marked, "Session", &SESSION);
    assert!(
        found[0].starts_with("Session.title: the interface lists it, so it is not"),
        "{found:?}"
    );
}

#[test]
fn session_update_takes_title_and_archived() {
    assert_fields(
        "SessionUpdate",
        &[
            ("title", "string", false, false),
            ("archived", "boolean", false, false),
        ],
    );
    let op = operation("PATCH", "/v1/agent/sessions/{sessionId}");
    assert_eq!(
        op["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/SessionUpdate"
    );
}

#[test]
fn turn_states_of_part_3_and_events_that_carry_them() {
    assert_eq!(
        enum_of(schema("TurnState")),
        [
            "processing",
            "complete",
            "failed",
            "interrupted",
            "awaiting_action"
        ]
        .map(|s| json!(s))
    );
    let variants = schema("AgentEvent")["oneOf"].as_array().unwrap();
    let mut kinds = BTreeSet::new();
    for variant in variants {
        let kind = enum_of(&variant["properties"]["type"]);
        assert_eq!(kind.len(), 1, "each event variant has one `type`");
        kinds.insert(kind[0].as_str().unwrap().to_owned());
        let required = variant["required"].as_array().unwrap();
        assert!(required.contains(&json!("type")) && required.contains(&json!("seq")));
        assert_eq!(variant["properties"]["seq"]["minimum"], 1);
    }
    let expected = [
        "message",
        "tool_call",
        "tool_result",
        "action",
        "action_result",
        "error",
        "turn_state",
    ];
    assert_eq!(kinds, expected.iter().map(|s| s.to_string()).collect());
    let turn_state = variants
        .iter()
        .find(|v| v["properties"]["type"]["enum"][0] == "turn_state")
        .unwrap();
    assert_eq!(
        turn_state["properties"]["state"]["$ref"],
        "#/components/schemas/TurnState"
    );
    let action = variants
        .iter()
        .find(|v| v["properties"]["type"]["enum"][0] == "action")
        .unwrap();
    assert_eq!(
        action["properties"]["action"]["$ref"],
        "#/components/schemas/ActionRequest"
    );
}

#[test]
fn action_resolution_takes_revision_and_result_with_an_idempotency_key() {
    // Part 4.2: `revision: number` (the `allOf`); our profile's integer is a fill.
    assert_fields(
        "ActionResolutionRequest",
        &[
            ("revision", "number", true, false),
            ("result", "ref:ActionResult", true, false),
        ],
    );
    let (_, path, op) = operations()
        .into_iter()
        .find(|(_, _, op)| op["operationId"] == "resolveAction")
        .unwrap();
    assert!(path.starts_with("/v1/agent/"), "{path}");
    let parameters: Vec<&Value> = op["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(resolve)
        .collect();
    let key = parameters
        .iter()
        .find(|p| p["name"] == "Idempotency-Key")
        .expect("Idempotency-Key header");
    assert_eq!(
        (key["in"].clone(), key["required"].clone()),
        (json!("header"), json!(true))
    );
    let success = &op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"];
    assert_eq!(success, "#/components/schemas/ActionResolution");
    assert!(
        schema("ActionResolution")["required"]
            .as_array()
            .unwrap()
            .contains(&json!("revision"))
    );
    // Part 4.2: `revision: number`. Our profile narrows it to a 64-bit integer from 1, which the
    // code generators read; the normative view keeps the number (`allOf`).
    let revision = &schema("ActionResolutionRequest")["properties"]["revision"];
    assert_eq!(revision["allOf"], json!([{ "type": "number" }]));
    for keyword in ["type", "format", "minimum"] {
        assert!(
            fills(revision).contains(&keyword),
            "revision: {keyword} is ours"
        );
    }
}

/// Integers of parts 2, 4 and 8 to which our profile gives `format: int64` (as its fill), and
/// numbers it narrows to integers.
#[test]
fn int64_and_integer_narrowings_are_marked_at_their_keyword() {
    let members: &[(&str, &[&str])] = &[
        ("PipelineBuild", &["expiresAt"]),
        ("PipelineBalanceChange", &["decimals", "chainId", "step"]),
        ("PipelineApprovalChange", &["decimals", "chainId", "step"]),
        ("PipelineFeeEstimate", &["decimals", "chainId"]),
        ("PipelineLog", &["chainId", "step"]),
        ("Session", &["updatedAt"]),
    ];
    let mut integers: Vec<(String, &Value)> = members
        .iter()
        .flat_map(|(name, properties)| {
            properties.iter().map(move |property| {
                (
                    format!("{name}.{property}"),
                    &schema(name)["properties"][*property],
                )
            })
        })
        .collect();
    let parameters = &openapi()["components"]["parameters"];
    integers.push(("wait".into(), &parameters["Wait"]["schema"]));
    integers.push((
        "applicationId".into(),
        &parameters["ApplicationId"]["schema"],
    ));
    assert_eq!(integers.len(), 14);
    for (at, integer) in integers {
        assert_eq!(
            (integer["type"].clone(), integer["format"].clone()),
            (json!("integer"), json!("int64")),
            "{at}"
        );
        assert!(fills(integer).contains(&"format"), "{at}: int64 is ours");
    }
    // Part 4.3: `{applicationId}` is numeric; our profile makes it an integer.
    let application = &parameters["ApplicationId"]["schema"];
    assert!(fills(application).contains(&"type"));
    assert_eq!(application["allOf"], json!([{ "type": "number" }]));
    // Part 2.9: `Session.id` is a string; the 160 of `SessionId` is the path parameter's.
    let id = &schema("Session")["properties"]["id"];
    assert_eq!(id["type"], "string");
    assert_eq!(
        id["oneOf"],
        json!([{ "$ref": "#/components/schemas/SessionId" }])
    );
    assert!(fills(id).contains(&"oneOf") && !fills(id).contains(&"type"));
}

#[test]
fn install_and_credential_removal_return_a_json_object_of_our_members() {
    for (method, path, name) in [
        (
            "POST",
            "/v1/account/apps/{applicationId}",
            "AppInstallation",
        ),
        (
            "DELETE",
            "/v1/account/apps/{applicationId}/secrets/{name}",
            "CredentialChange",
        ),
    ] {
        let success = &operation(method, path)["responses"]["200"];
        assert_eq!(
            success["content"]["application/json"]["schema"]["$ref"],
            format!("#/components/schemas/{name}"),
            "{method} {path}"
        );
        let object = schema(name);
        assert_eq!(object["type"], "object", "{name}");
        assert!(
            !is_profile(object) && !fills(object).contains(&"type"),
            "{name}"
        );
        assert!(
            fills(object).contains(&"required"),
            "{name}: required is ours"
        );
        for (member, property) in object["properties"].as_object().unwrap() {
            assert!(is_profile(property), "{name}.{member} is ours");
        }
    }
}

fn parameter(method: &str, path: &str, name: &str) -> &'static Value {
    operation(method, path)["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(resolve)
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("{method} {path} has no parameter {name}"))
}

#[test]
fn limits_of_part_8_on_every_operation_that_takes_the_parameter() {
    let mut seen = BTreeSet::new();
    for (method, path, _) in operations() {
        for name in [
            "sessionId",
            "skill",
            "operation",
            "app",
            "applicationId",
            "name",
        ] {
            if !path.contains(&format!("{{{name}}}")) {
                continue;
            }
            seen.insert(name);
            let schema = resolve(&parameter(&method, path, name)["schema"]);
            match name {
                "sessionId" => assert_eq!(schema["maxLength"], 160, "{method} {path}"),
                "skill" | "operation" | "app" => {
                    assert_eq!(
                        (schema["minLength"].clone(), schema["maxLength"].clone()),
                        (json!(1), json!(160))
                    )
                }
                "applicationId" => {
                    assert_eq!(
                        (schema["type"].clone(), schema["minimum"].clone()),
                        (json!("integer"), json!(1))
                    )
                }
                "name" => {
                    assert_eq!(schema["maxLength"], 128);
                    assert_eq!(schema["pattern"], "^[A-Za-z_][A-Za-z0-9_]{0,127}$");
                }
                _ => unreachable!(),
            }
        }
    }
    assert_eq!(
        seen.len(),
        6,
        "every limited parameter appears somewhere: {seen:?}"
    );
    let wait = &parameter("GET", "/v1/agent/chat/{sessionId}", "wait")["schema"];
    assert_eq!(
        (wait["type"].clone(), wait["maximum"].clone()),
        (json!("integer"), json!(30000))
    );
}

#[test]
fn cursor_and_page_limit_are_profile_query_parameters() {
    for name in ["cursor", "limit"] {
        let p = parameter("GET", "/v1/agent/chat/{sessionId}", name);
        assert_eq!(p["in"], "query");
        assert!(is_profile(p), "{name}");
    }
    let cursor = parameter("GET", "/v1/agent/chat/{sessionId}/stream", "cursor");
    assert_eq!(cursor["in"], "query");
    let last_event_id = parameter("GET", "/v1/agent/chat/{sessionId}/stream", "Last-Event-ID");
    assert_eq!(last_event_id["in"], "header");
}

#[test]
fn sse_stream_is_text_event_stream_with_the_three_event_names() {
    let response = &operation("GET", "/v1/agent/chat/{sessionId}/stream")["responses"]["200"];
    assert!(response["content"].get("text/event-stream").is_some());
    let names: BTreeSet<&str> = response["x-sse-events"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(names, BTreeSet::from(["page", "message", "resync"]));
    assert_eq!(
        response["x-sse-events"]["page"]["$ref"],
        "#/components/schemas/EventPage"
    );
}

#[test]
fn error_codes_name_their_status_as_part_7_says() {
    let codes = schema("ErrorCode");
    let statuses = codes["x-status"].as_object().unwrap();
    let listed: BTreeSet<String> = enum_of(codes)
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect();
    let mapped: BTreeSet<String> = statuses.keys().cloned().collect();
    assert_eq!(listed, mapped, "every code has a status");
    for (code, status) in [
        ("invalid_cursor", 400),
        ("cursor_expired", 410),
        ("unauthorized", 401),
        ("insufficient_scope", 403),
        ("build_expired", 422),
    ] {
        assert_eq!(statuses[code], status, "{code}");
    }
    for path in [
        "/v1/agent/chat/{sessionId}",
        "/v1/agent/chat/{sessionId}/stream",
    ] {
        let responses = &operation("GET", path)["responses"];
        assert!(
            responses.get("400").is_some() && responses.get("410").is_some(),
            "{path}"
        );
    }
}

/// The schemas part 2 describes, or whose shape the interface gives in part 4. Everything else
/// in `components.schemas` is a gap-fill.
const NORMATIVE_SCHEMAS: &[&str] = &[
    "PipelineBuild",
    "PipelineOrigin",
    "PipelineSimulation",
    "PipelineBalanceChange",
    "PipelineApprovalChange",
    "PipelineFeeEstimate",
    "PipelineGuardResult",
    "PipelineGasEstimate",
    "PipelineLog",
    "PipelineLifecycleRequest",
    // Part 4.1: "200 PipelineBuild", or a commit result (whose shape, PipelineCommitResult, is
    // ours).
    "PipelineLifecycleResponse",
    "OperationDescriptor",
    "Session",
    // Part 8's limit of a session id, shared by every session path and by `Session.id`.
    "SessionId",
    "SessionUpdate",
    "TurnState",
    "EventPage",
    "ActionResolutionRequest",
    "ErrorEnvelope",
    // Part 4.3: install and credential removal return a JSON object; every member is ours.
    "AppInstallation",
    "CredentialChange",
];

#[test]
fn every_gap_filling_schema_is_marked_profile() {
    for (name, schema) in openapi()["components"]["schemas"].as_object().unwrap() {
        if !NORMATIVE_SCHEMAS.contains(&name.as_str()) {
            assert!(
                is_profile(schema),
                "{name} fills a gap and must carry x-profile: reference"
            );
        }
    }
    for name in NORMATIVE_SCHEMAS {
        assert!(!is_profile(schema(name)), "{name} is normative");
    }
    for name in [
        "PipelineBuildRequest",
        "PipelineStageInput",
        "PipelineCommitResult",
        "ActionRequest",
        "ActionResult",
        "AgentEvent",
        "ChatStartRequest",
        "ChatStartResponse",
        "ErrorDetail",
    ] {
        assert!(is_profile(schema(name)), "{name}");
    }
}

#[test]
fn lifecycle_request_variants_are_build_request_stage_input_and_build() {
    let variants: Vec<&Value> = schema("PipelineLifecycleRequest")["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    let names: Vec<&str> = variants
        .iter()
        .map(|v| v["$ref"].as_str().unwrap().rsplit('/').next().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "PipelineBuildRequest",
            "PipelineStageInput",
            "PipelineBuild"
        ]
    );
    // Part 4.1: a JSON object, whose fields the document does not show: the variants are ours.
    let request = schema("PipelineLifecycleRequest");
    assert_eq!(request["type"], "object");
    assert!(fills(request).contains(&"oneOf"), "the variants are ours");
    assert!(
        !fills(request).contains(&"type"),
        "a JSON object is the document's"
    );
    for (method, path) in [
        ("POST", "/v1/pipeline/svm/stage"),
        ("POST", "/v1/pipeline/evm/build"),
    ] {
        let op = operation(method, path);
        assert_eq!(op["requestBody"]["required"], true);
        assert_eq!(
            op["requestBody"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/PipelineLifecycleRequest"
        );
        let response = &op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"];
        assert_eq!(response, "#/components/schemas/PipelineLifecycleResponse");
        assert!(!is_profile(&op["responses"]["200"]), "{method} {path} 200");
        // Parts 5.5 and 7.2: 401 and 403 are declared for the lifecycle endpoint.
        for (status, name) in [
            ("401", "LifecycleUnauthorized"),
            ("403", "LifecycleForbidden"),
        ] {
            assert_eq!(
                op["responses"][status]["$ref"],
                format!("#/components/responses/{name}"),
                "{method} {path} {status}"
            );
            let declared = resolve(&op["responses"][status]);
            assert!(
                !is_profile(declared),
                "{method} {path} {status} is normative"
            );
            assert_eq!(
                declared["content"]["application/json"]["schema"]["$ref"],
                "#/components/schemas/ErrorEnvelope",
                "{method} {path} {status}"
            );
        }
    }
    let lifecycle = schema("PipelineLifecycleResponse");
    assert!(!is_profile(lifecycle) && fills(lifecycle).is_empty());
    assert!(is_profile(schema("PipelineCommitResult")));
    let results: Vec<&str> = schema("PipelineLifecycleResponse")["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["$ref"].as_str().unwrap())
        .collect();
    assert_eq!(
        results,
        [
            "#/components/schemas/PipelineBuild",
            "#/components/schemas/PipelineCommitResult"
        ]
    );
}

/// Every link of a response: (where, link name, link).
fn links() -> Vec<(String, &'static str, &'static Value)> {
    let mut found = Vec::new();
    for (method, path, op) in operations() {
        for (status, response) in op["responses"].as_object().into_iter().flatten() {
            for (name, link) in resolve(response)["links"].as_object().into_iter().flatten() {
                found.push((format!("{method} {path} {status}"), name.as_str(), link));
            }
        }
    }
    found
}

/// Whether a link's runtime expression (OpenAPI 3.0.3, 4.7.20.4) names what the operation
/// `source`, answering `status`, has: a body member at any JSON pointer, a whole body, a
/// parameter or a header, the forms the suite's stateful checks evaluate. A value that is no
/// expression is a constant.
fn expression_holds(
    source: &'static Value,
    status: &str,
    expression: &Value,
) -> Result<(), String> {
    let Some(text) = expression.as_str().filter(|text| text.starts_with('$')) else {
        return Ok(());
    };
    let response = resolve(&source["responses"][status]);
    let body_at = |schema: &'static Value, pointer: &str| {
        schema_at(schema, pointer)
            .map(|_| ())
            .ok_or("no such member of the body".to_owned())
    };
    let declared = |location: &str, name: &str| {
        let parameters = source["parameters"].as_array().into_iter().flatten();
        parameters
            .map(resolve)
            .filter(|p| p["in"] == location)
            .filter_map(|p| p["name"].as_str())
            .any(|declared| match location {
                "header" => declared.eq_ignore_ascii_case(name),
                _ => declared == name,
            })
            .then_some(())
            .ok_or(format!("the operation has no {location} parameter {name}"))
    };
    if let Some(pointer) = text.strip_prefix("$response.body#") {
        body_at(
            resolve(&response["content"]["application/json"]["schema"]),
            pointer,
        )
    } else if let Some(pointer) = text.strip_prefix("$request.body#") {
        let schema = &source["requestBody"]["content"]["application/json"]["schema"];
        body_at(resolve(schema), pointer)
    } else if let Some(name) = text.strip_prefix("$response.header.") {
        let headers = response["headers"].as_object().into_iter().flatten();
        let mut names = headers.map(|(header, _)| header);
        names
            .any(|header| header.eq_ignore_ascii_case(name))
            .then_some(())
            .ok_or(format!("the response declares no header {name}"))
    } else if let Some(name) = text.strip_prefix("$request.path.") {
        declared("path", name)
    } else if let Some(name) = text.strip_prefix("$request.query.") {
        declared("query", name)
    } else if let Some(name) = text.strip_prefix("$request.header.") {
        declared("header", name)
    } else if ["$request.body", "$response.body"].contains(&text) {
        Ok(())
    } else {
        Err("not a runtime expression the stateful checks evaluate".to_owned())
    }
}

/// The schema of the member at JSON `pointer` (RFC 6901) in values of `schema`: through object
/// properties (or a map's `additionalProperties`), array items (by index) and any branch of a
/// composition.
fn schema_at(schema: &'static Value, pointer: &str) -> Option<&'static Value> {
    schema_within(schema, pointer, 0)
}

/// [`schema_at`], `depth` schemas down: a schema that holds itself ends the search.
fn schema_within(schema: &'static Value, pointer: &str, depth: usize) -> Option<&'static Value> {
    if depth > 16 {
        return None;
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return pointer.is_empty().then_some(schema);
    };
    let (token, rest) = match rest.split_once('/') {
        Some((token, rest)) => (token, format!("/{rest}")),
        None => (rest, String::new()),
    };
    let token = token.replace("~1", "/").replace("~0", "~");
    let schema = resolve(schema);
    let branches = ["allOf", "oneOf", "anyOf"]
        .iter()
        .flat_map(|keyword| schema[keyword].as_array().into_iter().flatten());
    let map = Some(&schema["additionalProperties"]).filter(|map| map.is_object());
    let own = match schema.get("items") {
        Some(items) if token.parse::<usize>().is_ok() => Some(items),
        _ => schema["properties"].get(&token).or(map),
    };
    own.and_then(|member| schema_within(member, &rest, depth + 1))
        .or_else(|| {
            let pointer = format!("/{}{rest}", token.replace('~', "~0").replace('/', "~1"));
            branches
                .into_iter()
                .find_map(|branch| schema_within(branch, &pointer, depth + 1))
        })
}

#[test]
fn a_link_may_name_a_member_at_any_pointer() {
    let page = resolve(&intent_tests::openapi()["components"]["schemas"]["EventPage"]);
    // `seq` is a member of each kind of event, the branches of AgentEvent's `oneOf`.
    assert!(schema_at(page, "/events/0/seq").is_some());
    assert!(schema_at(page, "/events/x").is_none());
    assert!(schema_at(page, "/nothing").is_none());
    let chat = operation("post", "/v1/agent/chat");
    for (expression, holds) in [
        ("$response.body#/sessionId", true),
        ("$response.body#/sessionId/0", false),
        ("$response.body#/nothing", false),
        ("$request.body#/message", true),
        ("$request.header.Idempotency-Key", false),
        ("$response.body", true),
        ("$statusCode", false),
        ("$response.nothing", false),
    ] {
        let result = expression_holds(chat, "202", &Value::from(expression));
        assert_eq!(result.is_ok(), holds, "{expression}: {result:?}");
    }
}

#[test]
fn links_chain_a_turn_and_a_commit_through_real_operations_and_fields() {
    let by_id: BTreeMap<&str, &Value> = operations()
        .into_iter()
        .filter_map(|(_, _, op)| Some((op["operationId"].as_str()?, op)))
        .collect();
    let links = links();
    for (at, name, link) in &links {
        let target = by_id
            .get(link["operationId"].as_str().unwrap_or_default())
            .unwrap_or_else(|| panic!("{at} link {name}: no operation {}", link["operationId"]));
        let parameters: BTreeSet<&str> = target["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| resolve(p)["name"].as_str())
            .collect();
        let (method, path) = at.rsplit_once(' ').unwrap().0.split_once(' ').unwrap();
        let status = at.rsplit(' ').next().unwrap();
        let source = operation(method, path);
        for (parameter, expression) in link["parameters"].as_object().into_iter().flatten() {
            assert!(
                parameters.contains(parameter.as_str()),
                "{at} link {name}: {} takes no parameter {parameter}",
                link["operationId"]
            );
            if let Err(wrong) = expression_holds(source, status, expression) {
                panic!("{at} link {name}: {expression}: {wrong}");
            }
        }
        if let Some(request_body) = link.get("requestBody") {
            assert_eq!(request_body, "$response.body", "{at} link {name}");
            assert!(target.get("requestBody").is_some(), "{at} link {name}");
        }
    }
    let targets = |from: &str| -> BTreeSet<&str> {
        links
            .iter()
            .filter(|(at, _, _)| at.starts_with(from))
            .filter_map(|(_, _, link)| link["operationId"].as_str())
            .collect()
    };
    assert_eq!(
        targets("POST /v1/agent/chat 202"),
        BTreeSet::from([
            "getChatEvents",
            "getSession",
            "interruptTurn",
            "resolveAction",
            "streamChatEvents"
        ])
    );
    assert_eq!(
        targets("POST /v1/pipeline/evm/build 200"),
        BTreeSet::from(["evmBuild"])
    );
    assert_eq!(
        targets("POST /v1/pipeline/svm/stage 200"),
        BTreeSet::from(["svmStage"])
    );
}

/// Keywords that narrow what a value may be (`format: int64` bounds an integer).
const LIMITS: [&str; 10] = [
    "format",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "pattern",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
];

/// The limits the interface states (parts 2, 4 and 8), by the schema that carries them.
const STATED_LIMITS: &[(&str, &str)] = &[
    ("#/components/schemas/SessionId", "maxLength"),
    ("#/components/parameters/Wait/schema", "maximum"),
    ("#/components/parameters/App/schema", "minLength"),
    ("#/components/parameters/App/schema", "maxLength"),
    ("#/components/parameters/Skill/schema", "minLength"),
    ("#/components/parameters/Skill/schema", "maxLength"),
    ("#/components/parameters/Operation/schema", "minLength"),
    ("#/components/parameters/Operation/schema", "maxLength"),
    ("#/components/parameters/SkillOperation/schema", "minLength"),
    ("#/components/parameters/SkillOperation/schema", "maxLength"),
    ("#/components/parameters/ApplicationId/schema", "minimum"),
    ("#/components/parameters/CredentialName/schema", "maxLength"),
    ("#/components/parameters/CredentialName/schema", "pattern"),
    (
        "#/components/schemas/PipelineBuild/properties/digest",
        "pattern",
    ),
    (
        "#/components/schemas/PipelineBalanceChange/properties/step",
        "minimum",
    ),
    (
        "#/components/schemas/PipelineApprovalChange/properties/step",
        "minimum",
    ),
    (
        "#/components/schemas/PipelineLog/properties/step",
        "minimum",
    ),
];

/// Whether `node` marks `keyword` as ours: the node is `x-profile: reference` or lists the
/// keyword in `x-profile-fills`.
fn marks(node: &Value, keyword: &str) -> bool {
    is_profile(node) || fills(node).contains(&keyword)
}

/// Every limit keyword under `node` (at `at`) that is neither stated by the interface nor
/// marked on its schema or on a profile ancestor (`inherited`); `owner` is the object whose
/// marks also cover `node` (a parameter for its schema).
fn unmarked_limits(
    at: &str,
    node: &Value,
    owner: Option<&Value>,
    inherited: bool,
    out: &mut Vec<String>,
) {
    let Some(object) = node.as_object() else {
        return;
    };
    let inherited = inherited || is_profile(node) || owner.is_some_and(is_profile);
    for keyword in LIMITS.iter().filter(|k| object.contains_key(**k)) {
        let marked = inherited
            || marks(node, keyword)
            || owner.is_some_and(|o| marks(o, keyword))
            || STATED_LIMITS.contains(&(at, keyword));
        if !marked {
            out.push(format!("{at} {keyword}"));
        }
    }
    for (name, property) in object
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        unmarked_limits(
            &format!("{at}/properties/{name}"),
            property,
            None,
            inherited,
            out,
        );
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = object.get(key) {
            unmarked_limits(&format!("{at}/{key}"), child, None, inherited, out);
        }
    }
    for key in ["allOf", "oneOf", "anyOf"] {
        for (i, child) in object
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            unmarked_limits(&format!("{at}/{key}/{i}"), child, None, inherited, out);
        }
    }
}

/// The statuses an operation may declare as facts: its success status (part 4), 401 and 403
/// (part 5), 400 and 410 where a cursor is read (parts 7.3 and 7.4), and `default`, the error
/// envelope (part 7.2).
fn stated_statuses(path: &str, op: &Value) -> Vec<&'static str> {
    let mut statuses = vec!["401", "403", "default"];
    // Only part 4.1 gives a success status: 200.
    if path.starts_with("/v1/pipeline/") {
        statuses.push("200");
    }
    let reads_cursor = op["parameters"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|p| p["$ref"] == "#/components/parameters/Cursor");
    if reads_cursor {
        statuses.extend(["400", "410"]);
    }
    statuses
}

/// The responses of `components/responses` that say what the document says: the error envelope
/// of every endpoint (parts 4 and 7.2), the lifecycle endpoint's 401 and 403 (parts 5.5 and
/// 7.2), and a cursor's 400 and 410 (parts 7.3 to 7.5). The others list our error codes and
/// headers and are `x-profile: reference`.
const NORMATIVE_RESPONSES: &[&str] = &[
    "Error",
    "LifecycleUnauthorized",
    "LifecycleForbidden",
    "InvalidCursor",
    "Gone",
];

#[test]
fn the_responses_the_document_declares_are_normative_error_envelopes() {
    let responses = &openapi()["components"]["responses"];
    for name in NORMATIVE_RESPONSES {
        let response = &responses[*name];
        assert!(!is_profile(response), "{name} is normative");
        assert_eq!(
            response["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/ErrorEnvelope",
            "{name}"
        );
    }
    for path in [
        "/v1/agent/chat/{sessionId}",
        "/v1/agent/chat/{sessionId}/stream",
    ] {
        let declared = &operation("GET", path)["responses"];
        assert_eq!(
            declared["400"]["$ref"], "#/components/responses/InvalidCursor",
            "{path}"
        );
        assert_eq!(
            declared["410"]["$ref"], "#/components/responses/Gone",
            "{path}"
        );
    }
    // The interface shows neither the status nor the shape of a started turn's answer.
    assert!(is_profile(
        &operation("POST", "/v1/agent/chat")["responses"]["202"]
    ));
    let envelope = schema("ErrorEnvelope");
    assert_eq!(envelope["required"], json!(["error"]));
    assert!(fills(envelope).is_empty() && !is_profile(&envelope["properties"]["error"]));
}

#[test]
fn every_gap_fill_is_marked() {
    let mut unmarked = Vec::new();
    let components = &openapi()["components"];
    for kind in ["schemas", "parameters"] {
        for (name, node) in components[kind].as_object().into_iter().flatten() {
            let at = format!("#/components/{kind}/{name}");
            match kind {
                "parameters" => unmarked_limits(
                    &format!("{at}/schema"),
                    &node["schema"],
                    Some(node),
                    false,
                    &mut unmarked,
                ),
                _ => unmarked_limits(&at, node, None, false, &mut unmarked),
            }
        }
    }
    for (name, response) in components["responses"].as_object().into_iter().flatten() {
        if !is_profile(response) && !NORMATIVE_RESPONSES.contains(&name.as_str()) {
            unmarked.push(format!(
                "#/components/responses/{name}: the error codes and headers it lists"
            ));
        }
    }
    for (method, path, op) in operations() {
        if is_profile(op) {
            continue;
        }
        for (index, parameter) in op["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            if parameter.get("$ref").is_none() {
                let at = format!("{method} {path} parameter {index}");
                unmarked_limits(
                    &at,
                    &parameter["schema"],
                    Some(parameter),
                    false,
                    &mut unmarked,
                );
            }
        }
        // A status of ours is marked on its response (most through `components/responses`),
        // never by a fill of the operation, which would label the document's own statuses too.
        if fills(op).iter().any(|fill| fill.starts_with("responses")) {
            unmarked.push(format!(
                "{method} {path}: `responses` in x-profile-fills; mark the responses of ours"
            ));
        }
        let stated = stated_statuses(path, op);
        let responses = &op["responses"];
        let statuses = responses.as_object().into_iter().flatten();
        for (status, response) in statuses.filter(|(status, _)| !status.starts_with("x-")) {
            // A success status the document does not give: its response fills `status` (the
            // normative view makes it any success of its class).
            let marked = is_profile(response)
                || is_profile(resolve(response))
                || fills(response).contains(&"status");
            if !stated.contains(&status.as_str()) && !marked {
                unmarked.push(format!("{method} {path} responds {status}"));
            }
        }
    }
    for (name, schema) in components["schemas"].as_object().into_iter().flatten() {
        if is_profile(schema) {
            continue;
        }
        for key in schema.as_object().into_iter().flatten().map(|(k, _)| k) {
            if key.starts_with("x-")
                && !["x-profile", "x-profile-fills"].contains(&key.as_str())
                && !fills(schema).contains(&key.as_str())
            {
                unmarked.push(format!("#/components/schemas/{name} {key}: an extension that is neither the convention nor listed in x-profile-fills"));
            }
        }
    }
    assert!(
        unmarked.is_empty(),
        "unmarked gap-fills:\n{}",
        unmarked.join("\n")
    );
}

/// Every element the JSON pointer `at` passes through, from the document down to it.
fn path_to(at: &str) -> Vec<&'static Value> {
    let mut nodes = vec![openapi()];
    let mut prefix = String::new();
    for segment in at.trim_start_matches('#').split('/').skip(1) {
        prefix.push('/');
        prefix.push_str(segment);
        nodes.push(
            openapi()
                .pointer(&prefix)
                .unwrap_or_else(|| panic!("no {prefix} in openapi.json")),
        );
    }
    nodes
}

/// The description of the element at `at`, asserted normative: neither it nor an element above
/// it is `x-profile: reference`, and it does not list `description` in `x-profile-fills`.
fn normative_description(at: &str) -> &'static str {
    let nodes = path_to(at);
    for node in &nodes {
        assert!(
            !is_profile(node),
            "{at} lies under an element of our profile"
        );
    }
    let element: &'static Value = nodes[nodes.len() - 1];
    assert!(
        !fills(element).contains(&"description"),
        "{at}: its description is a fill"
    );
    element["description"]
        .as_str()
        .unwrap_or_else(|| panic!("{at} has no description"))
}

/// Sentences of the interface that openapi.json holds in normative descriptions, never only
/// under a fill or an element of our profile; our own sentences stand beside them, in
/// `x-profile-note`.
#[test]
fn document_sentences_stand_in_normative_descriptions() {
    let escape = |path: &str| path.replace('~', "~0").replace('/', "~1");
    let resolution = "#/components/schemas/ActionResolutionRequest".to_owned();
    let stream = format!(
        "#/paths/{}/get",
        escape("/v1/agent/chat/{sessionId}/stream")
    );
    let events = "#/components/schemas/EventPage/properties";
    let build = "#/components/schemas/PipelineBuild/properties";
    let sentences: Vec<(String, &str)> = vec![
        (
            format!("{events}/events"),
            "never separate top-level fields",
        ),
        (
            format!("{events}/events"),
            "An action is a durable event that carries a nested ActionRequest",
        ),
        (
            format!("{events}/cursor"),
            "Opaque; never parse or build it.",
        ),
        (format!("{events}/has_more"), "while `has_more` is true"),
        (
            format!("{build}/attestation"),
            "Server authentication of the Build, its owner and its app scope.",
        ),
        (
            format!("{build}/expiresAt"),
            "Commit is rejected after this time.",
        ),
        (
            "#/components/schemas/Session".into(),
            "a wallet address is never used as an ownership key",
        ),
        (
            "#/components/securitySchemes/oauth2".into(),
            "A backend-for-frontend gateway verifies them and delegates a downscoped internal bearer.",
        ),
        (resolution.clone(), "needs an idempotency key"),
        (
            resolution.clone(),
            "requires the scope `agent:actions:resolve`",
        ),
        (
            resolution.clone(),
            "responds with the resulting action revision",
        ),
        (
            resolution,
            "caller-authored transaction fields never replace the action payload",
        ),
        (
            "#/components/schemas/ActionResolutionRequest".into(),
            "The submitted result must be the one produced by the reviewed request",
        ),
        (stream.clone(), "the client fetches an event page again"),
        (stream.clone(), "it is never a durable cursor"),
        (
            stream.clone(),
            "A client reconnects with the last cursor received in a `page` event.",
        ),
        (
            "#/components/schemas/PipelineLifecycleRequest".into(),
            "A JSON object",
        ),
        (
            "#/components/responses/Error".into(),
            "any other status falls to the same envelope",
        ),
    ];
    for (at, sentence) in &sentences {
        let description = normative_description(at);
        assert!(
            description.contains(*sentence),
            "{at}: {description:?} lacks {sentence:?}"
        );
    }
    // Part 7 gives 410 no code, and part 6 never names Last-Event-ID: both are ours.
    let stream_description = normative_description(&stream);
    for ours in ["Last-Event-ID", "cursor_expired", "rebuild"] {
        assert!(
            !stream_description.contains(ours),
            "the stream's normative description says {ours:?}, a choice of ours"
        );
    }
    // Commit-once needs state about Builds on the server (part 1 keeps none): it is ours.
    let deployment = &openapi()["x-deployment"];
    assert!(is_profile(deployment));
    assert!(
        deployment["description"]
            .as_str()
            .unwrap()
            .contains("Commit-once is the reference profile's choice")
    );
}

/// Our sentences beside a normative description (`x-profile-note`) are listed in their object's
/// `x-profile-fills`, so that a pointer to one names a choice of the profile.
#[test]
fn every_profile_note_is_listed_in_its_fills() {
    fn walk(at: String, node: &Value, out: &mut Vec<String>) {
        match node {
            Value::Object(members) => {
                if members.contains_key("x-profile-note")
                    && !is_profile(node)
                    && !fills(node).contains(&"x-profile-note")
                {
                    out.push(at.clone());
                }
                for (key, member) in members {
                    walk(format!("{at}/{key}"), member, out);
                }
            }
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    walk(format!("{at}/{index}"), item, out);
                }
            }
            _ => {}
        }
    }
    let mut unlisted = Vec::new();
    walk("#".into(), openapi(), &mut unlisted);
    assert!(
        unlisted.is_empty(),
        "x-profile-note not listed in x-profile-fills:\n{}",
        unlisted.join("\n")
    );
}

#[test]
fn every_scope_of_the_scheme_is_a_scope_variant_named_as_tokens_carry_it() {
    let names: Vec<&str> = intent_models::Scope::ALL
        .iter()
        .map(|scope| scope.as_str())
        .collect();
    assert_eq!(names, intent_models::SCOPES);
    let flows = &openapi()["components"]["securitySchemes"]["oauth2"]["flows"];
    let declared: BTreeSet<&str> = flows
        .as_object()
        .unwrap()
        .values()
        .flat_map(|flow| flow["scopes"].as_object().unwrap().keys())
        .map(String::as_str)
        .collect();
    assert_eq!(names.iter().copied().collect::<BTreeSet<_>>(), declared);
    assert_eq!(intent_models::Scope::AgentRead.to_string(), "agent:read");
}
