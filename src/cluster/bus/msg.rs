//! The cluster bus message format of Redis 7.0 (`clusterMsg` in its `src/cluster.h`):
//! encoding and decoding, nothing else.
//!
//! Every message is one fixed 2256-byte header followed by a body that depends on its type.
//! Integers are big-endian. Offsets (pinned by Redis's `static_assert`s, so every release
//! agrees):
//!
//! ```text
//!    0 sig "RCmb"      4 totlen u32     8 ver u16 (1)   10 port u16     12 type u16
//!   14 count u16      16 currentEpoch  24 configEpoch  32 offset u64
//!   40 sender[40]     80 myslots[2048] 2128 slaveof[40] 2168 myip[46]
//! 2214 extensions u16 2216 reserved[30] 2246 pport u16  2248 cport u16 2250 flags u16
//! 2252 state u8     2253 mflags[3]    2256 body
//! ```
//!
//! Bodies: PING/PONG/MEET carry `count` gossip entries of 104 bytes (name, ping_sent and
//! pong_received in seconds, ip\[46\], port, cport, flags, pport, 2 unused), then, when
//! `extensions` is non-zero, that many extensions (u32 length including its 8-byte header,
//! u16 type, u16 unused, data padded to 8 bytes). Redis 7.0 sends one kind, the hostname
//! (type 0, NUL-terminated); later releases add others, which a 7.0 node skips and so do we.
//! FAIL carries a node name; PUBLISH/PUBLISHSHARD two lengths then channel and message bytes;
//! UPDATE a config epoch, a node name and a slot bitmap; FAILOVER_AUTH_REQUEST/ACK and
//! MFSTART only the header. A slot bitmap has slot `s` at bit `s % 8` of byte `s / 8`.

#![allow(missing_docs)] // Fields and constants are Redis's (`clusterMsg`, `clusterNode`), named as there; the module doc says where.

use super::super::slot::SLOTS;

/// Node names are 40 hexadecimal characters.
pub(crate) const NAMELEN: usize = 40;
/// Size of the header, where every body starts.
pub(crate) const HEADER_LEN: usize = 2256;
/// Size of one gossip entry.
pub(crate) const GOSSIP_LEN: usize = 104;
/// Bytes of a slot bitmap.
pub(crate) const BITMAP_LEN: usize = SLOTS / 8;
/// Room for an IP address text (Redis's NET_IP_STR_LEN).
const IP_LEN: usize = 46;
/// The largest message accepted from a peer. Redis sets no limit; a PUBLISH larger than this
/// is dropped (and the link closed) rather than buffered without bound.
pub(crate) const MAX_MESSAGE: usize = 64 << 20;

/// Message types.
pub(crate) mod kind {
    pub(crate) const PING: u16 = 0;
    pub(crate) const PONG: u16 = 1;
    pub(crate) const MEET: u16 = 2;
    pub(crate) const FAIL: u16 = 3;
    pub(crate) const PUBLISH: u16 = 4;
    pub(crate) const FAILOVER_AUTH_REQUEST: u16 = 5;
    pub(crate) const FAILOVER_AUTH_ACK: u16 = 6;
    pub(crate) const UPDATE: u16 = 7;
    pub(crate) const MFSTART: u16 = 8;
    pub(crate) const MODULE: u16 = 9;
    pub(crate) const PUBLISHSHARD: u16 = 10;
    /// Number of types (for per-type counters).
    pub(crate) const COUNT: usize = 11;

    /// The name CLUSTER INFO uses for a type's counters.
    pub(crate) fn name(t: u16) -> &'static str {
        match t {
            PING => "ping",
            PONG => "pong",
            MEET => "meet",
            FAIL => "fail",
            PUBLISH => "publish",
            FAILOVER_AUTH_REQUEST => "auth-req",
            FAILOVER_AUTH_ACK => "auth-ack",
            UPDATE => "update",
            MFSTART => "mfstart",
            MODULE => "module",
            PUBLISHSHARD => "publishshard",
            _ => "unknown",
        }
    }
}

