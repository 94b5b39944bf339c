//! Names from elsewhere (a config object, a scenario) made into ones that
//! fit both a scenario component and a Kubernetes object: the audit's
//! export names its scenario elements with [`slug`], the sweep its Jobs.
//! Text, like [`crate::units`]: shared here because it is the one crate
//! both depend on.

/// `s` in lower-case ASCII letters, digits and single dashes, with no dash
/// at either end; every other character (and every run of them) becomes
/// one dash. Empty when `s` has no letter or digit: the caller picks the
/// fallback that suits its use.
///
/// ```
/// use stormbreak_policy::names::slug;
/// assert_eq!(slug("Istio Ingress / GW_1"), "istio-ingress-gw-1");
/// assert_eq!(slug("--"), "");
/// ```
pub fn slug(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::slug;

    #[test]
    fn runs_of_other_characters_are_one_dash_and_ends_are_trimmed() {
        assert_eq!(slug("a..b"), "a-b");
        assert_eq!(slug("-a b-"), "a-b");
        assert_eq!(slug("Ünïcode"), "n-code");
        assert_eq!(slug(""), "");
        assert_eq!(slug("web-api"), "web-api");
    }
}
