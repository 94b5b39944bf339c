//! serde's messages in the user's terms.
//!
//! Types of this crate say what they expect with `#[serde(expecting)]`, but
//! the policy crate's configs and serde's primitives still speak Rust
//! (`expected struct RetryConfig`, `expected u32`). This rewrites what is
//! left, so no message names a Rust type.

/// What a scenario table or value of each Rust type looks like.
const TYPES: &[(&str, &str)] = &[
    (
        "RetryConfig",
        "a retry table like { max_attempts = 3, backoff = { base = \"25ms\" } }",
    ),
    (
        "BackoffConfig",
        "a backoff table like { kind = \"exponential\", base = \"25ms\", max = \"250ms\" }",
    ),
    ("BackoffKind", "\"constant\" or \"exponential\""),
    (
        "Jitter",
        "one of \"none\", \"full\", \"equal\", \"decorrelated\", \"proportional\"",
    ),
    (
        "RetryOn",
        "one of \"5xx\", \"gateway-error\", \"retriable-4xx\", \"reset\", \
         \"connect-failure\", \"timeout\", \"throttled\"",
    ),
    (
        "BudgetConfig",
        "a budget table with kind = \"ratio\" | \"grpc\" | \"aws\" | \"bucket\"",
    ),
    (
        "RatioBudgetConfig",
        "a budget table like { kind = \"ratio\", retry_ratio = 0.1 }",
    ),
    (
        "GrpcThrottleConfig",
        "a budget table like { kind = \"grpc\", max_tokens = 10, token_ratio = 0.1 }",
    ),
    (
        "AwsRetryQuotaConfig",
        "a budget table like { kind = \"aws\", initial_tokens = 500 }",
    ),
    (
        "TokenBucketConfig",
        "a budget table like { kind = \"bucket\", capacity = 10, cost = 1, reward = 0.1 }",
    ),
    (
        "FailoverConfig",
        "a failover policy table like { law = { kind = \"capacity_aware\", \
         target_utilisation = 0.8 }, deadband = 0.05 }",
    ),
    (
        "SpillLaw",
        "a law table with kind = \"capacity_aware\" | \"all_excess\" | \"fixed_fraction\"",
    ),
    (
        "StagedRestoreConfig",
        "a restore table like { ramp = { steps = [0.1, 0.5, 1.0], hold = \"5m\" } }",
    ),
    (
        "RampConfig",
        "a ramp table like { steps = [0.1, 0.5, 1.0], hold = \"5m\" }",
    ),
    (
        "Behavior",
        "a behavior table like { scale_up = { policies = [{ type = \"Pods\", value = 1, \
         period = \"60s\" }] }, scale_down = { stabilization_window = \"300s\" } }",
    ),
    (
        "ScalingRules",
        "a scaling rules table like { stabilization_window = \"0s\", select_policy = \"Max\", \
         policies = [{ type = \"Percent\", value = 100, period = \"15s\" }] }",
    ),
    (
        "ScalingPolicy",
        "a policy table like { type = \"Pods\", value = 4, period = \"15s\" }",
    ),
    ("PolicyKind", "\"Pods\" or \"Percent\""),
    ("SelectPolicy", "\"Max\", \"Min\" or \"Disabled\""),
    (
        "ErrorGuardConfig",
        "a guard table like { window = \"60s\", error_rate_threshold = 0.05 }",
    ),
];

/// serde's words before a type name, longest first so that `struct
/// variant X` is not read as `variant X`.
const PREFIXES: &[&str] = &[
    "internally tagged enum ",
    "adjacently tagged enum ",
    "untagged enum ",
    "struct variant ",
    "tuple variant ",
    "newtype variant ",
    "unit variant ",
    "tuple struct ",
    "unit struct ",
    "newtype struct ",
    "struct ",
    "enum ",
    "variant ",
];

/// serde's primitive names, as they end a message ("expected u32").
const PRIMITIVES: &[(&str, &str)] = &[
    ("expected u8", "expected a whole number from 0 to 255"),
    ("expected u16", "expected a whole number from 0 to 65535"),
    (
        "expected u32",
        "expected a whole number from 0 to 4294967295",
    ),
    (
        "expected u64",
        "expected a whole number from 0 to 18446744073709551615",
    ),
    ("expected usize", "expected a whole number ≥ 0"),
    ("expected i64", "expected a whole number"),
    ("expected f64", "expected a number"),
    ("expected a sequence", "expected a list [ … ]"),
    ("expected a map", "expected a table { … }"),
    ("expected option", "expected a value"),
    ("unknown variant", "unknown value"),
    (
        "expected variant identifier",
        "expected a string naming one of the documented values",
    ),
    (
        "wanted string or table",
        "expected a string naming one of the documented values",
    ),
];

/// `message` with Rust type names replaced by what the user writes.
pub(crate) fn user_terms(message: &str) -> String {
    // The unit parsers' bare expectation ("a rate such as …") reads as a
    // noun phrase; say that it is what was expected.
    let message =
        if message.starts_with("a rate such as") || message.starts_with("a duration such as") {
            format!("expected {message}")
        } else {
            message.to_owned()
        };
    let mut out = strip_types(&message);
    for (rust, user) in PRIMITIVES {
        out = replace_word(&out, rust, user);
    }
    out
}

/// Replaces `from` where it is not followed by more of an identifier
/// (`expected u32` but not `expected u320`).
fn replace_word(text: &str, from: &str, to: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(from) {
        let after = &rest[i + from.len()..];
        out.push_str(&rest[..i]);
        if after.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
            out.push_str(from);
        } else {
            out.push_str(to);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

fn strip_types(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    'scan: while !rest.is_empty() {
        for prefix in PREFIXES {
            // Only at a word start: "unknown variant `x`" has no type name
            // and stays as it is (the primitives pass rewords it).
            let Some(after) = rest.strip_prefix(prefix) else {
                continue;
            };
            let at_word_start = out
                .chars()
                .last()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
            let ident_len = after
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(after.len());
            let ident = &after[..ident_len];
            if at_word_start && ident.starts_with(|c: char| c.is_ascii_uppercase()) {
                let head = ident.split("::").next().unwrap_or(ident);
                match TYPES.iter().find(|(t, _)| *t == head) {
                    Some((_, user)) => out.push_str(user),
                    None if prefix.contains("variant") => out.push_str("a value"),
                    None if prefix.contains("enum") && !prefix.contains("tagged") => {
                        out.push_str("one of the values listed in docs/scenarios.md")
                    }
                    None => out.push_str("a table"),
                }
                rest = &after[ident_len..];
                continue 'scan;
            }
        }
        let c = rest.chars().next().expect("rest is not empty");
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::user_terms;

    #[test]
    fn rust_types_become_scenario_terms() {
        assert_eq!(
            user_terms("invalid type: integer `5`, expected struct RetryConfig"),
            "invalid type: integer `5`, expected a retry table like \
             { max_attempts = 3, backoff = { base = \"25ms\" } }"
        );
        assert_eq!(
            user_terms("invalid type: string \"x\", expected struct Unknown"),
            "invalid type: string \"x\", expected a table"
        );
        assert_eq!(
            user_terms("invalid value: integer `-1`, expected u32"),
            "invalid value: integer `-1`, expected a whole number from 0 to 4294967295"
        );
        assert_eq!(
            user_terms("unknown variant `reboot`, expected one of `a`"),
            "unknown value `reboot`, expected one of `a`"
        );
        assert_eq!(
            user_terms("expected unit variant ActionKind::PauseNodes"),
            "expected a value"
        );
    }
}
