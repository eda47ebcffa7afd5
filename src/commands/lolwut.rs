//! LOLWUT [VERSION v] [arguments]: Redis's computer art, as Redis 7.0.15 chooses it.
//!
//! Redis 7.0 has no art of its own: plain LOLWUT answers the version line. `VERSION 5`
//! draws Georg Nees's "Schotter" (a grid of squares, more and more rotated and displaced
//! row after row) in Braille characters, each 2×4 dots of the canvas; `VERSION 6` a city
//! skyline in ANSI-coloured spaces. Both are random, take Redis's optional size arguments
//! and clamp them as Redis does, and end with Redis's caption and version line. Any other
//! version gets the version line.

use bytes::Bytes;
use rand::RngExt;

use crate::engine::{ArgCursor, Command, CommandSpec as C, Ctx, KeySpec, run};
use crate::error::CmdResult;
use crate::protocol::Reply;

/// LOLWUT.
pub(crate) static COMMANDS: &[C] = &[C::new(
    "lolwut",
    -1,
    &["readonly", "fast"],
    KeySpec::None,
    run::<Lolwut>,
)
.with_acl(&["@read", "@fast"])];

/// The art asked for.
#[derive(Debug)]
enum Art {
    /// The version line only.
    Plain,
    /// Schotter: terminal columns, squares per row, squares per column.
    Schotter(i64, i64, i64),
    /// The skyline: columns, rows.
    Skyline(i64, i64),
}

/// LOLWUT [VERSION v] [arguments]
#[derive(Debug)]
pub(crate) struct Lolwut {
    art: Art,
}

impl Command<'_> for Lolwut {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let mut version = None;
        if a.remaining() >= 2 && a.eat("VERSION") {
            version = Some(a.next_i64()?);
        }
        // Redis prints the version as an unsigned number and looks at its first digits.
        let art = match version.map(|v| v as u32) {
            Some(5) => {
                let cols = opt(a, 66)?;
                let per_row = opt(a, 8)?;
                let per_col = opt(a, 12)?;
                Art::Schotter(
                    cols.clamp(1, 1000),
                    per_row.clamp(1, 200),
                    per_col.clamp(1, 200),
                )
            }
            Some(6) => {
                let cols = opt(a, 80)?;
                let rows = opt(a, 20)?;
                Art::Skyline(cols.clamp(1, 1000), rows.clamp(1, 1000))
            }
            _ => {
                a.rest();
                Art::Plain
            }
        };
        a.rest();
        Ok(Lolwut { art })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let version = ctx.shared.config().redis_version.clone();
        let text = match self.art {
            Art::Plain => format!("Redis ver. {version}\n"),
            Art::Schotter(cols, per_row, per_col) => format!(
                "{}\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. {version}\n",
                braille(&schotter(cols as usize, per_row as usize, per_col as usize))
            ),
            Art::Skyline(cols, rows) => format!(
                "{}\nDedicated to the 8 bit game developers of past and present.\n\
                 Original 8 bit image from Plaguemon by hikikomori. Redis ver. {version}\n",
                colours(&skyline(cols as usize, rows as usize))
            ),
        };
        Ok(Reply::Verbatim(Bytes::from(text)))
    }
}

/// The next argument as an integer, or `default` when there is none.
fn opt(a: &mut ArgCursor<'_>, default: i64) -> CmdResult<i64> {
    if a.remaining() == 0 {
        Ok(default)
    } else {
        a.next_i64()
    }
}

