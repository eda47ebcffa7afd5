//! The slot map: which node (id, host:port) owns which hash slots. It is the shape routing
//! reads the cluster bus's view in ([`SlotMap::from_view`]), and the text format of a seed
//! map (`cluster-seed-map`, see `cluster::seed`), parsed and validated here.
//!
//! # Format
//!
//! Plain text, one entry per line (or entries separated by `;`); `#` starts a comment; words
//! are separated by spaces.
//!
//! ```text
//! # sluice seed map: every node of the cluster gets the same file
//! node 1111111111111111111111111111111111111111 127.0.0.1:7001 0-5460
//! node 2222222222222222222222222222222222222222 127.0.0.1:7002 5461-10922
//! node 3333333333333333333333333333333333333333 127.0.0.1:7003@17103 10923-16383
//! ```
//!
//! - `node <id> <ip>:<port>[@<cport>] [<slots> …]`: a master. `<id>` is 40 hexadecimal
//!   characters, as Redis node ids are; `<ip>:<port>` is the address clients (and the
//!   replicas) connect to (`[::1]:7001` for IPv6); `@<cport>` its cluster bus port (default:
//!   the port plus 10000); `<slots>` are single slots (`42`) or inclusive ranges
//!   (`0-5460`), separated by spaces or commas. A master may own no slots.
//! - `replica <id> <ip>:<port>[@<cport>] <master-id>`: a replica of the master
//!   `<master-id>`, which must be a `node` of the map (Redis Cluster has no chained
//!   replicas). It owns no slots.
//! - `epoch <n>` (optional, accepted for older maps): not used; a seeded cluster's masters
//!   get config epochs 1, 2, … in the map's order.
//!
//! A map is valid when it has at least one master, ids and addresses are unique (replicas
//! included), every replica's master is a master of the map, and every slot 0–16383 is owned
//! by exactly one master.

use std::fmt;

use super::slot::{MAX_SLOT, SLOTS};

/// One node of the map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// 40 lowercase hexadecimal characters.
    pub id: String,
    /// The host clients connect to.
    pub host: String,
    /// The port clients connect to.
    pub port: u16,
    /// The cluster bus port, when the map gives one (`host:port@cport`; 0: not given).
    pub cport: u16,
    /// Owned slots as sorted, merged, inclusive ranges (none for a replica).
    pub ranges: Vec<(u16, u16)>,
    /// For a replica, the index (in the map's `nodes`) of its master.
    pub master: Option<usize>,
}

impl Node {
    /// `host:port` as MOVED replies and CLUSTER NODES show it.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// True for a replica.
    pub fn is_replica(&self) -> bool {
        self.master.is_some()
    }

    /// Number of slots the node owns.
    pub fn slot_count(&self) -> usize {
        self.ranges
            .iter()
            .map(|&(a, b)| usize::from(b - a) + 1)
            .sum()
    }
}

/// A validated slot map.
#[derive(Clone, PartialEq, Eq)]
pub struct SlotMap {
    /// The epoch the map states, if it states one.
    pub epoch: Option<u64>,
    /// The nodes, in the order the map lists them.
    pub nodes: Vec<Node>,
    /// For every slot, the index of its owner in `nodes`.
    owner: Box<[u16]>,
}

impl fmt::Debug for SlotMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlotMap")
            .field("epoch", &self.epoch)
            .field("nodes", &self.nodes)
            .finish()
    }
}

/// Why a map was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MapError(pub String);

fn err<T>(line: usize, msg: impl fmt::Display) -> Result<T, MapError> {
    Err(MapError(format!("line {line}: {msg}")))
}

fn parse_id(line: usize, id: &str) -> Result<String, MapError> {
    if !valid_id(id) {
        return err(
            line,
            format_args!("node id '{id}' must be 40 hexadecimal characters, like a Redis node id"),
        );
    }
    Ok(id.to_ascii_lowercase())
}

