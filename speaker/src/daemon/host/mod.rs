//! The speaker's kernel I/O: rtnetlink dumps (default routes, neighbours), routing lookups
//! (source addresses), and the CNI conflist on disk. Decisions are the core's.

pub mod cni_write;
pub mod default_routes;
pub mod kernel;
pub mod netlink;
pub mod route_lookup;