/// A grid of pixels, each a colour (0 = background).
struct Canvas {
    width: usize,
    height: usize,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: usize, height: usize, colour: u8) -> Canvas {
        Canvas {
            width,
            height,
            pixels: vec![colour; width * height],
        }
    }

    fn get(&self, x: i64, y: i64) -> u8 {
        if x < 0 || y < 0 || x as usize >= self.width || y as usize >= self.height {
            return 0;
        }
        self.pixels[x as usize + y as usize * self.width]
    }

    fn set(&mut self, x: i64, y: i64, colour: u8) {
        if x < 0 || y < 0 || x as usize >= self.width || y as usize >= self.height {
            return;
        }
        self.pixels[x as usize + y as usize * self.width] = colour;
    }

    /// Bresenham's line from (x1, y1) to (x2, y2).
    fn line(&mut self, (mut x1, mut y1): (i64, i64), (x2, y2): (i64, i64), colour: u8) {
        let (dx, dy) = ((x2 - x1).abs(), (y2 - y1).abs());
        let (sx, sy) = (if x1 < x2 { 1 } else { -1 }, if y1 < y2 { 1 } else { -1 });
        let mut err = dx - dy;
        loop {
            self.set(x1, y1, colour);
            if x1 == x2 && y1 == y2 {
                break;
            }
            let e2 = err * 2;
            if e2 > -dy {
                err -= dy;
                x1 += sx;
            }
            if e2 < dx {
                err += dx;
                y1 += sy;
            }
        }
    }

    /// A square centred on (x, y) whose side is about `size`, turned by `angle` radians.
    fn square(&mut self, x: i64, y: i64, size: f64, angle: f64) {
        // The corners lie on a circle whose radius is half the diagonal.
        let radius = (size / std::f64::consts::SQRT_2).round();
        let corner = |j: usize| {
            let k = std::f64::consts::FRAC_PI_4 + angle + j as f64 * std::f64::consts::FRAC_PI_2;
            (
                (k.sin() * radius + x as f64).round() as i64,
                (k.cos() * radius + y as f64).round() as i64,
            )
        };
        for j in 0..4 {
            self.line(corner(j), corner((j + 1) % 4), 1);
        }
    }
}

/// Schotter on a canvas `cols` × 2 dots wide.
fn schotter(cols: usize, per_row: usize, per_col: usize) -> Canvas {
    let width = cols * 2;
    let padding = if width > 4 { 2 } else { 0 };
    let side = (width - padding * 2) as f64 / per_row as f64;
    let height = (side * per_col as f64) as usize + padding * 2;
    let mut canvas = Canvas::new(width, height, 0);
    let mut rng = rand::rng();
    for y in 0..per_col {
        for x in 0..per_row {
            let mut sx = (x as f64 * side + side / 2.0) as i64 + padding as i64;
            let mut sy = (y as f64 * side + side / 2.0) as i64 + padding as i64;
            let mut angle = 0.0;
            if y > 1 {
                // Disorder grows with the row.
                let mut jitter = || {
                    let r = rng.random::<f64>() / per_col as f64 * y as f64;
                    if rng.random::<bool>() { -r } else { r }
                };
                angle = jitter();
                sx += (jitter() * side / 3.0) as i64;
                sy += (jitter() * side / 3.0) as i64;
            }
            canvas.square(sx, sy, side, angle);
        }
    }
    canvas
}

/// The canvas as Braille characters, each 2 dots wide and 4 tall, one text line per 4 rows.
fn braille(c: &Canvas) -> String {
    // Dot (dx, dy) of a character and its bit in the Braille block (U+2800).
    const DOTS: [(i64, i64, u32); 8] = [
        (0, 0, 0),
        (0, 1, 1),
        (0, 2, 2),
        (1, 0, 3),
        (1, 1, 4),
        (1, 2, 5),
        (0, 3, 6),
        (1, 3, 7),
    ];
    let mut out = String::new();
    for y in (0..c.height).step_by(4) {
        for x in (0..c.width).step_by(2) {
            let bits = DOTS
                .iter()
                .filter(|(dx, dy, _)| c.get(x as i64 + dx, y as i64 + dy) != 0)
                .fold(0u32, |acc, (_, _, bit)| acc | 1 << bit);
            out.push(char::from_u32(0x2800 + bits).unwrap_or(' '));
        }
        if y != c.height - 1 {
            out.push('\n');
        }
    }
    out
}

/// One skyscraper: where it starts, its size, whether it has windows, its colour.
struct Skyscraper {
    x: i64,
    width: i64,
    height: i64,
    windows: bool,
    colour: u8,
}

