//! Redis's geohash arithmetic (`geohash.c`, `geohash_helper.c`), pure and without I/O.
//!
//! A position is stored as the score of a sorted-set member: a 52-bit geohash, the
//! longitude's and latitude's 26-bit cell indexes interleaved (latitude in the even bits),
//! over Redis's Web-Mercator latitude range ±85.05112878. A search computes a geohash cell
//! around the centre sized from the radius, its eight neighbours, drops the neighbours the
//! search area cannot reach, and scans each cell's score range. Every step is Redis's, in the
//! same floating-point order (the trigonometry goes through the platform's libm, as Redis's
//! does), so the same members come back with the same distances and coordinates.

/// Bits per coordinate: 26 × 2 = 52 bits, exact in a double score.
pub(crate) const STEP_MAX: u8 = 26;
/// Redis's `GEO_LAT_MIN` / `GEO_LAT_MAX` (Web Mercator's limits).
pub(crate) const LAT_MIN: f64 = -85.051_128_78;
pub(crate) const LAT_MAX: f64 = 85.051_128_78;
pub(crate) const LONG_MIN: f64 = -180.0;
pub(crate) const LONG_MAX: f64 = 180.0;

/// The quadratic mean radius of the earth (WGS-84) Redis measures distances with.
const EARTH_RADIUS_IN_METERS: f64 = 6_372_797.560_856;
const MERCATOR_MAX: f64 = 20_037_726.37;
/// Redis's `D_R` (`M_PI / 180.0`).
const D_R: f64 = std::f64::consts::PI / 180.0;

fn deg_rad(ang: f64) -> f64 {
    ang * D_R
}

fn rad_deg(ang: f64) -> f64 {
    ang / D_R
}

/// A geohash cell: `step` bits per coordinate, interleaved in the low `2 * step` bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct HashBits {
    pub(crate) bits: u64,
    pub(crate) step: u8,
}

impl HashBits {
    /// Redis's `HASHISZERO`: a neighbour the search dropped.
    fn is_zero(self) -> bool {
        self.bits == 0 && self.step == 0
    }
}

/// A coordinate interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Interval {
    pub(crate) min: f64,
    pub(crate) max: f64,
}

/// The longitude and latitude ranges of a cell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Area {
    pub(crate) lon: Interval,
    pub(crate) lat: Interval,
}

const LONG_RANGE: Interval = Interval {
    min: LONG_MIN,
    max: LONG_MAX,
};
const LAT_RANGE: Interval = Interval {
    min: LAT_MIN,
    max: LAT_MAX,
};
/// The standard geohash latitude range GEOHASH re-encodes with.
const STANDARD_LAT_RANGE: Interval = Interval {
    min: -90.0,
    max: 90.0,
};

/// The bits of `v` moved to the even positions of the result.
fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// The even bits of `x` gathered into the low 32 bits ([`spread`]'s inverse).
fn squash(x: u64) -> u32 {
    let mut x = x & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    ((x | (x >> 16)) & 0xFFFF_FFFF) as u32
}

