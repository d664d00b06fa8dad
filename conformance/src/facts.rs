//! The interface document, fact by fact: `conformance/facts.json` ties each statement of
//! `shared/interface.md` to the normative checks that assert it, or says why no check from
//! outside a deployment can (as web-platform-tests ties each test to the text it tests).

use std::collections::{BTreeMap, HashSet};
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

use crate::checks::Check;
use crate::spec::{Level, spec};

/// One statement of the document.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fact {
    /// Stable id, `section.slug`.
    pub id: String,
    /// The document's top-level part: `0` for its opening paragraph, `1` to `9`.
    pub part: String,
    /// The statement, quoted or closely paraphrased.
    pub text: String,
    /// The ids of the checks that assert it.
    #[serde(default)]
    pub checks: Vec<String>,
    /// Why no check from outside a deployment can assert it.
    pub untestable: Option<String>,
    /// What a normative check would have to assert, for a testable fact none asserts yet.
    pub missing: Option<String>,
    /// The condition of the run or the deployment under which its checks reach it (a short
    /// lifetime, the reference catalog): elsewhere they skip, and a run asserts it only where
    /// the report says so.
    pub conditional: Option<String>,
}

/// The list: the document it reads and its facts.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Facts {
    /// The document's path in the workspace's parent.
    pub document: String,
    /// Its facts, in its order.
    pub facts: Vec<Fact>,
}

/// The list, parsed once.
pub fn list() -> &'static Facts {
    static FACTS: LazyLock<Facts> = LazyLock::new(|| {
        serde_json::from_str(include_str!("../facts.json"))
            .expect("conformance/facts.json holds the facts")
    });
    &FACTS
}

/// Every fact of the document, in its order.
pub fn all() -> &'static [Fact] {
    &list().facts
}

/// How a fact stands against the checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// At least one normative check asserts it.
    Covered,
    /// No check from outside can.
    Untestable,
    /// Testable, but no normative check asserts it.
    Uncovered,
}

/// The checks `fact` names that are among `checks` at the normative level.
pub fn normative_checks<'a>(fact: &'a Fact, checks: &[Check]) -> Vec<&'a str> {
    fact.checks
        .iter()
        .filter(|id| {
            checks
                .iter()
                .any(|check| *check.id == **id && spec().level(&check.rests_on) == Level::Normative)
        })
        .map(String::as_str)
        .collect()
}

/// How `fact` stands against `checks`.
pub fn standing(fact: &Fact, checks: &[Check]) -> Standing {
    let normative = !normative_checks(fact, checks).is_empty();
    match (normative, &fact.untestable) {
        (true, _) => Standing::Covered,
        (false, Some(_)) => Standing::Untestable,
        (false, None) => Standing::Uncovered,
    }
}

/// The facts of each part: `(part, covered, untestable, uncovered)`, in part order.
pub fn coverage(checks: &[Check]) -> Vec<(String, usize, usize, usize)> {
    let mut parts: BTreeMap<u32, (String, usize, usize, usize)> = BTreeMap::new();
    for fact in all() {
        let order = fact.part.parse().unwrap_or(u32::MAX);
        let entry = parts
            .entry(order)
            .or_insert_with(|| (fact.part.clone(), 0, 0, 0));
        match standing(fact, checks) {
            Standing::Covered => entry.1 += 1,
            Standing::Untestable => entry.2 += 1,
            Standing::Uncovered => entry.3 += 1,
        }
    }
    parts.into_values().collect()
}

/// The testable facts a run reached: asserted by a normative check that ran and made
/// assertions (it passed or failed), or not (its checks skipped, were inconclusive or were left
/// out), so that a fact that only a short lifetime or the reference catalog lets a check reach
/// counts only where it was.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Reached {
    /// The ids of the facts this run asserted.
    pub asserted: Vec<String>,
    /// The ids of the testable facts it did not.
    pub unasserted: Vec<String>,
}

/// The facts a run reached, where `asserted(check, fact)` tells whether the run's check of that
/// id asserted that fact on an answer.
pub fn reached(asserted: impl Fn(&str, &str) -> bool) -> Reached {
    let checks = crate::checks::all();
    let mut reached = Reached::default();
    for fact in all() {
        let by = normative_checks(fact, checks);
        if by.is_empty() {
            continue;
        }
        let asserted = by.iter().any(|id| asserted(id, &fact.id));
        let list = if asserted {
            &mut reached.asserted
        } else {
            &mut reached.unasserted
        };
        list.push(fact.id.clone());
    }
    reached
}

impl Reached {
    /// One line: how many testable facts the run asserted, and which it did not; `None` for a
    /// report that judges no fact (a validation proxy's).
    pub fn summary(&self) -> Option<String> {
        let all = self.asserted.len() + self.unasserted.len();
        if all == 0 {
            return None;
        }
        let mut line = format!(
            "facts: {} of {all} testable facts of the document asserted by this run",
            self.asserted.len()
        );
        if !self.unasserted.is_empty() {
            line.push_str(&format!("; not: {}", self.unasserted.join(", ")));
        }
        Some(line)
    }
}

/// What is wrong with the list against `checks`: an id twice, a check that does not exist, a
/// fact both tested and called untestable, a testable fact no normative check asserts.
pub fn problems(checks: &[Check]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut ids = HashSet::new();
    for fact in all() {
        if !ids.insert(fact.id.as_str()) {
            problems.push(format!("{}: the id appears twice", fact.id));
        }
        for id in &fact.checks {
            if !checks.iter().any(|check| *check.id == **id) {
                problems.push(format!("{}: no check {id}", fact.id));
            }
        }
        if fact.untestable.is_some() && !fact.checks.is_empty() {
            problems.push(format!("{}: tested and called untestable", fact.id));
        }
        if fact.untestable.is_some() && fact.conditional.is_some() {
            problems.push(format!("{}: conditional and called untestable", fact.id));
        }
        if standing(fact, checks) == Standing::Uncovered {
            problems.push(format!(
                "{} (part {}): no normative check asserts \"{}\"",
                fact.id, fact.part, fact.text
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_testable_fact_has_a_normative_check() {
        let problems = problems(crate::checks::all());
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    #[test]
    fn a_fact_whose_only_check_is_of_the_profile_is_uncovered() {
        let checks = crate::checks::all();
        let fact = |checks: &[&str], untestable: Option<&str>| Fact {
            id: "x".into(),
            part: "7".into(),
            text: "x".into(),
            checks: checks.iter().map(|id| id.to_string()).collect(),
            untestable: untestable.map(str::to_owned),
            missing: None,
            conditional: None,
        };
        let profile_only = fact(&["agent.sessions.delete"], None);
        assert_eq!(standing(&profile_only, checks), Standing::Uncovered);
        let normative = fact(&["schema.error-envelope"], None);
        assert_eq!(standing(&normative, checks), Standing::Covered);
        let untestable = fact(&[], Some("inside the deployment"));
        assert_eq!(standing(&untestable, checks), Standing::Untestable);
    }
}
