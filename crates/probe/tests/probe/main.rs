mod config;
mod expect;
mod metrics;
mod retries;
mod scripted;
