//! `--load ROUTE=RATE` flags: the traffic a user gives an exported route.

use std::collections::BTreeMap;

/// Parses `--load ROUTE=RATE` flags (RATE as the scenario format writes
/// rates: `2k/s`, `250/s`, `9000`).
pub fn parse_loads(flags: &[String]) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for f in flags {
        let (route, rate) = f
            .split_once('=')
            .ok_or_else(|| format!("--load {f:?}: expected ROUTE=RATE such as auth=2k/s"))?;
        let ok = rate
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '/');
        if route.is_empty() || rate.is_empty() || !ok {
            return Err(format!(
                "--load {f:?}: expected ROUTE=RATE such as auth=2k/s"
            ));
        }
        out.insert(route.to_string(), rate.to_string());
    }
    Ok(out)
}
