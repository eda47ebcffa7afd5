//! zset commands (being written).

use super::CommandSpec as C;

/// The zset commands.
pub static COMMANDS: &[C] = &[];