/// True for a valid node id: 40 hexadecimal characters.
pub fn valid_id(id: &str) -> bool {
    id.len() == 40 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

fn parse_slot(line: usize, s: &str) -> Result<u16, MapError> {
    match s.parse::<u16>() {
        Ok(n) if n <= MAX_SLOT => Ok(n),
        _ => err(
            line,
            format_args!("'{s}' is not a slot number (slots are 0-{MAX_SLOT})"),
        ),
    }
}

fn parse_ranges(line: usize, words: &[&str]) -> Result<Vec<(u16, u16)>, MapError> {
    let mut ranges = Vec::new();
    for part in words
        .iter()
        .flat_map(|w| w.split(','))
        .filter(|p| !p.is_empty())
    {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (parse_slot(line, a)?, parse_slot(line, b)?),
            None => {
                let s = parse_slot(line, part)?;
                (s, s)
            }
        };
        if a > b {
            return err(
                line,
                format_args!("slot range '{part}' ends before it starts"),
            );
        }
        ranges.push((a, b));
    }
    Ok(ranges)
}

fn parse_addr(line: usize, s: &str) -> Result<(String, u16, u16), MapError> {
    let bad = || {
        err(
            line,
            format_args!("'{s}' is not host:port or host:port@cport"),
        )
    };
    let (addr, cport) = match s.split_once('@') {
        Some((addr, c)) => match c.parse::<u16>() {
            Ok(c) if c != 0 => (addr, c),
            _ => return bad(),
        },
        None => (s, 0),
    };
    let Some((host, port)) = addr.rsplit_once(':') else {
        return bad();
    };
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let Ok(port) = port.parse::<u16>() else {
        return bad();
    };
    if host.is_empty() || port == 0 {
        return bad();
    }
    Ok((host.to_string(), port, cport))
}