/// A city skyline on a white sky: two rows of grey buildings behind, black ones in front
/// with lit windows.
fn skyline(cols: usize, rows: usize) -> Canvas {
    let mut canvas = Canvas::new(cols, rows, 3);
    let mut rng = rand::rng();
    let (w, h) = (cols as i64, rows as i64);
    let mut rand_below = |n: i64| if n <= 0 { 0 } else { rng.random_range(0..n) };
    let mut buildings = Vec::new();
    for colour in [2u8, 1] {
        let mut x = -10;
        while x < w {
            x += rand_below(8);
            let width = 10 + rand_below(9);
            let height = if colour == 2 {
                h / 2 + rand_below(h) / 2
            } else {
                h / 2 + rand_below(h) / 3
            };
            buildings.push(Skyscraper {
                x,
                width,
                height,
                windows: false,
                colour,
            });
            x += if colour == 2 { width / 2 } else { width + 1 };
        }
    }
    let mut x = -10;
    while x < w {
        x += rand_below(8);
        let mut width = 5 + rand_below(14);
        if width % 4 != 0 {
            width += width % 3;
        }
        let height = h / 3 + rand_below(h) / 2;
        buildings.push(Skyscraper {
            x,
            width,
            height,
            windows: true,
            colour: 0,
        });
        x += width + 5;
    }
    for b in &buildings {
        draw_skyscraper(&mut canvas, b, &mut rand_below);
    }
    canvas
}

fn draw_skyscraper(c: &mut Canvas, b: &Skyscraper, rand_below: &mut impl FnMut(i64) -> i64) {
    let bottom = c.height as i64 - 1;
    let top = bottom - b.height + 1;
    for y in (top..=bottom).rev() {
        for x in b.x..b.x + b.width {
            // The roof is narrower by two on each side.
            if y == top && (x <= b.x + 1 || x >= b.x + b.width - 2) {
                continue;
            }
            let mut colour = b.colour;
            let inside = x > b.x + 1 && x < b.x + b.width - 2 && y > top + 1 && y < bottom - 1;
            if b.windows && inside {
                let (rx, ry) = (x - (b.x + 1), y - (top + 1));
                // Windows two characters wide, one tall, in a lit grey.
                if (rx / 2) % 2 == 1 && ry % 2 == 1 {
                    colour = if rx % 2 == 1 {
                        c.get(x - 1, y)
                    } else {
                        1 + rand_below(2) as u8
                    };
                }
            }
            c.set(x, y, colour);
        }
    }
}

/// The canvas as ANSI-coloured spaces (foreground and background), one line per row.
fn colours(c: &Canvas) -> String {
    let mut out = String::new();
    for y in 0..c.height {
        for x in 0..c.width {
            let code = match c.get(x as i64, y as i64) {
                1 => "0;90;100m",
                2 => "0;37;47m",
                3 => "0;97;107m",
                _ => "0;30;40m",
            };
            out.push_str("\x1b[");
            out.push_str(code);
            out.push_str(" \x1b[0m");
        }
        if y != c.height - 1 {
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schotter_has_redis_size_and_braille_characters() {
        let text = braille(&schotter(66, 8, 12));
        // As in Redis, the last text line ends with a newline too.
        let lines: Vec<&str> = text.strip_suffix('\n').unwrap().split('\n').collect();
        // 132 dots wide (66 characters); (128 / 8) * 12 + 4 = 196 dots tall, 49 lines.
        assert_eq!(lines.len(), 49);
        assert!(lines.iter().all(|l| l.chars().count() == 66));
        assert!(
            text.chars()
                .all(|c| c == '\n' || ('\u{2800}'..='\u{28ff}').contains(&c))
        );
        assert!(text.chars().any(|c| c != '\u{2800}' && c != '\n'));
    }

    #[test]
    fn skyline_is_coloured_spaces() {
        let c = skyline(80, 20);
        let text = colours(&c);
        assert_eq!(text.split('\n').count(), 20);
        assert_eq!(text.matches("\x1b[0m").count(), 80 * 20);
        // The bottom row is built on; the sky is white somewhere at the top.
        assert!((0..80).any(|x| c.get(x, 19) != 3));
        assert!((0..80).any(|x| c.get(x, 0) == 3));
    }
}
