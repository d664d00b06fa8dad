//! `cargo xtask lint`: openapi.json through Spectral (`spectral:oas`) and Redocly
//! (`recommended`), at the versions pinned in `tests/clients/package-lock.json`, with the
//! committed rulesets (`.spectral.yaml`, `redocly.yaml`). Any error or warning fails. The
//! linters are Node programs, so this runs `tests/clients/lint`, which installs them with npm
//! and says how to install Node where it is missing.

use std::path::Path;
use std::process::Command;

/// Runs both linters; fails unless both report nothing.
pub fn run(root: &Path) -> Result<(), String> {
    let script = root.join("tests/clients/lint");
    let status = Command::new(&script)
        .current_dir(root)
        .status()
        .map_err(|e| format!("running {}: {e}", script.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err("openapi.json does not lint clean (see above)".into())
    }
}
