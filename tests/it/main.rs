//! The integration tests, one crate (STYLE.md): a change to the library relinks one test
//! binary, not one per file. Each module was a `tests/*.rs` crate of its own; `common` is
//! the live-scheduler harness they share, `fixtures` the console's sample snapshots (test
//! data, kept out of the library). `tests/slurm_executor.rs` stays a crate of its own
//! because it sets `SLURM_CONF` in its process environment.

mod common;
mod fixtures;

mod admin_reads;
mod api_doc;
mod checkpoint_live;
mod cli_docs;
mod config_apply;
mod config_check_watch;
mod config_invalid;
mod config_samples;
mod config_watch;
mod deploy_doc;
mod deps_live;
mod disk_full;
mod durable_attach;
mod durable_crash;
mod durable_restart;
mod events_memory;
mod fair_share_live;
mod faults_db;
mod faults_jobs;
mod faults_server;
mod forecast;
mod forecast_live;
mod gangs_submit;
mod gangs_view;
mod history_live;
mod jobs_confined;
mod json_names;
mod lost_work;
mod multi_user;
mod notice;
mod observability;
mod predict_members;
mod python_admin;
mod python_client;
mod refusal_codes;
mod replay_cli;
mod report_channel;
mod report_history;
mod runtime_config;
mod runtime_jobs;
mod runtime_mig;
mod runtime_nodes;
mod runtime_reserve;
mod runtime_socket;
mod scenarios;
mod sched_props;
mod server_log;
mod slices_live;
mod store_crash;
mod store_db;
mod store_failures;
mod store_recovery;
mod tui_demo;
mod tui_keys;
mod tui_live;
mod tui_loop;
mod tui_predict;
mod tui_render;
mod tui_tmux;
mod usage_samples;
mod whatif_cli;
