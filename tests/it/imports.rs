//! Imports flow one way in every folder of modules: among the modules of a crate's top level,
//! and among those of each area inside it (the server's `agent`, its `store`...), none reaches
//! itself through the modules its code (outside tests and comments) names. A module and one
//! inside it (a room and its parts) may name each other; an arrow between two rooms is drawn
//! between the rooms of the folder that holds both, and a name re-exported by a room's `mod.rs`
//! points at the module that defines it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module, as its path from the crate root (`["agent", "sessions"]`); the root is empty.
type Module = Vec<String>;

/// The code of each module of the crate at `src` (its file, outside tests, without comments).
fn modules(src: &Path) -> BTreeMap<Module, String> {
    let mut code = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let Some(relative) = path.strip_prefix(src).unwrap().to_str() else {
                continue;
            };
            let Some(relative) = relative.strip_suffix(".rs") else {
                continue;
            };
            let mut module: Module = relative.split('/').map(str::to_owned).collect();
            if module.last().is_some_and(|last| last == "mod") {
                module.pop();
            }
            // The library's root; a binary's beside it is read for the library's too.
            if module == ["main"] && src.join("lib.rs").exists() {
                continue;
            }
            if module == ["lib"] || module == ["main"] {
                module.clear();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            // A file's test module is its last item; `#[cfg(test)]` on one item keeps the rest.
            let outside_tests = text.split("#[cfg(test)]\nmod ").next().unwrap_or_default();
            let lines = outside_tests.lines();
            let kept: Vec<&str> = lines
                .filter(|line| !line.trim_start().starts_with("//"))
                .collect();
            code.insert(module, kept.join("\n"));
        }
    }
    code
}

/// Each path a `use` tree names, with the name it is bound to: `a::{b::C, D as E}` names
/// `a::b::C` as `C` and `a::D` as `E`.
fn expand(tree: &str, prefix: &[String], out: &mut Vec<(Vec<String>, String)>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let close = tree.rfind('}').expect("a use tree closes its braces");
        let mut prefix = prefix.to_vec();
        prefix.extend(segments(tree[..open].trim_end_matches("::")));
        let (mut depth, mut start) = (0, open + 1);
        for (at, c) in tree.char_indices().take(close).skip(open + 1) {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&tree[start..at], &prefix, out);
                    start = at + 1;
                }
                _ => {}
            }
        }
        expand(&tree[start..close], &prefix, out);
        return;
    }
    let (path, alias) = match tree.split_once(" as ") {
        Some((path, alias)) => (path, Some(alias.trim())),
        None => (tree, None),
    };
    let mut path: Vec<String> = prefix.iter().cloned().chain(segments(path)).collect();
    if path
        .last()
        .is_some_and(|last| last == "self" || last == "*")
    {
        path.pop();
    }
    if let Some(name) = alias.map(str::to_owned).or_else(|| path.last().cloned()) {
        out.push((path, name));
    }
}

fn segments(path: &str) -> impl Iterator<Item = String> + '_ {
    path.split("::")
        .map(str::trim)
        .filter(|segment| !segment.is_empty())
        .map(str::to_owned)
}

/// The `use` declarations of `code`, each path with its name: what the module sees by that
/// name, and so do its own modules through `super::` (a `pub` one re-exports it too).
fn uses(code: &str) -> Vec<(Vec<String>, String)> {
    const KEYWORDS: [&str; 4] = ["pub use ", "pub(crate) use ", "pub(super) use ", "use "];
    let mut out = Vec::new();
    for statement in code.split(';') {
        // A `use` starts a line of its statement and runs to the statement's end.
        let starts = std::iter::once(0).chain(statement.match_indices('\n').map(|(at, _)| at + 1));
        let tree = starts
            .filter_map(|at| {
                let line = statement[at..].trim_start_matches([' ', '\t']);
                KEYWORDS
                    .iter()
                    .find_map(|keyword| line.strip_prefix(keyword))
            })
            .next_back();
        if let Some(tree) = tree {
            expand(tree, &[], &mut out);
        }
    }
    out
}

/// The paths `code` names inline: `crate::a::b`, `super::a`, `self::a`.
fn inline_paths(code: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    for start in ["crate::", "super::", "self::"] {
        for (at, _) in code.match_indices(start) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let chain: String = code[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            paths.push(segments(&chain).collect());
        }
    }
    paths
}

