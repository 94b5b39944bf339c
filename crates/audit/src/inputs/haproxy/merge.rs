//! One `Config` from the readings of a file under every combination of
//! its environment-dependent conditions ([`super::cond`]).
//!
//! A section that reads the same in every combination is kept once under
//! its own name. One that differs (or exists only in some combinations)
//! is kept once per distinct reading, its name followed by the branches
//! that reading assumes — `be (assuming `.if defined(PROD)` (line 4) is
//! true)` — so every chain and finding about it says which branch it
//! assumes. A frontend whose backend differs is split the same way and
//! routes to the matching reading of the backend. Settings taken from the
//! environment are named after the section's name the same way.

use std::collections::HashMap;

use super::cond::{Assumption, Choice, describe};
use super::{Config, Proxy, ProxyKind};

/// Groups of readings (worlds) with one value each, and the assumption
/// that names the group: only the choices the value depends on.
fn variants<V: PartialEq>(vals: &[Option<V>], k: usize) -> Vec<(Assumption, Vec<usize>)> {
    let n = vals.len();
    let relevant: Vec<usize> = (0..k)
        .filter(|i| (0..n).any(|w| vals[w] != vals[w ^ (1 << i)]))
        .collect();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for w in 0..n {
        if vals[w].is_none() {
            continue;
        }
        match groups.iter_mut().find(|g| vals[g[0]] == vals[w]) {
            Some(g) => g.push(w),
            None => groups.push(vec![w]),
        }
    }
    let mut out = Vec::new();
    for g in groups {
        let lits: Assumption = relevant
            .iter()
            .filter_map(|&i| {
                let b = g[0] & (1 << i) != 0;
                g.iter().all(|w| (w & (1 << i) != 0) == b).then_some((i, b))
            })
            .collect();
        if g.len() == n >> lits.len() {
            out.push((lits, g));
            continue;
        }
        let mask: usize = relevant.iter().map(|i| 1 << i).sum();
        let mut subs: Vec<(usize, Vec<usize>)> = Vec::new();
        for w in g {
            match subs.iter_mut().find(|s| s.0 == w & mask) {
                Some(s) => s.1.push(w),
                None => subs.push((w & mask, vec![w])),
            }
        }
        for (m, ws) in subs {
            out.push((
                relevant.iter().map(|&i| (i, m & (1 << i) != 0)).collect(),
                ws,
            ));
        }
    }
    out
}

/// The name a reading of a section is reported under.
fn named(name: &str, a: &Assumption, choices: &[Choice], unknown: &[String]) -> String {
    let mut notes = Vec::new();
    if !a.is_empty() {
        notes.push(format!("assuming {}", describe(choices, a)));
    }
    if !unknown.is_empty() {
        notes.push(format!("{}: unknown, read as not set", unknown.join(", ")));
    }
    if notes.is_empty() {
        name.to_string()
    } else {
        format!("{name} ({})", notes.join("; "))
    }
}

type Key = (ProxyKind, String, usize);

