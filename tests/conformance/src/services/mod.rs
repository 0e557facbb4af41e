//! External services the tests start themselves: real servers on loopback, owned by the
//! test process and gone when it exits.

pub mod postgres;
pub mod zookeeper;