/// Sorts and merges ranges (adjacent ones too).
fn merge(mut ranges: Vec<(u16, u16)>) -> Vec<(u16, u16)> {
    ranges.sort_unstable();
    let mut out: Vec<(u16, u16)> = Vec::with_capacity(ranges.len());
    for (a, b) in ranges {
        match out.last_mut() {
            Some(last) if u32::from(a) <= u32::from(last.1) + 1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// `a-b` or `a` for a one-slot range.
pub fn range_text(a: u16, b: u16) -> String {
    if a == b {
        a.to_string()
    } else {
        format!("{a}-{b}")
    }
}

const NONE: u16 = u16::MAX;

impl SlotMap {
    /// Parses and validates a map.
    pub fn parse(text: &str) -> Result<SlotMap, MapError> {
        let mut epoch = None;
        // Each node with the line it came from and, for a replica, its master's id.
        let mut nodes: Vec<(usize, Node, Option<String>)> = Vec::new();
        for (n, raw_line) in text.lines().enumerate() {
            let line = n + 1;
            let uncommented = raw_line.split('#').next().unwrap_or("");
            for entry in uncommented.split(';') {
                let words: Vec<&str> = entry.split_whitespace().collect();
                match words.as_slice() {
                    [] => {}
                    ["epoch", e] => {
                        if epoch.is_some() {
                            return err(line, "the epoch is given twice");
                        }
                        let Ok(e) = e.parse::<u64>() else {
                            return err(line, format_args!("'{e}' is not an epoch number"));
                        };
                        epoch = Some(e);
                    }
                    ["epoch", ..] => return err(line, "expected 'epoch <number>'"),
                    ["node", id, addr, slots @ ..] => {
                        let id = parse_id(line, id)?;
                        let (host, port, cport) = parse_addr(line, addr)?;
                        let ranges = parse_ranges(line, slots)?;
                        nodes.push((
                            line,
                            Node {
                                id,
                                host,
                                port,
                                cport,
                                ranges,
                                master: None,
                            },
                            None,
                        ));
                    }
                    ["node", ..] => {
                        return err(line, "expected 'node <id> <host>:<port> [<slots> ...]'");
                    }
                    ["replica", id, addr, master] => {
                        let id = parse_id(line, id)?;
                        let (host, port, cport) = parse_addr(line, addr)?;
                        let master = parse_id(line, master)?;
                        nodes.push((
                            line,
                            Node {
                                id,
                                host,
                                port,
                                cport,
                                ranges: Vec::new(),
                                master: None,
                            },
                            Some(master),
                        ));
                    }
                    ["replica", ..] => {
                        return err(
                            line,
                            "expected 'replica <id> <host>:<port> <master-id>' (a replica owns no slots)",
                        );
                    }
                    [other, ..] => {
                        return err(
                            line,
                            format_args!(
                                "unknown entry '{other}' (expected 'node <id> <host>:<port> <slots>', 'replica <id> <host>:<port> <master-id>' or 'epoch <n>')"
                            ),
                        );
                    }
                }
            }
        }
        if nodes.is_empty() {
            return Err(MapError("the map has no nodes".into()));
        }
        for (i, (line, node, _)) in nodes.iter().enumerate() {
            let (id, host, port) = (&node.id, &node.host, node.port);
            for (other_line, other, _) in &nodes[..i] {
                if &other.id == id {
                    return err(
                        *line,
                        format_args!("node id {id} is already used on line {other_line}"),
                    );
                }
                if &other.host == host && other.port == port {
                    return err(
                        *line,
                        format_args!("address {host}:{port} is already used on line {other_line}"),
                    );
                }
            }
        }
        // Every replica's master: a master of the map (Redis Cluster has no chains).
        let mut masters: Vec<Option<usize>> = Vec::with_capacity(nodes.len());
        for (line, node, master) in &nodes {
            let Some(master) = master else {
                masters.push(None);
                continue;
            };
            let id = &node.id;
            match nodes.iter().position(|(_, n, _)| &n.id == master) {
                None => {
                    return err(
                        *line,
                        format_args!("replica {id} names master {master}, which is not in the map"),
                    );
                }
                Some(m) if nodes[m].2.is_some() => {
                    return err(
                        *line,
                        format_args!(
                            "replica {id} names {master} as its master, but {master} is itself a replica (line {}); a replica's master must be a node of the map",
                            nodes[m].0
                        ),
                    );
                }
                Some(m) => masters.push(Some(m)),
            }
        }
        if masters.iter().all(Option::is_some) {
            return Err(MapError("the map has no masters ('node' entries)".into()));
        }
        let mut owner = vec![NONE; SLOTS].into_boxed_slice();
        for (index, (line, node, _)) in nodes.iter().enumerate() {
            let id = &node.id;
            for &(a, b) in &node.ranges {
                for s in a..=b {
                    let prev = owner[usize::from(s)];
                    if prev == NONE {
                        owner[usize::from(s)] = index as u16;
                        continue;
                    }
                    if prev as usize == index {
                        return err(
                            *line,
                            format_args!("slot {s} is listed twice for node {id}"),
                        );
                    }
                    let mut end = s;
                    while end < b && owner[usize::from(end) + 1] == prev {
                        end += 1;
                    }
                    let (prev_line, prev_id) =
                        (&nodes[prev as usize].0, &nodes[prev as usize].1.id);
                    return err(
                        *line,
                        format_args!(
                            "slots {} of node {id} are already owned by node {prev_id} (line {prev_line}); every slot must have exactly one owner",
                            range_text(s, end)
                        ),
                    );
                }
            }
        }
        let gaps = unowned_ranges(&owner);
        if !gaps.is_empty() {
            let total: usize = gaps.iter().map(|&(a, b)| usize::from(b - a) + 1).sum();
            let shown: Vec<String> = gaps
                .iter()
                .take(4)
                .map(|&(a, b)| range_text(a, b))
                .collect();
            let more = if gaps.len() > 4 { ", ..." } else { "" };
            return Err(MapError(format!(
                "{total} slots are not assigned to any node ({}{more}); every slot 0-{MAX_SLOT} must have exactly one owner",
                shown.join(", ")
            )));
        }
        Ok(SlotMap {
            epoch,
            nodes: nodes
                .into_iter()
                .zip(masters)
                .map(|((_, node, _), master)| Node {
                    ranges: merge(node.ranges),
                    master,
                    ..node
                })
                .collect(),
            owner,
        })
    }

    /// Reads and parses a map file.
    pub fn load(path: &str) -> Result<SlotMap, MapError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| MapError(format!("cannot read the cluster map '{path}': {e}")))?;
        SlotMap::parse(&text).map_err(|e| MapError(format!("cluster map '{path}': {e}")))
    }

    /// A map made from the cluster bus's view: `owners[slot]` is an index into `nodes`, or
    /// None for a slot no node serves. Not validated as a map file is: the bus's view may
    /// leave slots unassigned while a cluster is being built.
    pub fn from_view(epoch: u64, nodes: Vec<Node>, owners: &[Option<usize>]) -> SlotMap {
        let owner = owners
            .iter()
            .map(|o| o.map_or(NONE, |i| i as u16))
            .collect();
        SlotMap {
            epoch: Some(epoch),
            nodes,
            owner,
        }
    }

    /// The owner of `slot`, if any (a bus view may leave slots unassigned).
    #[inline]
    pub fn owner_of(&self, slot: u16) -> Option<&Node> {
        let i = self.owner.get(usize::from(slot)).copied().unwrap_or(NONE);
        (i != NONE).then(|| &self.nodes[usize::from(i)])
    }

    /// The index (in `nodes`) of the owner of `slot`.
    #[inline]
    pub fn owner_index(&self, slot: u16) -> usize {
        usize::from(self.owner[usize::from(slot)])
    }

    /// The owner of `slot`.
    #[inline]
    pub fn owner(&self, slot: u16) -> &Node {
        &self.nodes[self.owner_index(slot)]
    }

    /// The node with id `id`.
    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id.eq_ignore_ascii_case(id))
    }

    /// The replicas of the node at index `master`, in the map's order, with their indexes.
    pub fn replicas_of(&self, master: usize) -> impl Iterator<Item = (usize, &Node)> {
        self.nodes
            .iter()
            .enumerate()
            .filter(move |(_, n)| n.master == Some(master))
    }

    /// Every owned run of slots in slot order: (start, end, owner index).
    pub fn runs(&self) -> Vec<(u16, u16, usize)> {
        let mut runs: Vec<(u16, u16, usize)> = Vec::new();
        for (s, &o) in self.owner.iter().enumerate() {
            let s = s as u16;
            match runs.last_mut() {
                Some(last) if last.2 == usize::from(o) && last.1 + 1 == s => last.1 = s,
                _ => runs.push((s, s, usize::from(o))),
            }
        }
        runs
    }
}

