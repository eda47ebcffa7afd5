//! `nodes.conf` (`cluster-config-file`) in Redis 7.0's format, and the CLUSTER NODES lines it
//! shares with it (Redis's `clusterGenNodeDescription`):
//!
//! ```text
//! <id> <ip>:<port>@<cport>[,<hostname>] <flags> <master-id|-> <ping-sent> <pong-recv> <config-epoch> <connected|disconnected> <slots>...
//! vars currentEpoch <n> lastVoteEpoch <n>
//! ```
//!
//! Flags are `myself,master,slave,fail?,fail,handshake,noaddr,nofailover` (or `noflags`);
//! slots are single numbers or `a-b` ranges; this node's line also lists `[slot->-id]`
//! (migrating) and `[slot-<-id]` (importing). The file omits nodes in handshake and ends
//! with the `vars` line. It is written whole to a temporary file, synced and renamed, so a
//! crash leaves the old one or the new one.

use std::fmt::Write as _;

use super::super::slot::SLOTS;
use super::msg::flag;
use super::state::{BusNode, Settings, State};

/// The flags field.
pub(crate) fn flags_text(flags: u16) -> String {
    let names = [
        (flag::MYSELF, "myself"),
        (flag::MASTER, "master"),
        (flag::SLAVE, "slave"),
        (flag::PFAIL, "fail?"),
        (flag::FAIL, "fail"),
        (flag::HANDSHAKE, "handshake"),
        (flag::NOADDR, "noaddr"),
        (flag::NOFAILOVER, "nofailover"),
    ];
    let shown: Vec<&str> = names
        .iter()
        .filter(|(f, _)| flags & f != 0)
        .map(|(_, n)| *n)
        .collect();
    if shown.is_empty() {
        "noflags".into()
    } else {
        shown.join(",")
    }
}

/// The slot ranges a node owns, as `(first, last)` pairs.
pub(crate) fn ranges(n: &BusNode) -> Vec<(u16, u16)> {
    // Byte by byte: an empty byte is skipped and a full one taken whole, so a node's ranges
    // cost 2,048 steps, not 16,384 (every view and every nodes.conf write asks for them).
    let mut out: Vec<(u16, u16)> = Vec::new();
    let mut add = |a: u16, b: u16| match out.last_mut() {
        Some(last) if last.1 + 1 == a => last.1 = b,
        _ => out.push((a, b)),
    };
    for (i, &byte) in n.slots.0.iter().enumerate() {
        let base = (i * 8) as u16;
        match byte {
            0 => {}
            0xff => add(base, base + 7),
            _ => {
                for bit in 0..8u16 {
                    if byte & (1 << bit) != 0 {
                        add(base + bit, base + bit);
                    }
                }
            }
        }
    }
    out
}

/// One node's line (without the newline).
pub(crate) fn node_line(st: &State, n: &BusNode) -> String {
    let mut line = format!("{} {}:{}@{}", n.name, n.ip, n.port, n.cport);
    if !n.hostname.is_empty() {
        let _ = write!(line, ",{}", n.hostname);
    }
    let master = n.slaveof.as_deref().unwrap_or("-");
    let connected = n.link.is_some() || n.is(flag::MYSELF);
    let _ = write!(
        line,
        " {} {} {} {} {} {}",
        flags_text(n.flags),
        master,
        n.ping_sent,
        if n.is(flag::MYSELF) {
            0
        } else {
            n.pong_received
        },
        n.config_epoch,
        if connected {
            "connected"
        } else {
            "disconnected"
        }
    );
    for (a, b) in ranges(n) {
        if a == b {
            let _ = write!(line, " {a}");
        } else {
            let _ = write!(line, " {a}-{b}");
        }
    }
    if n.is(flag::MYSELF) {
        for (slot, to) in &st.migrating {
            let _ = write!(line, " [{slot}->-{to}]");
        }
        for (slot, from) in &st.importing {
            let _ = write!(line, " [{slot}-<-{from}]");
        }
    }
    line
}

/// CLUSTER NODES: every known node, one line each.
pub(crate) fn nodes_text(st: &State) -> String {
    let mut out = String::new();
    for n in st.nodes.values() {
        out.push_str(&node_line(st, n));
        out.push('\n');
    }
    out
}

/// The file's text.
pub(crate) fn render(st: &State) -> String {
    let mut out = String::new();
    for n in st.nodes.values().filter(|n| !n.is(flag::HANDSHAKE)) {
        out.push_str(&node_line(st, n));
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "vars currentEpoch {} lastVoteEpoch {}",
        st.current_epoch, st.last_vote_epoch
    );
    out
}

