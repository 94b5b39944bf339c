mod config;
mod metrics;
mod scripted;
