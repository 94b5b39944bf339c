//! Outputs: text for people, JSON (schema `stormbreak.audit/1`) and SARIF
//! 2.1.0 for machines.

pub mod json;
pub mod sarif;
pub mod text;
