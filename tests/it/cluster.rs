//! Cluster mode as clients see it: `sluice` processes on loopback ports forming a Redis
//! cluster over the bus, seeded from one slot map (`cluster-seed-map`: each node's first
//! nodes.conf is what MEET / ADDSLOTS / REPLICATE would have left), then running as any bus
//! member does.
//!
//! `cluster_wire_replies_match_redis` checks the raw replies (MOVED, CROSSSLOT, MULTI/EXEC,
//! scripts, SELECT, CLUSTER …) against the bytes redis-server 7.0.15 sends in the same
//! situations (recorded from a real three-master Redis cluster with the same slot split).
//! `cluster_client_workloads_reshard_and_node_loss` drives the `redis` crate's cluster
//! client through the limiter workloads, a `redis-cli --cluster reshard` that moves slots
//! with their keys, and the loss and return of a node.
//! `cluster_replica_views_match_a_real_redis_cluster` builds a master and its replica on
//! real redis-server 7.0 and the same pair seeded on sluice, and compares what the replica
//! changes (CLUSTER SLOTS/SHARDS/NODES/REPLICAS, MOVED and READONLY reads on the replica,
//! the FAILOVER/REPLICATE refusals) byte for byte after normalizing ports, times and
//! offsets; `cluster_replica_serves_reads_and_takes_over` runs a replica through reads,
//! a slot moving away from its master, CLUSTER FAILOVER both ways and CLUSTER REPLICATE.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::cluster::{ClusterClient, ClusterConnection};
use redis::{Commands, Value};
use sluice::cluster::key_slot;

use crate::support::{Conn, free_port};

pub const IDS: [&str; 3] = [
    "1111111111111111111111111111111111111111",
    "2222222222222222222222222222222222222222",
    "3333333333333333333333333333333333333333",
];

/// The slot split `redis-cli --cluster create` makes for three masters.
const SPLIT: [(u16, u16); 3] = [(0, 5460), (5461, 10922), (10923, 16383)];

/// The cluster bus port of the node on client port `port`: picked once, then the same (the
/// seed map and the node's `--cluster-port` must agree).
fn bus_port(port: u16) -> u16 {
    static PORTS: std::sync::Mutex<Vec<(u16, u16)>> = std::sync::Mutex::new(Vec::new());
    let mut ports = PORTS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(&(_, b)) = ports.iter().find(|(p, _)| *p == port) {
        return b;
    }
    let b = free_port();
    ports.push((port, b));
    b
}

/// `127.0.0.1:<port>@<bus port>`, a seed map's address of the node on `port`.
fn seed_addr(port: u16) -> String {
    format!("127.0.0.1:{port}@{}", bus_port(port))
}

/// A `sluice` node process, killed when dropped.
struct NodeProc {
    child: Option<Child>,
    args: Vec<String>,
    port: u16,
    /// Its working directory, kept across restarts.
    cwd: tempfile::TempDir,
}

impl NodeProc {
    fn start(args: Vec<String>, port: u16) -> NodeProc {
        let mut node = NodeProc {
            child: None,
            args,
            port,
            cwd: tempfile::tempdir().unwrap(),
        };
        node.restart();
        node
    }

    /// Starts the process (again) with the same arguments; waits for its "listening" line.
    fn restart(&mut self) {
        assert!(self.child.is_none(), "node {} is running", self.port);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
                .args(&self.args)
                .current_dir(self.cwd.path())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("cannot run the sluice binary");
            let stdout = child.stdout.take().expect("piped stdout");
            let mut lines = BufReader::new(stdout).lines();
            let ready = lines
                .by_ref()
                .map_while(Result::ok)
                .any(|l| l.starts_with("sluice listening on "));
            std::thread::spawn(move || for _ in lines {});
            if ready {
                self.child = Some(child);
                return;
            }
            // Exited at start-up (the port may still be in use after a kill): retry briefly.
            let status = child.wait();
            assert!(
                Instant::now() < deadline,
                "sluice {:?} did not start: {status:?}",
                self.args
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGKILL, as a crash.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }
}

impl Drop for NodeProc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Three masters seeded from one map file.
pub struct Trio {
    nodes: Vec<NodeProc>,
    ports: [u16; 3],
    map_file: PathBuf,
}

impl Trio {
    /// Picks three free ports, writes the map and starts the nodes (test mode, so the tests
    /// can freeze each node's clock).
    fn start() -> Trio {
        let ports = [free_port(), free_port(), free_port()];
        let map_file = std::env::temp_dir().join(format!(
            "sluice-it-cluster-{}-{}.map",
            std::process::id(),
            ports[0]
        ));
        let trio_map = map_text(&ports, &SPLIT.map(|r| vec![r]), None);
        std::fs::write(&map_file, trio_map).expect("cannot write the map file");
        let nodes = (0..3)
            .map(|i| {
                let args = [
                    "--port",
                    &ports[i].to_string(),
                    "--loglevel",
                    "warning",
                    "--test-mode",
                    "--cluster-enabled",
                    "yes",
                    "--cluster-port",
                    &bus_port(ports[i]).to_string(),
                    "--cluster-seed-map",
                    map_file.to_str().unwrap(),
                    "--cluster-node-id",
                    IDS[i],
                ]
                .map(String::from)
                .to_vec();
                NodeProc::start(args, ports[i])
            })
            .collect();
        let trio = Trio {
            nodes,
            ports,
            map_file,
        };
        trio.wait_linked();
        trio
    }

    /// Waits until every node has a link to every other (the bus connects in the
    /// background; a tool like redis-cli expects the nodes to see each other).
    fn wait_linked(&self) {
        for i in 0..3 {
            let mut c = self.conn(i);
            wait_until("the nodes' bus links", || {
                let nodes = cmd(&mut c, &["CLUSTER", "NODES"]);
                nodes.matches(" connected").count() == 3
                    && cmd(&mut c, &["CLUSTER", "INFO"]).contains("cluster_state:ok")
            });
        }
    }

    fn conn(&self, i: usize) -> Conn {
        Conn::connect(self.nodes[i].addr())
    }

    fn client(&self, seed: usize) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.ports[seed]))
            .unwrap()
            .get_connection()
            .unwrap()
    }

    /// The index of the node that owns `slot` under `ranges`.
    fn owner(ranges: &[Vec<(u16, u16)>], slot: u16) -> usize {
        ranges
            .iter()
            .position(|rs| rs.iter().any(|&(a, b)| (a..=b).contains(&slot)))
            .expect("every slot has an owner")
    }
}

impl Drop for Trio {
    fn drop(&mut self) {
        self.nodes.clear();
        let _ = std::fs::remove_file(&self.map_file);
    }
}

/// A seed map for nodes on `ports` owning `ranges`.
pub fn map_text(ports: &[u16], ranges: &[Vec<(u16, u16)>], epoch: Option<u64>) -> String {
    let mut text = String::from("# written by tests/it/cluster.rs\n");
    if let Some(e) = epoch {
        text.push_str(&format!("epoch {e}\n"));
    }
    for (i, port) in ports.iter().enumerate() {
        text.push_str(&format!("node {} {}", IDS[i], seed_addr(*port)));
        for (a, b) in &ranges[i] {
            text.push_str(&format!(" {a}-{b}"));
        }
        text.push('\n');
    }
    text
}

fn cmd(con: &mut Conn, args: &[&str]) -> String {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    String::from_utf8_lossy(&con.cmd(&args)).into_owned()
}

const CROSSSLOT: &str = "-CROSSSLOT Keys in request don't hash to the same slot\r\n";
const EXECABORT: &str = "-EXECABORT Transaction discarded because of previous errors.\r\n";

