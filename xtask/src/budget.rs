//! `cargo xtask budget`: how many crates each build compiles, against the limits committed in
//! `xtask/budget.json`. Growth past a limit is a decision (raise the limit in the same commit),
//! not an accident.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

/// Each build a user makes: its name (the key of its limit) and the `cargo tree` arguments that
/// list what it compiles, build scripts and proc-macros included.
const BUILDS: &[(&str, &[&str])] = &[
    (
        "main job",
        &["-p", "intent-conformance", "-e", "normal,build"],
    ),
    ("tests", &["--workspace", "-e", "normal,build,dev"]),
    ("sdk", &["-p", "intent-sdk", "-e", "normal,build"]),
    (
        "conformance without the embedded server",
        &[
            "-p",
            "intent-conformance",
            "--no-default-features",
            "-e",
            "normal,build",
        ],
    ),
];

/// Prints each build's crate count beside its limit; fails when one passes it.
pub fn run(root: &Path) -> Result<(), String> {
    let path = root.join("xtask/budget.json");
    let limits: Value = std::fs::read_to_string(&path)
        .map_err(|e| format!("reading {}: {e}", path.display()))
        .and_then(|text| {
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
        })?;
    let mut over = Vec::new();
    println!("{:<42} {:>6} {:>6}", "build", "crates", "limit");
    for (name, args) in BUILDS {
        let count = crates(root, args)?;
        let limit = limits[*name]
            .as_u64()
            .ok_or_else(|| format!("{} has no limit for {name:?}", path.display()))?;
        println!("{name:<42} {count:>6} {limit:>6}");
        if count as u64 > limit {
            over.push(format!("{name}: {count} crates, limit {limit}"));
        }
    }
    if over.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "over budget ({}); cut a dependency or raise the limit in {}",
            over.join("; "),
            path.display()
        ))
    }
}

/// The distinct packages (name and version) `cargo tree` lists for one build on this host.
fn crates(root: &Path, args: &[&str]) -> Result<usize, String> {
    let output = crate::cargo()
        .current_dir(root)
        .args(["tree", "--locked", "--prefix", "none", "--format", "{p}"])
        .args(args)
        .output()
        .map_err(|e| format!("running cargo tree: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo tree {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    // "name vX.Y.Z", without the path of a local package or the " (*)" of a repeated one.
    let packages: BTreeSet<&str> = stdout
        .lines()
        .filter_map(|line| line.split(" (").next())
        .filter(|package| !package.is_empty())
        .collect();
    Ok(packages.len())
}
