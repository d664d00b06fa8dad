//! `cargo xtask breaking [BASE [HEAD]]`: classifies every change between two versions of
//! openapi.json twice: for the clients of the interface, after oasdiff's catalogue of breaking
//! changes, and for the apps compiled against the generated crates (intent-models and
//! intent-sdk), after what the generator makes of it. Both documents are parsed with `openapiv3`
//! first; the comparison then walks them with their `$ref`s resolved.
//!
//! The Rust verdict rests on how the crates are generated: the client is builder-style (a new
//! optional parameter is a new setter), every model with members is `#[non_exhaustive]` and made
//! by its builder (a new optional member is a new setter), and the enums of
//! [`codegen::OPEN_VALUES`] keep values they do not know. What changes a type the apps name (a
//! member's type, `null` allowed or not, an enum's variants, a new success body) breaks them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;
use std::process::Command;

use intent_models::openapi::{self, resolve};
use serde_json::{Value, json};

use crate::releases::{self, CRATES, INTERFACE};
use crate::{codegen, downstream};

const USAGE: &str =
    "usage: cargo xtask breaking [BASE [HEAD]] [--json | --markdown] [--interface] [--compile]";

/// How a change affects existing users.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// Existing users may stop working (clients) or compiling (apps).
    Breaking,
    /// Existing users keep working and compiling.
    Compatible,
    /// Only descriptions changed: the generated doc comments, nothing else.
    Documentation,
}

impl Class {
    fn name(self) -> &'static str {
        match self {
            Class::Breaking => "breaking",
            Class::Compatible => "compatible",
            Class::Documentation => "documentation",
        }
    }
}

/// One change between the two documents.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Change {
    /// What it does to the clients of the interface.
    pub class: Class,
    /// What it does to apps compiled against the generated crates.
    pub rust: Class,
    /// Where: the operation, then the parameter, body or response and the field path.
    pub location: String,
    /// What changed, in one line.
    pub reason: String,
}

impl Change {
    /// The worse of the two verdicts.
    pub fn worst(&self) -> Class {
        self.class.min(self.rust)
    }
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:<13} {:<13} {}: {}",
            self.class.name(),
            self.rust.name(),
            self.location,
            self.reason
        )
    }
}

/// Runs the task: prints the report (text, JSON with `--json`, or a changelog entry with
/// `--markdown`) and fails on a change that breaks the interface's clients or the generated
/// crates' apps; with `--interface`, only on one that breaks the clients (for a BASE that no
/// release of the crates was generated from). With `--compile`, it checks a verdict of compatible
/// for the Rust API by compiling the downstream app against crates generated from HEAD
/// ([`downstream`]). `args` are `[BASE [HEAD]] [--json | --markdown] [--interface] [--compile]`;
/// BASE is by default the last release of the crates (`spec/crates/`), or with `--interface`
/// the interface's (`spec/released/`).
pub fn run(root: &Path, args: &[&str]) -> Result<bool, String> {
    let json_output = args.contains(&"--json");
    let markdown_output = args.contains(&"--markdown");
    let compile = args.contains(&"--compile");
    let interface_only = args.contains(&"--interface");
    let sources: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| !a.starts_with("--"))
        .collect();
    let judged = if interface_only {
        Judged::Interface
    } else {
        Judged::Crates
    };
    let (released, last) = releases::last(root, judged.releases())?;
    let last = last
        .strip_prefix(root)
        .unwrap_or(&last)
        .display()
        .to_string();
    let (base, head) = match sources.as_slice() {
        [] => (last.as_str(), "openapi.json"),
        [base] => (*base, "openapi.json"),
        [base, head] => (*base, *head),
        _ => return Err(USAGE.into()),
    };
    eprintln!("comparing {head} with {base}");
    let (mut base, mut head) = (load(root, base)?, load(root, head)?);
    // The interface's clients are held to the normative contract: what every deployment does.
    if judged == Judged::Interface {
        (base, head) = (openapi::normative(&base), openapi::normative(&head));
    }
    let changes = compare(&base, &head);
    let rust_compatible = !changes.iter().any(|c| c.rust == Class::Breaking);
    if compile && rust_compatible {
        downstream::check(root, "breaking", head)?;
        eprintln!("the downstream app compiles against the crates generated from HEAD");
    }
    let version = match judged {
        Judged::Crates => releases::crate_version(root)?,
        Judged::Interface => released,
    };
    let bump = bump(&version, &changes, judged);
    if json_output {
        let report = json!({
            "judged": judged.name(),
            "changes": changes.iter().map(|c| json!({
                "class": c.class.name(),
                "rust": c.rust.name(),
                "location": c.location,
                "reason": c.reason,
            })).collect::<Vec<_>>(),
            "breaking": changes.iter().filter(|c| judged.verdict(c) == Class::Breaking).count(),
            "version": version,
            "bump": bump,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("a report serializes")
        );
    } else if markdown_output {
        print!("{}", changelog(&changes, bump.as_deref(), judged));
    } else {
        print!("{}", report(&changes, &version, bump.as_deref(), judged));
    }
    Ok(!changes.iter().any(|c| judged.verdict(c) == Class::Breaking))
}

/// Whose verdict a run judges by: the generated crates' (the worse of the interface's and the
/// Rust API's, against the crates' last release) or the interface's clients' alone (the
/// normative views, against the interface's last release).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    Crates,
    Interface,
}

impl Judged {
    /// The verdict of `change` that counts.
    pub fn verdict(self, change: &Change) -> Class {
        match self {
            Judged::Crates => change.worst(),
            Judged::Interface => change.class,
        }
    }

    /// Where its releases are recorded.
    fn releases(self) -> &'static str {
        match self {
            Judged::Crates => CRATES,
            Judged::Interface => INTERFACE,
        }
    }

    /// What is released, as the report names it.
    fn name(self) -> &'static str {
        match self {
            Judged::Crates => "intent-models and intent-sdk",
            Judged::Interface => "the interface",
        }
    }
}