#[test]
fn cluster_wire_replies_match_redis() {
    let trio = Trio::start();
    let [p1, p2, p3] = trio.ports;
    // Slots (checked against redis-server's CLUSTER KEYSLOT): foo 12182, a 15495 and x 16287
    // are node 3's; b 3300 is node 1's.
    for (i, id) in IDS.iter().enumerate() {
        let mut c = trio.conn(i);
        for (key, slot) in [
            ("foo", 12182),
            ("{user1000}.following", 3443),
            ("foo{}{bar}", 8363),
            ("foo{{bar}}zap", 4015),
            ("foo{bar}{zap}", 5061),
        ] {
            assert_eq!(
                cmd(&mut c, &["CLUSTER", "KEYSLOT", key]),
                format!(":{slot}\r\n")
            );
        }
        // Redis checks that the keys share a slot before it checks who owns it.
        assert_eq!(cmd(&mut c, &["MSET", "a", "1", "b", "2"]), CROSSSLOT);
        assert_eq!(
            cmd(&mut c, &["CLUSTER", "MYID"]),
            format!("$40\r\n{id}\r\n")
        );
    }
    let mut n1 = trio.conn(0);
    let mut n3 = trio.conn(2);
    assert_eq!(
        cmd(&mut n1, &["GET", "foo"]),
        format!("-MOVED 12182 127.0.0.1:{p3}\r\n")
    );
    assert_eq!(cmd(&mut n3, &["GET", "foo"]), "$-1\r\n");
    assert_eq!(
        cmd(&mut n3, &["CL.THROTTLE", "b", "1", "2", "3"]),
        format!("-MOVED 3300 127.0.0.1:{p1}\r\n")
    );
    assert_eq!(
        cmd(&mut n3, &["CL.THROTTLE", "x", "1", "2", "3"]),
        "*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:2\r\n"
    );
    // Unknown commands and arity errors come before routing; keyless commands run anywhere.
    assert!(cmd(&mut n3, &["GETX", "b"]).starts_with("-ERR unknown command 'GETX'"));
    assert_eq!(
        cmd(&mut n3, &["GET", "b", "c"]),
        "-ERR wrong number of arguments for 'get' command\r\n"
    );
    assert_eq!(cmd(&mut n3, &["PING"]), "+PONG\r\n");
    assert_eq!(cmd(&mut n3, &["EXISTS", "x", "x"]), ":2\r\n");

    // MULTI on node 3: two of its slots queue fine, then EXEC refuses them together.
    assert_eq!(cmd(&mut n3, &["MULTI"]), "+OK\r\n");
    assert_eq!(cmd(&mut n3, &["INCR", "x"]), "+QUEUED\r\n");
    assert_eq!(cmd(&mut n3, &["INCR", "foo"]), "+QUEUED\r\n");
    assert_eq!(cmd(&mut n3, &["EXEC"]), CROSSSLOT);
    // A key of node 1 is refused at queue time, and EXEC aborts.
    assert_eq!(cmd(&mut n3, &["MULTI"]), "+OK\r\n");
    assert_eq!(cmd(&mut n3, &["PING"]), "+QUEUED\r\n");
    assert_eq!(cmd(&mut n3, &["INCR", "x"]), "+QUEUED\r\n");
    assert_eq!(
        cmd(&mut n3, &["GET", "b"]),
        format!("-MOVED 3300 127.0.0.1:{p1}\r\n")
    );
    assert_eq!(cmd(&mut n3, &["EXEC"]), EXECABORT);
    // One slot (hash tags): runs.
    assert_eq!(cmd(&mut n3, &["MULTI"]), "+OK\r\n");
    assert_eq!(cmd(&mut n3, &["SET", "{x}1", "1"]), "+QUEUED\r\n");
    assert_eq!(cmd(&mut n3, &["INCR", "{x}2"]), "+QUEUED\r\n");
    assert_eq!(cmd(&mut n3, &["EXEC"]), "*2\r\n+OK\r\n:1\r\n");
    // WATCH routes like any keyed command.
    assert_eq!(
        cmd(&mut n3, &["WATCH", "b"]),
        format!("-MOVED 3300 127.0.0.1:{p1}\r\n")
    );
    assert_eq!(cmd(&mut n3, &["WATCH", "x", "foo"]), CROSSSLOT);

    // Scripts: declared keys route like a command's; calls inside must stay on this node.
    assert_eq!(
        cmd(&mut n3, &["EVAL", "return 1", "2", "x", "foo"]),
        CROSSSLOT
    );
    assert_eq!(
        cmd(&mut n3, &["EVAL", "return 1", "1", "b"]),
        format!("-MOVED 3300 127.0.0.1:{p1}\r\n")
    );
    assert_eq!(
        cmd(&mut n3, &["EVAL", "return redis.call('get','b')", "0"]),
        "-ERR Script attempted to access a non local key in a cluster node script: eefb072c762647cc8d8a40e7fe048aaf8872d416, on @user_script:1.\r\n"
    );
    assert_eq!(
        cmd(
            &mut n3,
            &["EVAL", "return redis.pcall('get','b')", "1", "x"]
        ),
        "-ERR Script attempted to access a non local key in a cluster node\r\n"
    );
    // Redis 7.0 lets a script touch several slots of its own node.
    assert_eq!(
        cmd(
            &mut n3,
            &[
                "EVAL",
                "redis.call('incr','x'); return redis.call('incr','foo')",
                "0"
            ]
        ),
        ":1\r\n"
    );
    // ... but a `#!lua` script must keep to one slot (its declared keys', or its first
    // call's) unless it declares allow-cross-slot-keys (texts from redis-server 7.0.15).
    let same_slot = "-ERR Script attempted to access keys that do not hash to the same slot";
    let r = cmd(
        &mut n3,
        &[
            "EVAL",
            "#!lua\nredis.call('incr','{x}s1')\nreturn redis.call('incr','{foo}s1')",
            "0",
        ],
    );
    assert!(
        r.starts_with(&format!("{same_slot} script: ")) && r.ends_with(", on @user_script:3.\r\n"),
        "{r}"
    );
    let r = cmd(
        &mut n3,
        &[
            "EVAL",
            "#!lua\nreturn redis.call('incr','{foo}s2')",
            "1",
            "x",
        ],
    );
    assert!(
        r.ends_with(", on @user_script:2.\r\n") && r.starts_with(same_slot),
        "{r}"
    );
    assert_eq!(
        cmd(
            &mut n3,
            &[
                "EVAL",
                "#!lua\nreturn redis.pcall('incr','{foo}s2')",
                "1",
                "x"
            ]
        ),
        format!("{same_slot}\r\n")
    );
    assert_eq!(
        cmd(
            &mut n3,
            &[
                "EVAL",
                "#!lua\nredis.call('incr','{x}s3')\nreturn redis.call('incr','{x}s4')",
                "0"
            ]
        ),
        ":1\r\n"
    );
    assert_eq!(
        cmd(
            &mut n3,
            &[
                "EVAL",
                "#!lua flags=allow-cross-slot-keys\nredis.call('incr','{x}s5')\nreturn redis.call('incr','{foo}s5')",
                "0"
            ]
        ),
        ":1\r\n"
    );
    // A numkeys that does not fit is the command's own error, not a redirect.
    assert_eq!(
        cmd(&mut n1, &["EVAL", "return 1", "5", "x"]),
        "-ERR Number of keys can't be greater than number of args\r\n"
    );
    assert_eq!(
        cmd(&mut n1, &["EVAL", "return 1", "1", "x"]),
        format!("-MOVED 16287 127.0.0.1:{p3}\r\n")
    );

    // One database, as in cluster Redis.
    assert_eq!(cmd(&mut n1, &["SELECT", "0"]), "+OK\r\n");
    assert_eq!(
        cmd(&mut n1, &["SELECT", "1"]),
        "-ERR SELECT is not allowed in cluster mode\r\n"
    );
    assert_eq!(
        cmd(&mut n1, &["SWAPDB", "0", "1"]),
        "-ERR SWAPDB is not allowed in cluster mode\r\n"
    );
    for c in ["READONLY", "READWRITE", "ASKING"] {
        assert_eq!(cmd(&mut n1, &[c]), "+OK\r\n");
    }

    // Key-count subcommands and their errors.
    assert_eq!(cmd(&mut n1, &["SET", "b", "1"]), "+OK\r\n");
    assert_eq!(
        cmd(&mut n1, &["CLUSTER", "COUNTKEYSINSLOT", "3300"]),
        ":1\r\n"
    );
    assert_eq!(
        cmd(&mut n1, &["CLUSTER", "GETKEYSINSLOT", "3300", "5"]),
        "*1\r\n$1\r\nb\r\n"
    );
    assert_eq!(
        cmd(&mut n1, &["CLUSTER", "COUNTKEYSINSLOT", "16384"]),
        "-ERR Invalid slot\r\n"
    );
    assert_eq!(
        cmd(&mut n1, &["CLUSTER", "GETKEYSINSLOT", "100", "-1"]),
        "-ERR Invalid slot or number of keys\r\n"
    );
    assert_eq!(
        cmd(&mut n1, &["CLUSTER", "COUNTKEYSINSLOT", "x"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        cmd(&mut n1, &["CLUSTER", "FOO"]),
        "-ERR unknown subcommand 'FOO'. Try CLUSTER HELP.\r\n"
    );
    assert_eq!(
        cmd(&mut n1, &["CLUSTER", "KEYSLOT"]),
        "-ERR wrong number of arguments for 'cluster|keyslot' command\r\n"
    );

    // Topology, in Redis 7.0's shapes.
    let node = |port: u16, i: usize| {
        format!(
            "*4\r\n$9\r\n127.0.0.1\r\n:{port}\r\n$40\r\n{}\r\n*0\r\n",
            IDS[i]
        )
    };
    assert_eq!(
        cmd(&mut n1, &["CLUSTER", "SLOTS"]),
        format!(
            "*3\r\n*3\r\n:0\r\n:5460\r\n{}*3\r\n:5461\r\n:10922\r\n{}*3\r\n:10923\r\n:16383\r\n{}",
            node(p1, 0),
            node(p2, 1),
            node(p3, 2)
        )
    );
    let shards = cmd(&mut n1, &["CLUSTER", "SHARDS"]);
    assert!(
        shards.starts_with(&format!(
            "*3\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:5460\r\n$5\r\nnodes\r\n*1\r\n*14\r\n$2\r\nid\r\n$40\r\n{}\r\n$4\r\nport\r\n:{p1}\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealth\r\n$6\r\nonline\r\n",
            IDS[0]
        )),
        "{shards}"
    );
    let nodes = cmd(&mut n3, &["CLUSTER", "NODES"]);
    let lines: Vec<&str> = nodes.lines().skip(1).filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 3, "{nodes}");
    assert!(
        lines[2].starts_with(&format!(
            "{} 127.0.0.1:{p3}@{} myself,master - 0 ",
            IDS[2],
            bus_port(p3)
        )) && lines[2].ends_with(" 3 connected 10923-16383"),
        "{nodes}"
    );
    assert!(lines[0].contains(" master - 0 ") && !lines[0].contains("myself"));
    let info = cmd(&mut n1, &["CLUSTER", "INFO"]);
    for field in [
        "cluster_state:ok\r\n",
        "cluster_slots_assigned:16384\r\n",
        "cluster_known_nodes:3\r\n",
        "cluster_size:3\r\n",
        "cluster_current_epoch:3\r\n",
    ] {
        assert!(info.contains(field), "{info}");
    }
    assert_eq!(
        cmd(&mut n1, &["INFO", "cluster"]),
        "$30\r\n# Cluster\r\ncluster_enabled:1\r\n\r\n"
    );
    assert!(cmd(&mut n1, &["INFO", "server"]).contains("redis_mode:cluster\r\n"));
    let hello = cmd(&mut n1, &["HELLO", "3"]);
    assert!(hello.contains("$4\r\nmode\r\n$7\r\ncluster\r\n"), "{hello}");
    // RESP3 shapes: an empty map in CLUSTER SLOTS, verbatim text for CLUSTER NODES.
    assert!(cmd(&mut n1, &["CLUSTER", "SLOTS"]).contains(&format!("$40\r\n{}\r\n%0\r\n", IDS[0])));
    assert!(cmd(&mut n1, &["CLUSTER", "NODES"]).starts_with("="));
}

/// Refusals of bad seed maps: the process exits with a clear message. Then a slot that
/// moves away between MULTI and EXEC.
#[test]
fn cluster_refuses_bad_seed_maps_and_a_moved_slot_aborts_exec() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let run = |map: &str, extra: &[&str]| {
        let file = dir.path().join("seed.map");
        std::fs::write(&file, map).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["--port", &port.to_string(), "--cluster-enabled", "yes"])
            .args(["--cluster-port", &bus_port(port).to_string()])
            .args(["--cluster-seed-map", file.to_str().unwrap()])
            .args(extra)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success(), "started with {map:?}");
        assert!(
            !dir.path().join("nodes.conf").exists(),
            "a refused seed leaves no nodes.conf"
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let a = IDS[0];
    let b = IDS[1];
    let gap = run(
        &format!("node {a} 127.0.0.1:{port} 0-100\nnode {b} 127.0.0.1:1 200-16383"),
        &[],
    );
    assert!(
        gap.contains("99 slots are not assigned to any node (101-199)"),
        "{gap}"
    );
    let overlap = run(
        &format!("node {a} 127.0.0.1:{port} 0-200\nnode {b} 127.0.0.1:1 100-16383"),
        &[],
    );
    assert!(overlap.contains("slots 100-200 of node"), "{overlap}");
    let bad_id = run(&format!("node 12ab 127.0.0.1:{port} 0-16383"), &[]);
    assert!(
        bad_id.contains("must be 40 hexadecimal characters"),
        "{bad_id}"
    );
    let unknown_self = run(&format!("node {a} 127.0.0.1:1 0-16383"), &[]);
    assert!(unknown_self.contains("--cluster-node-id"), "{unknown_self}");
    let wrong_id = run(
        &format!("node {a} 127.0.0.1:1 0-16383"),
        &["--cluster-node-id", b],
    );
    assert!(wrong_id.contains("is not in the cluster map"), "{wrong_id}");
    let named = run(
        &format!("node {a} localhost:{port} 0-16383"),
        &["--cluster-node-id", a],
    );
    assert!(named.contains("is not an IP address"), "{named}");
    let wrong_bus = run(&format!("node {a} 127.0.0.1:{port}@1 0-16383"), &[]);
    assert!(wrong_bus.contains("cluster-port"), "{wrong_bus}");
    // In cluster mode the cluster says who replicates whom: Redis's refusal of `replicaof`.
    let replicaof = run(
        &format!("node {a} 127.0.0.1:{port} 0-16383"),
        &["--replicaof", "127.0.0.1", "1"],
    );
    assert!(
        replicaof.contains("replicaof directive not allowed in cluster mode"),
        "{replicaof}"
    );
    let chain = run(
        &format!(
            "node {a} 127.0.0.1:{port} 0-16383\nreplica {b} 127.0.0.1:1 {a}\nreplica {} 127.0.0.1:2 {b}",
            IDS[2]
        ),
        &[],
    );
    assert!(chain.contains("is itself a replica"), "{chain}");
    // A map where the node's own nodes.conf belongs is refused, with what to do instead.
    let file = dir.path().join("map-as-nodes.conf");
    std::fs::write(&file, format!("node {a} 127.0.0.1:{port} 0-16383\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["--port", &port.to_string(), "--cluster-enabled", "yes"])
        .args(["--cluster-config-file", file.to_str().unwrap()])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("give the map as cluster-seed-map"),
        "{stderr}"
    );

    // A slot that moves between MULTI and EXEC (CLUSTER SETSLOT NODE on its owner, while
    // it holds no keys): EXEC answers MOVED and discards, as Redis does.
    let trio = Trio::start();
    let [p1, _, _] = trio.ports;
    let mut n3 = trio.conn(2);
    let mut admin = trio.conn(2);
    assert_eq!(cmd(&mut n3, &["MULTI"]), "+OK\r\n");
    assert_eq!(cmd(&mut n3, &["INCR", "x"]), "+QUEUED\r\n");
    assert_eq!(
        cmd(&mut admin, &["CLUSTER", "SETSLOT", "16287", "NODE", IDS[0]]),
        "+OK\r\n"
    );
    assert_eq!(
        cmd(&mut n3, &["EXEC"]),
        format!("-MOVED 16287 127.0.0.1:{p1}\r\n")
    );
    assert_eq!(cmd(&mut n3, &["EXEC"]), "-ERR EXEC without MULTI\r\n");
    let nodes = cmd(&mut n3, &["CLUSTER", "NODES"]);
    assert!(
        nodes.contains(" connected 10923-16286 16288-16383\n"),
        "{nodes}"
    );
}

/// Sends a MULTI … EXEC pipeline through the sync cluster client, which routes it by its
/// first keyed command (its `Pipeline::query` refuses pipelines; the packed form is the way
/// it takes transactions). Returns EXEC's reply.
fn transaction(
    con: &mut ClusterConnection,
    pipe: &redis::Pipeline,
    queued: usize,
) -> redis::RedisResult<Value> {
    use redis::ConnectionLike;
    let mut replies = con.req_packed_commands(&pipe.get_packed_pipeline(), queued + 1, 1)?;
    Ok(replies.pop().expect("EXEC's reply"))
}

/// One W1 call (the MULTI block of a sliding-window limiter). Returns the count.
fn w1(con: &mut ClusterConnection, key: &str, now_ms: i64) -> i64 {
    let mut pipe = redis::pipe();
    pipe.atomic()
        .zadd(key, now_ms.to_string(), now_ms)
        .zrembyscore(key, 0, now_ms - 60_000)
        .zcard(key)
        .expire(key, 61);
    let (added, _removed, count, expire_set): (i64, i64, i64, i64) =
        redis::from_redis_value(transaction(con, &pipe, 4).unwrap()).unwrap();
    assert_eq!((added, expire_set), (1, 1));
    count
}

/// One W3 call (fixed window: GET, then SET EX or INCR). Returns whether it is allowed.
fn w3(con: &mut ClusterConnection, key: &str, limit: i64) -> bool {
    let current: Option<i64> = con.get(key).unwrap();
    match current {
        None => {
            let _: () = redis::cmd("SET")
                .arg(key)
                .arg(1)
                .arg("EX")
                .arg(61)
                .query(con)
                .unwrap();
            true
        }
        Some(_) => con.incr::<_, _, i64>(key, 1).unwrap() <= limit,
    }
}

fn throttle(con: &mut ClusterConnection, key: &str) -> Vec<i64> {
    redis::cmd("CL.THROTTLE")
        .arg(key)
        .arg(15)
        .arg(30)
        .arg(60)
        .arg(1)
        .query(con)
        .unwrap()
}

fn commandstat_calls(con: &mut redis::Connection, name: &str) -> i64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(con).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:calls=")))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn cluster_client_workloads_reshard_and_node_loss() {
    let mut trio = Trio::start();
    let mut direct: Vec<redis::Connection> = (0..3).map(|i| trio.client(i)).collect();
    let mut t0 = 0i64;
    for d in &mut direct {
        t0 = redis::cmd("CLOCK").arg("FREEZE").query(d).unwrap();
    }
    // Bootstrap from the second node: any node serves the map.
    let client = ClusterClient::builder([format!("redis://127.0.0.1:{}/", trio.ports[1])])
        .retries(2)
        .min_retry_wait(10)
        .max_retry_wait(50)
        .connection_timeout(Duration::from_millis(500))
        .response_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let mut con = client.get_connection().unwrap();
    let ranges: Vec<Vec<(u16, u16)>> = SPLIT.map(|r| vec![r]).to_vec();

    // Users spread over every node.
    let users: Vec<String> = (0..12).map(|i| format!("user{i}")).collect();
    let mut owners = [0usize; 3];
    for u in &users {
        owners[Trio::owner(&ranges, key_slot(u.as_bytes()))] += 1;
    }
    assert!(
        owners.iter().all(|&n| n > 0),
        "keys must reach every node: {owners:?}"
    );

    // W1: 20 calls per user at distinct milliseconds; the count grows by one each time.
    for u in &users {
        let key = format!("hist:{{{u}}}:reply");
        for i in 0..20 {
            assert_eq!(w1(&mut con, &key, t0 + i), i + 1, "{key}");
        }
        let ttl: i64 = con.ttl(&key).unwrap();
        assert_eq!(ttl, 61);
    }
    // W3: 20 calls, 5 allowed, per action (the hash tag is the action).
    for u in &users {
        let key = format!("rate:{{{u}}}:reply");
        let allowed = (0..20).filter(|_| w3(&mut con, &key, 5)).count();
        assert_eq!(allowed, 5, "{key}");
    }
    // CL.THROTTLE: redis-cell's example, exact on every node.
    for u in &users {
        let key = format!("throttle:{{{u}}}");
        let replies: Vec<Vec<i64>> = (0..20).map(|_| throttle(&mut con, &key)).collect();
        assert_eq!(replies[0], vec![0, 16, 15, -1, 2]);
        assert_eq!(replies.iter().filter(|r| r[0] == 0).count(), 16, "{key}");
        assert_eq!(replies[19][0], 1);
    }
    // Every key is on its owner only, and the client sent each CL.THROTTLE straight there.
    let mut calls = 0;
    for (i, d) in direct.iter_mut().enumerate() {
        let dbsize: i64 = redis::cmd("DBSIZE").query(d).unwrap();
        assert_eq!(dbsize, 3 * owners[i] as i64, "node {i}");
        calls += commandstat_calls(d, "cl.throttle");
    }
    assert_eq!(calls, 20 * users.len() as i64);
    // Exact under concurrency: 4 threads × 50 calls on one key (burst 9: 10 allowed).
    let allowed: usize = std::thread::scope(|s| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let client = &client;
                s.spawn(move || {
                    let mut con = client.get_connection().unwrap();
                    (0..50)
                        .filter(|_| {
                            let r: Vec<i64> = redis::cmd("CL.THROTTLE")
                                .arg("{k}x")
                                .arg(9)
                                .arg(10)
                                .arg(60)
                                .query(&mut con)
                                .unwrap();
                            r[0] == 0
                        })
                        .count()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    assert_eq!(allowed, 10);
    // A script limiter (fixed window in Lua), routed by its declared key on every node.
    let script = redis::Script::new(
        "local n = redis.call('INCR', KEYS[1]) if n == 1 then redis.call('EXPIRE', KEYS[1], 61) end return n",
    );
    for u in &users {
        let key = format!("lua:{{{u}}}");
        let counts: Vec<i64> = (0..3)
            .map(|_| script.key(&key).invoke(&mut con).unwrap())
            .collect();
        assert_eq!(counts, vec![1, 2, 3], "{key}");
    }
    // A cross-slot transaction is refused as Redis refuses it.
    let (k1, k2) = same_node_different_slots(&ranges);
    let mut pipe = redis::pipe();
    pipe.atomic().incr(&k1, 1).incr(&k2, 1);
    let err = transaction(&mut con, &pipe, 2).unwrap_err();
    assert_eq!(err.code(), Some("CROSSSLOT"), "{err}");
    let err = redis::cmd("EVAL")
        .arg("return 1")
        .arg(2)
        .arg(&k1)
        .arg(&k2)
        .query::<Value>(&mut con)
        .unwrap_err();
    assert_eq!(err.code(), Some("CROSSSLOT"), "{err}");

    // Move slots 10923-13000 from node 3 to node 1 with their keys, the way operators do it:
    // `redis-cli --cluster reshard` (SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE).
    let moved: Vec<&String> = users
        .iter()
        .filter(|u| (10923..=13000).contains(&key_slot(u.as_bytes())))
        .collect();
    assert!(!moved.is_empty(), "some user must be in the moved range");
    let new_ranges = vec![
        vec![(0, 5460), (10923, 13000)],
        vec![(5461, 10922)],
        vec![(13001, 16383)],
    ];
    let out = Command::new("redis-cli")
        .args([
            "--cluster",
            "reshard",
            &format!("127.0.0.1:{}", trio.ports[0]),
        ])
        .args(["--cluster-from", IDS[2], "--cluster-to", IDS[0]])
        .args(["--cluster-slots", "2078", "--cluster-yes"])
        .output()
        .expect("redis-cli is installed");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Node 3 has none of the moved users' keys left; node 1 has them all.
    for u in &moved {
        let slot = key_slot(u.as_bytes()).to_string();
        let count = |d: &mut redis::Connection| -> i64 {
            redis::cmd("CLUSTER")
                .arg("COUNTKEYSINSLOT")
                .arg(&slot)
                .query(d)
                .unwrap()
        };
        assert_eq!(count(&mut direct[2]), 0, "{u}");
        assert!(count(&mut direct[0]) >= 3, "{u} now lives on node 1");
    }
    // The same client follows the new owners, and every limiter kept its state: the moved
    // ones moved whole (still limited), the others never moved.
    for u in &users {
        let key = format!("throttle:{{{u}}}");
        let r = throttle(&mut con, &key);
        assert_eq!(r[0], 1, "{key}: {r:?}");
    }

    // Node 3 dies: its keys fail, everything else keeps working.
    drop(direct.pop());
    trio.nodes[2].kill();
    let started = Instant::now();
    for u in &users {
        let key = format!("rate:{{{u}}}:reply");
        let on_dead = Trio::owner(&new_ranges, key_slot(u.as_bytes())) == 2;
        let result: redis::RedisResult<i64> = con.incr(&key, 1);
        assert_eq!(result.is_err(), on_dead, "{key}: {result:?}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    // The survivors still describe node 3 and, within the node timeout (15 s by default),
    // have not marked it failed: they keep serving their slots.
    let slots: Value = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query(&mut direct[0])
        .unwrap();
    assert!(format!("{slots:?}").contains(&trio.ports[2].to_string()));

    // It restarts (from its nodes.conf, which has the reshard) and the same client is served
    // again.
    trio.nodes[2].restart();
    let mut n3 = trio.client(2);
    let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut n3).unwrap();
    assert!(info.contains("cluster_slots_assigned:16384\r\n"), "{info}");
    let _: i64 = redis::cmd("CLOCK").arg("FREEZE").query(&mut n3).unwrap();
    for u in &users {
        let key = format!("throttle:{{{u}}}");
        let deadline = Instant::now() + Duration::from_secs(10);
        let r = loop {
            match redis::cmd("CL.THROTTLE")
                .arg(&key)
                .arg(15)
                .arg(30)
                .arg(60)
                .arg(1)
                .query::<Vec<i64>>(&mut con)
            {
                Ok(r) => break r,
                Err(e) => {
                    assert!(Instant::now() < deadline, "{key}: {e}");
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        };
        if Trio::owner(&new_ranges, key_slot(u.as_bytes())) == 2 {
            // A restarted node starts empty: one fresh burst.
            assert_eq!(r, vec![0, 16, 15, -1, 2], "{key}");
        }
    }
}

/// Two keys in different slots of the same node.
fn same_node_different_slots(ranges: &[Vec<(u16, u16)>]) -> (String, String) {
    let keys: Vec<String> = (0..100).map(|i| format!("k{i}")).collect();
    for a in &keys {
        for b in &keys {
            let (sa, sb) = (key_slot(a.as_bytes()), key_slot(b.as_bytes()));
            if sa != sb && Trio::owner(ranges, sa) == Trio::owner(ranges, sb) {
                return (a.clone(), b.clone());
            }
        }
    }
    unreachable!("100 keys over three nodes share a node")
}

/// The shipped example (`deploy/cluster.map`, the seed map of `deploy/compose.yaml`) is a
/// valid map whose nodes are the compose file's.
#[test]
fn cluster_deploy_example_map_is_valid() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy");
    let map = sluice::cluster::SlotMap::load(&format!("{dir}/cluster.map")).unwrap();
    let compose = std::fs::read_to_string(format!("{dir}/compose.yaml")).unwrap();
    assert_eq!(map.nodes.len(), 3);
    for (i, node) in map.nodes.iter().enumerate() {
        assert_eq!(node.id, IDS[i]);
        assert_eq!(node.addr(), format!("127.0.0.1:{}", 7001 + i));
        assert!(compose.contains(&format!("\"--cluster-node-id\", \"{}\"", node.id)));
        assert!(compose.contains(&format!("\"--port\", \"{}\"", node.port)));
        assert!(compose.contains(&format!("/dev/tcp/127.0.0.1/{}", node.port)));
    }
}

/// Cluster clients route by COMMAND's key positions: every command sluice shares with Redis
/// 7.0 reports the same (first, last, step) and `movablekeys` flag, and CL.THROTTLE reports
/// its key at position 1.
#[test]
fn command_key_positions_match_redis() {
    fn positions(addr: SocketAddr) -> std::collections::BTreeMap<String, (i64, i64, i64, bool)> {
        let mut con = redis::Client::open(format!("redis://{addr}/"))
            .unwrap()
            .get_connection()
            .unwrap();
        let all: Vec<Value> = redis::cmd("COMMAND").query(&mut con).unwrap();
        let mut out = std::collections::BTreeMap::new();
        let mut stack = all;
        while let Some(Value::Array(entry)) = stack.pop() {
            let name: String = redis::from_redis_value_ref(&entry[0]).unwrap();
            let flags: Vec<String> = redis::from_redis_value_ref(&entry[2]).unwrap();
            let triple: (i64, i64, i64) = (
                redis::from_redis_value_ref(&entry[3]).unwrap(),
                redis::from_redis_value_ref(&entry[4]).unwrap(),
                redis::from_redis_value_ref(&entry[5]).unwrap(),
            );
            let movable = flags.iter().any(|f| f == "movablekeys");
            out.insert(name, (triple.0, triple.1, triple.2, movable));
            if let Some(Value::Array(subs)) = entry.get(9) {
                stack.extend(subs.iter().cloned());
            }
        }
        out
    }
    let ours = positions(crate::support::sluice().addr());
    let redis = crate::support::RedisServer::start();
    let theirs = positions(redis.addr());
    let mut shared = 0;
    for (name, keys) in &ours {
        if let Some(redis_keys) = theirs.get(name) {
            assert_eq!(keys, redis_keys, "{name}");
            shared += 1;
        }
    }
    assert!(shared > 150, "only {shared} commands in common");
    assert_eq!(ours["cl.throttle"], (1, 1, 1, false));
    assert_eq!(ours["eval"], (0, 0, 0, true));
    assert_eq!(ours["cluster|keyslot"], (0, 0, 0, false));
}

#[test]
fn sharded_pubsub_is_routed_by_slot() {
    let trio = Trio::start();
    let p3 = trio.ports[2];
    let mut n1 = trio.conn(0);
    let mut n3 = trio.conn(2);
    let mut publisher = trio.conn(2);
    // foo (slot 12182) is node 3's; a (15495) and b (3300) are in different slots.
    assert_eq!(
        cmd(&mut n1, &["SSUBSCRIBE", "foo"]),
        format!("-MOVED 12182 127.0.0.1:{p3}\r\n")
    );
    assert_eq!(
        cmd(&mut n1, &["SPUBLISH", "foo", "x"]),
        format!("-MOVED 12182 127.0.0.1:{p3}\r\n")
    );
    assert_eq!(cmd(&mut n3, &["SSUBSCRIBE", "a", "b"]), CROSSSLOT);
    assert_eq!(
        cmd(&mut n3, &["SSUBSCRIBE", "foo"]),
        "*3\r\n$10\r\nssubscribe\r\n$3\r\nfoo\r\n:1\r\n"
    );
    assert_eq!(cmd(&mut publisher, &["SPUBLISH", "foo", "hi"]), ":1\r\n");
    assert_eq!(
        String::from_utf8_lossy(&n3.read_reply()),
        "*3\r\n$8\r\nsmessage\r\n$3\r\nfoo\r\n$2\r\nhi\r\n"
    );
    // Plain PUBLISH has no key and runs on any node.
    assert_eq!(cmd(&mut n1, &["PUBLISH", "foo", "x"]), ":0\r\n");
}

/// Polls `args` on `con` until the reply is `want` (a replica catching up), for at most 10 s.
fn eventually(con: &mut Conn, args: &[&str], want: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = cmd(con, args);
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{args:?}: still {got:?}, waiting for {want:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A node seeded from a map (read once, into the node's own nodes.conf in its directory),
/// with a one-second node timeout.
fn start_node(map_file: &std::path::Path, port: u16, id: &str) -> NodeProc {
    let args = [
        "--port",
        &port.to_string(),
        "--loglevel",
        "warning",
        "--cluster-enabled",
        "yes",
        "--cluster-port",
        &bus_port(port).to_string(),
        "--cluster-node-timeout",
        "1000",
        "--cluster-seed-map",
        map_file.to_str().unwrap(),
        "--cluster-node-id",
        id,
    ]
    .map(String::from)
    .to_vec();
    NodeProc::start(args, port)
}

/// Two masters and a replica of the first: replica reads (READONLY), MOVED for everything
/// else, the replica's CLUSTER views, a slot moving away from its master (the replica drops
/// its key), CLUSTER FAILOVER on the replica (every node follows over the bus, the old
/// master replicates the new one), CLUSTER FAILOVER back, and CLUSTER REPLICATE re-pointing
/// the replica at the other master.
#[test]
fn cluster_replica_serves_reads_and_takes_over() {
    let [a, b, r] = IDS;
    let ports = [free_port(), free_port(), free_port()];
    let [pa, pb, pr] = ports;
    let map_file = std::env::temp_dir().join(format!(
        "sluice-it-cluster-replica-{}-{pa}.map",
        std::process::id()
    ));
    std::fs::write(
        &map_file,
        format!(
            "node {a} {} 0-8191\nnode {b} {} 8192-16383\nreplica {r} {} {a}\n",
            seed_addr(pa),
            seed_addr(pb),
            seed_addr(pr)
        ),
    )
    .unwrap();
    let _nodes: Vec<NodeProc> = [(pa, a), (pb, b), (pr, r)]
        .iter()
        .map(|&(p, id)| start_node(&map_file, p, id))
        .collect();
    let _ = std::fs::remove_file(&map_file);
    let addr = |p: u16| SocketAddr::from(([127, 0, 0, 1], p));
    let (mut na, mut nb, mut nr) = (
        Conn::connect(addr(pa)),
        Conn::connect(addr(pb)),
        Conn::connect(addr(pr)),
    );
    wait_until("the nodes' bus links", || {
        [&mut na, &mut nb, &mut nr]
            .into_iter()
            .all(|c| cmd(c, &["CLUSTER", "NODES"]).matches(" connected").count() == 3)
    });
    // Links up is not yet a cluster that serves: a node says CLUSTERDOWN until its state is
    // ok (seen once at load 7-10, a SET right after the links connected).
    wait_until("the nodes' cluster state", || {
        [&mut na, &mut nb, &mut nr]
            .into_iter()
            .all(|c| cmd(c, &["CLUSTER", "INFO"]).contains("cluster_state:ok"))
    });
    // b is slot 3300 (node a's), foo 12182 (node b's).
    assert_eq!(cmd(&mut na, &["SET", "b", "1"]), "+OK\r\n");
    // Slot 5061 (also node a's until the map changes below).
    assert_eq!(cmd(&mut na, &["SET", "foo{bar}{zap}", "1"]), "+OK\r\n");
    let mut reader = Conn::connect(addr(pr));
    assert_eq!(cmd(&mut reader, &["READONLY"]), "+OK\r\n");
    eventually(&mut reader, &["GET", "b"], "$1\r\n1\r\n");
    let role = cmd(&mut nr, &["ROLE"]);
    assert!(
        role.starts_with(&format!(
            "*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:{pa}\r\n$9\r\nconnected\r\n"
        )),
        "{role}"
    );

    // Without READONLY everything keyed is MOVED; with it, reads of the master's slots are
    // served and writes still go to the master (texts from redis-server 7.0.15).
    let moved_a = format!("-MOVED 3300 127.0.0.1:{pa}\r\n");
    let moved_b = format!("-MOVED 12182 127.0.0.1:{pb}\r\n");
    assert_eq!(cmd(&mut nr, &["GET", "b"]), moved_a);
    assert_eq!(cmd(&mut nr, &["SET", "b", "2"]), moved_a);
    assert_eq!(cmd(&mut nr, &["GET", "foo"]), moved_b);
    assert_eq!(cmd(&mut reader, &["SET", "b", "2"]), moved_a);
    assert_eq!(
        cmd(&mut reader, &["CL.THROTTLE", "b", "1", "2", "3"]),
        moved_a
    );
    assert_eq!(cmd(&mut reader, &["GET", "foo"]), moved_b);
    assert_eq!(
        cmd(&mut reader, &["MGET", "b", "{b}x"]),
        "*2\r\n$1\r\n1\r\n$-1\r\n"
    );
    assert_eq!(cmd(&mut reader, &["MULTI"]), "+OK\r\n");
    assert_eq!(cmd(&mut reader, &["GET", "b"]), "+QUEUED\r\n");
    assert_eq!(cmd(&mut reader, &["EXEC"]), "*1\r\n$1\r\n1\r\n");
    assert_eq!(cmd(&mut reader, &["MULTI"]), "+OK\r\n");
    assert_eq!(cmd(&mut reader, &["GET", "b"]), "+QUEUED\r\n");
    assert_eq!(cmd(&mut reader, &["INCR", "b"]), moved_a);
    assert_eq!(cmd(&mut reader, &["EXEC"]), EXECABORT);
    assert_eq!(
        cmd(
            &mut reader,
            &["EVAL", "return redis.call('get',KEYS[1])", "1", "b"]
        ),
        "$1\r\n1\r\n"
    );
    assert_eq!(
        cmd(&mut reader, &["EVAL", "return redis.call('get','b')", "0"]),
        "$1\r\n1\r\n"
    );
    let r1 = cmd(
        &mut reader,
        &["EVAL", "return redis.call('set',KEYS[1],'1')", "1", "b"],
    );
    assert!(
        r1.starts_with("-READONLY You can't write against a read only replica. script: "),
        "{r1}"
    );
    let r2 = cmd(&mut nr, &["EVAL", "return redis.call('get','b')", "0"]);
    assert!(
        r2.starts_with(
            "-ERR Script attempted to access a non local key in a cluster node script: "
        ),
        "{r2}"
    );
    assert_eq!(
        cmd(&mut reader, &["FLUSHALL"]),
        "-READONLY You can't write against a read only replica.\r\n"
    );
    assert!(cmd(&mut reader, &["CLIENT", "INFO"]).contains(" flags=r "));
    assert_eq!(cmd(&mut reader, &["READWRITE"]), "+OK\r\n");
    assert_eq!(cmd(&mut reader, &["GET", "b"]), moved_a);
    assert_eq!(cmd(&mut reader, &["READONLY"]), "+OK\r\n");
    assert_eq!(cmd(&mut reader, &["RESET"]), "+RESET\r\n");
    assert_eq!(cmd(&mut reader, &["GET", "b"]), moved_a);
    assert_eq!(
        cmd(&mut nr, &["REPLICAOF", "NO", "ONE"]),
        "-ERR REPLICAOF not allowed in cluster mode.\r\n"
    );

    // The replica in the cluster views, as Redis 7.0 shows one.
    let entry =
        |p: u16, id: &str| format!("*4\r\n$9\r\n127.0.0.1\r\n:{p}\r\n$40\r\n{id}\r\n*0\r\n");
    let slots = format!(
        "*2\r\n*4\r\n:0\r\n:8191\r\n{}{}*3\r\n:8192\r\n:16383\r\n{}",
        entry(pa, a),
        entry(pr, r),
        entry(pb, b)
    );
    for con in [&mut na, &mut nb, &mut nr] {
        assert_eq!(cmd(con, &["CLUSTER", "SLOTS"]), slots);
        let info = cmd(con, &["CLUSTER", "INFO"]);
        assert!(
            info.contains("cluster_known_nodes:3\r\n") && info.contains("cluster_size:2\r\n"),
            "{info}"
        );
    }
    let nodes = cmd(&mut nr, &["CLUSTER", "NODES"]);
    let line = nodes.lines().find(|l| l.starts_with(r)).unwrap();
    assert!(
        line.starts_with(&format!(
            "{r} 127.0.0.1:{pr}@{} myself,slave {a} 0 ",
            bus_port(pr)
        )) && line.ends_with(" connected"),
        "{nodes}"
    );
    let nodes = cmd(&mut na, &["CLUSTER", "NODES"]);
    let line = nodes.lines().find(|l| l.starts_with(r)).unwrap();
    assert!(
        line.starts_with(&format!("{r} 127.0.0.1:{pr}@{} slave {a} 0 ", bus_port(pr))),
        "{nodes}"
    );
    let replicas = cmd(&mut nb, &["CLUSTER", "REPLICAS", a]);
    assert!(
        replicas.starts_with("*1\r\n$1")
            && replicas.contains(&format!(
                "\r\n{r} 127.0.0.1:{pr}@{} slave {a} 0 ",
                bus_port(pr)
            )),
        "{replicas}"
    );
    assert_eq!(cmd(&mut nb, &["CLUSTER", "SLAVES", b]), "*0\r\n");
    assert_eq!(
        cmd(&mut nb, &["CLUSTER", "REPLICAS", r]),
        "-ERR The specified node is not a master\r\n"
    );
    let shards = cmd(&mut na, &["CLUSTER", "SHARDS"]);
    let replica_entry = format!(
        "*14\r\n$2\r\nid\r\n$40\r\n{r}\r\n$4\r\nport\r\n:{pr}\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n:"
    );
    assert!(
        shards.starts_with(
            "*2\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:8191\r\n$5\r\nnodes\r\n*2\r\n*14\r\n"
        ) && shards.contains(&replica_entry),
        "{shards}"
    );

    // Redis's refusals.
    assert_eq!(
        cmd(&mut na, &["CLUSTER", "FAILOVER"]),
        "-ERR You should send CLUSTER FAILOVER to a replica\r\n"
    );
    assert_eq!(
        cmd(&mut nr, &["CLUSTER", "FAILOVER", "SOON"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        cmd(&mut nr, &["CLUSTER", "FAILOVER", "FORCE", "X"]),
        "-ERR unknown subcommand or wrong number of arguments for 'FAILOVER'. Try CLUSTER HELP.\r\n"
    );
    assert_eq!(
        cmd(&mut na, &["CLUSTER", "REPLICATE", b]),
        "-ERR To set a master the node must be empty and without assigned slots.\r\n"
    );
    assert_eq!(
        cmd(&mut nr, &["CLUSTER", "REPLICATE", r]),
        "-ERR Can't replicate myself\r\n"
    );
    assert_eq!(
        cmd(&mut nb, &["CLUSTER", "REPLICATE", r]),
        "-ERR I can only replicate a master, not a replica.\r\n"
    );
    assert_eq!(
        cmd(&mut nr, &["CLUSTER", "REPLICATE", "123"]),
        "-ERR Unknown node 123\r\n"
    );
    assert_eq!(cmd(&mut nr, &["CLUSTER", "REPLICATE", a]), "+OK\r\n");

    // Slot 5061 moves from a to b with its key, as redis-cli moves a slot: the replica
    // drops the key its master migrated away and keeps the rest.
    assert_eq!(cmd(&mut reader, &["READONLY"]), "+OK\r\n");
    eventually(&mut reader, &["GET", "foo{bar}{zap}"], "$1\r\n1\r\n");
    assert_eq!(
        cmd(&mut nb, &["CLUSTER", "SETSLOT", "5061", "IMPORTING", a]),
        "+OK\r\n"
    );
    assert_eq!(
        cmd(&mut na, &["CLUSTER", "SETSLOT", "5061", "MIGRATING", b]),
        "+OK\r\n"
    );
    assert_eq!(
        cmd(
            &mut na,
            &[
                "MIGRATE",
                "127.0.0.1",
                &pb.to_string(),
                "",
                "0",
                "5000",
                "KEYS",
                "foo{bar}{zap}"
            ]
        ),
        "+OK\r\n"
    );
    for con in [&mut nb, &mut na] {
        assert_eq!(
            cmd(con, &["CLUSTER", "SETSLOT", "5061", "NODE", b]),
            "+OK\r\n"
        );
    }
    eventually(
        &mut reader,
        &["CLUSTER", "COUNTKEYSINSLOT", "5061"],
        ":0\r\n",
    );
    assert_eq!(
        cmd(&mut reader, &["CLUSTER", "COUNTKEYSINSLOT", "3300"]),
        ":1\r\n"
    );
    assert_eq!(cmd(&mut reader, &["GET", "b"]), "$1\r\n1\r\n");
    eventually(
        &mut reader,
        &["GET", "foo{bar}{zap}"],
        &format!("-MOVED 5061 127.0.0.1:{pb}\r\n"),
    );

    // CLUSTER FAILOVER on the replica: Redis's manual failover (the master holds its
    // writes until the replica has its offset, then the replica wins the election and
    // takes the slots); every node follows over the bus.
    assert_eq!(cmd(&mut nr, &["CLUSTER", "FAILOVER"]), "+OK\r\n");
    wait_until("the replica's promotion", || {
        cmd(&mut nr, &["ROLE"]).starts_with("*3\r\n$6\r\nmaster\r\n")
    });
    assert_eq!(cmd(&mut nr, &["SET", "b", "2"]), "+OK\r\n");
    assert_eq!(cmd(&mut nr, &["GET", "b"]), "$1\r\n2\r\n");
    let nodes = cmd(&mut nr, &["CLUSTER", "NODES"]);
    assert!(
        nodes.contains(" myself,master - 0 ") && nodes.contains(" connected 0-5060 5062-8191\n"),
        "{nodes}"
    );
    let moved_r = format!("-MOVED 3300 127.0.0.1:{pr}\r\n");
    wait_until("the others to follow the new master", || {
        cmd(&mut nb, &["GET", "b"]) == moved_r
            && cmd(&mut na, &["GET", "b"]) == moved_r
            && cmd(&mut nr, &["CLUSTER", "NODES"])
                .contains(&format!("{a} 127.0.0.1:{pa}@{} slave {r} 0 ", bus_port(pa)))
    });
    let mut old = Conn::connect(addr(pa));
    assert_eq!(cmd(&mut old, &["READONLY"]), "+OK\r\n");
    eventually(&mut old, &["GET", "b"], "$1\r\n2\r\n");
    assert_eq!(cmd(&mut nr, &["INCR", "b"]), ":3\r\n");
    eventually(&mut old, &["GET", "b"], "$1\r\n3\r\n");

    // CLUSTER FAILOVER on the old master turns the roles back; r follows a again.
    assert_eq!(cmd(&mut na, &["CLUSTER", "FAILOVER"]), "+OK\r\n");
    wait_until("the roles to turn back", || {
        cmd(&mut na, &["ROLE"]).starts_with("*3\r\n$6\r\nmaster\r\n")
            && cmd(&mut nr, &["GET", "b"]) == moved_a
            && cmd(&mut nb, &["GET", "b"]) == moved_a
    });
    assert_eq!(cmd(&mut na, &["INCR", "b"]), ":4\r\n");
    assert_eq!(cmd(&mut reader, &["READONLY"]), "+OK\r\n");
    eventually(&mut reader, &["GET", "b"], "$1\r\n4\r\n");

    // CLUSTER REPLICATE re-points the replica at the other master: it follows b, and now
    // serves b's slots (foo) to READONLY reads and sends a's (b) to a.
    assert_eq!(cmd(&mut nb, &["SET", "foo", "fromb"]), "+OK\r\n");
    assert_eq!(cmd(&mut nr, &["CLUSTER", "REPLICATE", b]), "+OK\r\n");
    eventually(&mut reader, &["GET", "foo"], "$5\r\nfromb\r\n");
    assert_eq!(cmd(&mut reader, &["GET", "b"]), moved_a);
    let role = cmd(&mut nr, &["ROLE"]);
    assert!(role.contains(&format!(":{pb}\r\n")), "{role}");
}

/// A reply with what differs between two clusters made equal: bulk lengths, CLUSTER NODES's
/// bus port, ping/pong times and epochs, replication offsets, then the ports by name.
fn normalize(reply: &str, ports: &[(u16, &str)]) -> String {
    let mut out = String::new();
    let mut after_offset = false;
    for piece in reply.split_inclusive('\n') {
        let (body, end) = match piece.strip_suffix("\r\n") {
            Some(b) => (b, "\r\n"),
            None => match piece.strip_suffix('\n') {
                Some(b) => (b, "\n"),
                None => (piece, ""),
            },
        };
        let (prefix, line) = match body.strip_prefix("txt:") {
            Some(rest) => ("txt:", rest),
            None => ("", body),
        };
        let words: Vec<&str> = line.split(' ').collect();
        let text = if words.len() >= 8 && sluice::cluster::map::valid_id(words[0]) {
            let addr = words[1].split('@').next().unwrap_or_default();
            let mut w: Vec<String> = words.iter().map(|s| s.to_string()).collect();
            w[1] = format!("{addr}@BUS");
            w[4] = "T".into();
            w[5] = "T".into();
            w[6] = "E".into();
            format!("{prefix}{}", w.join(" "))
        } else if after_offset && body.starts_with(':') {
            ":N".to_string()
        } else if (body.starts_with('$') || body.starts_with('='))
            && body.len() > 1
            && body[1..].bytes().all(|b| b.is_ascii_digit())
        {
            format!("{}L", &body[..1])
        } else {
            body.to_string()
        };
        after_offset = body == "replication-offset";
        out.push_str(&text);
        out.push_str(end);
    }
    for (port, name) in ports {
        out = out.replace(&port.to_string(), name);
    }
    out
}

/// Polls until `check` holds, for at most 15 s (a Redis Cluster's gossip settling).
fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A master and its replica built on real redis-server 7.0.15 (CLUSTER ADDSLOTSRANGE, MEET,
/// REPLICATE) and the same two nodes in a sluice map (same node ids): every view and reply
/// the replica changes, from both nodes, normalized for ports, times, epochs and offsets, is
/// the same bytes.
#[test]
fn cluster_replica_views_match_a_real_redis_cluster() {
    use crate::support::RedisServer;
    let (rm, rr) = (
        RedisServer::start_cluster_node(),
        RedisServer::start_cluster_node(),
    );
    let (mut cm, mut cr) = (Conn::connect(rm.addr()), Conn::connect(rr.addr()));
    let myid = |c: &mut Conn| {
        let r = cmd(c, &["CLUSTER", "MYID"]);
        r.trim_end().rsplit("\r\n").next().unwrap().to_string()
    };
    let (mid, rid) = (myid(&mut cm), myid(&mut cr));
    assert_eq!(
        cmd(&mut cm, &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        "+OK\r\n"
    );
    assert_eq!(
        cmd(
            &mut cr,
            &[
                "CLUSTER",
                "MEET",
                "127.0.0.1",
                &rm.port().to_string(),
                &rm.bus_port().to_string()
            ]
        ),
        "+OK\r\n"
    );
    wait_until("the nodes to meet", || {
        cmd(&mut cr, &["CLUSTER", "NODES"]).contains(&format!("{mid} 127.0.0.1:"))
            && cmd(&mut cr, &["CLUSTER", "REPLICATE", &mid]) == "+OK\r\n"
    });
    let rport = format!(":{}\r\n", rr.port());
    wait_until("redis's replica to be listed on both nodes", || {
        [&mut cm, &mut cr].into_iter().all(|c| {
            cmd(c, &["CLUSTER", "SLOTS"]).contains(&rport)
                && cmd(c, &["CLUSTER", "INFO"]).contains("cluster_state:ok")
                && !cmd(c, &["CLUSTER", "SHARDS"]).contains("loading")
        })
    });

    let (sm, sr) = (free_port(), free_port());
    let map_file = std::env::temp_dir().join(format!(
        "sluice-it-cluster-vs-redis-{}-{sm}.map",
        std::process::id()
    ));
    std::fs::write(
        &map_file,
        format!(
            "node {mid} {} 0-16383\nreplica {rid} {} {mid}\n",
            seed_addr(sm),
            seed_addr(sr)
        ),
    )
    .unwrap();
    let _nodes = [
        start_node(&map_file, sm, &mid),
        start_node(&map_file, sr, &rid),
    ];
    let _ = std::fs::remove_file(&map_file);
    let addr = |p: u16| SocketAddr::from(([127, 0, 0, 1], p));
    let (mut sluice_m, mut sluice_r) = (Conn::connect(addr(sm)), Conn::connect(addr(sr)));

    wait_until("sluice's replica link", || {
        cmd(&mut sluice_r, &["ROLE"]).contains("connected")
    });
    // The same key on both masters, read back on both replicas.
    let mut readers = Vec::new();
    for (m, r) in [(&mut cm, rr.addr()), (&mut sluice_m, addr(sr))] {
        assert_eq!(cmd(m, &["SET", "b", "1"]), "+OK\r\n");
        let mut reader = Conn::connect(r);
        assert_eq!(cmd(&mut reader, &["READONLY"]), "+OK\r\n");
        eventually(&mut reader, &["GET", "b"], "$1\r\n1\r\n");
        readers.push(reader);
    }
    // A master knows its replica's offset from its acknowledgements (every second).
    wait_until("sluice's replica to acknowledge", || {
        !cmd(&mut sluice_m, &["CLUSTER", "SHARDS"]).contains("loading")
    });
    let redis_ports = [(rm.port(), "PORT_M"), (rr.port(), "PORT_R")];
    let sluice_ports = [(sm, "PORT_M"), (sr, "PORT_R")];
    let views: &[&[&str]] = &[
        &["CLUSTER", "SLOTS"],
        &["CLUSTER", "SHARDS"],
        &["CLUSTER", "NODES"],
        &["CLUSTER", "REPLICAS", &mid],
        &["CLUSTER", "SLAVES", &mid],
        &["CLUSTER", "REPLICAS", &rid],
        &["CLUSTER", "REPLICATE", &rid],
        &["CLUSTER", "FAILOVER", "SOON"],
        &["CLUSTER", "FAILOVER", "FORCE", "NOW"],
        &["CLUSTER", "REPLICATE", "123"],
        &["REPLICAOF", "NO", "ONE"],
        &["GET", "b"],
        &["SET", "b", "2"],
        &["GET", "{b}2"],
        &["MGET", "b", "{b}2"],
        &["FLUSHALL"],
        &["EVAL", "return redis.call('get','b')", "0"],
        &["EVAL", "return redis.call('set',KEYS[1],'3')", "1", "b"],
        &["HELLO", "3"],
        &["CLUSTER", "SLOTS"],
        &["CLUSTER", "SHARDS"],
        &["CLUSTER", "NODES"],
        &["CLUSTER", "REPLICAS", &mid],
    ];
    let (redis_reader, sluice_reader) = readers.split_at_mut(1);
    let pairs: [(&str, &mut Conn, &mut Conn); 3] = [
        ("master", &mut cm, &mut sluice_m),
        ("replica", &mut cr, &mut sluice_r),
        (
            "READONLY replica",
            &mut redis_reader[0],
            &mut sluice_reader[0],
        ),
    ];
    for (node, redis_con, sluice_con) in pairs {
        for args in views {
            // CLUSTER NODES lists Redis's nodes in its dict's order, sluice's in the map's.
            let sorted = |text: String| {
                if args.get(1) != Some(&"NODES") {
                    return text;
                }
                let header = ["=L\r\ntxt:", "$L\r\n"]
                    .into_iter()
                    .find(|h| text.starts_with(h))
                    .unwrap_or("");
                let mut lines: Vec<&str> = text[header.len()..].split('\n').collect();
                lines.sort_unstable();
                format!("{header}{}", lines.join("\n"))
            };
            let want = sorted(normalize(&cmd(redis_con, args), &redis_ports));
            let got = sorted(normalize(&cmd(sluice_con, args), &sluice_ports));
            if args[0] == "HELLO" {
                continue; // its id and version differ; it is here to switch to RESP3
            }
            assert_eq!(got, want, "{node}: {args:?}");
        }
    }
    // The fields of CLUSTER INFO that the map decides.
    for (redis_con, sluice_con) in [(&mut cm, &mut sluice_m), (&mut cr, &mut sluice_r)] {
        let (want, got) = (
            cmd(redis_con, &["CLUSTER", "INFO"]),
            cmd(sluice_con, &["CLUSTER", "INFO"]),
        );
        for field in [
            "cluster_state",
            "cluster_slots_assigned",
            "cluster_known_nodes",
            "cluster_size",
        ] {
            let value = |text: &str| {
                text.lines()
                    .find(|l| l.starts_with(field))
                    .map(str::to_string)
            };
            assert_eq!(value(&got), value(&want), "{field}");
        }
    }
}

/// CONFIG REWRITE on a cluster replica writes no `replicaof` (nodes.conf names its master, as
/// Redis writes none in cluster mode), so the node restarts from its files, still a replica.
#[test]
fn cluster_replica_config_rewrite_keeps_no_replicaof() {
    let [a, r, _] = IDS;
    let (pa, pr) = (free_port(), free_port());
    let dir = std::env::temp_dir().join(format!(
        "sluice-it-cluster-rewrite-{}-{pa}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let map_file = dir.join("cluster.map");
    std::fs::write(
        &map_file,
        format!(
            "node {a} {} 0-16383\nreplica {r} {} {a}\n",
            seed_addr(pa),
            seed_addr(pr)
        ),
    )
    .unwrap();
    let conf = dir.join("replica.conf");
    std::fs::write(
        &conf,
        format!(
            "port {pr}\ncluster-enabled yes\ncluster-port {}\ncluster-config-file {}\ncluster-seed-map {}\ncluster-node-id {r}\n",
            bus_port(pr),
            dir.join("replica-nodes.conf").display(),
            map_file.display()
        ),
    )
    .unwrap();
    let _master = start_node(&map_file, pa, a);
    let mut replica = NodeProc::start(vec![conf.display().to_string()], pr);
    let mut con = Conn::connect(replica.addr());
    wait_until("the replica's link", || {
        cmd(&mut con, &["ROLE"]).contains("connected")
    });
    assert_eq!(cmd(&mut con, &["CONFIG", "REWRITE"]), "+OK\r\n");
    let written = std::fs::read_to_string(&conf).unwrap();
    assert!(!written.contains("replicaof"), "{written}");
    replica.kill();
    replica.restart();
    let mut con = Conn::connect(replica.addr());
    wait_until("the restarted replica's link", || {
        cmd(&mut con, &["ROLE"]).contains("connected")
    });
    drop(replica);
    let _ = std::fs::remove_dir_all(&dir);
}
