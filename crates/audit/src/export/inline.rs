//! Policy configs written as TOML inline tables, by the policy crate's own
//! serde derives: the simulator reads the table back with the same derive,
//! so the file says what the run does and cannot drift from the type (a
//! field renamed in the policy crate changes the export with it).

use serde::Serialize;

/// `value` as a one-line TOML inline table or value (`{ a = 1, b = "2s" }`);
/// `None` fields are left out, as the format's defaults read them.
pub(crate) fn inline<T: Serialize>(value: &T) -> Result<String, String> {
    let mut s = String::new();
    value
        .serialize(toml::ser::ValueSerializer::new(&mut s))
        .map_err(|e| format!("cannot write a scenario table: {e}"))?;
    // The serializer writes inline tables on one line; say so if that
    // ever changes rather than write a broken file.
    if s.contains('\n') {
        return Err(format!("a scenario table spans lines: {s}"));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stormbreak_policy::Nanos;
    use stormbreak_policy::limit::QueueConfig;

    #[test]
    fn a_policy_table_is_one_readable_line() {
        let q = QueueConfig {
            size: 30,
            timeout: Nanos::from_millis(250),
        };
        assert_eq!(inline(&q).unwrap(), "{ size = 30, timeout = \"250ms\" }");
    }
}
