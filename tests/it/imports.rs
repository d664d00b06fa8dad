//! Imports flow one way in each crate with rooms of its own: no top-level module of the server,
//! the SDK or the suite reaches itself through the modules its code (outside tests) names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each top-level module of the crate at `src` (a folder or a file beside `lib.rs`), with the
/// top-level modules its code (not its comments or tests) names as `crate::x`.
fn imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let relative = path
                .strip_prefix(src)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let top = relative.split('/').next().unwrap().trim_end_matches(".rs");
            if !relative.ends_with(".rs") || top == "lib" || top == "main" {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code: String = text
                .split("#[cfg(test)]")
                .next()
                .unwrap_or_default()
                .lines()
                .filter(|line| !line.trim_start().starts_with("//"))
                .collect();
            let named: &mut BTreeSet<String> = graph.entry(top.to_owned()).or_default();
            for (at, _) in code.match_indices("crate::") {
                let name: String = code[at + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != top {
                    named.insert(name);
                }
            }
        }
    }
    graph
}

/// The first circle of `graph`, as the path that closes it.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    for start in graph.keys() {
        let mut paths = vec![vec![start.clone()]];
        let mut seen = BTreeSet::new();
        while let Some(path) = paths.pop() {
            let last = path.last().unwrap();
            for next in graph.get(last).into_iter().flatten() {
                let mut longer = path.clone();
                longer.push(next.clone());
                if next == start {
                    return Some(longer);
                }
                if seen.insert(next.clone()) {
                    paths.push(longer);
                }
            }
        }
    }
    None
}

#[test]
fn no_crate_has_an_import_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    for crate_src in ["server-reference/src", "sdk/client/src", "conformance/src"] {
        let graph = imports(&root.join(crate_src));
        assert!(
            graph.len() >= 8,
            "{crate_src}'s modules are read: {graph:?}"
        );
        assert_eq!(circle(&graph), None, "an import circle in {crate_src}");
    }
}

#[test]
fn a_circle_is_found() {
    let graph = BTreeMap::from([
        ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
        ("b".to_owned(), BTreeSet::from(["c".to_owned()])),
        ("c".to_owned(), BTreeSet::from(["a".to_owned()])),
        ("d".to_owned(), BTreeSet::from(["a".to_owned()])),
    ]);
    assert_eq!(circle(&graph).unwrap(), ["a", "b", "c", "a"]);
    let line = BTreeMap::from([("a".to_owned(), BTreeSet::from(["b".to_owned()]))]);
    assert_eq!(circle(&line), None);
}
