//! A `[[gateway]]` with a `fixed` limit: the element for a hop that admits
//! a count of requests and answers 503 past it (an HAProxy backend's
//! servers, an Istio pool), with an admission queue where the proxy
//! queues. Tables serialised from the policy crate's configs
//! ([`super::inline`]).

use std::fmt::Write;
use std::time::Duration;

use stormbreak_policy::Nanos;
use stormbreak_policy::limit::{FixedConfig, LimitConfig, QueueConfig};
use stormbreak_policy::shed::SaturationConfig;

use super::inline;
use super::names::one_line;
use crate::units::show;

/// A limited gateway to write.
#[derive(Debug, Clone)]
pub(crate) struct Limited {
    /// Component name.
    pub name: String,
    /// Comment lines above the block, without their `# `.
    pub comments: Vec<String>,
    /// The forwarded call's timeout, and where it comes from.
    pub timeout: (Duration, String),
    /// The limit per instance.
    pub limit: u32,
    /// Instances, each with its own limit and queue.
    pub instances: u32,
    /// The queue per instance (size, longest wait) and where it comes from.
    pub queue: Option<(u32, Duration, String)>,
}

/// The `[[gateway]]` block. The refusal is a 503 without `Retry-After`
/// (`retry_after = "0"`): neither Envoy's overflow nor HAProxy's queue
/// timeout sends one, and the format's default (1 s) would slow the
/// callers' retries.
pub(crate) fn block(g: &Limited) -> Result<String, String> {
    let mut s = String::new();
    for c in &g.comments {
        let _ = writeln!(s, "# {}", one_line(c));
    }
    let limit = LimitConfig::Fixed(FixedConfig { limit: g.limit });
    let _ = writeln!(
        s,
        "[[gateway]]\nname = \"{}\"\ntimeout = \"{}\"   # {}\nlimit = {}\ninstances = {}",
        g.name,
        show(g.timeout.0),
        one_line(&g.timeout.1),
        inline(&limit)?,
        g.instances
    );
    if let Some((size, wait, why)) = &g.queue {
        let q = QueueConfig {
            size: *size,
            timeout: Nanos::from(*wait),
        };
        q.validate()
            .map_err(|e| format!("gateway {:?}: queue: {e}", g.name))?;
        let _ = writeln!(s, "queue = {}   # {}", inline(&q)?, one_line(why));
    }
    let sat = SaturationConfig {
        retry_after: None,
        ..SaturationConfig::default()
    };
    let _ = writeln!(
        s,
        "saturation = {}   # the refusal: 503 without Retry-After",
        inline(&sat)?
    );
    s.push('\n');
    Ok(s)
}
