//! The geo commands: `GEOADD`, `GEOPOS`, `GEODIST`, `GEOHASH`, `GEOSEARCH`,
//! `GEOSEARCHSTORE`, `GEORADIUS`, `GEORADIUSBYMEMBER` and their `_RO` forms, as Redis 7.0's
//! `geo.c`.
//!
//! A geo set is a sorted set whose scores are 52-bit geohashes ([`hash`]); GEOADD is ZADD
//! with encoded scores (same options, reply and `zadd` event). The searches share one path,
//! [`search`], which follows Redis's `georadiusGeneric` step by step: the source key is
//! read (and type-checked) before any argument is parsed, options are read in one pass with
//! Redis's conditions, then the error checks run in Redis's order. Results are collected cell
//! by cell in Redis's scan order and sorted by distance as Redis sorts them (glibc's stable
//! `qsort` for all of them, Redis's own partial quicksort, [`pqsort`], for the first COUNT),
//! so members at equal distances come back in Redis's order.

pub(crate) mod hash;
mod pqsort;

use bytes::Bytes;

use self::hash::{Shape, ShapeKind};
use crate::commands::zset::{AddArgs, zset_error};
use crate::engine::{
    ArgCursor, Command, CommandSpec as C, Ctx, FindKeys, InfoDoc, KeySpec, KeySpecDoc, run,
    run_borrowed,
};
use crate::error::{CmdError, CmdResult};
use crate::num::{long_double, parse_double, parse_i64};
use crate::protocol::Reply;
use crate::services::notify::class;
use crate::store::Value;
use crate::store::zset::{AddFlags, ScoreRange, SortedSet};

const READ_ACL: &[&str] = &["@read", "@geo", "@slow"];
const WRITE_ACL: &[&str] = &["@write", "@geo", "@slow"];
const SEARCH_WRITE_FLAGS: &[&str] = &["write", "denyoom", "movablekeys"];

/// Redis compares keywords and units with `strcasecmp`, which stops at a NUL byte: only the
/// bytes before the first one count (`"km\0x"` is `km`).
fn c_str(a: &[u8]) -> &[u8] {
    a.iter().position(|&b| b == 0).map_or(a, |n| &a[..n])
}

/// Whether `a` is `keyword` as Redis's `strcasecmp` sees it.
fn keyword_is(a: &[u8], keyword: &str) -> bool {
    c_str(a).eq_ignore_ascii_case(keyword.as_bytes())
}

/// The keys of GEORADIUS (options from `start` = 6) and GEORADIUSBYMEMBER (5): the source,
/// then what Redis 7.0's key specs find (the argument after the first `STORE`, after the
/// first `STOREDIST`), then the key the command really stores into if those miss it (a
/// repeated keyword: the last one wins), so that it is locked too.
fn radius_keys(args: &[&[u8]], start: usize) -> Vec<usize> {
    let after = |keyword: &str| {
        (start..args.len().saturating_sub(1))
            .find(|&i| keyword_is(args[i], keyword))
            .map(|i| i + 1)
    };
    let mut keys = vec![1];
    keys.extend(after("store"));
    keys.extend(after("storedist"));
    if let Some(k) = stored_key(args, start)
        && !keys.contains(&k)
    {
        keys.push(k);
    }
    keys
}

/// The destination [`run_search`] takes for a GEORADIUS form: the option parse without
/// its checks (an option it refuses ends the parse with an error, storing nothing).
fn stored_key(args: &[&[u8]], start: usize) -> Option<usize> {
    let mut key = None;
    let mut i = start;
    while i < args.len() {
        let a = &args[i];
        let has_value = i + 1 < args.len();
        if has_value
            && (keyword_is(a, "store") || keyword_is(a, "storedist") || keyword_is(a, "count"))
        {
            if !keyword_is(a, "count") {
                key = Some(i + 1);
            }
            i += 1;
        }
        i += 1;
    }
    key
}

const GEORADIUS_KEYS: KeySpec = KeySpec::Custom {
    first: 1,
    last: 1,
    step: 1,
    find: |args| radius_keys(args, 6),
};