/// Redis's `geohashEncode`: `None` outside the Mercator limits or the given ranges.
fn encode(lon_r: Interval, lat_r: Interval, lon: f64, lat: f64, step: u8) -> Option<HashBits> {
    if step == 0 || step > 32 {
        return None;
    }
    if !(LONG_MIN..=LONG_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if lat < lat_r.min || lat > lat_r.max || lon < lon_r.min || lon > lon_r.max {
        return None;
    }
    let cells = (1u64 << step) as f64;
    let lat_offset = (lat - lat_r.min) / (lat_r.max - lat_r.min) * cells;
    let long_offset = (lon - lon_r.min) / (lon_r.max - lon_r.min) * cells;
    // C's double to uint32_t conversion truncates, as `as` does in range.
    Some(HashBits {
        bits: spread(lat_offset as u32) | (spread(long_offset as u32) << 1),
        step,
    })
}

/// The 52-bit geohash of a position (the score GEOADD stores); `None` outside the limits.
pub(crate) fn encode_wgs84(lon: f64, lat: f64) -> Option<u64> {
    encode(LONG_RANGE, LAT_RANGE, lon, lat, STEP_MAX).map(align52)
}

/// Redis's `geohashDecode` over the given ranges.
fn decode_in(lon_r: Interval, lat_r: Interval, hash: HashBits) -> Area {
    let ilat = squash(hash.bits);
    let ilon = squash(hash.bits >> 1);
    let cells = (1u64 << hash.step) as f64;
    let lat_scale = lat_r.max - lat_r.min;
    let lon_scale = lon_r.max - lon_r.min;
    // `ilat + 1` is unsigned int arithmetic in C: it wraps.
    Area {
        lat: Interval {
            min: lat_r.min + (f64::from(ilat) / cells) * lat_scale,
            max: lat_r.min + (f64::from(ilat.wrapping_add(1)) / cells) * lat_scale,
        },
        lon: Interval {
            min: lon_r.min + (f64::from(ilon) / cells) * lon_scale,
            max: lon_r.min + (f64::from(ilon.wrapping_add(1)) / cells) * lon_scale,
        },
    }
}

fn decode(hash: HashBits) -> Area {
    decode_in(LONG_RANGE, LAT_RANGE, hash)
}

/// C's `(uint64_t)` conversion of a double as x86-64 compiles it: below 2^63 a signed
/// conversion (out of range: `i64::MIN`'s bits), above it the signed conversion of the
/// difference with the top bit flipped.
fn c_cast_u64(d: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if d < TWO_63 {
        crate::num::c_cast_i64(d) as u64
    } else {
        (crate::num::c_cast_i64(d - TWO_63) as u64) ^ (1 << 63)
    }
}

/// The longitude and latitude a sorted-set score stands for (Redis's `decodeGeohash`):
/// the centre of its 52-bit cell, within the limits. Any score decodes, as in Redis, even
/// one ZADD wrote.
pub(crate) fn decode_score(score: f64) -> (f64, f64) {
    let area = decode(HashBits {
        bits: c_cast_u64(score),
        step: STEP_MAX,
    });
    // Clamped to the limits: the last cell's centre may lie past them, and any score decodes.
    (
        ((area.lon.min + area.lon.max) / 2.0).clamp(LONG_MIN, LONG_MAX),
        ((area.lat.min + area.lat.max) / 2.0).clamp(LAT_MIN, LAT_MAX),
    )
}

/// The 11-character standard geohash GEOHASH replies for a score: the position re-encoded
/// over latitudes ±90, its 52 bits in base 32, and a last character `0`.
pub(crate) fn standard_geohash(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (lon, lat) = decode_score(score);
    // A position outside the limits (a score ZADD wrote) leaves Redis's hash at 0.
    let bits = encode(LONG_RANGE, STANDARD_LAT_RANGE, lon, lat, STEP_MAX).map_or(0, |h| h.bits);
    let mut out = [b'0'; 11];
    for (i, c) in out.iter_mut().enumerate().take(10) {
        *c = ALPHABET[((bits >> (52 - (i + 1) * 5)) & 0x1f) as usize];
    }
    out
}

/// Redis's `geohashAlign52Bits`: the cell's bits as the high bits of a 52-bit score.
pub(crate) fn align52(hash: HashBits) -> u64 {
    hash.bits << (52 - u32::from(hash.step) * 2)
}

/// The score range `[min, max)` holding every position inside `hash`'s cell.
pub(crate) fn score_range(hash: HashBits) -> (u64, u64) {
    let next = HashBits {
        bits: hash.bits.wrapping_add(1),
        step: hash.step,
    };
    (align52(hash), align52(next))
}

fn move_x(hash: &mut HashBits, d: i8) {
    if d == 0 {
        return;
    }
    let shift = 64 - u32::from(hash.step) * 2;
    let mut x = hash.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = hash.bits & 0x5555_5555_5555_5555;
    let zz = 0x5555_5555_5555_5555u64 >> shift;
    if d > 0 {
        x = x.wrapping_add(zz.wrapping_add(1));
    } else {
        x = (x | zz).wrapping_sub(zz.wrapping_add(1));
    }
    x &= 0xaaaa_aaaa_aaaa_aaaau64 >> shift;
    hash.bits = x | y;
}

fn move_y(hash: &mut HashBits, d: i8) {
    if d == 0 {
        return;
    }
    let shift = 64 - u32::from(hash.step) * 2;
    let x = hash.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let mut y = hash.bits & 0x5555_5555_5555_5555;
    let zz = 0xaaaa_aaaa_aaaa_aaaau64 >> shift;
    if d > 0 {
        y = y.wrapping_add(zz.wrapping_add(1));
    } else {
        y = (y | zz).wrapping_sub(zz.wrapping_add(1));
    }
    y &= 0x5555_5555_5555_5555u64 >> shift;
    hash.bits = x | y;
}

/// The cell moved by (`dx`, `dy`) cells (wrapping around the edges).
fn neighbour(hash: HashBits, dx: i8, dy: i8) -> HashBits {
    let mut h = hash;
    move_x(&mut h, dx);
    move_y(&mut h, dy);
    h
}

/// Redis's `geohashEstimateStepsByRadius`: the coarsest step whose cells still hold the
/// radius, one coarser again near the poles.
fn estimate_steps_by_radius(range_meters: f64, lat: f64) -> u8 {
    if range_meters == 0.0 {
        return 26;
    }
    let mut range = range_meters;
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// The search area: a circle or an axis-aligned box around a centre, in a unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ShapeKind {
    /// BYRADIUS: the radius, in the unit.
    Radius(f64),
    /// BYBOX: width and height, in the unit.
    Box { width: f64, height: f64 },
}

/// A search: centre, area, and the unit's size in meters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Shape {
    pub(crate) lon: f64,
    pub(crate) lat: f64,
    /// Meters per unit.
    pub(crate) conversion: f64,
    pub(crate) kind: ShapeKind,
}

