//! What the binary's test files share.

use std::path::PathBuf;

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

/// A fresh, empty directory for one test, unique to this process.
pub fn temp_dir(prefix: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{prefix}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
