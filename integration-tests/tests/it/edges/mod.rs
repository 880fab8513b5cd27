//! "The edges": the parts around the merge (logs, the dashboard's HTTP,
//! snapshots, status and error messages, object names). Each test is named after what
//! broke; by kind in `logs.rs`, `dashboard.rs`, `store.rs` and `messages.rs`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use covmerge_integration_tests::fleet::{fleet_cmd, Vhost};
use covmerge_integration_tests::{bin, fixture, gcs, gunzip, FleetCorpus};

use crate::fleet::{file_store, LONG};

mod dashboard;
mod logs;
mod messages;
mod notify;
mod store;

#[allow(unused_imports)]
use self::{dashboard::*, logs::*, messages::*, store::*};
