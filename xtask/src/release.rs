//! Releases of the generated crates (intent-models and intent-sdk), recorded as `spec/released/`
//! records the interface's: `spec/crates/<version>.json` is the openapi.json a release was
//! generated from. `cargo xtask breaking` compares with the last of them by default, and
//! `cargo xtask release` records the next: the version the changes since call for (by
//! [`breaking::bump`]), in the workspace's `Cargo.toml` and `Cargo.lock`, with its entry at the top
//! of `CHANGELOG.md`.

use std::fs;
use std::path::Path;

use crate::breaking::{self, Judged};
use crate::releases::{self, CRATES};

/// The changelog of the crates, at the workspace root.
const CHANGELOG: &str = "CHANGELOG.md";

/// Its first line, above the entries (newest first).
const CHANGELOG_TITLE: &str = "# Changelog of intent-models and intent-sdk\n";

/// Runs `cargo xtask release [--dry-run]`: prints the entry of the next release and, unless
/// `--dry-run`, records it.
pub fn run(root: &Path, args: &[&str]) -> Result<(), String> {
    let dry_run = match args {
        [] => false,
        ["--dry-run"] => true,
        _ => return Err("usage: cargo xtask release [--dry-run]".into()),
    };
    let (version, path) = releases::last(root, CRATES)?;
    let base = breaking::load(root, &path.display().to_string())?;
    let text =
        fs::read_to_string(root.join("openapi.json")).map_err(|e| format!("openapi.json: {e}"))?;
    let head = breaking::load(root, "openapi.json")?;
    let changes = breaking::compare(&base, &head);
    let Some(next) = breaking::bump(&version, &changes, Judged::Crates) else {
        return Err(format!(
            "openapi.json has not changed since {version}: nothing to release"
        ));
    };
    let entry = breaking::changelog(&changes, Some(&next), Judged::Crates);
    print!("{entry}");
    if dry_run {
        return Ok(());
    }
    record(root, &version, &next, &text, &entry)?;
    eprintln!("recorded {CRATES}/{next}.json, the version {next} and its entry in {CHANGELOG}");
    Ok(())
}

/// Records release `next` after `version`: the document `text`, the version in `Cargo.toml` and
/// `Cargo.lock`, and `entry` at the top of the changelog.
fn record(root: &Path, version: &str, next: &str, text: &str, entry: &str) -> Result<(), String> {
    write(&root.join(CRATES).join(format!("{next}.json")), text)?;
    let manifest = read(&root.join("Cargo.toml"))?;
    write(
        &root.join("Cargo.toml"),
        &workspace_version(&manifest, version, next)?,
    )?;
    let lock = read(&root.join("Cargo.lock"))?;
    write(
        &root.join("Cargo.lock"),
        &locked_versions(&lock, version, next),
    )?;
    let changelog = read(&root.join(CHANGELOG)).unwrap_or_default();
    let earlier = changelog
        .strip_prefix(CHANGELOG_TITLE)
        .unwrap_or(&changelog);
    write(
        &root.join(CHANGELOG),
        &format!("{CHANGELOG_TITLE}\n{entry}{earlier}"),
    )
}

/// `manifest` with its `[workspace.package]` version `version` made `next`.
fn workspace_version(manifest: &str, version: &str, next: &str) -> Result<String, String> {
    let old = format!("version = \"{version}\"");
    let mut in_package = false;
    let mut found = false;
    let mut out = String::with_capacity(manifest.len());
    for line in manifest.lines() {
        if line.starts_with('[') {
            in_package = line.trim() == "[workspace.package]";
        }
        if in_package && line.trim() == old {
            out.push_str(&format!("version = \"{next}\""));
            found = true;
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    if found {
        Ok(out)
    } else {
        Err(format!(
            "Cargo.toml's [workspace.package] has no {old}: the last release recorded is {version}"
        ))
    }
}

/// `lock` with the version of every package of the workspace (those without a `source`) made
/// `next` where it was `version`.
fn locked_versions(lock: &str, version: &str, next: &str) -> String {
    let blocks: Vec<String> = lock
        .split("\n\n")
        .map(|block| {
            let local = block.starts_with("[[package]]") && !block.contains("\nsource = ");
            if local {
                block.replace(
                    &format!("\nversion = \"{version}\""),
                    &format!("\nversion = \"{next}\""),
                )
            } else {
                block.to_owned()
            }
        })
        .collect();
    blocks.join("\n\n")
}

fn read(path: &Path) -> Result<String, String> {
    fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workspace_version_is_the_last_release_of_the_crates() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let (version, _) = releases::last(root, CRATES).unwrap();
        assert_eq!(releases::crate_version(root).unwrap(), version);
    }

    #[test]
    fn a_release_records_its_document_version_and_changelog_entry() {
        let dir = std::env::temp_dir().join(format!("xtask-release-{}", std::process::id()));
        fs::create_dir_all(dir.join(CRATES)).unwrap();
        let document = fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/crates/0.1.0.json"),
        )
        .unwrap();
        fs::write(dir.join(CRATES).join("0.1.0.json"), &document).unwrap();
        // A compatible change: a new optional member of our profile.
        let mut head: serde_json::Value = serde_json::from_str(&document).unwrap();
        head["components"]["schemas"]["Session"]["properties"]["turnCount"] =
            serde_json::json!({ "type": "integer", "x-profile": "reference" });
        fs::write(dir.join("openapi.json"), head.to_string()).unwrap();
        let manifest = "[workspace]\nmembers = [\"a\"]\n\n[workspace.package]\nversion = \"0.1.0\"\n\n[workspace.dependencies]\nx = { version = \"0.1.0\" }\n";
        fs::write(dir.join("Cargo.toml"), manifest).unwrap();
        let lock = "version = 4\n\n[[package]]\nname = \"intent-sdk\"\nversion = \"0.1.0\"\n\n[[package]]\nname = \"other\"\nversion = \"0.1.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n";
        fs::write(dir.join("Cargo.lock"), lock).unwrap();
        fs::write(
            dir.join(CHANGELOG),
            format!("{CHANGELOG_TITLE}\n## 0.1.0\n"),
        )
        .unwrap();

        run(&dir, &[]).unwrap();
        assert_eq!(releases::last(&dir, CRATES).unwrap().0, "0.1.1");
        assert_eq!(
            read(&dir.join("spec/crates/0.1.1.json")).unwrap(),
            head.to_string()
        );
        let manifest = read(&dir.join("Cargo.toml")).unwrap();
        assert!(manifest.contains("[workspace.package]\nversion = \"0.1.1\""));
        assert!(
            manifest.contains("x = { version = \"0.1.0\" }"),
            "{manifest}"
        );
        let lock = read(&dir.join("Cargo.lock")).unwrap();
        assert!(
            lock.contains("name = \"intent-sdk\"\nversion = \"0.1.1\""),
            "{lock}"
        );
        assert!(
            lock.contains("name = \"other\"\nversion = \"0.1.0\""),
            "{lock}"
        );
        let changelog = read(&dir.join(CHANGELOG)).unwrap();
        assert!(
            changelog.starts_with(&format!(
                "{CHANGELOG_TITLE}\n## intent-models and intent-sdk 0.1.1\n"
            )),
            "{changelog}"
        );
        assert!(changelog.contains("turnCount") && changelog.ends_with("## 0.1.0\n"));
        // Nothing changed since: nothing to release.
        assert!(run(&dir, &[]).unwrap_err().contains("nothing to release"));
        fs::remove_dir_all(&dir).unwrap();
    }
}