fn unowned_ranges(owner: &[u16]) -> Vec<(u16, u16)> {
    let mut gaps: Vec<(u16, u16)> = Vec::new();
    for (s, &o) in owner.iter().enumerate() {
        if o != NONE {
            continue;
        }
        let s = s as u16;
        match gaps.last_mut() {
            Some(last) if last.1 + 1 == s => last.1 = s,
            _ => gaps.push((s, s)),
        }
    }
    gaps
}

impl fmt::Display for SlotMap {
    /// The map in its file format (the epoch first, if it states one).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(e) = self.epoch {
            writeln!(f, "epoch {e}")?;
        }
        for n in &self.nodes {
            let host = if n.host.contains(':') {
                format!("[{}]", n.host)
            } else {
                n.host.clone()
            };
            let cport = if n.cport == 0 {
                String::new()
            } else {
                format!("@{}", n.cport)
            };
            if let Some(m) = n.master {
                writeln!(
                    f,
                    "replica {} {host}:{}{cport} {}",
                    n.id, n.port, self.nodes[m].id
                )?;
                continue;
            }
            write!(f, "node {} {host}:{}{cport}", n.id, n.port)?;
            for &(a, b) in &n.ranges {
                write!(f, " {}", range_text(a, b))?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";
    const C: &str = "3333333333333333333333333333333333333333";

    fn three() -> String {
        format!(
            "# three nodes\nepoch 4\nnode {A} 127.0.0.1:7001 0-5460\nnode {B} 127.0.0.1:7002 5461-10922 # middle\nnode {C} 127.0.0.1:7003 10923-16383\n"
        )
    }

    #[test]
    fn parses_the_documented_example() {
        let map = SlotMap::parse(&three()).unwrap();
        assert_eq!(map.epoch, Some(4));
        assert_eq!(map.nodes.len(), 3);
        assert_eq!(map.owner(0).id, A);
        assert_eq!(map.owner(5460).id, A);
        assert_eq!(map.owner(5461).id, B);
        assert_eq!(map.owner(16383).port, 7003);
        assert_eq!(
            map.runs(),
            vec![(0, 5460, 0), (5461, 10922, 1), (10923, 16383, 2)]
        );
        // The text form parses back to the same map.
        assert_eq!(SlotMap::parse(&map.to_string()).unwrap(), map);
    }

    #[test]
    fn one_line_form_commas_and_single_slots() {
        let map = SlotMap::parse(&format!(
            "node {A} [::1]:7001 0-99,200 300-16383; node {B} h2:7002 100-199 201-299"
        ))
        .unwrap();
        assert_eq!(map.epoch, None);
        assert_eq!(map.nodes[0].host, "::1");
        assert_eq!(map.nodes[0].ranges, vec![(0, 99), (200, 200), (300, 16383)]);
        assert_eq!(map.owner(150).addr(), "h2:7002");
        assert_eq!(map.owner(200).id, A);
        assert_eq!(map.nodes[1].slot_count(), 199);
    }

    #[test]
    fn adjacent_ranges_merge_and_spare_nodes_are_allowed() {
        let map = SlotMap::parse(&format!(
            "node {A} 127.0.0.1:1 0-10 11-16383\nnode {B} 127.0.0.1:2\n"
        ))
        .unwrap();
        assert_eq!(map.nodes[0].ranges, vec![(0, 16383)]);
        assert!(map.nodes[1].ranges.is_empty());
    }

    fn error(text: &str) -> String {
        SlotMap::parse(text).unwrap_err().0
    }

    #[test]
    fn refuses_gaps_overlaps_and_bad_entries() {
        let gap = error(&format!(
            "node {A} 127.0.0.1:1 0-5000\nnode {B} 127.0.0.1:2 5011-16383"
        ));
        assert!(
            gap.contains("10 slots are not assigned to any node (5001-5010)"),
            "{gap}"
        );
        let overlap = error(&format!(
            "node {A} 127.0.0.1:1 0-5460\nnode {B} 127.0.0.1:2 5000-16383"
        ));
        assert!(
            overlap.starts_with(&format!(
                "line 2: slots 5000-5460 of node {B} are already owned by node {A} (line 1)"
            )),
            "{overlap}"
        );
        assert!(error("node abc 127.0.0.1:1 0-16383").contains("40 hexadecimal"));
        assert!(error(&format!("node {A} 127.0.0.1 0-16383")).contains("not host:port"));
        assert!(error(&format!("node {A} 127.0.0.1:0 0-16383")).contains("not host:port"));
        assert!(error(&format!("node {A} 127.0.0.1:1 0-16384")).contains("'16384' is not a slot"));
        assert!(error(&format!("node {A} 127.0.0.1:1 9-3")).contains("ends before it starts"));
        assert!(error("").contains("no nodes"));
        assert!(error("nodes x").contains("unknown entry 'nodes'"));
        assert!(error("epoch x").contains("not an epoch"));
        let dup = error(&format!(
            "node {A} 127.0.0.1:1 0-16383\nnode {A} 127.0.0.1:2"
        ));
        assert!(dup.contains("already used on line 1"), "{dup}");
        let dup_addr = error(&format!(
            "node {A} 127.0.0.1:1 0-16383\nnode {B} 127.0.0.1:1"
        ));
        assert!(
            dup_addr.contains("address 127.0.0.1:1 is already used"),
            "{dup_addr}"
        );
    }

    const D: &str = "4444444444444444444444444444444444444444";

    #[test]
    fn replicas_name_a_master_of_the_map() {
        let text = format!(
            "epoch 2\nreplica {C} 127.0.0.1:3 {A}\nnode {A} 127.0.0.1:1 0-8191\nnode {B} 127.0.0.1:2 8192-16383\nreplica {D} 127.0.0.1:4 {a}\n",
            a = A.to_ascii_uppercase()
        );
        let map = SlotMap::parse(&text).unwrap();
        assert_eq!(map.nodes[0].master, Some(1));
        assert_eq!(map.nodes[3].master, Some(1));
        assert!(map.nodes[0].is_replica() && !map.nodes[1].is_replica());
        assert_eq!(map.nodes[2].master, None);
        let replicas: Vec<usize> = map.replicas_of(1).map(|(i, _)| i).collect();
        assert_eq!(replicas, vec![0, 3]);
        assert_eq!(map.replicas_of(2).count(), 0);
        assert_eq!(map.owner(0).id, A);
        // The text form keeps the replicas and parses back to the same map.
        let shown = map.to_string();
        assert!(
            shown.contains(&format!("replica {D} 127.0.0.1:4 {A}\n")),
            "{shown}"
        );
        assert_eq!(SlotMap::parse(&shown).unwrap(), map);
        // A master without slots may have replicas; a replica of a replica may not exist.
        let spare = SlotMap::parse(&format!(
            "node {A} 127.0.0.1:1 0-16383; node {B} 127.0.0.1:2; replica {C} 127.0.0.1:3 {B}"
        ))
        .unwrap();
        assert_eq!(spare.nodes[2].master, Some(1));
        let chain = error(&format!(
            "node {A} 127.0.0.1:1 0-16383\nreplica {B} 127.0.0.1:2 {A}\nreplica {C} 127.0.0.1:3 {B}"
        ));
        assert!(
            chain.starts_with(&format!(
                "line 3: replica {C} names {B} as its master, but {B} is itself a replica (line 2)"
            )),
            "{chain}"
        );
        let own = error(&format!(
            "node {A} 127.0.0.1:1 0-16383\nreplica {B} 127.0.0.1:2 {B}"
        ));
        assert!(own.contains("is itself a replica"), "{own}");
        let unknown = error(&format!(
            "node {A} 127.0.0.1:1 0-16383\nreplica {B} 127.0.0.1:2 {C}"
        ));
        assert_eq!(
            unknown,
            format!("line 2: replica {B} names master {C}, which is not in the map")
        );
        // Replicas own no slots, and share the uniqueness of ids and addresses.
        assert!(
            error(&format!(
                "node {A} 127.0.0.1:1 0-16383\nreplica {B} 127.0.0.1:2 {A} 5"
            ))
            .contains("owns no slots")
        );
        assert!(
            error(&format!(
                "node {A} 127.0.0.1:1 0-16383\nreplica {B} 127.0.0.1:1 {A}"
            ))
            .contains("address 127.0.0.1:1 is already used")
        );
        assert!(
            error(&format!(
                "node {A} 127.0.0.1:1 0-16383\nreplica {A} 127.0.0.1:2 {A}"
            ))
            .contains("already used on line 1")
        );
        assert!(error(&format!("replica {B} 127.0.0.1:2 {A}")).contains("not in the map"));
        // The slots still need their masters.
        assert!(
            error(&format!(
                "node {A} 127.0.0.1:1 0-100\nreplica {B} 127.0.0.1:2 {A}"
            ))
            .contains("slots are not assigned")
        );
    }
}