/// Writes the file atomically (`fsync`: synced to disk before it replaces the old one; Redis
/// syncs when an epoch or a vote changed, and otherwise leaves it to the OS).
pub(crate) fn save(path: &std::path::Path, st: &State, fsync: bool) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp-sluice");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(render(st).as_bytes())?;
    if fsync {
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

fn parse_flags(text: &str) -> Result<u16, String> {
    let mut f = 0;
    for word in text.split(',') {
        f |= match word {
            "myself" => flag::MYSELF,
            "master" => flag::MASTER,
            "slave" => flag::SLAVE,
            "fail?" => flag::PFAIL,
            "fail" => flag::FAIL,
            "handshake" => flag::HANDSHAKE,
            "noaddr" => flag::NOADDR,
            "nofailover" => flag::NOFAILOVER,
            "noflags" => 0,
            other => return Err(format!("unknown node flag '{other}'")),
        };
    }
    Ok(f)
}

fn valid_name(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Reads a file written by this node or by redis-server 7.0 into a state (links down, every
/// peer to be reconnected). An error names the line.
pub(crate) fn parse(text: &str, settings: Settings, now: u64) -> Result<State, String> {
    let mut st: Option<State> = None;
    let mut others: Vec<BusNode> = Vec::new();
    let mut migrating = Vec::new();
    let mut importing = Vec::new();
    let (mut cur, mut vote) = (0u64, 0u64);
    let mut my_slots: Vec<(u16, u16)> = Vec::new();
    let mut owned: Vec<(String, u16, u16)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let bad = |what: &str| {
            format!(
                "Unrecoverable error: corrupted cluster config file \"{line}\" (line {}: {what})",
                i + 1
            )
        };
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.is_empty() {
            continue;
        }
        if w[0] == "vars" {
            let mut it = w[1..].chunks(2);
            for pair in it.by_ref() {
                if let [k, v] = pair {
                    let v: u64 = v.parse().map_err(|_| bad("bad number"))?;
                    match *k {
                        "currentEpoch" => cur = v,
                        "lastVoteEpoch" => vote = v,
                        _ => {}
                    }
                }
            }
            continue;
        }
        if w.len() < 8 || !valid_name(w[0]) {
            return Err(bad("expected a node line"));
        }
        let addr = w[1].split(',').next().unwrap_or("");
        let hostname = w[1].split_once(',').map(|(_, h)| h).unwrap_or("");
        let (ipport, cport) = addr.split_once('@').ok_or_else(|| bad("no @cport"))?;
        let (ip, port) = ipport.rsplit_once(':').ok_or_else(|| bad("no :port"))?;
        let port: u16 = port.parse().map_err(|_| bad("bad port"))?;
        let cport: u16 = cport.parse().map_err(|_| bad("bad bus port"))?;
        let flags = parse_flags(w[2]).map_err(|e| bad(&e))?;
        let mut n = BusNode::new(w[0].to_ascii_lowercase(), flags, now);
        n.ip = ip.to_string();
        n.port = port;
        n.cport = cport;
        n.hostname = hostname.to_string();
        if w[3] != "-" {
            if !valid_name(w[3]) {
                return Err(bad("bad master id"));
            }
            n.slaveof = Some(w[3].to_ascii_lowercase());
        }
        n.ping_sent = 0;
        n.pong_received = w[5].parse().map_err(|_| bad("bad pong time"))?;
        n.config_epoch = w[6].parse().map_err(|_| bad("bad config epoch"))?;
        for s in &w[8..] {
            if let Some(inner) = s.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
                if let Some((slot, to)) = inner.split_once("->-") {
                    migrating.push((
                        slot.parse::<u16>().map_err(|_| bad("bad slot"))?,
                        to.to_string(),
                    ));
                } else if let Some((slot, from)) = inner.split_once("-<-") {
                    importing.push((
                        slot.parse::<u16>().map_err(|_| bad("bad slot"))?,
                        from.to_string(),
                    ));
                } else {
                    return Err(bad("bad slot entry"));
                }
                continue;
            }
            let (a, b) = match s.split_once('-') {
                Some((a, b)) => (a.parse::<u16>(), b.parse::<u16>()),
                None => (s.parse::<u16>(), s.parse::<u16>()),
            };
            let (Ok(a), Ok(b)) = (a, b) else {
                return Err(bad("bad slot"));
            };
            if a > b || usize::from(b) >= SLOTS {
                return Err(bad("bad slot range"));
            }
            if n.is(flag::MYSELF) {
                my_slots.push((a, b));
            }
            owned.push((n.name.clone(), a, b));
        }
        if n.is(flag::MYSELF) {
            if st.is_some() {
                return Err(bad("a second node is marked myself"));
            }
            let mut s = State::new(n.name.clone(), settings.clone(), now);
            let me = s.nodes.get_mut(&n.name).expect("myself");
            me.flags = n.flags & !(flag::PFAIL | flag::FAIL | flag::HANDSHAKE);
            me.config_epoch = n.config_epoch;
            me.slaveof = n.slaveof.clone();
            if !n.ip.is_empty() && settings.announce_ip.is_empty() {
                me.ip = n.ip.clone();
            }
            st = Some(s);
        } else {
            others.push(n);
        }
    }
    let Some(mut st) = st else {
        return Err("Unrecoverable error: the cluster config file names no node as myself".into());
    };
    for n in others {
        st.nodes.insert(n.name.clone(), n);
    }
    for (name, a, b) in owned {
        for s in a..=b {
            st.set_owner(s, Some(&name));
        }
    }
    let _ = my_slots;
    for (s, to) in migrating {
        st.migrating.insert(s, to);
    }
    for (s, from) in importing {
        st.importing.insert(s, from);
    }
    let max_epoch = st.nodes.values().map(|n| n.config_epoch).max().unwrap_or(0);
    st.current_epoch = cur.max(max_epoch);
    st.last_vote_epoch = vote;
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings::for_tests(23461, 15000)
    }

    /// A file written by redis-server 7.0.15 (two masters, one slot migrating).
    const REDIS_FILE: &str = "\
71dfaa7febd8df9f914571762aa564e7c8579030 127.0.0.1:23462@33462 master - 0 1795791817579 0 connected
3665d898eb3897b42f61fe74eac263fc3f11094a 127.0.0.1:23461@33461 myself,master - 0 0 1 connected 0-100 [5->-71dfaa7febd8df9f914571762aa564e7c8579030]
vars currentEpoch 1 lastVoteEpoch 0
";

    #[test]
    fn reads_a_redis_file_and_writes_it_back() {
        let st = parse(REDIS_FILE, settings(), 1).unwrap();
        assert_eq!(st.myself, "3665d898eb3897b42f61fe74eac263fc3f11094a");
        assert_eq!(st.current_epoch, 1);
        assert_eq!(st.me().config_epoch, 1);
        assert_eq!(st.me().slots.count(), 101);
        assert_eq!(st.owners[100].as_deref(), Some(st.myself.as_str()));
        assert_eq!(st.owners[101], None);
        assert_eq!(
            st.migrating.get(&5).map(String::as_str),
            Some("71dfaa7febd8df9f914571762aa564e7c8579030")
        );
        // Written again: the same lines, the peer now disconnected (no link yet).
        let text = render(&st);
        let again = REDIS_FILE.replace(" 0 connected\n", " 0 disconnected\n");
        let mut a: Vec<&str> = text.lines().collect();
        let mut b: Vec<&str> = again.lines().collect();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b);
        assert_eq!(parse(&text, settings(), 1).unwrap().me().slots.count(), 101);
    }

    #[test]
    fn refuses_corrupt_files() {
        for bad in [
            "garbage\n",
            "71dfaa7febd8df9f914571762aa564e7c8579030 127.0.0.1:1 master - 0 0 0 connected\n",
            "71dfaa7febd8df9f914571762aa564e7c8579030 127.0.0.1:1@2 myself,bogus - 0 0 0 connected\n",
            "71dfaa7febd8df9f914571762aa564e7c8579030 127.0.0.1:1@2 myself - 0 0 0 connected 9-3\n",
            "71dfaa7febd8df9f914571762aa564e7c8579030 127.0.0.1:1@2 master - 0 0 0 connected\n",
        ] {
            assert!(parse(bad, settings(), 1).is_err(), "{bad}");
        }
    }

    #[test]
    fn ranges_are_read_a_byte_at_a_time_as_slot_by_slot() {
        let mut st = parse(REDIS_FILE, settings(), 1).unwrap();
        let me = st.myself.clone();
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        for round in 0..50 {
            let n = st.nodes.get_mut(&me).unwrap();
            for s in 0..SLOTS as u16 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                // Runs, single slots, whole bytes and empty stretches by turns.
                let on = match round % 3 {
                    0 => rng.is_multiple_of(2),
                    1 => (s / 37).is_multiple_of(2),
                    _ => (s / 8).is_multiple_of(3) || s == 16383,
                };
                n.slots.set(s, on);
            }
            let mut want: Vec<(u16, u16)> = Vec::new();
            for s in (0..SLOTS as u16).filter(|&s| n.slots.get(s)) {
                match want.last_mut() {
                    Some(last) if last.1 + 1 == s => last.1 = s,
                    _ => want.push((s, s)),
                }
            }
            assert_eq!(ranges(n), want, "round {round}");
        }
    }

    #[test]
    fn flags_read_back() {
        for f in [
            flag::MYSELF | flag::MASTER,
            flag::SLAVE | flag::PFAIL,
            flag::MASTER | flag::FAIL | flag::NOFAILOVER,
            0,
        ] {
            assert_eq!(parse_flags(&flags_text(f)).unwrap(), f);
        }
    }
}
