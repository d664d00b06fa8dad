//! The data directory, private to the server's user whatever the umask: created 0700, and its
//! files 0600 (the keys are written so; the SQLite database, its WAL and SHM files are made so
//! here). One that other users can write is refused: they could replace a key or the database.

use std::fs::{self, DirBuilder, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Makes `dir` private: created 0700 when missing, refused when group or other users can write
/// it. With `database`, that file is created 0600 first, so that the WAL and SHM files SQLite
/// makes beside it take its mode, and the files of an existing database (`database*`) are made
/// 0600. Nothing else in an existing directory is touched.
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
        }
    }
    let Some(name) = database else {
        return Ok(());
    };
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(dir.join(name))?;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let metadata = entry.metadata()?;
        let ours = entry.file_name().to_string_lossy().starts_with(name);
        if ours && metadata.is_file() && metadata.permissions().mode() & 0o777 != 0o600 {
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
    fn an_existing_databases_files_are_made_private_and_nothing_else_is_touched() {
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), Permissions::from_mode(0o755)).unwrap();
        let names = ["intent.db", "intent.db-wal", "intent.db-shm", "notes.txt"];
        for name in names {
            fs::write(dir.path().join(name), b"").unwrap();
            fs::set_permissions(dir.path().join(name), Permissions::from_mode(0o644)).unwrap();
        }
        prepare(dir.path(), Some("intent.db")).unwrap();
        for name in &names[..3] {
            assert_eq!(mode(&dir.path().join(name)), 0o600, "{name}");
        }
        assert_eq!(
            mode(&dir.path().join("notes.txt")),
            0o644,
            "not the server's"
        );
        assert_eq!(
            mode(dir.path()),
            0o755,
            "a directory the server did not make"
        );
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
