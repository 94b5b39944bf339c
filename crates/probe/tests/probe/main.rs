mod config;
mod scripted;
