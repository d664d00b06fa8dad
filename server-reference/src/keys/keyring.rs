//! Secrets kept in the data dir: each is a current 32-byte value in its own file, plus the values
//! it replaced and when each was retired, in `<file>.retired.json`. `intent-server keys rotate`
//! retires the current signing and cursor secrets and makes new ones current; the server honours
//! a retired value for as long as anything made with it can still be valid, then refuses it.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

/// A secret's current value and the values it replaced.
pub(crate) struct Ring {
    current: [u8; 32],
    /// Each value with the time (Unix seconds) it was retired, oldest first.
    retired: Vec<([u8; 32], i64)>,
}

/// A retired value as `<file>.retired.json` keeps it.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Retired {
    /// The value, base64url without padding.
    secret: String,
    retired_at: i64,
}

impl Ring {
    /// The secret of `file` in `data_dir` and its retired values; the secret is created at random
    /// and saved the first time.
    pub fn load_or_create(data_dir: &Path, file: &str) -> io::Result<Self> {
        let current = secret_file(&data_dir.join(file))?;
        let saved: Vec<Retired> = match fs::read(retired_path(data_dir, file)) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| invalid(file, e))?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        let retired = saved
            .into_iter()
            .map(|r| {
                let secret = URL_SAFE_NO_PAD.decode(&r.secret).ok();
                let secret = secret.and_then(|bytes| bytes.try_into().ok());
                let secret =
                    secret.ok_or_else(|| invalid(file, "a retired value is not 32 bytes"))?;
                Ok((secret, r.retired_at))
            })
            .collect::<io::Result<_>>()?;
        Ok(Self { current, retired })
    }

    /// The current value, honoured for ever, then each retired value with the time (Unix
    /// seconds) it stops being honoured: `keep` after its retirement. A retired value equal to
    /// the current one (a rotation cut off half-way) is left out.
    pub fn honoured(&self, keep: Duration) -> Vec<([u8; 32], i64)> {
        let keep = i64::try_from(keep.as_secs()).unwrap_or(i64::MAX);
        let retired = self
            .retired
            .iter()
            .filter(|(secret, _)| *secret != self.current);
        std::iter::once((self.current, i64::MAX))
            .chain(retired.map(|&(secret, at)| (secret, at.saturating_add(keep))))
            .collect()
    }
}

/// Retires the current value of `file` in `data_dir` at `now` (Unix seconds) and makes a new
/// random value current. The retired list is written first, so a rotation cut off half-way
/// loses no value.
pub(crate) fn rotate(data_dir: &Path, file: &str, now: i64) -> io::Result<()> {
    let mut ring = Ring::load_or_create(data_dir, file)?;
    ring.retired.push((ring.current, now));
    let saved: Vec<Retired> = ring
        .retired
        .iter()
        .map(|(secret, retired_at)| Retired {
            secret: URL_SAFE_NO_PAD.encode(secret),
            retired_at: *retired_at,
        })
        .collect();
    let retired = serde_json::to_vec_pretty(&saved).expect("the retired list serializes");
    write_private(&retired_path(data_dir, file), &retired)?;
    write_private(&data_dir.join(file), &crate::random::bytes::<32>())
}

fn retired_path(data_dir: &Path, file: &str) -> PathBuf {
    data_dir.join(format!("{file}.retired.json"))
}

fn invalid(what: &str, error: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{what}: {error}"))
}

/// The 32 secret bytes kept in `path`, created at random and saved the first time.
pub(crate) fn secret_file(path: &Path) -> io::Result<[u8; 32]> {
    match fs::read(path) {
        Ok(bytes) => bytes
            .try_into()
            .map_err(|_| invalid(&path.display().to_string(), "not 32 bytes")),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let secret = crate::random::bytes::<32>();
            write_private(path, &secret)?;
            Ok(secret)
        }
        Err(e) => Err(e),
    }
}

/// Writes a file readable by its owner only, through a temporary file and a rename.
fn write_private(path: &Path, contents: &[u8]) -> io::Result<()> {
    let temporary = path.with_extension("tmp");
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&temporary)?;
    file.write_all(contents)?;
    file.sync_all()?;
    fs::rename(&temporary, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "test-key";
    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn a_secret_is_created_once_and_kept_private() {
        let dir = tempfile::tempdir().unwrap();
        let first = Ring::load_or_create(dir.path(), FILE).unwrap().current;
        assert_eq!(
            Ring::load_or_create(dir.path(), FILE).unwrap().current,
            first
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(dir.path().join(FILE)).unwrap().permissions();
            assert_eq!(mode.mode() & 0o777, 0o600);
        }
    }

    #[test]
    fn a_rotation_makes_a_new_secret_current_and_honours_the_old_one_for_a_while() {
        let dir = tempfile::tempdir().unwrap();
        let old = Ring::load_or_create(dir.path(), FILE).unwrap().current;
        rotate(dir.path(), FILE, 1_000).unwrap();
        let ring = Ring::load_or_create(dir.path(), FILE).unwrap();
        assert_ne!(ring.current, old);
        assert_eq!(
            ring.honoured(HOUR),
            vec![(ring.current, i64::MAX), (old, 1_000 + 3_600)]
        );
        rotate(dir.path(), FILE, 2_000).unwrap();
        let again = Ring::load_or_create(dir.path(), FILE).unwrap();
        assert_eq!(again.honoured(HOUR).len(), 3);
    }

    #[test]
    fn a_rotation_cut_off_after_retiring_keeps_the_current_secret_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut ring = Ring::load_or_create(dir.path(), FILE).unwrap();
        ring.retired.push((ring.current, 5));
        assert_eq!(ring.honoured(HOUR), vec![(ring.current, i64::MAX)]);
    }

    #[test]
    fn a_damaged_retired_list_is_an_error_not_a_lost_key() {
        let dir = tempfile::tempdir().unwrap();
        Ring::load_or_create(dir.path(), FILE).unwrap();
        fs::write(
            retired_path(dir.path(), FILE),
            br#"[{"secret": "c2hvcnQ", "retiredAt": 1}]"#,
        )
        .unwrap();
        let error = Ring::load_or_create(dir.path(), FILE).err().unwrap();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    }
}
