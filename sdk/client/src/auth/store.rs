//! Refresh tokens that outlive the process: [`TokenStore`], and [`FileTokenStore`] in the
//! user's config directory.

use std::io::Write;
use std::path::PathBuf;

use crate::Error;

/// Where an OAuth source keeps its refresh token between runs, under a key naming the
/// deployment, the client and the resource. A rotated refresh token replaces the stored one at
/// once: the old one is spent, and presenting it again revokes its whole family.
pub trait TokenStore: Send + Sync + 'static {
    /// The refresh token stored under `key`, if any.
    fn load(&self, key: &str) -> Result<Option<String>, Error>;

    /// Stores `refresh_token` under `key`, replacing what was there.
    fn save(&self, key: &str, refresh_token: &str) -> Result<(), Error>;
}

/// A file per key, readable by the user alone (mode 0600 on Unix), in a directory: by default
/// `$XDG_CONFIG_HOME/intent/tokens`, else `$HOME/.config/intent/tokens`.
#[derive(Debug, Clone)]
pub struct FileTokenStore {
    dir: PathBuf,
}

impl FileTokenStore {
    /// A store in `dir` (made when first written).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// A store in the user's config directory; an error where neither `XDG_CONFIG_HOME` nor
    /// `HOME` is set.
    pub fn in_config_dir() -> Result<Self, Error> {
        let config = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))
            .ok_or_else(|| Error::Token("neither XDG_CONFIG_HOME nor HOME is set".to_owned()))?;
        Ok(Self::new(config.join("intent").join("tokens")))
    }

    /// The file of `key`: its characters other than ASCII letters, digits, `-` and `.` become
    /// `_`, so that a key (a URL, say) is one file name.
    fn path(&self, key: &str) -> PathBuf {
        let name: String = key
            .chars()
            .map(|c| match c {
                'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '.' => c,
                _ => '_',
            })
            .collect();
        self.dir.join(name)
    }
}

fn failed(what: &str, path: &std::path::Path, error: std::io::Error) -> Error {
    Error::Token(format!("{what} {}: {error}", path.display()))
}

impl TokenStore for FileTokenStore {
    fn load(&self, key: &str) -> Result<Option<String>, Error> {
        let path = self.path(key);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text.trim().to_owned()).filter(|token| !token.is_empty())),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(failed("reading", &path, error)),
        }
    }

    /// Writes a new file beside the old one and renames it over, so that a crash leaves one
    /// token or the other, never half of one.
    fn save(&self, key: &str, refresh_token: &str) -> Result<(), Error> {
        std::fs::create_dir_all(&self.dir).map_err(|e| failed("creating", &self.dir, e))?;
        let path = self.path(key);
        let fresh = path.with_extension("new");
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options
            .open(&fresh)
            .map_err(|e| failed("creating", &fresh, e))?;
        file.write_all(refresh_token.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| failed("writing", &fresh, e))?;
        std::fs::rename(&fresh, &path).map_err(|e| failed("replacing", &path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_token_loads_back_from_a_file_only_its_user_reads() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileTokenStore::new(dir.path().join("tokens"));
        let key = "https://api.example.com/v1/agent intent-cli";
        assert_eq!(store.load(key).unwrap(), None);
        store.save(key, "refresh-1").unwrap();
        store.save(key, "refresh-2").unwrap();
        assert_eq!(store.load(key).unwrap().as_deref(), Some("refresh-2"));
        let files: Vec<_> = std::fs::read_dir(dir.path().join("tokens"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(files, ["https___api.example.com_v1_agent_intent-cli"]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(store.path(key))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
