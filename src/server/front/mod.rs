//! The control socket's side of the scheduler: the accept loop and each connection
//! (`socket`), the rules applied before a request reaches the runtime (`guard`, with
//! `crate::access`), the wire protocol (`protocol`) and the caps on connections
//! (`conn_limits`), and the answers only the front gives (`api`: `hello`, one `job`;
//! `admin_reads`: what-ifs and dry runs on the database for admins who cannot read it). It
//! hands requests to the runtime as `runtime::input::Input`s.

pub mod admin_reads;
pub mod api;
pub mod conn_limits;
pub mod guard;
pub mod protocol;
pub mod socket;
