//! Configuration schema for podcidr-bgp (issue: the per-node speaker).