/// `path`, named in `module`, from the crate root; `None` for another crate's.
fn absolute(module: &Module, path: &[String], known: &BTreeSet<Module>) -> Option<Vec<String>> {
    let first = path.first()?;
    match first.as_str() {
        "crate" => Some(path[1..].to_vec()),
        "self" => Some(module.iter().chain(&path[1..]).cloned().collect()),
        "super" => {
            let up = path.iter().take_while(|s| *s == "super").count();
            let base = &module[..module.len().checked_sub(up)?];
            Some(base.iter().chain(&path[up..]).cloned().collect())
        }
        _ => {
            let child: Module = module.iter().chain([first]).cloned().collect();
            known
                .contains(&child)
                .then(|| module.iter().chain(path).cloned().collect())
        }
    }
}

/// The module that defines what `path` (from the root) names: the longest module it starts
/// with, through the re-exports of that module.
fn defining(
    path: &[String],
    known: &BTreeSet<Module>,
    reexports: &BTreeMap<Module, BTreeMap<String, Vec<String>>>,
    depth: usize,
) -> Module {
    let module = (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|prefix| known.contains(prefix))
        .unwrap_or_default();
    let next = path.get(module.len());
    let exported = next.and_then(|name| reexports.get(&module)?.get(name));
    match exported {
        Some(target) if depth < 8 => {
            let rest = &path[module.len() + 1..];
            let full: Vec<String> = target.iter().chain(rest).cloned().collect();
            defining(&full, known, reexports, depth + 1)
        }
        _ => module,
    }
}

/// For each folder (the module that holds them), the arrows between its rooms.
fn arrows(src: &Path) -> BTreeMap<Module, BTreeMap<String, BTreeSet<String>>> {
    let code = modules(src);
    let known: BTreeSet<Module> = code.keys().cloned().collect();
    let reexports: BTreeMap<Module, BTreeMap<String, Vec<String>>> = code
        .iter()
        .map(|(module, text)| {
            let exported = uses(text)
                .into_iter()
                .filter_map(|(path, name)| Some((name, absolute(module, &path, &known)?)));
            (module.clone(), exported.collect())
        })
        .collect();
    let mut folders: BTreeMap<Module, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (module, text) in &code {
        let named = uses(text).into_iter().map(|(path, _)| path);
        for path in named.chain(inline_paths(text)) {
            let Some(path) = absolute(module, &path, &known) else {
                continue;
            };
            let target = defining(&path, &known, &reexports, 0);
            let common = module
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            if common == module.len() || common == target.len() {
                continue; // a room and one of its parts
            }
            let room = |m: &Module| m[..=common].join("::");
            folders
                .entry(module[..common].to_vec())
                .or_default()
                .entry(room(module))
                .or_default()
                .insert(room(&target));
        }
    }
    folders
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
fn no_folder_of_modules_has_an_import_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    for crate_src in [
        "server-reference/src",
        "sdk/client/src",
        "conformance/src",
        "xtask/src",
    ] {
        let folders = arrows(&root.join(crate_src));
        assert!(
            folders.get(&Vec::new()).is_some_and(|top| top.len() >= 5),
            "{crate_src}'s modules are read: {folders:?}"
        );
        for (folder, graph) in &folders {
            let found = circle(graph);
            assert_eq!(found, None, "an import circle in {crate_src} {folder:?}");
        }
    }
}

#[test]
fn an_arrow_follows_a_reexport_to_the_module_that_defines_it() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "mod area;\nmod other;\n");
    write(
        "area/mod.rs",
        "mod a;\nmod b;\nuse a::A;\npub use b::B;\nuse crate::other::O;\n",
    );
    // `b` reaches `a` through the room's private `use`; `a` reaches `b` after an item of its
    // tests.
    write(
        "area/a.rs",
        "pub struct A;\n#[cfg(test)]\nfn helper() {}\nuse super::B;\n",
    );
    write(
        "area/b.rs",
        "use super::{A, super::other};\npub struct B;\n#[cfg(test)]\nmod tests {\n    use super::super::c;\n}\n",
    );
    write("other.rs", "pub struct O;\n");
    let folders = arrows(dir.path());
    let area = &folders[&vec!["area".to_owned()]];
    assert_eq!(
        circle(area).unwrap(),
        ["area::a", "area::b", "area::a"],
        "{folders:?}"
    );
    let top = &folders[&Vec::new()];
    assert_eq!(top["area"], BTreeSet::from(["other".to_owned()]));
    assert_eq!(circle(top), None);
}