/// `[min lon, min lat, max lon, max lat]` of the shape (Redis's `geohashBoundingBox`).
fn bounding_box(shape: &Shape) -> [f64; 4] {
    let (half_height, half_width) = match shape.kind {
        ShapeKind::Radius(r) => (r, r),
        ShapeKind::Box { width, height } => (height / 2.0, width / 2.0),
    };
    let height = shape.conversion * half_height;
    let width = shape.conversion * half_width;
    let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
    let long_delta_top =
        rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(shape.lat + lat_delta).cos());
    let long_delta_bottom =
        rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(shape.lat - lat_delta).cos());
    let long_delta = if shape.lat < 0.0 {
        long_delta_bottom
    } else {
        long_delta_top
    };
    [
        shape.lon - long_delta,
        shape.lat - lat_delta,
        shape.lon + long_delta,
        shape.lat + lat_delta,
    ]
}

/// The cells to scan for `shape`, in Redis's order (centre, N, S, E, W, NE, NW, SE, SW);
/// a dropped neighbour is the zero cell (Redis's `geohashCalculateAreasByShapeWGS84`).
pub(crate) fn search_cells(shape: &Shape) -> [HashBits; 9] {
    let [min_lon, min_lat, max_lon, max_lat] = bounding_box(shape);
    let radius_meters = match shape.kind {
        ShapeKind::Radius(r) => r,
        ShapeKind::Box { width, height } => {
            ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
        }
    } * shape.conversion;
    let mut steps = estimate_steps_by_radius(radius_meters, shape.lat);
    // A centre outside the limits (decoded from a score ZADD wrote) leaves Redis's hash
    // unset; sluice uses the zero cell of that step.
    let centre = |steps: u8| {
        encode(LONG_RANGE, LAT_RANGE, shape.lon, shape.lat, steps).unwrap_or(HashBits {
            bits: 0,
            step: steps,
        })
    };
    let mut hash = centre(steps);
    let cells = |h: HashBits| {
        [
            h,
            neighbour(h, 0, 1),
            neighbour(h, 0, -1),
            neighbour(h, 1, 0),
            neighbour(h, -1, 0),
            neighbour(h, 1, 1),
            neighbour(h, -1, 1),
            neighbour(h, 1, -1),
            neighbour(h, -1, -1),
        ]
    };
    let mut n = cells(hash);
    // The estimated step may leave part of the area outside the 3×3 cells when the centre
    // is near its cell's edge: one step coarser then.
    let decrease = decode(n[1]).lat.max < max_lat
        || decode(n[2]).lat.min > min_lat
        || decode(n[3]).lon.max < max_lon
        || decode(n[4]).lon.min > min_lon;
    if steps > 1 && decrease {
        steps -= 1;
        hash = centre(steps);
        n = cells(hash);
    }
    let area = decode(hash);
    if steps >= 2 {
        let zero = HashBits::default();
        // Neighbours on a side the area does not reach are not scanned.
        if area.lat.min < min_lat {
            for i in [2, 7, 8] {
                n[i] = zero;
            }
        }
        if area.lat.max > max_lat {
            for i in [1, 5, 6] {
                n[i] = zero;
            }
        }
        if area.lon.min < min_lon {
            for i in [4, 8, 6] {
                n[i] = zero;
            }
        }
        if area.lon.max > max_lon {
            for i in [3, 7, 5] {
                n[i] = zero;
            }
        }
    }
    n
}

