//! A guard config for tests, written as lists of listeners, clusters and
//! routes instead of a page of inline TOML. Std only, so other crates'
//! tests can include it by path.
#![allow(dead_code)]

use std::fmt::Write;

/// `[[listener]]`, `[[cluster]]` and `[[route]]` tables in order, then any
/// other sections verbatim.
#[derive(Clone, Debug, Default)]
pub struct Config {
    listeners: Vec<String>,
    clusters: Vec<String>,
    routes: Vec<String>,
    tail: String,
}

impl Config {
    /// No tables yet.
    pub fn new() -> Self {
        Config::default()
    }

    /// One listener, `edge` on `127.0.0.1:0`: what most tests need.
    pub fn edge() -> Self {
        Config::new().listener("edge", "")
    }

    /// A listener `name` on `127.0.0.1:0`, with `extra` lines in its table.
    pub fn listener(mut self, name: &str, extra: &str) -> Self {
        self.listeners.push(format!(
            "[[listener]]\nname = {name:?}\nbind = \"127.0.0.1:0\"\n{extra}\n"
        ));
        self
    }

    /// A listener `name` on `bind`, with `extra` lines in its table.
    pub fn listener_at(mut self, name: &str, bind: &str, extra: &str) -> Self {
        self.listeners.push(format!(
            "[[listener]]\nname = {name:?}\nbind = {bind:?}\n{extra}\n"
        ));
        self
    }

    /// A cluster `name` of `endpoints`, with `extra` lines in its table.
    pub fn cluster<E: ToString>(mut self, name: &str, endpoints: &[E], extra: &str) -> Self {
        let endpoints: Vec<String> = endpoints
            .iter()
            .map(|e| format!("{:?}", e.to_string()))
            .collect();
        self.clusters.push(format!(
            "[[cluster]]\nname = {name:?}\nendpoints = [{}]\n{extra}\n",
            endpoints.join(", ")
        ));
        self
    }

    /// A route `name` to `cluster`, with `extra` lines (`match`, policies)
    /// in its table. Routes keep the order given (ties go by file order).
    pub fn route(mut self, name: &str, cluster: &str, extra: &str) -> Self {
        self.routes.push(format!(
            "[[route]]\nname = {name:?}\ncluster = {cluster:?}\n{extra}\n"
        ));
        self
    }

    /// Other sections (`[admin]`, `[[shed]]`, `[saturation]`, …), after the routes.
    pub fn tail(mut self, text: &str) -> Self {
        self.tail.push_str(text);
        self.tail.push('\n');
        self
    }

    /// The TOML text.
    pub fn toml(&self) -> String {
        let mut out = String::new();
        for table in self
            .listeners
            .iter()
            .chain(&self.clusters)
            .chain(&self.routes)
        {
            let _ = writeln!(out, "{table}");
        }
        out.push_str(&self.tail);
        out
    }
}