const GEORADIUSBYMEMBER_KEYS: KeySpec = KeySpec::Custom {
    first: 1,
    last: 1,
    step: 1,
    find: |args| radius_keys(args, 5),
};

const SOURCE: KeySpecDoc = KeySpecDoc::range(&["RO", "access"], 1, 0);

const fn store_spec(keyword: &'static str, startfrom: i64) -> KeySpecDoc {
    KeySpecDoc {
        notes: None,
        flags: &["OW", "update"],
        begin: Some(startfrom),
        keyword: Some(keyword),
        find: FindKeys::Range(0, 1, 0),
    }
}

static GEORADIUS_INFO: InfoDoc = InfoDoc {
    tips: &[],
    key_specs: &[SOURCE, store_spec("STORE", 6), store_spec("STOREDIST", 6)],
};
static GEORADIUSBYMEMBER_INFO: InfoDoc = InfoDoc {
    tips: &[],
    key_specs: &[SOURCE, store_spec("STORE", 5), store_spec("STOREDIST", 5)],
};
static GEOSEARCHSTORE_INFO: InfoDoc = InfoDoc {
    tips: &[],
    key_specs: &[
        KeySpecDoc::range(&["OW", "update"], 1, 0),
        KeySpecDoc::range(&["RO", "access"], 2, 0),
    ],
};

/// The geo commands, with Redis 7.0's arity, flags, key positions and ACL categories.
pub(crate) static COMMANDS: &[C] = &[
    C::new(
        "geoadd",
        -5,
        &["write", "denyoom"],
        C::keys(1, 1, 1),
        |c, a| run_borrowed::<GeoAdd>(c, a),
    )
    .with_effect(crate::repl::effects::Effect::Handled)
    .with_acl(WRITE_ACL),
    C::new("geopos", -2, &["readonly"], C::keys(1, 1, 1), run::<GeoPos>).with_acl(READ_ACL),
    C::new(
        "geodist",
        -4,
        &["readonly"],
        C::keys(1, 1, 1),
        run::<GeoDist>,
    )
    .with_acl(READ_ACL),
    C::new(
        "geohash",
        -2,
        &["readonly"],
        C::keys(1, 1, 1),
        run::<GeoHash>,
    )
    .with_acl(READ_ACL),
    C::new(
        "georadius",
        -6,
        SEARCH_WRITE_FLAGS,
        GEORADIUS_KEYS,
        |c, a| search(c, a, Flavor::Radius),
    )
    .with_effect(crate::repl::effects::Effect::Handled)
    .with_acl(WRITE_ACL)
    .with_info(&GEORADIUS_INFO),
    C::new(
        "georadius_ro",
        -6,
        &["readonly"],
        C::keys(1, 1, 1),
        |c, a| search(c, a, Flavor::RadiusRo),
    )
    .with_acl(READ_ACL),
    C::new(
        "georadiusbymember",
        -5,
        SEARCH_WRITE_FLAGS,
        GEORADIUSBYMEMBER_KEYS,
        |c, a| search(c, a, Flavor::ByMember),
    )
    .with_effect(crate::repl::effects::Effect::Handled)
    .with_acl(WRITE_ACL)
    .with_info(&GEORADIUSBYMEMBER_INFO),
    C::new(
        "georadiusbymember_ro",
        -5,
        &["readonly"],
        C::keys(1, 1, 1),
        |c, a| search(c, a, Flavor::ByMemberRo),
    )
    .with_acl(READ_ACL),
    C::new("geosearch", -7, &["readonly"], C::keys(1, 1, 1), |c, a| {
        search(c, a, Flavor::Search)
    })
    .with_acl(READ_ACL),
    C::new(
        "geosearchstore",
        -8,
        &["write", "denyoom"],
        C::keys(1, 2, 1),
        |c, a| search(c, a, Flavor::SearchStore),
    )
    .with_effect(crate::repl::effects::Effect::Handled)
    .with_acl(WRITE_ACL)
    .with_info(&GEOSEARCHSTORE_INFO),
];

