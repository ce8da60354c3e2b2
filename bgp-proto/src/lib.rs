//! BGP-4 wire format.
