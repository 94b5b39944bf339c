//! Component names in the exported scenario, and comment text.

use std::collections::{BTreeMap, BTreeSet};

/// A config name as a scenario component name: lower-case ASCII letters,
/// digits and single dashes.
pub(crate) use stormbreak_policy::names::slug as ident;

/// Text from the configs made safe for a `#` comment: a line break in a
/// name would end the comment and leave the rest as TOML.
pub(crate) fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// `n thing` or `n things`.
pub(crate) fn plural(n: u64, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// Unique names, one per modelled object: an object met again (a frontend
/// on several chains) gets the name it got first, so the scenario holds
/// one element for it, as the configs hold one object.
#[derive(Debug, Default)]
pub(crate) struct Names {
    used: BTreeSet<String>,
    by_key: BTreeMap<String, String>,
}

impl Names {
    /// The name of the element for `key`, made from `base`, and whether it
    /// is new (its block still to be written).
    pub(crate) fn of(&mut self, key: &str, base: &str) -> (String, bool) {
        if let Some(n) = self.by_key.get(key) {
            return (n.clone(), false);
        }
        let mut base = ident(base);
        if base.is_empty() {
            base = "x".into();
        }
        let mut name = base.clone();
        // Each name taken adds one entry: at most as many tries as names.
        let mut i = 1;
        while self.used.contains(&name) {
            i += 1;
            name = format!("{base}-{i}");
        }
        self.used.insert(name.clone());
        self.by_key.insert(key.to_string(), name.clone());
        (name, true)
    }

    /// Every name given, sorted.
    pub(crate) fn all(&self) -> Vec<String> {
        self.used.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_keeps_its_name_and_a_clash_is_suffixed() {
        let mut n = Names::default();
        assert_eq!(n.of("a", "Shop/Cart"), ("shop-cart".into(), true));
        assert_eq!(n.of("b", "shop cart"), ("shop-cart-2".into(), true));
        assert_eq!(n.of("a", "other"), ("shop-cart".into(), false));
        assert_eq!(n.of("c", "!!"), ("x".into(), true));
    }

    #[test]
    fn a_line_break_cannot_end_a_comment() {
        assert_eq!(one_line("a\nb\r\tc"), "a b  c");
    }
}
