//! Pod-CIDR sources.
