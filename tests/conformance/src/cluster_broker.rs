//! A real broker in cluster mode for tests that need what only a running broker has
//! (its ZooKeeper session, lent to plugins with `cluster::session::for_plugins`): no
//! plugins, no coordinator, listeners on free loopback ports.

use std::{path::Path, sync::Arc, time::Duration};

use drover_host::{
    cluster,
    config::Config,
    serve::{self, Running},
};

/// Starts broker `broker_id` on ZooKeeper `connect` in `chroot` (data in
/// `<root>/data-<broker_id>`) and returns it once its session is up. `zookeeper_extra`
/// is more `[zookeeper]` lines (`session_timeout_ms = 2000\n`).
pub fn start(
    rt: &tokio::runtime::Runtime,
    connect: &str,
    root: &Path,
    chroot: &str,
    broker_id: u32,
    zookeeper_extra: &str,
) -> Running {
    let text = format!(
        "data_dir = {data:?}\n\
         [server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\nbroker_id = {broker_id}\n\
         [plugins]\ndir = {plugins:?}\n\
         [coordinator]\nplugin = \"\"\n\
         [zookeeper]\nenabled = true\nconnect = {connect:?}\nchroot = {chroot:?}\n\
         {zookeeper_extra}",
        data = root.join(format!("data-{broker_id}")),
        plugins = root.join("no-plugins"),
    );
    let config = Config::parse(Path::new("test.toml"), &text).unwrap();
    let running = rt.block_on(serve::start(config)).unwrap();
    let c = Arc::clone(running.broker.cluster().expect("cluster mode"));
    let connected = rt.block_on(cluster::wait_for(&c, Duration::from_secs(30), |v| {
        v.connected
    }));
    assert!(connected, "broker {broker_id} did not connect to ZooKeeper");
    running
}
