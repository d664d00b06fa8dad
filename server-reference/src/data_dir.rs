//! The data directory, private to the server's user whatever the umask: the directory 0700 and
//! every file in it 0600 (the SQLite database, its WAL and SHM files, the keys). One that other
//! users can write is refused: they could replace a key or the database.

use std::fs::{self, DirBuilder, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Makes `dir` private: created 0700 when missing, group and other access taken from one that
/// exists, and each file in it 0600. With `database`, that file is created 0600 first, so that
/// the WAL and SHM files SQLite makes beside it take its mode. Refuses a directory that group
/// or other users can write.
pub fn prepare(dir: &Path, database: Option<&str>) -> io::Result<()> {
    match fs::metadata(dir) {
        Err(missing) if missing.kind() == io::ErrorKind::NotFound => {
            DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        }
        Err(other) => return Err(other),
        Ok(metadata) => {
            let mode = metadata.permissions().mode() & 0o777;
            if mode & 0o022 != 0 {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "other users can write it (mode {mode:o}); make it private with \
                         `chmod 700 {}`",
                        dir.display()
                    ),
                ));
            }
            if mode != 0o700 {
                fs::set_permissions(dir, Permissions::from_mode(0o700))?;
            }
        }
    }
    if let Some(name) = database {
        OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(dir.join(name))?;
    }
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let metadata = entry.metadata()?;
        if metadata.is_file() && metadata.permissions().mode() & 0o777 != 0o600 {
            fs::set_permissions(entry.path(), Permissions::from_mode(0o600))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_new_directory_and_its_database_are_private() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("data");
        prepare(&dir, Some("intent.db")).unwrap();
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("intent.db")), 0o600);
    }

    #[test]
    fn an_existing_directory_readable_by_others_is_made_private_with_its_files() {
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), Permissions::from_mode(0o755)).unwrap();
        for name in [
            "intent.db",
            "intent.db-wal",
            "intent.db-shm",
            "signing.json",
        ] {
            fs::write(dir.path().join(name), b"").unwrap();
            fs::set_permissions(dir.path().join(name), Permissions::from_mode(0o644)).unwrap();
        }
        prepare(dir.path(), None).unwrap();
        assert_eq!(mode(dir.path()), 0o700);
        for name in [
            "intent.db",
            "intent.db-wal",
            "intent.db-shm",
            "signing.json",
        ] {
            assert_eq!(mode(&dir.path().join(name)), 0o600, "{name}");
        }
    }

    #[test]
    fn a_directory_others_can_write_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), Permissions::from_mode(0o777)).unwrap();
        let refused = prepare(dir.path(), Some("intent.db")).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::PermissionDenied);
        assert!(refused.to_string().contains("chmod 700"), "{refused}");
        assert!(!dir.path().join("intent.db").exists(), "nothing written");
    }
}
