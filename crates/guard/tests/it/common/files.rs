//! Temporary files for the guard's tests, std only (the CLI's tests have
//! their own `TempDir` in crates/cli/tests/it/common).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// A directory unique to one test of one process, removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    /// `$TMPDIR/stormbreak-{tag}-{pid}`, made empty.
    pub fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("stormbreak-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `text` to `name` in the directory; its path.
    pub fn write(&self, name: &str, text: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
