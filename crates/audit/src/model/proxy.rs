//! The proxy settings Istio merges at injection beyond the pod's own
//! annotations: `ProxyConfig` resources and the mesh config's
//! `defaultConfig`. Only `concurrency` (Envoy's worker threads) is read.
//!
//! Precedence, highest first, as the running proxy gets it:
//! 1. the pod annotation `proxy.istio.io/config` (read by
//!    [`super::workload::decide_sidecar`]);
//! 2. a `ProxyConfig` in the workload's namespace whose `selector`
//!    selects the pod;
//! 3. the `ProxyConfig` without selector in the workload's namespace;
//! 4. the `ProxyConfig` without selector in the root namespace
//!    (`meshConfig.rootNamespace`, default `istio-system`);
//! 5. `meshConfig.defaultConfig.concurrency`, from the `istio` ConfigMap's
//!    `mesh` key or an IstioOperator's `spec.meshConfig`.
//!
//! Sources: Istio 1.27 "ProxyConfig" reference
//! (<https://istio.io/v1.27/docs/reference/config/networking/proxy-config/>)
//! for levels 2–5 ("the CR taking precedence" over `meshConfig.defaultConfig`);
//! istio/istio 1.27, pilot/pkg/model/proxy_config.go (`EffectiveProxyConfig`:
//! workload, namespace, root namespace, mesh default) and
//! pilot/cmd/pilot-agent/config/config.go (`getMeshConfig`: the agent
//! applies the pod's `proxy.istio.io/config` annotation last, over the
//! merged config istiod put in `PROXY_CONFIG`, so the annotation is what
//! the proxy runs with even where the reference says a workload
//! `ProxyConfig` wins over it).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{ROOT_NAMESPACE, Src, selects};

/// The largest `concurrency` read (a bound on hostile input; Envoy's
/// worker threads are a few per core).
pub const MAX_CONCURRENCY: i64 = 1024;

/// A `networking.istio.io/v1beta1` `ProxyConfig` that sets `concurrency`.
#[derive(Debug, Clone)]
pub struct ProxyConfigObject {
    /// Source.
    pub src: Src,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `selector.matchLabels` (None: the whole namespace).
    pub selector: Option<BTreeMap<String, String>>,
    /// `concurrency` (None: not set, so a lower level decides).
    pub concurrency: Option<u32>,
}

/// A mesh config's proxy defaults: the `istio` ConfigMap (`mesh` key) or an
/// IstioOperator's `spec.meshConfig`.
#[derive(Debug, Clone)]
pub struct MeshDefaults {
    /// Source.
    pub src: Src,
    /// Where it was read (`ConfigMap istio-system/istio`).
    pub what: String,
    /// The control-plane revision it configures (`""`: the default one):
    /// the ConfigMap `istio-<rev>`, or the IstioOperator's `spec.revision`.
    pub revision: String,
    /// `rootNamespace`, when written.
    pub root_namespace: Option<String>,
    /// `defaultConfig.concurrency`, when written.
    pub concurrency: Option<u32>,
}

/// `ProxyConfig.spec`.
#[derive(Debug, Default, Deserialize)]
pub struct ProxyConfigSpec {
    /// `selector`.
    #[serde(default)]
    pub selector: Option<Selector>,
    /// `concurrency`.
    #[serde(default)]
    pub concurrency: Option<i64>,
}

/// A `matchLabels` selector.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Selector {
    /// `matchLabels`.
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
}

/// A mesh config (`MeshConfig`), the fields read.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MeshConfig {
    /// `rootNamespace`.
    #[serde(default)]
    pub root_namespace: Option<String>,
    /// `defaultConfig`.
    #[serde(default)]
    pub default_config: Option<ProxyConfigFields>,
}

/// `ProxyConfig` fields of a mesh config's `defaultConfig` or of the
/// `proxy.istio.io/config` annotation that the audit reads.
#[derive(Debug, Default, Deserialize)]
pub struct ProxyConfigFields {
    /// `concurrency`.
    #[serde(default)]
    pub concurrency: Option<i64>,
}

/// `IstioOperator.spec`, the fields read.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IstioOperatorSpec {
    /// `revision`.
    #[serde(default)]
    pub revision: Option<String>,
    /// `meshConfig`.
    #[serde(default)]
    pub mesh_config: Option<MeshConfig>,
}

/// A `concurrency` as read: 0 to [`MAX_CONCURRENCY`], else an error naming
/// what was expected.
pub fn concurrency(v: Option<i64>) -> Result<Option<u32>, String> {
    match v {
        None => Ok(None),
        Some(c) if (0..=MAX_CONCURRENCY).contains(&c) => Ok(Some(c as u32)),
        Some(c) => Err(format!(
            "concurrency: expected 0 to {MAX_CONCURRENCY}, got {c}"
        )),
    }
}