/// Merges the readings (index = world, bit i = choice i's value).
pub fn merge(mut readings: Vec<Config>, choices: &[Choice]) -> Config {
    let k = choices.len();
    let n = readings.len();
    let first_global = (
        readings[0].global_maxconn,
        readings[0].global_unknown.clone(),
    );
    let global_same = readings
        .iter()
        .all(|c| (c.global_maxconn, c.global_unknown.clone()) == first_global);
    for c in &mut readings {
        let g = c.global_maxconn;
        let gu = c.global_unknown.clone();
        for p in c
            .proxies
            .iter_mut()
            .filter(|p| p.is_frontend() && p.maxconn.is_none())
        {
            if !global_same {
                p.maxconn = g;
            }
            if let Some((u, _)) = &gu {
                p.unknown.push(format!("global {u}"));
            }
        }
    }
    // Sections by (kind, name, occurrence), in order of first appearance.
    let mut keys: Vec<Key> = Vec::new();
    let mut index: HashMap<Key, usize> = HashMap::new();
    let mut per: Vec<Vec<Option<Proxy>>> = Vec::new();
    let mut file_ignores = Vec::new();
    for (w, c) in readings.iter_mut().enumerate() {
        for ig in c.file_ignores.drain(..) {
            if !file_ignores.contains(&ig) {
                file_ignores.push(ig);
            }
        }
        let mut seen: HashMap<(ProxyKind, String), usize> = HashMap::new();
        for p in c.proxies.drain(..) {
            let occ = seen.entry((p.kind, p.name.clone())).or_default();
            let key = (p.kind, p.name.clone(), *occ);
            *occ += 1;
            let i = *index.entry(key.clone()).or_insert_with(|| {
                keys.push(key);
                per.push(vec![None; n]);
                per.len() - 1
            });
            per[i][w] = Some(p);
        }
    }
    // Backends (and listens) first: their names per world.
    let mut backend_name: HashMap<(String, usize), String> = HashMap::new();
    let mut groups: Vec<Vec<(Assumption, Vec<usize>)>> = vec![Vec::new(); keys.len()];
    for (i, key) in keys.iter().enumerate() {
        if key.0 == ProxyKind::Frontend {
            continue;
        }
        groups[i] = variants(&per[i], k);
        for (a, ws) in &groups[i] {
            let p = per[i][ws[0]].as_ref().expect("present in its group");
            let name = named(&key.1, a, choices, &p.unknown);
            for &w in ws {
                backend_name
                    .entry((key.1.clone(), w))
                    .or_insert_with(|| name.clone());
            }
        }
    }
    let resolve = |b: &str, w: usize| {
        backend_name
            .get(&(b.to_string(), w))
            .cloned()
            .unwrap_or_else(|| b.to_string())
    };
    // Frontends: the same reading routing to the same backend readings.
    for (i, key) in keys.iter().enumerate() {
        if key.0 != ProxyKind::Frontend {
            continue;
        }
        let vals: Vec<Option<(&Proxy, Vec<String>)>> = (0..n)
            .map(|w| {
                per[i][w].as_ref().map(|p| {
                    let refs = p
                        .default_backend
                        .iter()
                        .chain(p.use_backends.iter())
                        .map(|b| resolve(b, w))
                        .collect();
                    (p, refs)
                })
            })
            .collect();
        groups[i] = variants(&vals, k);
    }
    let mut proxies = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        for (a, ws) in &groups[i] {
            let w = ws[0];
            let mut p = per[i][w].clone().expect("present in its group");
            p.name = named(&key.1, a, choices, &p.unknown);
            p.default_backend = p.default_backend.map(|b| resolve(&b, w));
            p.use_backends = p.use_backends.iter().map(|b| resolve(b, w)).collect();
            proxies.push(p);
        }
    }
    let mut cfg = readings.swap_remove(0);
    if !global_same {
        cfg.global_maxconn = None;
        cfg.global_unknown = None;
    }
    cfg.proxies = proxies;
    cfg.file_ignores = file_ignores;
    cfg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_name_only_the_choices_that_matter() {
        // Two choices; the value depends on choice 0 only.
        let v = [Some(1), Some(2), Some(1), Some(2)];
        let g = variants(&v, 2);
        assert_eq!(
            g,
            vec![
                (vec![(0, false)], vec![0, 2]),
                (vec![(0, true)], vec![1, 3])
            ]
        );
        let same = [Some(1); 4];
        assert_eq!(variants(&same, 2), vec![(vec![], vec![0, 1, 2, 3])]);
        // Present only when both are true.
        let only = [None, None, None, Some(1)];
        assert_eq!(
            variants(&only, 2),
            vec![(vec![(0, true), (1, true)], vec![3])]
        );
        // Exclusive or: not one cube, split by both choices.
        let xor = [Some(1), Some(2), Some(2), Some(1)];
        assert_eq!(variants(&xor, 2).len(), 4);
    }
}