/// Redis's `extractLongLatOrReply`: two doubles within the Mercator limits.
fn lon_lat(lon: &[u8], lat: &[u8]) -> CmdResult<(f64, f64)> {
    let lon = parse_double(lon).ok_or(CmdError::NotFloat)?;
    let lat = parse_double(lat).ok_or(CmdError::NotFloat)?;
    if !(hash::LONG_MIN..=hash::LONG_MAX).contains(&lon)
        || !(hash::LAT_MIN..=hash::LAT_MAX).contains(&lat)
    {
        return Err(CmdError::owned(format!(
            "ERR invalid longitude,latitude pair {lon:.6},{lat:.6}"
        )));
    }
    Ok((lon, lat))
}

/// Meters per unit (`m`, `km`, `ft`, `mi`, any case).
fn unit(u: &[u8]) -> CmdResult<f64> {
    const UNITS: [(&[u8], f64); 4] = [
        (b"m", 1.0),
        (b"km", 1000.0),
        (b"ft", 0.3048),
        (b"mi", 1609.34),
    ];
    UNITS
        .iter()
        .find(|(name, _)| c_str(u).eq_ignore_ascii_case(name))
        .map(|&(_, m)| m)
        .ok_or(CmdError::msg(
            "ERR unsupported unit provided. please use M, KM, FT, MI",
        ))
}

/// `radius unit`: the radius (in the unit) and meters per unit.
fn radius(r: &[u8], u: &[u8]) -> CmdResult<(f64, f64)> {
    let r = parse_double(r).ok_or(CmdError::msg("ERR need numeric radius"))?;
    if r < 0.0 {
        return Err(CmdError::msg("ERR radius cannot be negative"));
    }
    Ok((r, unit(u)?))
}

/// `width height unit`.
fn box_size(w: &[u8], h: &[u8], u: &[u8]) -> CmdResult<(f64, f64, f64)> {
    let w = parse_double(w).ok_or(CmdError::msg("ERR need numeric width"))?;
    let h = parse_double(h).ok_or(CmdError::msg("ERR need numeric height"))?;
    if h < 0.0 || w < 0.0 {
        return Err(CmdError::msg("ERR height or width cannot be negative"));
    }
    Ok((w, h, unit(u)?))
}

/// A coordinate as Redis's `addReplyHumanLongDouble` writes it.
fn coordinate(v: f64) -> Reply {
    Reply::DoubleText(Bytes::from(long_double::format_human(
        long_double::from_f64(v),
    )))
}

/// A distance as Redis's `addReplyDoubleDistance` writes it: a bulk string in both protocols.
fn distance_reply(d: f64) -> Reply {
    Reply::Bulk(Bytes::from(hash::format_distance(d)))
}

/// The geo set at `key` for a read: `None` if missing, WRONGTYPE for another type.
fn read_geo<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> CmdResult<Option<&'c SortedSet>> {
    let (db, now) = (ctx.db(), ctx.now_ms);
    match ctx.store.read_value(db, key, now) {
        None => Ok(None),
        Some(Value::ZSet(z)) => Ok(Some(z)),
        Some(_) => Err(CmdError::WrongType),
    }
}

/// `GEOADD key [NX|XX] [CH] longitude latitude member [...]`: ZADD with geohash scores.
#[derive(Debug)]
pub(crate) struct GeoAdd<'a> {
    add: AddArgs<'a>,
    /// What replicas get when a member was added or moved: `ZADD key [options] score
    /// member …`, as Redis rewrites GEOADD.
    zadd: Vec<Bytes>,
}

