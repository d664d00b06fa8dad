//! Writing generated files, or checking that the checked-in ones are up to date.

use std::fs;
use std::path::{Path, PathBuf};

/// What to do with the generated files.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Overwrite the checked-in files.
    Write,
    /// Fail with a diff when a checked-in file differs.
    Check,
}

/// Writes each `(path, content)` of `outputs` that differs, or in [`Mode::Check`] prints a diff
/// and fails naming `command`, the task that regenerates them.
pub fn sync(
    root: &Path,
    mode: Mode,
    outputs: &[(PathBuf, String)],
    command: &str,
) -> Result<(), String> {
    let mut stale = Vec::new();
    for (path, generated) in outputs {
        let current = fs::read_to_string(path).unwrap_or_default();
        if current == *generated {
            continue;
        }
        let name = path
            .strip_prefix(root)
            .unwrap_or(path)
            .display()
            .to_string();
        match mode {
            Mode::Write => {
                fs::write(path, generated).map_err(|e| format!("writing {name}: {e}"))?;
                println!("wrote {name}");
            }
            Mode::Check => {
                let diff = similar::TextDiff::from_lines(&current, generated);
                eprint!(
                    "{}",
                    diff.unified_diff()
                        .context_radius(3)
                        .header(&name, &format!("{name} (generated)"))
                );
                stale.push(name);
            }
        }
    }
    if stale.is_empty() {
        if mode == Mode::Check {
            println!("generated files are up to date");
        }
        Ok(())
    } else {
        Err(format!(
            "out of date: {}; run `{command}`",
            stale.join(", ")
        ))
    }
}
