//! Shared helpers for the toolgate integration tests.
