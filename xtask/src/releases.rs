//! The releases recorded in the workspace: the crates' (`spec/crates/<version>.json`, the
//! openapi.json each release of intent-models and intent-sdk was generated from) and the
//! interface's (`spec/released/<version>.json`), and the workspace's version, the crates' last.

use std::fs;
use std::path::{Path, PathBuf};

/// Where the releases of the crates are recorded, below the workspace root.
pub const CRATES: &str = "spec/crates";

/// Where the interface's own releases are recorded, below the workspace root.
pub const INTERFACE: &str = "spec/released";

/// The last release recorded in `dir` (below `root`): its version and the path of its document.
pub fn last(root: &Path, dir: &str) -> Result<(String, PathBuf), String> {
    let entries = fs::read_dir(root.join(dir)).map_err(|e| format!("{dir}: {e}"))?;
    let mut releases: Vec<(Vec<u64>, String, PathBuf)> = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        let Some(version) = path
            .file_name()
            .and_then(|name| name.to_str())
            .and_then(|name| name.strip_suffix(".json"))
        else {
            continue;
        };
        let parts: Option<Vec<u64>> = version.split('.').map(|p| p.parse().ok()).collect();
        if let Some(parts) = parts.filter(|parts| parts.len() == 3) {
            releases.push((parts, version.to_owned(), path));
        }
    }
    releases.sort();
    releases
        .pop()
        .map(|(_, version, path)| (version, path))
        .ok_or_else(|| format!("{dir} records no release"))
}

/// The workspace version, which intent-models and intent-sdk share: the last release recorded
/// in `spec/crates/` (a test holds them equal).
pub fn crate_version(root: &Path) -> Result<String, String> {
    let manifest = fs::read_to_string(root.join("Cargo.toml")).map_err(|e| e.to_string())?;
    manifest
        .lines()
        .skip_while(|line| line.trim() != "[workspace.package]")
        .find_map(|line| line.trim().strip_prefix("version = "))
        .map(|v| v.trim_matches('"').to_owned())
        .ok_or_else(|| "no workspace version in Cargo.toml".into())
}
