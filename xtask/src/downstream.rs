//! The downstream app, `xtask/downstream/main.rs`, built against intent-models and intent-sdk
//! generated from another openapi.json: the proof of what `xtask breaking` calls compatible for
//! the Rust API.
//!
//! The crates are copied into a workspace of their own under `target/downstream/<name>` (in
//! `CARGO_TARGET_DIR` where that is set, as CI sets it to a cache kept between runs), with the
//! repository's `Cargo.lock` (the same dependency versions) and profiles. The app is checked
//! (`cargo check`: what compiles is the question, not the binary) in the repository's target
//! directory: its dependencies are those of the two crates alone, checked once there for every
//! such workspace and for `cargo doc -p intent-models -p intent-sdk`, so that only the changed
//! crates are checked again. (Cargo holds that directory's lock only while it builds, not while
//! the tests run.)

use std::fs;
use std::path::Path;

use serde_json::Value;

use crate::codegen;

/// The crates the app depends on, copied from the repository.
const CRATES: [&str; 2] = ["sdk/models", "sdk/client"];

/// Checks that the downstream app compiles against the crates generated from `document`, in the
/// workspace `target/downstream/<name>`; the compiler's errors when it does not.
pub fn check(root: &Path, name: &str, document: Value) -> Result<(), String> {
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or(root.join("target"), |dir| root.join(dir));
    let downstream = target.join("downstream");
    let workspace = downstream.join(name);
    for krate in CRATES {
        let copy = workspace.join(krate);
        if copy.exists() {
            fs::remove_dir_all(&copy).map_err(|e| format!("{}: {e}", copy.display()))?;
        }
        copy_dir(&root.join(krate), &copy)?;
    }
    for (path, text) in codegen::GENERATED.iter().zip(codegen::generate(document)?) {
        write(&workspace.join(path), &text)?;
    }
    write(&workspace.join("Cargo.toml"), &manifest(root)?)?;
    fs::copy(root.join("Cargo.lock"), workspace.join("Cargo.lock"))
        .map_err(|e| format!("copying Cargo.lock: {e}"))?;
    write(&workspace.join("app/Cargo.toml"), APP_MANIFEST)?;
    fs::copy(
        root.join("xtask/downstream/main.rs"),
        workspace.join("app/main.rs"),
    )
    .map_err(|e| format!("copying the downstream app: {e}"))?;

    let output = crate::cargo()
        .current_dir(&workspace)
        .env("CARGO_TARGET_DIR", &target)
        .args(["check", "--quiet", "-p", "downstream"])
        .output()
        .map_err(|e| format!("running cargo: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "the downstream app does not compile against the regenerated crates:\n{}",
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// The app's manifest: the SDK by path, and the runtime its `main` starts.
const APP_MANIFEST: &str = r#"[package]
name = "downstream"
version = "0.0.0"
edition = "2024"
publish = false

[[bin]]
name = "downstream"
path = "main.rs"

[dependencies]
intent-sdk = { path = "../sdk/client" }
tokio = { version = "1", features = ["rt"] }
"#;

/// The repository's workspace manifest with the copied crates and the app as its members, and
/// only the dependencies they name.
fn manifest(root: &Path) -> Result<String, String> {
    let text = fs::read_to_string(root.join("Cargo.toml"))
        .map_err(|e| format!("reading Cargo.toml: {e}"))?;
    let mut out = String::new();
    let mut in_members = false;
    for line in text.lines() {
        if line.starts_with("members = [") {
            in_members = true;
            out.push_str("members = [\"sdk/models\", \"sdk/client\", \"app\"]\n");
            continue;
        }
        if in_members {
            in_members = line.trim() != "]";
            continue;
        }
        let other_crate = line.starts_with("intent-")
            && !line.starts_with("intent-models ")
            && !line.starts_with("intent-sdk ");
        if !other_crate {
            out.push_str(line);
            out.push('\n');
        }
    }
    Ok(out)
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
    let entries = fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| e.to_string())?;
        let (path, target) = (entry.path(), to.join(entry.file_name()));
        if path.is_dir() {
            copy_dir(&path, &target)?;
        } else {
            fs::copy(&path, &target).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    Ok(())
}
