mod config;
mod expect;
mod lab;
mod metrics;
mod retries;
mod scripted;