impl<'a> Command<'a> for GeoAdd<'a> {
    fn parse(a: &mut ArgCursor<'a>) -> CmdResult<Self> {
        let key = a.next()?;
        let (mut nx, mut xx, mut ch) = (false, false, false);
        let mut options = Vec::new();
        while let Some(opt) = a.peek() {
            if keyword_is(opt, "nx") {
                nx = true;
            } else if keyword_is(opt, "xx") {
                xx = true;
            } else if keyword_is(opt, "ch") {
                ch = true;
            } else {
                break;
            }
            options.push(a.next_owned()?);
        }
        let rest = a.rest();
        // No triple at all reaches ZADD in Redis, which answers the same syntax error.
        if !rest.len().is_multiple_of(3) || (xx && nx) || rest.is_empty() {
            return Err(CmdError::Syntax);
        }
        let pairs: smallvec::SmallVec<[(f64, &[u8]); 2]> = rest
            .chunks_exact(3)
            .map(|t| {
                let (lon, lat) = lon_lat(t[0], t[1])?;
                let score = hash::encode_wgs84(lon, lat).unwrap_or(0);
                Ok((score as f64, t[2]))
            })
            .collect::<CmdResult<_>>()?;
        let flags = AddFlags {
            nx,
            xx,
            ..AddFlags::default()
        };
        let mut zadd = Vec::with_capacity(2 + options.len() + pairs.len() * 2);
        zadd.push(Bytes::from_static(b"zadd"));
        zadd.push(Bytes::copy_from_slice(key));
        zadd.extend(options.iter().cloned());
        for (score, member) in &pairs {
            zadd.push(Bytes::from((*score as u64).to_string()));
            zadd.push(Bytes::copy_from_slice(member));
        }
        Ok(GeoAdd {
            add: AddArgs {
                key,
                flags,
                ch,
                pairs,
            },
            zadd,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (reply, changed) = self.add.apply_counting(ctx);
        if changed > 0 && crate::commands::hashttl::propagating(ctx) {
            let db = ctx.db();
            ctx.propagate.push((db, self.zadd));
        }
        reply
    }
}

/// `GEOPOS key [member ...]`
#[derive(Debug)]
pub(crate) struct GeoPos {
    key: Bytes,
    members: Vec<Bytes>,
}

impl Command<'_> for GeoPos {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(GeoPos {
            key: a.next_owned()?,
            members: crate::engine::args::owned(a.rest()),
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let z = read_geo(ctx, &self.key)?;
        Ok(Reply::Array(
            self.members
                .iter()
                .map(|m| match z.and_then(|z| z.score(m)) {
                    None => Reply::NullArray,
                    Some(score) => {
                        let (lon, lat) = hash::decode_score(score);
                        Reply::Array(vec![coordinate(lon), coordinate(lat)])
                    }
                })
                .collect(),
        ))
    }
}

/// `GEOHASH key [member ...]`
#[derive(Debug)]
pub(crate) struct GeoHash {
    key: Bytes,
    members: Vec<Bytes>,
}

impl Command<'_> for GeoHash {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(GeoHash {
            key: a.next_owned()?,
            members: crate::engine::args::owned(a.rest()),
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let z = read_geo(ctx, &self.key)?;
        Ok(Reply::Array(
            self.members
                .iter()
                .map(|m| match z.and_then(|z| z.score(m)) {
                    None => Reply::Null,
                    Some(score) => {
                        Reply::Bulk(Bytes::copy_from_slice(&hash::standard_geohash(score)))
                    }
                })
                .collect(),
        ))
    }
}

/// `GEODIST key member1 member2 [M|KM|FT|MI]`
#[derive(Debug)]
pub(crate) struct GeoDist {
    key: Bytes,
    a: Bytes,
    b: Bytes,
    to_meters: f64,
}

impl Command<'_> for GeoDist {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let key = a.next_owned()?;
        let m1 = a.next_owned()?;
        let m2 = a.next_owned()?;
        let to_meters = match a.remaining() {
            0 => 1.0,
            1 => unit(a.next()?)?,
            _ => return Err(CmdError::Syntax),
        };
        Ok(GeoDist {
            key,
            a: m1,
            b: m2,
            to_meters,
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let Some(z) = read_geo(ctx, &self.key)? else {
            return Ok(Reply::Null);
        };
        let (Some(s1), Some(s2)) = (z.score(&self.a), z.score(&self.b)) else {
            return Ok(Reply::Null);
        };
        let (p1, p2) = (hash::decode_score(s1), hash::decode_score(s2));
        Ok(distance_reply(
            hash::distance(p1.0, p1.1, p2.0, p2.1) / self.to_meters,
        ))
    }
}

