mod config;
mod metrics;
mod retries;
mod scripted;