/// Node flags as the bus carries them (and CLUSTER NODES names them).
pub(crate) mod flag {
    pub(crate) const MASTER: u16 = 1;
    pub(crate) const SLAVE: u16 = 2;
    pub(crate) const PFAIL: u16 = 4;
    pub(crate) const FAIL: u16 = 8;
    pub(crate) const MYSELF: u16 = 16;
    pub(crate) const HANDSHAKE: u16 = 32;
    pub(crate) const NOADDR: u16 = 64;
    pub(crate) const MEET: u16 = 128;
    pub(crate) const MIGRATE_TO: u16 = 256;
    pub(crate) const NOFAILOVER: u16 = 512;
}

/// `mflags[0]` bits.
pub(crate) mod mflag {
    /// The master is paused for a manual failover.
    pub(crate) const PAUSED: u8 = 1;
    /// Vote even though the master is up (CLUSTER FAILOVER FORCE/TAKEOVER).
    pub(crate) const FORCEACK: u8 = 2;
    /// The message carries ping extensions.
    pub(crate) const EXT_DATA: u8 = 4;
}

/// Ping extension types.
pub(crate) mod ext {
    pub(crate) const HOSTNAME: u16 = 0;
}

/// A node name as it travels: 40 bytes.
pub(crate) type Name = [u8; NAMELEN];

/// The all-zero name (a master's `slaveof`).
pub(crate) const NULL_NAME: Name = [0; NAMELEN];

/// A slot bitmap.
#[derive(Clone, PartialEq, Eq)]
pub struct Bitmap(pub Box<[u8; BITMAP_LEN]>);

impl Default for Bitmap {
    fn default() -> Self {
        Bitmap(Box::new([0; BITMAP_LEN]))
    }
}

impl std::fmt::Debug for Bitmap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bitmap({} slots)", self.count())
    }
}

impl Bitmap {
    /// True if `slot` is set.
    #[inline]
    pub fn get(&self, slot: u16) -> bool {
        let s = usize::from(slot);
        self.0[s / 8] & (1 << (s % 8)) != 0
    }

    /// Sets or clears `slot`.
    #[inline]
    pub fn set(&mut self, slot: u16, on: bool) {
        let s = usize::from(slot);
        if on {
            self.0[s / 8] |= 1 << (s % 8);
        } else {
            self.0[s / 8] &= !(1 << (s % 8));
        }
    }

    /// Number of slots set.
    pub fn count(&self) -> usize {
        self.0.iter().map(|b| b.count_ones() as usize).sum()
    }

    /// True when no slot is set.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&b| b == 0)
    }
}

/// The header every message starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub port: u16,
    pub current_epoch: u64,
    pub config_epoch: u64,
    pub offset: u64,
    pub sender: Name,
    pub myslots: Bitmap,
    /// The sender's master, or `NULL_NAME` for a master.
    pub slaveof: Name,
    /// The sender's own idea of its IP (empty when it does not know it).
    pub myip: String,
    pub pport: u16,
    pub cport: u16,
    pub flags: u16,
    /// 0 ok, 1 fail.
    pub state: u8,
    pub mflags: [u8; 3],
}

/// One gossip entry: what the sender knows of another node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gossip {
    pub name: Name,
    /// Seconds (Unix time) the sender last pinged it.
    pub ping_sent: u32,
    /// Seconds (Unix time) the sender last heard its pong.
    pub pong_received: u32,
    pub ip: String,
    pub port: u16,
    pub cport: u16,
    pub flags: u16,
    pub pport: u16,
}

/// One ping extension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ext {
    Hostname(String),
    /// A type this release does not know: skipped.
    Other(u16),
}

/// A message's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// PING, PONG and MEET.
    Ping {
        gossip: Vec<Gossip>,
        exts: Vec<Ext>,
    },
    Fail {
        about: Name,
    },
    Publish {
        channel: Vec<u8>,
        message: Vec<u8>,
    },
    Update {
        config_epoch: u64,
        node: Name,
        slots: Bitmap,
    },
    /// FAILOVER_AUTH_REQUEST/ACK, MFSTART, and MODULE (whose payload is ignored).
    Empty,
}

