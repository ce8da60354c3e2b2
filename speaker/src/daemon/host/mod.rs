//! The speaker's kernel I/O: rtnetlink dumps (default routes, neighbours), routing lookups
//! (source addresses), the CNI conflist on disk, and the state kept for the next process on
//! the node (`--state-dir`). Decisions are the core's.

pub mod cni_write;
pub mod default_routes;
pub mod kernel;
pub mod netlink;
pub mod route_lookup;
pub mod state_file;