/// Which search command runs [`search`] (Redis's `georadiusGeneric` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavor {
    /// GEORADIUS: around coordinates, STORE/STOREDIST allowed.
    Radius,
    /// GEORADIUS_RO.
    RadiusRo,
    /// GEORADIUSBYMEMBER.
    ByMember,
    /// GEORADIUSBYMEMBER_RO.
    ByMemberRo,
    /// GEOSEARCH.
    Search,
    /// GEOSEARCHSTORE: the destination first, STOREDIST a flag.
    SearchStore,
}

impl Flavor {
    fn is_search(self) -> bool {
        matches!(self, Flavor::Search | Flavor::SearchStore)
    }
    fn may_store(self) -> bool {
        matches!(self, Flavor::Radius | Flavor::ByMember)
    }
}

/// The ordering of the results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// One member found in the search area.
struct Point {
    member: Bytes,
    lon: f64,
    lat: f64,
    /// Meters from the centre.
    dist: f64,
    score: f64,
}

fn search(ctx: &mut Ctx<'_>, args: &[&[u8]], flavor: Flavor) -> Reply {
    match run_search(ctx, args, flavor) {
        Ok(r) => r,
        Err(e) => e.into(),
    }
}

/// The position of `member` in `z`, or Redis's error for a missing member.
fn member_position(z: &SortedSet, member: &[u8]) -> CmdResult<(f64, f64)> {
    z.score(member)
        .map(hash::decode_score)
        .ok_or(CmdError::msg("ERR could not decode requested zset member"))
}