/// One message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub kind: u16,
    pub header: Header,
    pub body: Body,
}

/// Why bytes are not a valid message. The link is closed, as Redis frees a link whose
/// message fails `clusterIsValidPacket`... except that Redis only drops the message; a
/// peer that sends garbage is not worth keeping either way.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad cluster bus message: {0}")]
pub struct DecodeError(pub &'static str);

fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}
fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}
fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_be_bytes());
}
fn put_str(b: &mut [u8], at: usize, len: usize, s: &str) {
    let bytes = s.as_bytes();
    let n = bytes.len().min(len - 1);
    b[at..at + n].copy_from_slice(&bytes[..n]);
}
fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}
fn str_at(b: &[u8], at: usize, len: usize) -> String {
    let raw = &b[at..at + len];
    let end = raw.iter().position(|&c| c == 0).unwrap_or(len);
    String::from_utf8_lossy(&raw[..end]).into_owned()
}
fn name_at(b: &[u8], at: usize) -> Name {
    let mut n = NULL_NAME;
    n.copy_from_slice(&b[at..at + NAMELEN]);
    n
}

impl Message {
    /// The message's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let h = &self.header;
        let mut body: Vec<u8> = Vec::new();
        let mut count = 0u16;
        let mut extensions = 0u16;
        let mut mflags = h.mflags;
        match &self.body {
            Body::Ping { gossip, exts } => {
                count = gossip.len().min(usize::from(u16::MAX)) as u16;
                for g in gossip.iter().take(usize::from(count)) {
                    let mut e = [0u8; GOSSIP_LEN];
                    e[..NAMELEN].copy_from_slice(&g.name);
                    put_u32(&mut e, 40, g.ping_sent);
                    put_u32(&mut e, 44, g.pong_received);
                    put_str(&mut e, 48, IP_LEN, &g.ip);
                    put_u16(&mut e, 94, g.port);
                    put_u16(&mut e, 96, g.cport);
                    put_u16(&mut e, 98, g.flags);
                    put_u16(&mut e, 100, g.pport);
                    body.extend_from_slice(&e);
                }
                for x in exts {
                    let Ext::Hostname(name) = x else { continue };
                    // NUL-terminated, padded to 8 bytes.
                    let data = name.len() + 1;
                    let padded = data.div_ceil(8) * 8;
                    let total = 8 + padded;
                    let start = body.len();
                    body.resize(start + total, 0);
                    put_u32(&mut body, start, total as u32);
                    put_u16(&mut body, start + 4, ext::HOSTNAME);
                    body[start + 8..start + 8 + name.len()].copy_from_slice(name.as_bytes());
                    extensions += 1;
                }
                if extensions > 0 {
                    mflags[0] |= mflag::EXT_DATA;
                }
            }
            Body::Fail { about } => body.extend_from_slice(about),
            Body::Publish { channel, message } => {
                body.extend_from_slice(&(channel.len() as u32).to_be_bytes());
                body.extend_from_slice(&(message.len() as u32).to_be_bytes());
                body.extend_from_slice(channel);
                body.extend_from_slice(message);
                // Redis sizes the body as at least its 8-byte placeholder.
                if body.len() < 16 {
                    body.resize(16, 0);
                }
            }
            Body::Update {
                config_epoch,
                node,
                slots,
            } => {
                body.extend_from_slice(&config_epoch.to_be_bytes());
                body.extend_from_slice(node);
                body.extend_from_slice(&slots.0[..]);
            }
            Body::Empty => {}
        }
        let total = HEADER_LEN + body.len();
        let mut b = vec![0u8; HEADER_LEN];
        b[..4].copy_from_slice(b"RCmb");
        put_u32(&mut b, 4, total as u32);
        put_u16(&mut b, 8, 1);
        put_u16(&mut b, 10, h.port);
        put_u16(&mut b, 12, self.kind);
        put_u16(&mut b, 14, count);
        put_u64(&mut b, 16, h.current_epoch);
        put_u64(&mut b, 24, h.config_epoch);
        put_u64(&mut b, 32, h.offset);
        b[40..80].copy_from_slice(&h.sender);
        b[80..80 + BITMAP_LEN].copy_from_slice(&h.myslots.0[..]);
        b[2128..2168].copy_from_slice(&h.slaveof);
        put_str(&mut b, 2168, IP_LEN, &h.myip);
        put_u16(&mut b, 2214, extensions);
        put_u16(&mut b, 2246, h.pport);
        put_u16(&mut b, 2248, h.cport);
        put_u16(&mut b, 2250, h.flags);
        b[2252] = h.state;
        b[2253..2256].copy_from_slice(&mflags);
        b.extend_from_slice(&body);
        b
    }

    /// The total length a message announces in its first 8 bytes, once they are there:
    /// `Ok(None)` until then, an error for a bad signature or an impossible length.
    pub fn frame_len(prefix: &[u8]) -> Result<Option<usize>, DecodeError> {
        if prefix.len() < 8 {
            return Ok(None);
        }
        if &prefix[..4] != b"RCmb" {
            return Err(DecodeError("bad signature"));
        }
        let len = u32_at(prefix, 4) as usize;
        if len < 8 {
            return Err(DecodeError("length below 8"));
        }
        if len > MAX_MESSAGE {
            return Err(DecodeError("message too large"));
        }
        Ok(Some(len))
    }

    /// Decodes one whole message (`b` is exactly `totlen` bytes). Checks the lengths as
    /// Redis's `clusterIsValidPacket` does; a message of another protocol version, or of a
    /// type this node does not know, decodes to `Ok(None)` and is ignored, as Redis does.
    pub fn decode(b: &[u8]) -> Result<Option<Message>, DecodeError> {
        if b.len() < 8 || &b[..4] != b"RCmb" {
            return Err(DecodeError("bad signature"));
        }
        if u32_at(b, 4) as usize != b.len() {
            return Err(DecodeError("length mismatch"));
        }
        if b.len() < 16 || u16_at(b, 8) != 1 {
            return Ok(None);
        }
        let t = u16_at(b, 12);
        if usize::from(t) >= kind::COUNT {
            return Ok(None);
        }
        if b.len() < HEADER_LEN {
            return Err(DecodeError("shorter than the header"));
        }
        let count = usize::from(u16_at(b, 14));
        let mut myslots = Bitmap::default();
        myslots.0.copy_from_slice(&b[80..80 + BITMAP_LEN]);
        let header = Header {
            port: u16_at(b, 10),
            current_epoch: u64_at(b, 16),
            config_epoch: u64_at(b, 24),
            offset: u64_at(b, 32),
            sender: name_at(b, 40),
            myslots,
            slaveof: name_at(b, 2128),
            myip: str_at(b, 2168, IP_LEN),
            pport: u16_at(b, 2246),
            cport: u16_at(b, 2248),
            flags: u16_at(b, 2250),
            state: b[2252],
            mflags: [b[2253], b[2254], b[2255]],
        };
        let data = &b[HEADER_LEN..];
        let body = match t {
            kind::PING | kind::PONG | kind::MEET => {
                let gossip_end = count * GOSSIP_LEN;
                if data.len() < gossip_end {
                    return Err(DecodeError("gossip section truncated"));
                }
                let gossip = data[..gossip_end]
                    .chunks_exact(GOSSIP_LEN)
                    .map(|e| Gossip {
                        name: name_at(e, 0),
                        ping_sent: u32_at(e, 40),
                        pong_received: u32_at(e, 44),
                        ip: str_at(e, 48, IP_LEN),
                        port: u16_at(e, 94),
                        cport: u16_at(e, 96),
                        flags: u16_at(e, 98),
                        pport: u16_at(e, 100),
                    })
                    .collect();
                let mut exts = Vec::new();
                let mut at = gossip_end;
                let n = if header.mflags[0] & mflag::EXT_DATA != 0 {
                    u16_at(b, 2214)
                } else {
                    0
                };
                for _ in 0..n {
                    if data.len() < at + 8 {
                        return Err(DecodeError("extension truncated"));
                    }
                    let len = u32_at(data, at) as usize;
                    let typ = u16_at(data, at + 4);
                    if len < 8 || !len.is_multiple_of(8) || data.len() < at + len {
                        return Err(DecodeError("bad extension length"));
                    }
                    let payload = &data[at + 8..at + len];
                    exts.push(match typ {
                        ext::HOSTNAME => Ext::Hostname(str_at(payload, 0, payload.len())),
                        other => Ext::Other(other),
                    });
                    at += len;
                }
                if at != data.len() {
                    return Err(DecodeError("ping length mismatch"));
                }
                Body::Ping { gossip, exts }
            }
            kind::FAIL => {
                if data.len() < NAMELEN {
                    return Err(DecodeError("fail truncated"));
                }
                Body::Fail {
                    about: name_at(data, 0),
                }
            }
            kind::PUBLISH | kind::PUBLISHSHARD => {
                if data.len() < 8 {
                    return Err(DecodeError("publish truncated"));
                }
                let cl = u32_at(data, 0) as usize;
                let ml = u32_at(data, 4) as usize;
                let end = 8usize.saturating_add(cl).saturating_add(ml);
                if data.len() < end {
                    return Err(DecodeError("publish truncated"));
                }
                Body::Publish {
                    channel: data[8..8 + cl].to_vec(),
                    message: data[8 + cl..end].to_vec(),
                }
            }
            kind::UPDATE => {
                if data.len() < 8 + NAMELEN + BITMAP_LEN {
                    return Err(DecodeError("update truncated"));
                }
                let mut slots = Bitmap::default();
                slots
                    .0
                    .copy_from_slice(&data[8 + NAMELEN..8 + NAMELEN + BITMAP_LEN]);
                Body::Update {
                    config_epoch: u64_at(data, 0),
                    node: name_at(data, 8),
                    slots,
                }
            }
            _ => Body::Empty,
        };
        Ok(Some(Message {
            kind: t,
            header,
            body,
        }))
    }
}