/// The cells [`search_cells`] gives, without dropped ones and without a cell equal to the
/// last one scanned (huge radii make neighbours coincide), as Redis's
/// `membersOfAllNeighbors` visits them.
pub(crate) fn cells_to_scan(cells: &[HashBits; 9]) -> Vec<HashBits> {
    let mut out = Vec::with_capacity(9);
    let mut last: Option<usize> = None;
    for (i, c) in cells.iter().enumerate() {
        if c.is_zero() {
            continue;
        }
        // Redis compares with the last processed cell only once it is not the centre.
        if let Some(l) = last
            && l != 0
            && cells[l] == *c
        {
            continue;
        }
        out.push(*c);
        last = Some(i);
    }
    out
}

/// Distance along a meridian (Redis's `geohashGetLatDistance`).
fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// The haversine great-circle distance in meters (Redis's `geohashGetDistance`).
pub(crate) fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let lon1r = deg_rad(lon1);
    let lon2r = deg_rad(lon2);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let lat1r = deg_rad(lat1);
    let lat2r = deg_rad(lat2);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
}

/// The distance in meters from the shape's centre to (`lon`, `lat`) if the point is
/// inside the shape (Redis's `geoWithinShape`).
pub(crate) fn within(shape: &Shape, lon: f64, lat: f64) -> Option<f64> {
    match shape.kind {
        ShapeKind::Radius(r) => {
            let d = distance(shape.lon, shape.lat, lon, lat);
            (d <= r * shape.conversion).then_some(d)
        }
        ShapeKind::Box { width, height } => {
            let (width_m, height_m) = (width * shape.conversion, height * shape.conversion);
            if lat_distance(lat, shape.lat) > height_m / 2.0 {
                return None;
            }
            if distance(lon, lat, shape.lon, lat) > width_m / 2.0 {
                return None;
            }
            Some(distance(shape.lon, shape.lat, lon, lat))
        }
    }
}