fn run_search(ctx: &mut Ctx<'_>, args: &[&[u8]], flavor: Flavor) -> CmdResult<Reply> {
    let zlimits = ctx.shared.live.zset_limits();
    // The table's arity guarantees the fixed arguments; a missing one reads as empty.
    let arg = |i: usize| args.get(i).map_or(&[][..], |b| &b[..]);
    let owned = |i: usize| args.get(i).cloned().unwrap_or_default();
    let src = arg(if flavor == Flavor::SearchStore { 2 } else { 1 });
    let z = read_geo(ctx, src)?;

    let mut center = (0.0, 0.0);
    let mut conversion = 0.0;
    let mut kind = ShapeKind::Radius(0.0);
    let mut storekey: Option<Bytes> = None;
    let base = match flavor {
        Flavor::Radius | Flavor::RadiusRo => {
            center = lon_lat(arg(2), arg(3))?;
            let (r, c) = radius(arg(4), arg(5))?;
            (kind, conversion) = (ShapeKind::Radius(r), c);
            6
        }
        Flavor::ByMember | Flavor::ByMemberRo => {
            // Without the key Redis reads neither the member nor the radius.
            if let Some(z) = z {
                center = member_position(z, arg(2))?;
                let (r, c) = radius(arg(3), arg(4))?;
                (kind, conversion) = (ShapeKind::Radius(r), c);
            }
            5
        }
        Flavor::Search => 2,
        Flavor::SearchStore => {
            storekey = Some(Bytes::copy_from_slice(owned(1)));
            3
        }
    };

    let (mut withdist, mut withhash, mut withcoords) = (false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut sort = Sort::None;
    let mut any = false;
    let mut count: i64 = 0;
    let mut storedist = false;
    let remaining = args.len().saturating_sub(base);
    let mut i = 0;
    while i < remaining {
        let a = arg(base + i);
        let is = |k: &str| keyword_is(a, k);
        if is("withdist") {
            withdist = true;
        } else if is("withhash") {
            withhash = true;
        } else if is("withcoord") {
            withcoords = true;
        } else if is("any") {
            any = true;
        } else if is("asc") {
            sort = Sort::Asc;
        } else if is("desc") {
            sort = Sort::Desc;
        } else if is("count") && i + 1 < remaining {
            count = parse_i64(arg(base + i + 1)).ok_or(CmdError::NotInteger)?;
            if count <= 0 {
                return Err(CmdError::msg("ERR COUNT must be > 0"));
            }
            i += 1;
        } else if (is("store") || is("storedist")) && i + 1 < remaining && flavor.may_store() {
            // `radius_keys` locked this key (it follows this parse).
            storekey = Some(Bytes::copy_from_slice(owned(base + i + 1)));
            storedist = is("storedist");
            i += 1;
        } else if is("storedist") && flavor == Flavor::SearchStore {
            storedist = true;
        } else if is("frommember") && i + 1 < remaining && flavor.is_search() && !fromloc {
            // Without the key the member is not looked up; the reply is empty anyway.
            if let Some(z) = z {
                center = member_position(z, arg(base + i + 1))?;
            }
            frommember = true;
            i += 1;
        } else if is("fromlonlat") && i + 2 < remaining && flavor.is_search() && !frommember {
            center = lon_lat(arg(base + i + 1), arg(base + i + 2))?;
            fromloc = true;
            i += 2;
        } else if is("byradius") && i + 2 < remaining && flavor.is_search() && !bybox {
            let (r, c) = radius(arg(base + i + 1), arg(base + i + 2))?;
            (kind, conversion) = (ShapeKind::Radius(r), c);
            byradius = true;
            i += 2;
        } else if is("bybox") && i + 3 < remaining && flavor.is_search() && !byradius {
            let (width, height, c) =
                box_size(arg(base + i + 1), arg(base + i + 2), arg(base + i + 3))?;
            (kind, conversion) = (ShapeKind::Box { width, height }, c);
            bybox = true;
            i += 3;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }

    if storekey.is_some() && (withdist || withhash || withcoords) {
        return Err(CmdError::owned(format!(
            "ERR {} is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
            if flavor == Flavor::SearchStore {
                "GEOSEARCHSTORE"
            } else {
                "STORE option in GEORADIUS"
            }
        )));
    }
    let name = String::from_utf8_lossy(arg(0));
    if flavor.is_search() && !(frommember || fromloc) {
        return Err(CmdError::owned(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if flavor.is_search() && !(byradius || bybox) {
        return Err(CmdError::owned(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if any && count == 0 {
        return Err(CmdError::msg(
            "ERR the ANY argument requires COUNT argument",
        ));
    }

    let Some(z) = z else {
        return Ok(match storekey {
            Some(dst) => {
                let (db, now) = (ctx.db(), ctx.now_ms);
                if ctx.store.remove(db, &dst, now).is_some() {
                    ctx.notify(class::GENERIC, "del", &dst);
                    propagate_store(ctx, args, flavor);
                }
                Reply::Int(0)
            }
            None => Reply::Array(vec![]),
        });
    };

    if count != 0 && sort == Sort::None && !any {
        sort = Sort::Asc;
    }
    let shape = Shape {
        lon: center.0,
        lat: center.1,
        conversion,
        kind,
    };
    let limit = if any { count as u64 } else { 0 };
    let mut points = collect(z, &shape, limit);

    if points.is_empty() && storekey.is_none() {
        return Ok(Reply::Array(vec![]));
    }
    let returned = if count == 0 || (points.len() as u64) < count as u64 {
        points.len()
    } else {
        count as usize
    };
    if sort != Sort::None {
        let desc = sort == Sort::Desc;
        let cmp = |a: &Point, b: &Point| {
            let o = cmp_dist(a.dist, b.dist);
            if desc { o.reverse() } else { o }
        };
        if returned == points.len() {
            // glibc's qsort is a merge sort: stable, equal distances keep the scan order.
            points.sort_by(cmp);
        } else if returned > 0 {
            pqsort::pqsort(&mut points, &cmp, 0, returned - 1);
        }
    }
    points.truncate(returned);

    let Some(dst) = storekey else {
        let options = usize::from(withdist) + usize::from(withhash) + usize::from(withcoords);
        let items = points
            .into_iter()
            .map(|p| {
                let member = Reply::Bulk(p.member);
                if options == 0 {
                    return member;
                }
                let mut item = Vec::with_capacity(options + 1);
                item.push(member);
                if withdist {
                    item.push(distance_reply(p.dist / conversion));
                }
                if withhash {
                    item.push(Reply::Int(crate::num::c_cast_i64(p.score)));
                }
                if withcoords {
                    item.push(Reply::Array(vec![coordinate(p.lon), coordinate(p.lat)]));
                }
                Reply::Array(item)
            })
            .collect();
        return Ok(Reply::Array(items));
    };

    let (db, now) = (ctx.db(), ctx.now_ms);
    let n = points.len();
    if n == 0 {
        if ctx.store.remove(db, &dst, now).is_some() {
            ctx.notify(class::GENERIC, "del", &dst);
            propagate_store(ctx, args, flavor);
        }
        return Ok(Reply::Int(0));
    }
    let fits = n <= zlimits.max_listpack_entries
        && points
            .iter()
            .all(|p| p.member.len() <= zlimits.max_listpack_value);
    let mut out = SortedSet::with_expected_len(if fits { 0 } else { usize::MAX }, &zlimits);
    for p in &points {
        let score = if storedist {
            p.dist / conversion
        } else {
            p.score
        };
        out.insert(&p.member, score, &zlimits).map_err(zset_error)?;
    }
    ctx.store.set(db, &dst, Value::ZSet(Box::new(out)), None);
    let event = if flavor.is_search() {
        "geosearchstore"
    } else {
        "georadiusstore"
    };
    ctx.notify(class::ZSET, event, &dst);
    propagate_store(ctx, args, flavor);
    Ok(Reply::Int(n as i64))
}

/// GEORADIUS, GEORADIUSBYMEMBER and GEOSEARCHSTORE reach replicas as sent, and only when
/// they changed the destination (Redis propagates a command that made the data dirty).
fn propagate_store(ctx: &mut Ctx<'_>, args: &[&[u8]], flavor: Flavor) {
    let writes = flavor.may_store() || flavor == Flavor::SearchStore;
    if writes && crate::commands::hashttl::propagating(ctx) {
        let db = ctx.db();
        ctx.propagate.push((db, crate::engine::args::owned(args)));
    }
}

/// Redis's comparator: greater, equal or less by distance (a NaN compares equal).
fn cmp_dist(a: f64, b: f64) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    if a > b {
        Ordering::Greater
    } else if a == b {
        Ordering::Equal
    } else {
        Ordering::Less
    }
}

/// Members inside `shape`, cell by cell in Redis's order; with a `limit` (COUNT … ANY) the
/// scan stops as soon as that many are found.
fn collect(z: &SortedSet, shape: &Shape, limit: u64) -> Vec<Point> {
    /// Members read from the set at a time when the scan may stop early.
    const PAGE: i64 = 128;
    let mut points = Vec::new();
    let full = |points: &Vec<Point>| limit != 0 && points.len() as u64 >= limit;
    for cell in hash::cells_to_scan(&hash::search_cells(shape)) {
        if full(&points) {
            break;
        }
        let (min, max) = hash::score_range(cell);
        let range = ScoreRange {
            min: min as f64,
            min_exclusive: false,
            max: max as f64,
            max_exclusive: true,
        };
        let mut offset = 0;
        'cell: loop {
            let page = if limit == 0 { -1 } else { PAGE };
            let members = z.range_by_score(&range, false, offset, page);
            let got = members.len();
            for (member, score) in members {
                let (lon, lat) = hash::decode_score(score);
                if let Some(dist) = hash::within(shape, lon, lat) {
                    points.push(Point {
                        member,
                        lon,
                        lat,
                        dist,
                        score,
                    });
                }
                if full(&points) {
                    break 'cell;
                }
            }
            if page < 0 || (got as i64) < page {
                break;
            }
            offset += page;
        }
    }
    points
}