/// The text report: one line per change, then the verdict and the version that `judged`'s
/// release needs.
pub fn report(changes: &[Change], version: &str, bump: Option<&str>, judged: Judged) -> String {
    let mut out = String::new();
    let count = |class| {
        changes
            .iter()
            .filter(|c| judged.verdict(c) == class)
            .count()
    };
    match judged {
        Judged::Crates => {
            if !changes.is_empty() {
                out.push_str(&format!("{:<13} {:<13} change\n", "interface", "rust api"));
            }
            for change in changes {
                out.push_str(&format!("{change}\n"));
            }
            out.push_str(&format!(
                "{} changes, {} breaking (the interface {}, the Rust API {})\n",
                changes.len(),
                count(Class::Breaking),
                changes
                    .iter()
                    .filter(|c| c.class == Class::Breaking)
                    .count(),
                changes.iter().filter(|c| c.rust == Class::Breaking).count(),
            ));
        }
        Judged::Interface => {
            if !changes.is_empty() {
                out.push_str(&format!("{:<13} change\n", "interface"));
            }
            for change in changes {
                let (class, location, reason) =
                    (change.class.name(), &change.location, &change.reason);
                out.push_str(&format!("{class:<13} {location}: {reason}\n"));
            }
            out.push_str(&format!(
                "{} changes, {} breaking the interface's clients\n",
                changes.len(),
                count(Class::Breaking),
            ));
        }
    }
    let name = judged.name();
    out.push_str(&match bump {
        Some(next) => format!("{name}: {version} -> {next}\n"),
        None => format!("{name}: {version}, no release needed\n"),
    });
    out
}

/// A changelog entry of what `judged` releases: the changes grouped as breaking, compatible
/// and documentation, each by the verdict `judged` counts.
pub fn changelog(changes: &[Change], bump: Option<&str>, judged: Judged) -> String {
    let name = judged.name();
    let mut out = match bump {
        Some(next) => format!("## {name} {next}\n"),
        None => format!("## {name}: no changes\n"),
    };
    for (class, title) in [
        (Class::Breaking, "Breaking"),
        (Class::Compatible, "Compatible"),
        (Class::Documentation, "Documentation"),
    ] {
        let listed: Vec<&Change> = changes
            .iter()
            .filter(|c| judged.verdict(c) == class)
            .collect();
        if listed.is_empty() {
            continue;
        }
        out.push_str(&format!("\n### {title}\n\n"));
        for change in listed {
            out.push_str(&format!("- `{}`: {}", change.location, change.reason));
            if judged == Judged::Crates && change.class != change.rust {
                out.push_str(&format!(
                    " ({} for the interface's clients, {} for the Rust API)",
                    change.class.name(),
                    change.rust.name()
                ));
            }
            out.push('\n');
        }
    }
    out
}

/// The version a release needs after `changes`, by the worst verdict `judged` counts: a
/// breaking change bumps the major (the minor before 1.0), a compatible one the minor (the patch
/// before 1.0), a documentation change the patch.
pub fn bump(version: &str, changes: &[Change], judged: Judged) -> Option<String> {
    let parts: Vec<u64> = version.split('.').filter_map(|p| p.parse().ok()).collect();
    let [major, minor, patch] = parts[..] else {
        return None;
    };
    let worst = changes.iter().map(|c| judged.verdict(c)).min()?;
    Some(match (worst, major) {
        (Class::Breaking, 0) => format!("0.{}.0", minor + 1),
        (Class::Breaking, _) => format!("{}.0.0", major + 1),
        (Class::Compatible, 0) | (Class::Documentation, _) => {
            format!("{major}.{minor}.{}", patch + 1)
        }
        (Class::Compatible, _) => format!("{major}.{}.0", minor + 1),
    })
}

/// Whether `alternatives`, added to `schema`, hold of every value `schema` admits: each is
/// `{"type": "number"}` beside `type: integer` (an integer is a number).
fn implied(schema: &Value, alternatives: &[Value]) -> bool {
    let number = json!({ "type": "number" });
    schema["type"] == "integer"
        && alternatives
            .iter()
            .all(|alternative| *alternative == number)
}

