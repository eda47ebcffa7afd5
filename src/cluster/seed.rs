//! Seeding a new node's cluster state from a slot map (`cluster-seed-map`): the one shortcut
//! sluice offers over the operator's way of building a Redis cluster (`redis-cli --cluster
//! create`, or CLUSTER MEET / ADDSLOTS / REPLICATE).
//!
//! A node that starts with no `nodes.conf` and a seed map writes, as its first `nodes.conf`,
//! the state those commands would have left: every node of the map known under its id at its
//! address (bus port `@cport`, or the client port plus 10000), the masters owning their slots
//! with config epochs 1, 2, … in the map's order, the replicas following their masters.
//! From then on the node is an ordinary member of the cluster bus (gossip, failover,
//! resharding, `nodes.conf` rewritten as Redis does), and a restart reads its `nodes.conf`,
//! not the map. Every node of the cluster is given the same map, so they agree from the start.

use std::fmt::Write as _;
use std::net::IpAddr;

use super::map::{MapError, SlotMap, range_text};

/// The `nodes.conf` text that seeds node `me` of `map`, whose bus listens on `my_cport`.
pub(crate) fn nodes_conf(map: &SlotMap, me: usize, my_cport: u16) -> Result<String, MapError> {
    let mut text = String::new();
    let mut epochs = vec![0u64; map.nodes.len()];
    let mut masters = 0u64;
    for (i, n) in map.nodes.iter().enumerate() {
        if !n.is_replica() {
            masters += 1;
            epochs[i] = masters;
        }
    }
    for (i, n) in map.nodes.iter().enumerate() {
        if n.host.parse::<IpAddr>().is_err() {
            return Err(MapError(format!(
                "node {}: '{}' is not an IP address; a seed map gives the addresses the nodes' cluster bus connects to",
                n.id, n.host
            )));
        }
        let cport = match (i == me, n.cport) {
            (true, 0) => my_cport,
            (true, c) if c != my_cport => {
                return Err(MapError(format!(
                    "this node's bus port in the map is {c}, but it listens for the bus on {my_cport} (cluster-port)"
                )));
            }
            (_, 0) => n.port.checked_add(10000).ok_or_else(|| {
                MapError(format!(
                    "node {}: port {} plus 10000 is not a port; give its bus port as host:port@cport",
                    n.id, n.port
                ))
            })?,
            (_, c) => c,
        };
        let role = if n.is_replica() { "slave" } else { "master" };
        let flags = if i == me {
            format!("myself,{role}")
        } else {
            role.to_string()
        };
        let master = n.master.map_or("-", |m| map.nodes[m].id.as_str());
        let host = if n.host.contains(':') {
            format!("[{}]", n.host)
        } else {
            n.host.clone()
        };
        let _ = write!(
            text,
            "{} {host}:{}@{cport} {flags} {master} 0 0 {} connected",
            n.id, n.port, epochs[i]
        );
        for &(a, b) in &n.ranges {
            let _ = write!(text, " {}", range_text(a, b));
        }
        text.push('\n');
    }
    let _ = writeln!(text, "vars currentEpoch {masters} lastVoteEpoch 0");
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::bus::{Settings, nodes_conf};

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";
    const R: &str = "3333333333333333333333333333333333333333";

    #[test]
    fn a_seed_is_the_nodes_conf_the_commands_would_leave() {
        let map = SlotMap::parse(&format!(
            "node {A} 127.0.0.1:7001@17101 0-8191\nnode {B} 127.0.0.1:7002 8192-16383\nreplica {R} 127.0.0.1:7003 {A}\n"
        ))
        .unwrap();
        let text = nodes_conf(&map, 2, 17003).unwrap();
        assert_eq!(
            text,
            format!(
                "{A} 127.0.0.1:7001@17101 master - 0 0 1 connected 0-8191\n\
                 {B} 127.0.0.1:7002@17002 master - 0 0 2 connected 8192-16383\n\
                 {R} 127.0.0.1:7003@17003 myself,slave {A} 0 0 0 connected\n\
                 vars currentEpoch 2 lastVoteEpoch 0\n"
            )
        );
        // The bus reads it as a Redis nodes.conf.
        let settings = Settings::for_tests(7003, 1000);
        let st = nodes_conf::parse(&text, settings, 0).unwrap();
        assert_eq!(st.myself, R);
        assert_eq!(st.me().slaveof.as_deref(), Some(A));
        assert_eq!(st.owners[0].as_deref(), Some(A));
        assert_eq!(st.owners[16383].as_deref(), Some(B));
        assert_eq!(st.current_epoch, 2);
        assert_eq!(st.nodes[B].cport, 17002);
    }

    #[test]
    fn a_seed_names_ip_addresses_and_this_nodes_bus_port() {
        let named = SlotMap::parse(&format!("node {A} localhost:7001 0-16383")).unwrap();
        let e = nodes_conf(&named, 0, 17001).unwrap_err();
        assert!(e.0.contains("not an IP address"), "{e}");
        let other = SlotMap::parse(&format!("node {A} 127.0.0.1:7001@17005 0-16383")).unwrap();
        let e = nodes_conf(&other, 0, 17001).unwrap_err();
        assert!(e.0.contains("cluster-port"), "{e}");
    }
}