/// Redis's `fixedpoint_d2string(…, 4)`: the distance replies' `%.4f`-like text (the value
/// times 10^4 rounded to nearest, ties to even, then the point put back).
pub(crate) fn format_distance(d: f64) -> String {
    if d == 0.0 {
        return "0.0000".to_string();
    }
    let scaled = crate::num::c_cast_i64((d * 10_000.0).round_ties_even());
    let neg = scaled < 0;
    let v = scaled.unsigned_abs();
    format!(
        "{}{}.{:04}",
        if neg { "-" } else { "" },
        v / 10_000,
        v % 10_000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_and_squash_are_inverse() {
        for v in [0u32, 1, 2, 0x3ff_ffff, 0xdead_beef, u32::MAX] {
            assert_eq!(squash(spread(v)), v);
            assert_eq!(squash(spread(v) << 1 >> 1), v);
        }
        assert_eq!(spread(0b11), 0b101);
    }

    #[test]
    fn encodes_as_redis() {
        // GEOADD Sicily 13.361389 38.115556 "Palermo" stores 3479099956230698 in Redis.
        assert_eq!(encode_wgs84(13.361389, 38.115556), Some(3479099956230698));
        assert_eq!(encode_wgs84(15.087269, 37.502669), Some(3479447370796909));
        assert_eq!(encode_wgs84(180.0, 0.0).map(|s| s > 0), Some(true));
        assert_eq!(encode_wgs84(180.1, 0.0), None);
        assert_eq!(encode_wgs84(0.0, 85.06), None);
    }

    #[test]
    fn decodes_the_cell_centre() {
        let (lon, lat) = decode_score(3479099956230698.0);
        assert!((lon - 13.361389).abs() < 1e-5 && (lat - 38.115556).abs() < 1e-5);
        assert_eq!(&standard_geohash(3479099956230698.0), b"sqc8b49rny0");
        assert_eq!(&standard_geohash(3479447370796909.0), b"sqdtr74hyu0");
    }

    #[test]
    fn distance_of_palermo_to_catania() {
        let (a, b) = (
            decode_score(3479099956230698.0),
            decode_score(3479447370796909.0),
        );
        assert_eq!(format_distance(distance(a.0, a.1, b.0, b.1)), "166274.1516");
        assert_eq!(
            format_distance(distance(a.0, a.1, b.0, b.1) / 1000.0),
            "166.2742"
        );
    }

    #[test]
    fn formats_distances_with_four_decimals() {
        assert_eq!(format_distance(0.0), "0.0000");
        assert_eq!(format_distance(-0.0), "0.0000");
        assert_eq!(format_distance(0.00004), "0.0000");
        assert_eq!(format_distance(0.5), "0.5000");
        assert_eq!(format_distance(12.34567), "12.3457");
        assert_eq!(format_distance(-1.5), "-1.5000");
    }

    #[test]
    fn neighbours_move_one_cell() {
        let h = HashBits {
            bits: 0b0110,
            step: 2,
        };
        assert_eq!(neighbour(neighbour(h, 1, 0), -1, 0), h);
        assert_eq!(neighbour(neighbour(h, 0, 1), 0, -1), h);
        assert_ne!(neighbour(h, 1, 1), h);
    }

    #[test]
    fn steps_follow_the_radius() {
        assert_eq!(estimate_steps_by_radius(0.0, 0.0), 26);
        assert!(estimate_steps_by_radius(1000.0, 0.0) > estimate_steps_by_radius(100_000.0, 0.0));
        assert_eq!(
            estimate_steps_by_radius(1000.0, 70.0) + 1,
            estimate_steps_by_radius(1000.0, 0.0)
        );
        assert_eq!(estimate_steps_by_radius(1e9, 0.0), 1);
    }

    #[test]
    fn a_search_finds_its_centre_cell() {
        let shape = Shape {
            lon: 15.0,
            lat: 37.0,
            conversion: 1000.0,
            kind: ShapeKind::Radius(200.0),
        };
        let cells = search_cells(&shape);
        let score = encode_wgs84(15.0, 37.0).unwrap();
        let scan = cells_to_scan(&cells);
        assert!(scan.iter().any(|c| {
            let (lo, hi) = score_range(*c);
            (lo..hi).contains(&score)
        }));
    }
}