/// The revision a ConfigMap named `name` carries the mesh config of:
/// `istio` is the default revision's, `istio-<rev>` revision `rev`'s;
/// None for any other ConfigMap.
pub fn mesh_config_map_revision(name: &str) -> Option<String> {
    match name {
        "istio" => Some(String::new()),
        // Other istiod ConfigMaps share the prefix and hold no mesh config.
        n if n.starts_with("istio-sidecar-injector") || n.starts_with("istio-ca-") => None,
        n => n.strip_prefix("istio-").map(str::to_string),
    }
}

/// What decides a pod's proxy settings besides its own annotations.
#[derive(Debug, Default)]
pub struct ProxySettings<'a> {
    configs: BTreeMap<&'a str, Vec<&'a ProxyConfigObject>>,
    meshes: &'a [MeshDefaults],
}

impl<'a> ProxySettings<'a> {
    /// Indexes the ProxyConfigs by namespace (input order kept: Istio
    /// takes the oldest of several at one level, and the inputs carry no
    /// creation time to order them by).
    pub fn new(configs: &'a [ProxyConfigObject], meshes: &'a [MeshDefaults]) -> Self {
        let mut by_ns: BTreeMap<&str, Vec<&ProxyConfigObject>> = BTreeMap::new();
        for c in configs {
            by_ns.entry(c.namespace.as_str()).or_default().push(c);
        }
        ProxySettings {
            configs: by_ns,
            meshes,
        }
    }

    /// The mesh config of `revision` (`""`: the default revision), else the
    /// default revision's, with a note when that is a stand-in.
    fn mesh(&self, revision: &str) -> Option<(&'a MeshDefaults, String)> {
        let rev = if revision == "default" { "" } else { revision };
        if let Some(m) = self.meshes.iter().find(|m| m.revision == rev) {
            return Some((m, String::new()));
        }
        self.meshes.iter().find(|m| m.revision.is_empty()).map(|m| {
            (
                m,
                format!(
                    " (the default revision's: revision {revision:?} has none among the inputs)"
                ),
            )
        })
    }

    /// The root namespace of the mesh config of `revision`.
    pub fn root_namespace(&self, revision: &str) -> &str {
        self.mesh(revision)
            .and_then(|(m, _)| m.root_namespace.as_deref())
            .unwrap_or(ROOT_NAMESPACE)
    }

    /// The ProxyConfig that selects a pod with `labels` in `ns` (workload
    /// level), or covers its namespace: the one that may set its proxy's
    /// settings other than the root namespace's, for deciding whether a
    /// pod is meshed.
    pub fn applying_in(
        &self,
        ns: &str,
        labels: &BTreeMap<String, String>,
    ) -> Option<&'a ProxyConfigObject> {
        let here = self.configs.get(ns)?;
        here.iter()
            .find(|c| c.selector.as_ref().is_some_and(|s| selects(s, labels)))
            .or_else(|| here.iter().find(|c| c.selector.is_none()))
            .copied()
    }

    /// `concurrency` set for a pod in `ns` with `labels`, injected by
    /// `revision`, by a ProxyConfig or the mesh config (levels 2–5 of the
    /// module's list), and where it was read. None: none of them sets it.
    pub fn concurrency(
        &self,
        ns: &str,
        labels: &BTreeMap<String, String>,
        revision: &str,
    ) -> Option<(u32, String)> {
        let here = self.configs.get(ns).map(Vec::as_slice).unwrap_or(&[]);
        // One resource a level: the first that applies, set or not.
        let workload = here
            .iter()
            .find(|c| c.selector.as_ref().is_some_and(|s| selects(s, labels)));
        let root = self.root_namespace(revision);
        let namespace = (ns != root)
            .then(|| here.iter().find(|c| c.selector.is_none()))
            .flatten();
        let mesh_wide = self
            .configs
            .get(root)
            .and_then(|r| r.iter().find(|c| c.selector.is_none()));
        for (level, c) in [
            ("selecting the pod", workload),
            ("of the namespace", namespace),
            ("of the root namespace", mesh_wide),
        ] {
            if let Some(n) = c.and_then(|c| c.concurrency) {
                let c = c.expect("set implies present");
                return Some((
                    n,
                    format!(
                        "ProxyConfig {}/{} ({level}) concurrency: {n}",
                        c.namespace, c.name
                    ),
                ));
            }
        }
        let (m, note) = self.mesh(revision)?;
        let n = m.concurrency?;
        Some((
            n,
            format!("{} meshConfig.defaultConfig.concurrency: {n}{note}", m.what),
        ))
    }
}