/// A document from a file, or from `openapi.json` at a git revision; checked with `openapiv3`.
pub fn load(root: &Path, source: &str) -> Result<Value, String> {
    let path = root.join(source);
    let text = if path.is_file() {
        std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?
    } else {
        let output = Command::new("git")
            .current_dir(root)
            .args(["show", &format!("{source}:openapi.json")])
            .output()
            .map_err(|e| format!("running git: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "{source} is neither a file nor a revision with openapi.json: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        String::from_utf8(output.stdout).map_err(|e| e.to_string())?
    };
    serde_json::from_str::<openapiv3::OpenAPI>(&text)
        .map_err(|e| format!("{source}: not an OpenAPI 3.0 document: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("{source}: {e}"))
}

/// Which way a schema travels, which decides what breaks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Request,
    Response,
}

/// Every change from `base` to `head`, breaking ones first.
pub fn compare(base: &Value, head: &Value) -> Vec<Change> {
    let mut diff = Diff {
        base,
        head,
        changes: Vec::new(),
    };
    let (base_ops, head_ops) = (operations(base), operations(head));
    for (key, base_op) in &base_ops {
        let location = format!("{} {}", key.1, key.0);
        match head_ops.get(key) {
            None => diff.breaking(&location, "operation removed"),
            Some(head_op) => diff.operation(&location, base_op, head_op),
        }
    }
    for key in head_ops.keys().filter(|key| !base_ops.contains_key(*key)) {
        diff.compatible(&format!("{} {}", key.1, key.0), "operation added");
    }
    let mut changes = diff.changes;
    changes.sort();
    changes.dedup();
    changes
}

/// Operations by (path, upper-case method).
fn operations(document: &Value) -> BTreeMap<(String, String), &Value> {
    openapi::operation_objects(document)
        .map(|(path, method, op)| ((path.to_owned(), method.to_uppercase()), op))
        .collect()
}

/// What a schema belongs to: the name typify gives its generated type (a component's name, else
/// its `title`, else its owner's name and its property's), and its place in the document for
/// documentation changes (inside a component, the component's; else where it is used), so that a
/// component's description is reported once however many operations use it.
struct Owner {
    name: String,
    place: String,
}

impl Owner {
    /// A schema written where it is used, at `place`.
    fn at(place: &str) -> Self {
        Self {
            name: String::new(),
            place: place.to_owned(),
        }
    }

    /// A schema inside this one: at `place` below it, named with `suffix` after it.
    fn within(&self, place: &str, suffix: &str) -> Self {
        Self {
            name: format!("{}{suffix}", self.name),
            place: format!("{}{place}", self.place),
        }
    }
}

struct Diff<'a> {
    base: &'a Value,
    head: &'a Value,
    changes: Vec<Change>,
}

impl<'a> Diff<'a> {
    fn breaking(&mut self, location: &str, reason: impl Into<String>) {
        self.push(Class::Breaking, Class::Breaking, location, reason.into());
    }

    fn compatible(&mut self, location: &str, reason: impl Into<String>) {
        self.push(
            Class::Compatible,
            Class::Compatible,
            location,
            reason.into(),
        );
    }

    /// Compatible on the wire, but it changes a type that apps compiled against the generated
    /// crates name.
    fn breaks_rust(&mut self, location: &str, reason: impl Into<String>) {
        self.push(Class::Compatible, Class::Breaking, location, reason.into());
    }

    fn documentation(&mut self, location: &str, reason: impl Into<String>) {
        self.push(
            Class::Documentation,
            Class::Documentation,
            location,
            reason.into(),
        );
    }

    fn push(&mut self, class: Class, rust: Class, location: &str, reason: String) {
        self.changes.push(Change {
            class,
            rust,
            location: location.to_owned(),
            reason,
        });
    }

    /// A changed `summary` or `description` of `base` and `head`.
    fn described(&mut self, at: &str, base: &Value, head: &Value) {
        for key in ["summary", "description"] {
            if base.get(key) != head.get(key) {
                self.documentation(at, format!("{key} changed"));
            }
        }
    }

    fn operation(&mut self, at: &str, base: &'a Value, head: &'a Value) {
        self.described(at, base, head);
        if base.get("security") != head.get("security") {
            self.breaking(
                at,
                format!(
                    "security changed from {} to {}",
                    compact(base.get("security")),
                    compact(head.get("security"))
                ),
            );
        }
        self.parameters(at, base, head);
        self.request_body(at, base, head);
        self.responses(at, base, head);
    }

    fn parameters(&mut self, at: &str, base: &'a Value, head: &'a Value) {
        let by_name =
            |document: &'a Value, op: &'a Value| -> BTreeMap<(String, String), &'a Value> {
                op["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|p| resolve(document, p))
                    .filter_map(|p| {
                        let key = (p["in"].as_str()?.to_owned(), p["name"].as_str()?.to_owned());
                        Some((key, p))
                    })
                    .collect()
            };
        let (base_params, head_params) = (by_name(self.base, base), by_name(self.head, head));
        for ((place, name), b) in &base_params {
            let location = format!("{at} {place} parameter {name}");
            match head_params.get(&(place.clone(), name.clone())) {
                None => self.breaking(&location, "parameter removed"),
                Some(h) => {
                    if is_required(b) != is_required(h) && is_required(h) {
                        self.breaking(&location, "parameter became required");
                    }
                    self.described(&location, b, h);
                    let owner = Owner::at(&location);
                    self.schema(
                        &location,
                        &b["schema"],
                        &h["schema"],
                        Direction::Request,
                        &owner,
                        0,
                    );
                }
            }
        }
        for ((place, name), h) in &head_params {
            if base_params.contains_key(&(place.clone(), name.clone())) {
                continue;
            }
            let location = format!("{at} {place} parameter {name}");
            if is_required(h) {
                self.breaking(&location, "new required parameter");
            } else {
                self.compatible(&location, "optional parameter added");
            }
        }
    }

    fn request_body(&mut self, at: &str, base: &'a Value, head: &'a Value) {
        let location = format!("{at} request");
        let base_body = base.get("requestBody").map(|b| resolve(self.base, b));
        let head_body = head.get("requestBody").map(|b| resolve(self.head, b));
        match (base_body, head_body) {
            (None, Some(h)) if is_required(h) => {
                self.breaking(&location, "request body now required")
            }
            (Some(b), Some(h)) => {
                if !is_required(b) && is_required(h) {
                    self.breaking(&location, "request body became required");
                }
                self.schema(
                    &location,
                    json_schema(b),
                    json_schema(h),
                    Direction::Request,
                    &Owner::at(&location),
                    0,
                );
            }
            _ => {}
        }
    }

    fn responses(&mut self, at: &str, base: &'a Value, head: &'a Value) {
        let base_responses = &base["responses"];
        let head_responses = &head["responses"];
        for (status, b) in openapi::statuses(base_responses) {
            let location = format!("{at} {status}");
            match head_responses.get(status) {
                None if status.starts_with('2') => {
                    self.breaking(&location, "success status removed")
                }
                // The generated client has one error type for all of an operation's error
                // statuses; it changes when the last one goes.
                None if statuses(head_responses, false).next().is_some() => {
                    self.compatible(&location, "error status removed")
                }
                None => self.breaks_rust(
                    &location,
                    "the last error status removed, which changes the client's error type",
                ),
                Some(h) => {
                    let (b, h) = (resolve(self.base, b), resolve(self.head, h));
                    self.described(&location, b, h);
                    self.schema(
                        &location,
                        json_schema(b),
                        json_schema(h),
                        Direction::Response,
                        &Owner::at(&location),
                        0,
                    );
                }
            }
        }
        for (status, _) in openapi::statuses(head_responses) {
            if base_responses.get(status).is_some() {
                continue;
            }
            // The generated client gives one type for all of an operation's successes, and one
            // for all of its errors: a status of a body type it had already keeps them.
            let body = |document: &Value, response: &Value| {
                json_schema(resolve(document, response)).clone()
            };
            let added = body(self.head, &head_responses[status]);
            let mut alike = statuses(base_responses, status.starts_with('2'));
            let location = format!("{at} {status}");
            if alike.any(|(_, response)| body(self.base, response) == added) {
                self.compatible(&location, "response status added");
            } else {
                self.breaks_rust(
                    &location,
                    "response status added with a body type the operation did not have",
                );
            }
        }
    }

    /// The changes of a schema `owner` names.
    fn schema(
        &mut self,
        at: &str,
        base: &'a Value,
        head: &'a Value,
        way: Direction,
        owner: &Owner,
        depth: usize,
    ) {
        if depth > 32 || base.is_null() || head.is_null() {
            return;
        }
        let component = base["$ref"]
            .as_str()
            .and_then(|reference| reference.strip_prefix("#/components/schemas/"));
        let (base, head) = (resolve(self.base, base), resolve(self.head, head));
        let owner = Owner {
            name: component
                .or_else(|| base["title"].as_str())
                .unwrap_or(&owner.name)
                .to_owned(),
            place: component.map_or_else(
                || owner.place.clone(),
                |name| format!("#/components/schemas/{name}"),
            ),
        };
        let open = codegen::OPEN_VALUES.contains(&owner.name.as_str());
        self.described(&owner.place, base, head);
        if base.get("title") != head.get("title") {
            self.breaks_rust(at, "title changed, which names the generated type");
        }
        for key in ["type", "format"] {
            let (b, h) = (base.get(key), head.get(key));
            if b == h {
                continue;
            }
            let reason = format!("{key} changed from {} to {}", compact(b), compact(h));
            // A keyword added to a response narrows what is sent; one added to a request that
            // every alternative of the schema already meets refuses nothing.
            let same_type = base.get("type") == head.get("type");
            let narrowing = b.is_none()
                && (way == Direction::Response && (key == "type" || same_type)
                    || key == "type" && self.alternatives_have_type(base, h));
            if narrowing {
                self.breaks_rust(at, format!("{reason}, which changes the generated type"));
            } else {
                self.breaking(at, reason);
            }
        }
        self.nullable(at, base, head, way);
        self.enumeration(at, base, head, way, open);
        if way == Direction::Request {
            self.limits(at, base, head);
        }
        self.properties(at, base, head, way, &owner, depth);
        if let (Some(b), Some(h)) = (base.get("items"), head.get("items")) {
            let items = owner.within("[]", "");
            self.schema(&format!("{at}[]"), b, h, way, &items, depth + 1);
        }
        for key in ["allOf", "oneOf", "anyOf"] {
            match (base[key].as_array(), head[key].as_array()) {
                (Some(b), Some(h)) if b.len() == h.len() => {
                    self.alternatives(at, key, (b, h), way, &owner, depth);
                }
                // A new kind of an open union (the log's entries): readers keep a kind they do
                // not know, and its generated enum is `#[non_exhaustive]` with `Unknown`.
                (Some(b), Some(h))
                    if key == "oneOf"
                        && way == Direction::Response
                        && h.len() > b.len()
                        && codegen::OPEN_ENUMS
                            .iter()
                            .any(|(name, _)| *name == owner.name) =>
                {
                    self.alternatives(at, key, (b, h), way, &owner, depth);
                    self.compatible(
                        at,
                        format!(
                            "{} new kinds of an open union, which readers keep as unknown",
                            h.len() - b.len()
                        ),
                    );
                }
                (None, None) => {}
                // The generators drop an implied `{"type": "number"}` (codegen::for_generators).
                (None, Some(h)) if implied(base, h) => self.compatible(
                    at,
                    format!(
                        "{key} of {} alternatives added, which narrows nothing accepted",
                        h.len()
                    ),
                ),
                (None, Some(h)) if way == Direction::Response => self.breaks_rust(
                    at,
                    format!(
                        "{key} of {} alternatives added, which narrows what is sent but changes \
                         the generated type",
                        h.len()
                    ),
                ),
                (b, h) => self.breaking(
                    at,
                    format!(
                        "{key} changed from {} to {} alternatives",
                        b.map_or(0, Vec::len),
                        h.map_or(0, Vec::len)
                    ),
                ),
            }
        }
    }

    /// Compares the alternatives `key` (`allOf`, `oneOf`, `anyOf`) of two schemas that both
    /// have, pairwise by position.
    fn alternatives(
        &mut self,
        at: &str,
        key: &str,
        (base, head): (&'a [Value], &'a [Value]),
        way: Direction,
        owner: &Owner,
        depth: usize,
    ) {
        for (i, (b, h)) in base.iter().zip(head).enumerate() {
            let alternative = owner.within(&format!("/{key}[{i}]"), "");
            self.schema(
                &format!("{at}/{key}[{i}]"),
                b,
                h,
                way,
                &alternative,
                depth + 1,
            );
        }
    }

    /// Whether every alternative (`oneOf` or `anyOf`) of `schema` has the type `kind`.
    fn alternatives_have_type(&self, schema: &Value, kind: Option<&Value>) -> bool {
        let alternatives: Vec<&Value> = ["oneOf", "anyOf"]
            .iter()
            .filter_map(|key| schema[key].as_array())
            .flatten()
            .collect();
        !alternatives.is_empty()
            && alternatives
                .iter()
                .all(|alternative| resolve(self.base, alternative).get("type") == kind)
    }

    fn nullable(&mut self, at: &str, base: &Value, head: &Value, way: Direction) {
        let (b, h) = (admits_null(base), admits_null(head));
        match (b, h, way) {
            (false, true, Direction::Response) => self.breaking(at, "may now be null"),
            (true, false, Direction::Request) => self.breaking(at, "no longer accepts null"),
            (false, true, Direction::Request) => {
                self.breaks_rust(at, "now accepts null, which makes its member an Option")
            }
            (true, false, Direction::Response) => {
                self.breaks_rust(at, "is never null now, which makes its member no Option")
            }
            _ => {}
        }
    }

    /// The values of an enum, `open` when its generated type keeps the values it does not know
    /// and is `#[non_exhaustive]`: then a new value breaks neither clients nor apps.
    fn enumeration(&mut self, at: &str, base: &Value, head: &Value, way: Direction, open: bool) {
        let (Some(b), Some(h)) = (base["enum"].as_array(), head["enum"].as_array()) else {
            return;
        };
        for value in b.iter().filter(|v| !h.contains(v)) {
            match way {
                Direction::Request => {
                    self.breaking(at, format!("enum value {value} no longer accepted"))
                }
                Direction::Response => self.breaks_rust(
                    at,
                    format!("enum value {value} no longer sent, which removes its variant"),
                ),
            }
        }
        for value in h.iter().filter(|v| !b.contains(v)) {
            match (way, open) {
                (_, true) => self.compatible(at, format!("open enum value {value} added")),
                (Direction::Response, false) => {
                    self.breaking(at, format!("may now send enum value {value}"))
                }
                (Direction::Request, false) => self.breaks_rust(
                    at,
                    format!(
                        "enum value {value} now accepted, a variant that exhaustive matches miss"
                    ),
                ),
            }
        }
    }

    /// Limits of a request value: a tighter one refuses what was accepted.
    fn limits(&mut self, at: &str, base: &Value, head: &Value) {
        for (key, upper) in [
            ("maxLength", true),
            ("maximum", true),
            ("maxItems", true),
            ("minLength", false),
            ("minimum", false),
            ("minItems", false),
        ] {
            let (b, h) = (base[key].as_f64(), head[key].as_f64());
            let tighter = match (b, h) {
                (None, Some(_)) => true,
                (Some(b), Some(h)) => {
                    if upper {
                        h < b
                    } else {
                        h > b
                    }
                }
                _ => false,
            };
            if tighter {
                self.breaking(
                    at,
                    format!(
                        "{key} tightened from {} to {}",
                        compact(base.get(key)),
                        compact(head.get(key))
                    ),
                );
            } else if b != h {
                self.compatible(
                    at,
                    format!(
                        "{key} loosened from {} to {}",
                        compact(base.get(key)),
                        compact(head.get(key))
                    ),
                );
            }
        }
        if head.get("pattern").is_some() && base.get("pattern") != head.get("pattern") {
            self.breaking(
                at,
                format!(
                    "pattern changed from {} to {}",
                    compact(base.get("pattern")),
                    compact(head.get("pattern"))
                ),
            );
        }
    }

    fn properties(
        &mut self,
        at: &str,
        base: &'a Value,
        head: &'a Value,
        way: Direction,
        owner: &Owner,
        depth: usize,
    ) {
        let (Some(b), Some(h)) = (
            base["properties"].as_object(),
            head["properties"].as_object(),
        ) else {
            return;
        };
        let required = |schema: &Value| -> BTreeSet<String> {
            schema["required"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r.as_str().map(str::to_owned))
                .collect()
        };
        let (base_required, head_required) = (required(base), required(head));
        for (name, b_schema) in b {
            let location = format!("{at}/{name}");
            match (h.get(name), way) {
                (None, Direction::Response) => {
                    self.breaking(&location, "response property removed")
                }
                (None, Direction::Request) => self.breaks_rust(
                    &location,
                    "request property removed, with its member and setter",
                ),
                (Some(h_schema), _) => {
                    let now = head_required.contains(name);
                    let before = base_required.contains(name);
                    match (before, now, way) {
                        (false, true, Direction::Request) => {
                            self.breaking(&location, "property became required")
                        }
                        (true, false, Direction::Response) => {
                            self.breaking(&location, "property became optional")
                        }
                        (true, false, Direction::Request) => self.breaks_rust(
                            &location,
                            "property became optional, which makes its member an Option",
                        ),
                        (false, true, Direction::Response) => self.breaks_rust(
                            &location,
                            "property became required, which makes its member no Option",
                        ),
                        _ => {}
                    }
                    let member = owner.within(&format!("/{name}"), &pascal_case(name));
                    self.schema(&location, b_schema, h_schema, way, &member, depth + 1);
                }
            }
        }
        for name in h.keys().filter(|name| !b.contains_key(*name)) {
            let location = format!("{at}/{name}");
            match (way, head_required.contains(name)) {
                (Direction::Request, true) => {
                    self.breaking(&location, "new required request property")
                }
                // Its builder fails where an app made the model without it.
                (Direction::Response, true) => self.breaks_rust(
                    &location,
                    "required response property added, which the model's builders must set",
                ),
                (_, false) => self.compatible(&location, "property added"),
            }
        }
    }
}

/// An operation's success responses (`successes`) or declared error responses (not `default`),
/// by status.
fn statuses(responses: &Value, successes: bool) -> impl Iterator<Item = (&String, &Value)> {
    openapi::statuses(responses)
        .filter(move |(status, _)| status.starts_with('2') == successes && *status != "default")
}

/// `member` in the PascalCase of a generated type's name: `unitPrice` and `turn_id` become
/// `UnitPrice` and `TurnId`.
fn pascal_case(member: &str) -> String {
    member
        .split(['_', '-'])
        .flat_map(|word| {
            let mut chars = word.chars();
            chars
                .next()
                .map(|first| first.to_uppercase().chain(chars))
                .into_iter()
                .flatten()
        })
        .collect()
}

fn is_required(value: &Value) -> bool {
    value["required"] == true
}

/// Whether a schema admits `null` by itself: `nullable: true`, or, without a `type`, an `enum`
/// that lists null (the null branch of a nullable reference, `oneOf: [{$ref}, {enum: [null]}]`).
fn admits_null(schema: &Value) -> bool {
    schema["nullable"] == true
        || (schema.get("type").is_none()
            && schema["enum"]
                .as_array()
                .is_some_and(|values| values.contains(&Value::Null)))
}

/// The JSON schema of a body or response, if it has one.
fn json_schema(value: &Value) -> &Value {
    &value["content"]["application/json"]["schema"]
}

fn compact(value: Option<&Value>) -> String {
    value.map_or_else(|| "none".to_owned(), Value::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small document: one session read and one chat start, with a shared schema.
    fn base() -> Value {
        json!({
            "openapi": "3.0.3",
            "info": { "title": "t", "version": "1.0.0" },
            "paths": {
                "/v1/sessions/{id}": { "get": {
                    "security": [{ "oauth2": ["agent:read"] }],
                    "parameters": [
                        { "name": "id", "in": "path", "required": true,
                          "schema": { "type": "string", "maxLength": 160 } },
                        { "name": "wait", "in": "query", "schema": { "type": "integer", "minimum": 0 } }
                    ],
                    "responses": {
                        "200": { "description": "ok", "content": { "application/json": {
                            "schema": { "$ref": "#/components/schemas/Session" } } } },
                        "404": { "description": "no" }
                    }
                } },
                "/v1/chat": { "post": {
                    "security": [{ "oauth2": ["agent:write"] }],
                    "requestBody": { "required": true, "content": { "application/json": { "schema": {
                        "type": "object", "required": ["message"],
                        "properties": {
                            "message": { "type": "string", "maxLength": 1000 },
                            "mode": { "type": "string", "enum": ["fast", "slow"], "nullable": true }
                        }
                    } } } },
                    "responses": { "202": { "description": "started", "content": { "application/json": {
                        "schema": { "$ref": "#/components/schemas/Session" } } } } }
                } }
            },
            "components": { "schemas": { "Session": {
                "type": "object", "required": ["id", "state"],
                "properties": {
                    "id": { "type": "string" },
                    "state": { "type": "string", "enum": ["open", "closed"] },
                    "title": { "type": "string" }
                }
            } } }
        })
    }

    /// The report of `change` applied to the base document.
    fn report_of(change: impl FnOnce(&mut Value)) -> String {
        let mut head = base();
        change(&mut head);
        let changes = compare(&base(), &head);
        report(
            &changes,
            "0.1.0",
            bump("0.1.0", &changes, Judged::Crates).as_deref(),
            Judged::Crates,
        )
    }

    fn session(document: &mut Value) -> &mut Value {
        &mut document["components"]["schemas"]["Session"]
    }

    fn chat_body(document: &mut Value) -> &mut Value {
        &mut document["paths"]["/v1/chat"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    }

    #[test]
    fn no_change_needs_no_release() {
        insta::assert_snapshot!(report_of(|_| {}));
    }

    #[test]
    fn keywords_that_narrow_nothing_accepted_are_compatible() {
        let classes = |change: &dyn Fn(&mut Value)| -> Vec<Class> {
            let mut head = base();
            change(&mut head);
            compare(&base(), &head).iter().map(|c| c.class).collect()
        };
        let wait = |d: &mut Value| -> Value {
            d["paths"]["/v1/sessions/{id}"]["get"]["parameters"][1]["schema"].take()
        };
        // An integer is a number; a response may only narrow (Session answers two operations).
        let implied = |d: &mut Value| {
            let mut schema = wait(d);
            schema["allOf"] = json!([{ "type": "number" }]);
            d["paths"]["/v1/sessions/{id}"]["get"]["parameters"][1]["schema"] = schema;
            session(d)["properties"]["id"]["oneOf"] = json!([{ "maxLength": 160 }]);
        };
        assert_eq!(classes(&implied), [Class::Compatible; 3]);
        // A request that gains an alternative it did not meet refuses what it accepted.
        let narrowed = |d: &mut Value| {
            let mut schema = wait(d);
            schema["allOf"] = json!([{ "maximum": 10 }]);
            d["paths"]["/v1/sessions/{id}"]["get"]["parameters"][1]["schema"] = schema;
        };
        assert_eq!(classes(&narrowed), [Class::Breaking]);
    }

    #[test]
    fn a_removed_response_field_breaks() {
        insta::assert_snapshot!(report_of(|d| {
            session(d)["properties"]
                .as_object_mut()
                .unwrap()
                .remove("title");
        }));
    }

    #[test]
    fn an_added_optional_response_field_is_compatible() {
        insta::assert_snapshot!(report_of(|d| {
            session(d)["properties"]["archived"] = json!({ "type": "boolean" });
        }));
    }

    #[test]
    fn a_removed_operation_and_success_status_break() {
        insta::assert_snapshot!(report_of(|d| {
            d["paths"].as_object_mut().unwrap().remove("/v1/chat");
            let responses = &mut d["paths"]["/v1/sessions/{id}"]["get"]["responses"];
            responses.as_object_mut().unwrap().remove("200");
            responses["201"] = json!({ "description": "created" });
        }));
    }

    #[test]
    fn new_parameters_break_when_required() {
        insta::assert_snapshot!(report_of(|d| {
            let parameters = &mut d["paths"]["/v1/sessions/{id}"]["get"]["parameters"];
            let parameters = parameters.as_array_mut().unwrap();
            parameters.push(json!({ "name": "tenant", "in": "header", "required": true, "schema": { "type": "string" } }));
            parameters
                .push(json!({ "name": "limit", "in": "query", "schema": { "type": "integer" } }));
            parameters[1]["required"] = json!(true);
        }));
    }

    #[test]
    fn types_formats_and_enums_break_by_direction() {
        insta::assert_snapshot!(report_of(|d| {
            session(d)["properties"]["id"] = json!({ "type": "integer", "format": "int64" });
            session(d)["properties"]["state"]["enum"] = json!(["open", "closed", "archived"]);
            chat_body(d)["properties"]["mode"]["enum"] = json!(["fast"]);
        }));
    }

    #[test]
    fn nullable_breaks_a_response_gaining_it_and_a_request_losing_it() {
        insta::assert_snapshot!(report_of(|d| {
            session(d)["properties"]["title"]["nullable"] = json!(true);
            chat_body(d)["properties"]["mode"]
                .as_object_mut()
                .unwrap()
                .remove("nullable");
        }));
    }

    #[test]
    fn a_null_branch_without_nullable_still_admits_null() {
        let mut before = base();
        chat_body(&mut before)["properties"]["mode"] = json!({ "oneOf": [
            { "type": "string", "enum": ["fast", "slow"] },
            { "nullable": true, "enum": [null] }
        ] });
        let mut head = before.clone();
        chat_body(&mut head)["properties"]["mode"]["oneOf"][1] = json!({ "enum": [null] });
        assert_eq!(compare(&before, &head), Vec::new());
        chat_body(&mut head)["properties"]["mode"]["oneOf"][1] = json!({ "enum": ["off"] });
        assert!(
            compare(&before, &head)
                .iter()
                .any(|c| c.class == Class::Breaking && c.reason == "no longer accepts null")
        );
    }

    #[test]
    fn tightened_request_limits_and_new_required_properties_break() {
        insta::assert_snapshot!(report_of(|d| {
            chat_body(d)["properties"]["message"]["maxLength"] = json!(500);
            chat_body(d)["properties"]["message"]["pattern"] = json!("^[a-z ]*$");
            chat_body(d)["properties"]["session"] = json!({ "type": "string" });
            chat_body(d)["required"] = json!(["message", "session"]);
            let wait = &mut d["paths"]["/v1/sessions/{id}"]["get"]["parameters"][1]["schema"];
            wait["minimum"] = json!(10);
            wait["maximum"] = json!(30000);
        }));
    }

    #[test]
    fn a_changed_scope_breaks() {
        insta::assert_snapshot!(report_of(|d| {
            d["paths"]["/v1/chat"]["post"]["security"] = json!([{ "oauth2": ["agent:admin"] }]);
        }));
    }

    /// `run` on `base()` and a changed copy, both written as files: whether it passes.
    fn run_on(name: &str, change: impl FnOnce(&mut Value)) -> bool {
        let dir =
            std::env::temp_dir().join(format!("xtask-breaking-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut head = base();
        change(&mut head);
        let (base_file, head_file) = (dir.join("base.json"), dir.join("head.json"));
        std::fs::write(&base_file, base().to_string()).unwrap();
        std::fs::write(&head_file, head.to_string()).unwrap();
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let args = [base_file.to_str().unwrap(), head_file.to_str().unwrap()];
        let passed = run(root, &args).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        passed
    }

    #[test]
    fn the_task_fails_on_a_removed_field_and_passes_an_added_optional_one() {
        assert!(!run_on("removed", |d| {
            session(d)["properties"]
                .as_object_mut()
                .unwrap()
                .remove("title");
        }));
        assert!(run_on("added", |d| {
            session(d)["properties"]["archived"] = json!({ "type": "boolean" });
        }));
    }

    /// The kinds of change every generated crate must take without a major release, each a
    /// function of the real openapi.json.
    /// A kind of change, and the change on a document.
    type Kind = (&'static str, fn(&mut Value));

    const COMPATIBLE: [Kind; 8] = [
        ("a new optional query parameter", |d| {
            let parameters = &mut d["paths"]["/v1/agent/chat/{sessionId}"]["get"]["parameters"];
            parameters.as_array_mut().unwrap().push(json!({
                "name": "order", "in": "query", "required": false, "schema": { "type": "string" }
            }));
        }),
        ("a new optional request member", |d| {
            d["components"]["schemas"]["SessionUpdate"]["properties"]["pinned"] =
                json!({ "type": "boolean" });
        }),
        ("a new optional response member", |d| {
            d["components"]["schemas"]["Session"]["properties"]["color"] =
                json!({ "type": "string" });
        }),
        ("a new operation", |d| {
            let mut operation = d["paths"]["/v1/agent/sessions/{sessionId}"]["get"].clone();
            operation["operationId"] = json!("getSessionSummary");
            d["paths"]["/v1/agent/sessions/{sessionId}/summary"] = json!({ "get": operation });
        }),
        ("a new value of an open enum", |d| {
            let lines = &mut d["components"]["schemas"]["UsageStatement"]["properties"]["lines"];
            let meters = &mut lines["items"]["properties"]["meter"]["enum"];
            meters.as_array_mut().unwrap().push(json!("storage"));
        }),
        ("a new response status", |d| {
            let responses = &mut d["paths"]["/v1/agent/sessions/{sessionId}"]["get"]["responses"];
            responses["409"] = responses["404"].clone();
        }),
        ("a new optional member of our profile", |d| {
            // Not the walk's `turnCount` (.ci/maintainer-walk runs these tests after adding it).
            d["components"]["schemas"]["Session"]["properties"]["messageCount"] =
                json!({ "type": "integer", "minimum": 0, "x-profile": "reference" });
        }),
        ("a new kind of log entry", |d| {
            let kinds = d["components"]["schemas"]["AgentEvent"]["oneOf"]
                .as_array_mut()
                .unwrap();
            let mut reasoning = kinds[0].clone();
            reasoning["description"] = json!("The runtime's reasoning, in words.");
            reasoning["properties"]["type"]["enum"] = json!(["reasoning"]);
            reasoning["properties"]
                .as_object_mut()
                .unwrap()
                .remove("role");
            reasoning["required"] = json!(["type", "seq", "turnId", "createdAt", "text"]);
            kinds.push(reasoning);
        }),
    ];

    #[test]
    fn each_compatible_kind_of_change_is_compatible_for_clients_and_for_rust() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let base = load(root, "openapi.json").unwrap();
        for (kind, change) in COMPATIBLE {
            let mut head = base.clone();
            change(&mut head);
            let changes = compare(&base, &head);
            assert!(!changes.is_empty(), "{kind}: no change seen");
            assert!(
                changes.iter().all(|c| c.worst() == Class::Compatible),
                "{kind}: {changes:#?}"
            );
        }
    }

    /// The claim checked: after every compatible kind of change at once, an app written
    /// against today's crates still compiles against the regenerated ones.
    #[test]
    fn an_app_written_before_compatible_changes_still_compiles() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let mut head = load(root, "openapi.json").unwrap();
        for (_, change) in COMPATIBLE {
            change(&mut head);
        }
        if let Err(error) = downstream::check(root, "compatible-changes", head) {
            panic!("{error}");
        }
    }

    #[test]
    fn changes_the_wire_takes_but_rust_does_not_break_the_rust_api_only() {
        let rust_only = |change: &dyn Fn(&mut Value)| -> BTreeSet<(Class, Class)> {
            let mut head = base();
            change(&mut head);
            compare(&base(), &head)
                .iter()
                .map(|c| (c.class, c.rust))
                .collect()
        };
        let compatible_for_clients = BTreeSet::from([(Class::Compatible, Class::Breaking)]);
        // A response member that became required is no longer an Option.
        assert_eq!(
            rust_only(&|d| session(d)["required"] = json!(["id", "state", "title"])),
            compatible_for_clients
        );
        // A request enum that gained a value gained a variant exhaustive matches miss.
        assert_eq!(
            rust_only(
                &|d| chat_body(d)["properties"]["mode"]["enum"] = json!(["fast", "slow", "auto"])
            ),
            compatible_for_clients
        );
        // A new success status with another body changes what `send()` returns.
        assert_eq!(
            rust_only(
                &|d| d["paths"]["/v1/chat"]["post"]["responses"]["200"] = json!({ "description": "done", "content": { "application/json": {
                    "schema": { "type": "object" } } } })
            ),
            compatible_for_clients
        );
        // A description is documentation only.
        assert_eq!(
            rust_only(&|d| session(d)["description"] = json!("A session.")),
            BTreeSet::from([(Class::Documentation, Class::Documentation)])
        );
    }

    #[test]
    fn the_changelog_groups_changes_by_their_worse_verdict() {
        let mut head = base();
        session(&mut head)["properties"]["archived"] = json!({ "type": "boolean" });
        session(&mut head)["required"] = json!(["id", "state", "title"]);
        session(&mut head)["description"] = json!("A session.");
        let changes = compare(&base(), &head);
        insta::assert_snapshot!(changelog(
            &changes,
            bump("0.1.0", &changes, Judged::Crates).as_deref(),
            Judged::Crates
        ));
    }

    #[test]
    fn versions_bump_by_the_worst_change() {
        let change = |class| Change {
            class,
            rust: class,
            location: "x".into(),
            reason: "y".into(),
        };
        assert_eq!(bump("0.1.0", &[], Judged::Crates), None);
        assert_eq!(
            bump("1.4.2", &[change(Class::Documentation)], Judged::Crates).as_deref(),
            Some("1.4.3")
        );
        let rust_only = Change {
            rust: Class::Breaking,
            ..change(Class::Compatible)
        };
        assert_eq!(
            bump("1.4.2", std::slice::from_ref(&rust_only), Judged::Crates).as_deref(),
            Some("2.0.0")
        );
        // The interface's clients judge by its verdict alone.
        assert_eq!(
            bump("1.0.0", &[rust_only], Judged::Interface).as_deref(),
            Some("1.1.0")
        );
        assert_eq!(
            bump("0.1.0", &[change(Class::Compatible)], Judged::Crates).as_deref(),
            Some("0.1.1")
        );
        assert_eq!(
            bump("0.1.3", &[change(Class::Breaking)], Judged::Crates).as_deref(),
            Some("0.2.0")
        );
        assert_eq!(
            bump("1.4.2", &[change(Class::Compatible)], Judged::Crates).as_deref(),
            Some("1.5.0")
        );
        assert_eq!(
            bump("1.4.2", &[change(Class::Breaking)], Judged::Crates).as_deref(),
            Some("2.0.0")
        );
    }

    #[test]
    fn the_interface_report_judges_by_the_interface_alone() {
        let changes = [Change {
            class: Class::Compatible,
            rust: Class::Breaking,
            location: "Session.turnCount".into(),
            reason: "new required response member".into(),
        }];
        let next = bump("1.0.0", &changes, Judged::Interface);
        let text = report(&changes, "1.0.0", next.as_deref(), Judged::Interface);
        assert!(
            text.contains("1 changes, 0 breaking the interface's clients\n"),
            "{text}"
        );
        assert!(text.ends_with("the interface: 1.0.0 -> 1.1.0\n"), "{text}");
        assert!(!text.to_lowercase().contains("rust"), "{text}");
    }
}
