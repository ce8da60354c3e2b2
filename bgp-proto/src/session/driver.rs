//! Tokio driver (to come).