/// A name as text (lossy for non-ASCII bytes, which a valid name never has).
pub(crate) fn name_text(n: &Name) -> String {
    String::from_utf8_lossy(n).into_owned()
}

/// A 40-character id as a bus name; None if it is not 40 bytes.
pub(crate) fn name_of(id: &str) -> Option<Name> {
    let mut n = NULL_NAME;
    (id.len() == NAMELEN).then(|| {
        n.copy_from_slice(id.as_bytes());
        n
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A MEET recorded from redis-server 7.0.15 (`cluster-announce-hostname host-a.example`,
    /// slots 1-3, port 23456, no gossip), reduced to its non-zero bytes.
    fn recorded_meet() -> Vec<u8> {
        let mut b = vec![0u8; 2280];
        b[..4].copy_from_slice(b"RCmb");
        b[4..8].copy_from_slice(&[0, 0, 0x08, 0xe8]);
        b[8..16].copy_from_slice(&[0, 1, 0x5b, 0xa0, 0, 2, 0, 0]);
        b[40..80].copy_from_slice(b"d04d48576dd8a57e01a6b1ed36b45c2b74f8ac11");
        b[80] = 0x0e;
        b[2214..2216].copy_from_slice(&[0, 1]);
        b[2248..2256].copy_from_slice(&[0x82, 0xb0, 0, 0x11, 1, 4, 0, 0]);
        b[2256..2264].copy_from_slice(&[0, 0, 0, 0x18, 0, 0, 0, 0]);
        b[2264..2278].copy_from_slice(b"host-a.example");
        b
    }

    #[test]
    fn decodes_a_meet_from_redis_7_0_and_encodes_it_back() {
        let bytes = recorded_meet();
        let m = Message::decode(&bytes).unwrap().unwrap();
        assert_eq!(m.kind, kind::MEET);
        assert_eq!(m.header.port, 23456);
        assert_eq!(m.header.cport, 33456);
        assert_eq!(m.header.flags, flag::MASTER | flag::MYSELF);
        assert_eq!(m.header.state, 1);
        assert_eq!(
            name_text(&m.header.sender),
            "d04d48576dd8a57e01a6b1ed36b45c2b74f8ac11"
        );
        assert!(m.header.myip.is_empty());
        assert_eq!(m.header.slaveof, NULL_NAME);
        assert!(m.header.myslots.get(1) && m.header.myslots.get(3) && !m.header.myslots.get(0));
        assert_eq!(m.header.myslots.count(), 3);
        assert_eq!(
            m.body,
            Body::Ping {
                gossip: vec![],
                exts: vec![Ext::Hostname("host-a.example".into())]
            }
        );
        assert_eq!(m.encode(), bytes);
    }

    #[test]
    fn round_trips_every_body() {
        let mut slots = Bitmap::default();
        slots.set(16383, true);
        slots.set(0, true);
        let header = Header {
            port: 7000,
            current_epoch: 9,
            config_epoch: 3,
            offset: 12345,
            sender: name_of(&"a".repeat(40)).unwrap(),
            myslots: slots.clone(),
            slaveof: name_of(&"b".repeat(40)).unwrap(),
            myip: "127.0.0.1".into(),
            pport: 0,
            cport: 17000,
            flags: flag::SLAVE,
            state: 0,
            mflags: [mflag::FORCEACK, 0, 0],
        };
        let bodies = [
            (
                kind::PING,
                Body::Ping {
                    gossip: vec![Gossip {
                        name: name_of(&"c".repeat(40)).unwrap(),
                        ping_sent: 1,
                        pong_received: 2,
                        ip: "::1".into(),
                        port: 7001,
                        cport: 17001,
                        flags: flag::MASTER | flag::PFAIL,
                        pport: 0,
                    }],
                    exts: vec![],
                },
            ),
            (
                kind::FAIL,
                Body::Fail {
                    about: name_of(&"d".repeat(40)).unwrap(),
                },
            ),
            (
                kind::PUBLISH,
                Body::Publish {
                    channel: b"ch".to_vec(),
                    message: b"a message longer than the placeholder".to_vec(),
                },
            ),
            (
                kind::UPDATE,
                Body::Update {
                    config_epoch: 77,
                    node: name_of(&"e".repeat(40)).unwrap(),
                    slots,
                },
            ),
            (kind::FAILOVER_AUTH_REQUEST, Body::Empty),
        ];
        for (k, body) in bodies {
            let m = Message {
                kind: k,
                header: header.clone(),
                body,
            };
            let bytes = m.encode();
            assert_eq!(Message::frame_len(&bytes[..8]).unwrap(), Some(bytes.len()));
            assert_eq!(Message::decode(&bytes).unwrap().unwrap(), m, "type {k}");
        }
        // A short publish is padded to Redis's placeholder size and still decodes exactly.
        let m = Message {
            kind: kind::PUBLISH,
            header,
            body: Body::Publish {
                channel: b"c".to_vec(),
                message: b"m".to_vec(),
            },
        };
        assert_eq!(m.encode().len(), HEADER_LEN + 16);
        assert_eq!(Message::decode(&m.encode()).unwrap().unwrap(), m);
    }

    #[test]
    fn refuses_or_ignores_what_redis_does() {
        let good = recorded_meet();
        assert!(Message::frame_len(b"XXXX\0\0\0\x10").is_err());
        assert!(Message::frame_len(b"RCmb\xff\xff\xff\xff").is_err());
        assert_eq!(Message::frame_len(b"RCmb").unwrap(), None);
        // Another protocol version: ignored.
        let mut v2 = good.clone();
        v2[9] = 2;
        assert_eq!(Message::decode(&v2).unwrap(), None);
        // A gossip count beyond the body, a bad extension length, a length mismatch.
        let mut bad = good.clone();
        bad[15] = 1;
        assert!(Message::decode(&bad).is_err());
        let mut bad = good.clone();
        bad[2259] = 0x17;
        assert!(Message::decode(&bad).is_err());
        assert!(Message::decode(&good[..2000]).is_err());
        // Every truncation of every prefix is an error, never a panic.
        for cut in 0..good.len() {
            let mut t = good[..cut].to_vec();
            if t.len() >= 8 {
                t[4..8].copy_from_slice(&(cut as u32).to_be_bytes());
            }
            let _ = Message::decode(&t);
        }
    }
}
