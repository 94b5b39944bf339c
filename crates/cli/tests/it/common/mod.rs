//! What the binary's test files share.

use std::ops::Deref;
use std::path::{Path, PathBuf};

/// A small scenario that runs in milliseconds: one service, one client.
pub const SMALL: &str = r#"[scenario]
name = "small"
duration = "30s"

[[service]]
name = "svc"
replicas = 2
app = { workers = 4, service_time = { dist = "exponential", mean = "2ms" } }

[[route]]
name = "r"
path = ["svc"]

[[client]]
name = "users"
route = "r"
rate = "500/s"
timeout = "1s"
"#;

/// A fresh, empty directory for one test, unique to this process, removed
/// with everything in it when dropped, also when the test fails: a test run
/// leaves nothing behind in the temp directory.
pub struct TempDir(PathBuf);

impl TempDir {
    /// Writes `text` to `name` in the directory; its path.
    #[allow(dead_code)] // Not every test file writes files.
    pub fn write(&self, name: &str, text: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for TempDir {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh, empty directory for one test (see [`TempDir`]).
pub fn temp_dir(prefix: &str, name: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!("{prefix}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    TempDir(dir)
}
