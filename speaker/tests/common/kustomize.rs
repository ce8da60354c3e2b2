//! Rendering deploy/ with `kubectl kustomize`: the helpers live in the test support crate.
#![allow(unused_imports)]
pub use integration_tests::kustomize::*;
